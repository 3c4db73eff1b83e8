//! `replicheck store run MODEL`: a model's environment, for real, against the concrete store.
//!
//! The scenario's nodes become node processes; every coordinator<->node link goes through a
//! proxy set to the latency of the link between the coordinator's zone and the node's zone,
//! and the clients reach the coordinator through a proxy of their own (the model's edge link).
//! Model time becomes real time at `ms_per_tick` (by default the model's tick): every policy
//! duration and every latency in ticks is multiplied by it. The run has four phases:
//!
//! 1. calm: client load on a small key set, no faults (the first `CALM_PERMILLE` of the run);
//! 2. faults: the scenario's fault menu, one fault after another, at most `faults.budget`
//!    of them, one of each kind first (crash, partition, degrade, drop), each kept until the
//!    heal;
//! 3. healed: every fault undone, load goes on, the cluster settles;
//! 4. check: load stops; the last value of every key is read, and the history is checked.
//!
//! What is measured, beside the model's verdicts for the same policy:
//! - acked writes readable: the final read of every key returns the newest acknowledged write
//!   or a write that was not over before it began (`acked_writes_persist`);
//! - linearizability per key (`lincheck`, register model; unknown outcomes allowed);
//! - duplicate effects: a retried SET whose token the coordinator had sequenced already, given
//!   a new version (`duplicate_effect` event lines of the decision log; `no_duplicate_effects`);
//! - evictions, each with its time and whether the fault schedule had touched the evicted node
//!   by then (`no_healthy_eviction`: slow is not failed), and INFO's membership counters;
//! - per node, the longest round trip and the longest silence the coordinator measured, and
//!   the replies that came after their deadline, beside the model's bounds: a healthy eviction
//!   the model rules out is explained with these, not guessed at;
//! - rebalancing moves over time (`change_requested ... move=true` event lines of the decision
//!   log), from the model's node disk use and compaction debt and its shards' sizes and heat;
//! - capacity: the store has the model's shards as partitions, with their replica sets, its
//!   nodes' ingest capacities and base loads, its shards' bursts and the policy's partition
//!   and table capacities, counted per window of one tick; INFO's `fleet_capacity_breaches`
//!   counts writes offered above a capacity by every coordinator together (`capacity_respected`;
//!   each coordinator's own `capacity_breaches` sees only its writes);
//! - operations that never completed: still being retried, per the policy, when the load
//!   ended although they began before the heal (`ops_complete`);
//! - whether membership settles: no eviction or move starts in the second half of the healed
//!   phase and none is in progress at the end (`converges`).
//!
//! Each of the model's clients is played by a client thread with the client's keys, think time
//! and mix of reads and writes (a model's client on shard `p1` with `key_hash` 3 writes keys
//! named `p1:...` whose hash is 3, so write-shard suffixes route them as in the model). When
//! the model has a capacity, exactly one thread plays each of its clients: the rate of writes
//! is part of what is checked.
//!
//! What it cannot see: the model explores every interleaving, the run sees one; a property the
//! model finds violated may simply not happen in a few seconds (each disagreement is explained
//! in one line). Each node is in its model zone: latency and partitions follow the zones, and
//! the coordinator prefers a replacement in the evicted replica's zone, as the model does.
//!
//! A model with several coordinators runs them all, each in its zone with proxies of its own
//! to every node, to the other coordinators and from its clients; a fault applies to every link
//! it touches. A rollout variant is played in waves of live policy reloads (`rollout`).
//!
//! The run's room: this (the phases), `rig` (the fault schedule and what applies it),
//! `measure`, `report`, `rollout`, and [`client`], the load generator whose history is checked.

use crate::config::{self, Found, LatencyTicks, OpKind, Policy, PropertyName, Scenario, SourcedPolicy};
use crate::lincheck::register::{Register, RegisterInput, RegisterOutput};
use crate::lincheck::{self, Budget, Operation, Verdict};
use crate::policy::detector::FailureDetection;
use crate::policy::leader::Replication;
use crate::policy::routing;
use crate::policy::NodeId;
use crate::protocol::Endpoint;
use crate::store::cluster::proxy::{Proxy, ProxyHandle};
use crate::store::cluster::{Cluster, ClusterConfig};
use crate::store::coordinator::clients::ClientLimits;
use crate::store::coordinator::layout::{Layout, LoadFacts};
use crate::store::coordinator::resp;
use crate::store::decision::{EventLine, LogLine};
use crate::store::leader::cluster::{LeaderCluster, LeaderConfig};
use crate::store::trace::{self, TraceFault, TraceLine, TraceVerdict};
use crate::store::StoreError;
use client::{ClientRole, Input, LoadConfig, LoadReport, Op, Outcome};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod client;
mod measure;
mod report;
mod rig;
mod rollout;
mod start;

pub use measure::StoreEviction;
use measure::*;
pub(crate) use measure::{
    changes_within, judge_phases, measure, read_info, read_leader_info, retry_round_ms,
};
pub(crate) use report::write_history_files;
use report::*;
use rig::*;
pub(crate) use rig::{menu, Fault, PromotionWatch, Step, Workload};
pub(crate) use rollout::RolloutRun;
use start::*;
pub(crate) use start::{leader_policy_file, load_facts, membership_in_ms, Played, ScratchDir};

/// Phases, in thousandths of the run's duration.
pub(crate) const CALM_PERMILLE: u64 = 150;
/// Faults start one after another, this far apart.
const FAULT_STAGGER_PERMILLE: u64 = 50;
pub(crate) const HEAL_PERMILLE: u64 = 650;
/// A run lasts at most this long, so a typo cannot keep a test machine busy for hours.
pub const DURATION_MS_MAX: u64 = 600_000;
/// How often a run's waits look for an interrupt (SIGINT, SIGTERM).
const INTERRUPT_POLL_MS: u64 = 50;
/// Drop probability on a lossy link while the `drop` fault is on.
const DROP_PERMILLE: u16 = 150;
/// Search steps per key for the linearizability check.
const LINCHECK_STEPS_MAX: u64 = 20_000_000;

/// What `store run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub model: PathBuf,
    pub variant: Option<String>,
    pub policy: Option<PathBuf>,
    /// Real milliseconds per model tick; `None`: the model's tick.
    pub ms_per_tick: Option<u64>,
    pub duration: Duration,
    /// Client threads; `None`: `CLIENT_THREADS_DEFAULT`, or one per model client where the
    /// model has a capacity.
    pub clients: Option<usize>,
    pub keys: usize,
    pub write_permille: u16,
    /// How to get the model's verdicts: explore now, take the variant's declared ones, or none.
    pub model_verdicts: ModelVerdicts,
    /// Keep the decision log here (default: a temporary file, removed).
    pub decision_log: Option<PathBuf>,
    /// Write the clients' history here, in Jepsen's EDN (`history check` reads it back).
    pub history: Option<PathBuf>,
    /// Keep the coordinator's trace here (default: a temporary file, removed); `replicheck
    /// conform TRACE --model M` validates it again.
    pub trace: Option<PathBuf>,
    pub seed: u64,
    /// The faults to apply, by name (`crash:n2`, `partition:b`, `degrade:a-b`, `drop`,
    /// `crash:coordinator`; `none`), in order; empty: one of each kind of the menu, up to the
    /// budget.
    pub faults: Vec<String>,
    /// A rollout's coordinators by name, in the order each stage reaches them (empty: as the
    /// model lists them).
    pub rollout_order: Vec<String>,
    /// The `replicheck` executable that runs the nodes.
    pub binary: PathBuf,
    /// Set when the run is interrupted (SIGINT, SIGTERM): it stops early and reports what ran.
    pub interrupt: Option<&'static AtomicBool>,
}

/// Explores a model for `store run --model-verdicts check`: the model file, and the policy
/// file or else the variant to check; gives every property's verdict. The store does not
/// explore models itself (it sits beside the checker, not above it): the CLI hands it one.
pub type ModelChecker<'a> = &'a dyn Fn(
    &std::path::Path,
    Option<&std::path::Path>,
    &str,
) -> Result<Vec<(PropertyName, Found)>, crate::config::ConfigError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelVerdicts {
    /// Run the model check for this variant or policy (may take minutes).
    Check,
    /// The verdicts the variant declares (its `expect`), without exploring.
    Declared,
    /// Do not compare with the model.
    Skip,
}

/// When something happened, in ms since the run began.
#[derive(Clone, Debug)]
pub struct Event {
    pub at_ms: u64,
    pub what: String,
}

/// What the run measured.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// A signal stopped the run before its end: it covers less than was asked.
    pub interrupted: bool,
    /// The run played a rollout (its coordinators reloaded policies at moments of its own).
    pub rollout: bool,
    pub ops: usize,
    pub ops_ok: usize,
    pub writes_unknown: usize,
    pub reads_failed: usize,
    pub retries: u64,
    /// Keys whose final read missed an acknowledged write, with why.
    pub acked_writes_lost: Vec<String>,
    /// Keys whose history is not linearizable (or undecided within the budget).
    pub not_linearizable: Vec<String>,
    /// The coordinator's trace against the model's environment (`store::trace::validate`).
    pub trace_verdict: Option<TraceVerdict>,
    /// Files written about the history (EDN, the picture of a non-linearizable one), as report
    /// lines.
    pub history_files: Vec<String>,
    pub undecided: Vec<String>,
    pub duplicate_effects: usize,
    pub evictions: Vec<StoreEviction>,
    /// Changes the coordinator dropped at once because its membership queue was full:
    /// (ms, partition, node that stays). Each was also requested (`evictions` or `moves`).
    pub changes_rejected: Vec<(u64, u8, NodeId)>,
    /// Rebalancing moves: (ms, partition, from, to).
    pub moves: Vec<(u64, u8, NodeId, NodeId)>,
    /// Writes offered to a partition or backend above its capacity (INFO), and the first.
    pub capacity_breaches: u64,
    pub first_capacity_breach: Option<String>,
    pub writes_throttled: u64,
    /// Operations still being retried when the load ended that began before the heal, as
    /// "client N key K: A attempts since T ms".
    pub ops_never_completed: Vec<String>,
    /// Membership changes (ms, what) that started after the settle point, and changes
    /// still in progress at the end: membership did not settle.
    pub settle_at_ms: u64,
    pub changes_after_settle: Vec<(u64, String)>,
    pub changes_in_progress_at_end: u64,
    /// The scenario's churn budget in ms: at most `.0` membership changes in any `.1` ms.
    pub churn_budget_ms: Option<(u8, u64)>,
    pub deadline_deaths: usize,
    /// Why the detector had declared each evicted node dead (one per eviction, in order).
    pub evicted_because: Vec<Option<DeathEvidence>>,
    /// Per node, what the coordinator's link to it measured (INFO at the end of the run).
    pub links: Vec<LinkFacts>,
    /// The model's bounds for this scenario and policy, to compare the measured facts with.
    pub bounds: ModelBounds,
    pub events: Vec<Event>,
    /// Since when no fault was in force (`None`: a fault lasted to the end, or none happened).
    pub faults_over_at_ms: Option<u64>,
    pub info_counters: BTreeMap<String, u64>,
    pub decisions: usize,
    /// The run played the leader family (`replication = "leader"`).
    pub leader: bool,
    /// Leader family: each promotion the coordinator made (ms, what), from its INFO.
    pub promotions: Vec<(u64, String)>,
    /// Why `ops_complete` was not judged (a healed phase too short), if it was not.
    pub ops_complete_unjudged: Option<String>,
    /// Leader family: partitions and epochs in which two nodes took writes as primary (each
    /// node's own record), as "s1 epoch 2: n1, n2".
    pub two_primaries: Vec<String>,
    /// Leader family: writes acknowledged in an epoch older than one that had acknowledged a
    /// write already (a deposed primary's: `single_primary` violated).
    pub late_epoch_acks: u64,
}

/// What the detector had seen when it declared a node dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeathEvidence {
    /// Independent detection: silent this long (`health_from_silence`).
    Silence { silence_ms: u64 },
    /// Coupled detection: asked, and no answer by a request's ack deadline.
    DeadlineMiss,
}

/// One node's link as the coordinator measured it over the run (INFO's node line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkFacts {
    /// The longest time without any frame from the node, faults included.
    pub max_silence_ms: u64,
    /// The longest round trip of a reply, late ones included (node processing included).
    pub max_round_trip_ms: u64,
    /// Replies that came after their request's deadline: proof of life only.
    pub late_replies: u64,
}

impl RunOutcome {
    /// Whether more membership changes (evictions and moves) than the churn budget allows
    /// were requested within one window, or one was dropped by a full membership queue: the
    /// model's `churn_bounded` counts both (a dropped change is a saturated coordinator).
    pub fn churn_exceeded(&self, changes_max: u8, window_ms: u64) -> bool {
        if !self.changes_rejected.is_empty() {
            return true;
        }
        let mut at_ms: Vec<u64> =
            self.evictions.iter().map(|e| e.at_ms).chain(self.moves.iter().map(|m| m.0)).collect();
        at_ms.sort_unstable();
        at_ms.windows(usize::from(changes_max) + 1).any(|w| w[w.len() - 1] - w[0] < window_ms)
    }

    pub fn healthy_evictions(&self) -> usize {
        self.evictions.iter().filter(|e| e.healthy).count()
    }

    /// The store's verdict for a model property, where the run measures it.
    pub fn verdict(&self, property: PropertyName) -> Option<Found> {
        let violated = |bad: bool| Some(if bad { Found::Violated } else { Found::Holds });
        if self.leader {
            return match property {
                PropertyName::AckedWritesPersist => violated(!self.acked_writes_lost.is_empty()),
                PropertyName::Linearizable => violated(!self.not_linearizable.is_empty()),
                PropertyName::OpsComplete if self.ops_complete_unjudged.is_some() => None,
                PropertyName::OpsComplete => violated(!self.ops_never_completed.is_empty()),
                PropertyName::Converges => {
                    violated(!self.changes_after_settle.is_empty() || self.changes_in_progress_at_end > 0)
                }
                // Both halves: two nodes that took writes as primary in one epoch (their own
                // records), and an ack from a deposed primary after a newer epoch's (the
                // coordinator's).
                PropertyName::SinglePrimary => {
                    violated(self.late_epoch_acks > 0 || !self.two_primaries.is_empty())
                }
                // The leader family evicts, moves and throttles nothing, and takes no tokens.
                _ => None,
            };
        }
        match property {
            PropertyName::AckedWritesPersist => violated(!self.acked_writes_lost.is_empty()),
            PropertyName::Linearizable => violated(!self.not_linearizable.is_empty()),
            PropertyName::NoDuplicateEffects => violated(self.duplicate_effects > 0),
            PropertyName::NoHealthyEviction => violated(self.healthy_evictions() > 0),
            PropertyName::ChurnBounded => match self.churn_budget_ms {
                Some((n, window_ms)) => violated(self.churn_exceeded(n, window_ms)),
                // Without a budget the property is the membership queue's: nothing dropped.
                None => violated(!self.changes_rejected.is_empty()),
            },
            PropertyName::CapacityRespected => violated(self.capacity_breaches > 0),
            PropertyName::OpsComplete if self.ops_complete_unjudged.is_some() => None,
            PropertyName::OpsComplete => violated(!self.ops_never_completed.is_empty()),
            // A run kills nodes for a while, not forever: "replaced eventually" is the model's.
            PropertyName::DeadReplaced | PropertyName::HotShardLeavesSlowNode => None,
            PropertyName::SinglePrimary => None,
            PropertyName::Converges => {
                violated(!self.changes_after_settle.is_empty() || self.changes_in_progress_at_end > 0)
            }
        }
    }
}

/// Multiply every duration of a policy resolved in ticks by `ms_per_tick`: the store reads
/// `_ticks` as milliseconds.
pub fn policy_in_ms(policy: &Policy, ms_per_tick: u64) -> Policy {
    policy.with_ticks_scaled(u32::try_from(ms_per_tick).unwrap_or(u32::MAX))
}

/// The policy `store run` uses, with where it came from.
pub(crate) fn choose_policy(
    scenario: &Scenario,
    policy: Option<&std::path::Path>,
    variant: Option<&str>,
) -> Result<(String, SourcedPolicy), String> {
    match (policy, variant) {
        (Some(path), _) => {
            let patch = config::load_policy(path).map_err(|e| e.to_string())?;
            let sourced = scenario.base_policy.then(&patch);
            scenario.check_family(&sourced)?;
            Ok((path.display().to_string(), sourced))
        }
        (None, name) => {
            let name = name.map_or_else(|| scenario.variants[0].name.clone(), str::to_string);
            let variant = scenario.variant(&name).ok_or_else(|| {
                let known: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
                format!("{}: no variant \"{name}\" (variants: {})", scenario.path.display(), known.join(", "))
            })?;
            Ok((name, variant.policy.clone()))
        }
    }
}

/// Run the scenario against the store and write the report to `out`. Returns the outcome and
/// the model's verdicts (if asked for).
pub fn run(
    req: &RunRequest,
    check_model: ModelChecker,
    out: &mut String,
) -> Result<(RunOutcome, Vec<(PropertyName, Found)>), StoreError> {
    let scenario = Scenario::load(&req.model)?;
    let (label, sourced) =
        choose_policy(&scenario, req.policy.as_deref(), req.variant.as_deref()).map_err(StoreError::Input)?;
    let ms_per_tick = req.ms_per_tick.unwrap_or(scenario.tick_ms);
    validate(req, ms_per_tick).map_err(StoreError::Input)?;
    // The schedule and its timeline before anything starts: a bad `--faults` or a run too
    // short for a fault's duration is refused at once.
    let faults = schedule(&scenario, &req.faults).map_err(StoreError::Input)?;
    timeline(&scenario, &faults, req.duration.as_millis() as u64, ms_per_tick, req.seed, &[])
        .map_err(StoreError::Input)?;
    let Played { rollout, sourced, policy, leader, layout, .. } =
        Played::of(&scenario, &label, sourced, ms_per_tick, &req.rollout_order).map_err(StoreError::Input)?;
    if let Some(flag) = [(req.trace.is_some(), "--trace"), (req.decision_log.is_some(), "--decision-log")]
        .into_iter()
        .find_map(|(given, flag)| (given && leader).then_some(flag))
    {
        return Err(StoreError::Input(format!(
            "{flag}: {} runs the leader family, whose store keeps no decision log or trace (those are the quorum coordinator's); --history keeps its clients' history",
            req.model.display()
        )));
    }
    let load = Workload::of_model(
        &scenario,
        &layout,
        (req.keys, req.write_permille, req.clients),
        ms_per_tick,
        policy.routing.write_shard_suffixes,
    );
    if let Some(n) = req.clients.filter(|&n| load.rate_checked && n != load.threads) {
        return Err(StoreError::Input(format!(
            "--clients {n}: {} has a capacity, so each of its {} clients is played by one thread (a client's rate of writes is part of what is checked); leave --clients out",
            req.model.display(),
            load.threads
        )));
    }
    let _ = writeln!(
        out,
        "store run {} / {label}: {} nodes, {} partitions, 1 tick = {ms_per_tick} ms (model tick {} ms), {:.1}s, {} client threads playing {} model clients on {} keys",
        scenario.name,
        scenario.nodes.len(),
        layout.shards.len(),
        scenario.tick_ms,
        req.duration.as_secs_f64(),
        load.threads,
        scenario.clients.len(),
        load.key_count()
    );
    let outcome = run_store(&scenario, &policy, &sourced, layout, &load, ms_per_tick, req, rollout.as_ref())
        .map_err(StoreError::Runtime)?;
    let mut outcome = outcome;
    let model = model_verdicts(&scenario, req, &label, check_model)?;
    // A signal during the model's exploration cuts it short too: the run covers less.
    outcome.interrupted |= interrupted(req.interrupt);
    report(out, &scenario, &outcome, &model);
    Ok((outcome, model))
}

fn validate(req: &RunRequest, ms_per_tick: u64) -> Result<(), String> {
    if req.model_verdicts == ModelVerdicts::Declared && req.policy.is_some() {
        return Err("--model-verdicts declared needs a --variant: a policy file declares no verdicts".into());
    }
    let duration_ms = req.duration.as_millis() as u64;
    if !(500..=DURATION_MS_MAX).contains(&duration_ms) {
        return Err(format!("--duration {duration_ms}ms: must be 500ms to {DURATION_MS_MAX}ms"));
    }
    let model = req.ms_per_tick.is_none().then_some(req.model.as_path());
    validate_load(ms_per_tick, model, req.clients, req.keys, req.write_permille)
}

/// The time scale and the load's flags, as `store run` and `store sim` take them. The time
/// scale is `--time-scale` when given, else the model's tick (`model`, named when it is wrong).
pub(crate) fn validate_load(
    ms_per_tick: u64,
    model: Option<&std::path::Path>,
    clients: Option<usize>,
    keys: usize,
    write_permille: u16,
) -> Result<(), String> {
    use crate::store::trace::MS_PER_TICK_MAX;
    if ms_per_tick == 0 || ms_per_tick > MS_PER_TICK_MAX {
        return Err(match model {
            None => format!("--time-scale {ms_per_tick}: must be 1 to {MS_PER_TICK_MAX} ms per tick"),
            Some(path) => format!(
                "{}: key `tick` = {ms_per_tick}ms: the store plays a tick as that many milliseconds, at most {MS_PER_TICK_MAX}; give a faster scale with --time-scale MS",
                path.display()
            ),
        });
    }
    if let Some(n) = clients.filter(|&n| n == 0 || n > client::LOAD_CLIENTS_MAX) {
        return Err(format!("--clients {n}: must be 1 to {}", client::LOAD_CLIENTS_MAX));
    }
    if write_permille > 1000 {
        return Err(format!(
            "--write-permille {write_permille}: at most 1000 (thousandths of the operations)"
        ));
    }
    if keys == 0 || keys > client::LOAD_KEYS_MAX {
        return Err(format!("--keys {keys}: must be 1 to {}", client::LOAD_KEYS_MAX));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_store(
    scenario: &Scenario,
    policy: &Policy,
    sourced: &SourcedPolicy,
    layout: Layout,
    workload: &Workload,
    ms_per_tick: u64,
    req: &RunRequest,
    rollout: Option<&RolloutRun>,
) -> Result<RunOutcome, String> {
    let dir = ScratchDir::new()?;
    let leader = policy.replication() == Replication::Leader;
    // The leader family's store runs as processes that keep no trace; `store sim` keeps one.
    let traced = !leader;
    let log_path = req.decision_log.clone().unwrap_or_else(|| dir.path.join("decisions.jsonl"));
    let trace_path = req.trace.clone().unwrap_or_else(|| dir.path.join("trace.jsonl"));
    let before_start = Instant::now();
    let cluster = if leader {
        Store::Leader(Box::new(start_leader(scenario, sourced, &layout, ms_per_tick, &dir, req)?))
    } else {
        let trace = traced.then_some(trace_path.as_path());
        Store::Quorum(Box::new(start_quorum(
            scenario,
            policy,
            layout,
            ms_per_tick,
            &dir,
            req,
            &log_path,
            trace,
            before_start,
        )?))
    };
    let coordinators: Vec<std::net::SocketAddr> = match &cluster {
        Store::Quorum(c) => (0..c.coordinator_count() as u8).map(|c8| c.client_addr_of(c8)).collect(),
        Store::Leader(c) => vec![c.client_addr()],
    };
    let client_proxies = coordinators
        .into_iter()
        .enumerate()
        .map(|(c, addr)| Proxy::start_seeded(addr, req.seed ^ (0xc1 + c as u64 * 0x100)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot start the client proxy: {e}"))?;
    let mut rig = Rig {
        scenario,
        cluster,
        client_proxies,
        ms_per_tick,
        started: before_start,
        node_faulted_at_ms: BTreeMap::new(),
        active: Vec::new(),
        faults_over_at_ms: None,
        faults: schedule(scenario, &req.faults)?,
        events: Vec::new(),
        promotions: PromotionWatch::default(),
    };
    rig.set_scenario_links()?;
    if let Store::Leader(cluster) = &rig.cluster {
        // What the processes read from the directory's policy file, at the run's time scale.
        let what = leader_policy_text(&cluster.config().policy);
        rig.event(what);
    }
    rig.event("links at the scenario's latencies; load starts".into());
    let duration_ms = req.duration.as_millis() as u64;
    let request_timeout_ms = scenario
        .clients
        .first()
        .map(|c| u64::from(c.request_timeout_ticks) * ms_per_tick)
        .unwrap_or(u64::from(policy.replica_ack_timeout_ticks) * 2);
    let first_role = workload.roles.first().ok_or("the model has no clients")?;
    // Each model client reaches its own coordinator.
    let mut roles = workload.roles.clone();
    for (role, client) in roles.iter_mut().zip(&scenario.clients) {
        role.addr = Some(rig.client_proxies[usize::from(client.coordinator)].addr());
    }
    let load = LoadConfig {
        addr: rig.client_proxies[0].addr(),
        clients: workload.threads,
        keys: first_role.keys.clone(),
        write_permille: first_role.write_permille,
        roles,
        request_timeout_ms,
        retry: policy.retry,
        ms_per_tick: 1,
        think_lo_ms: first_role.think_lo_ms,
        think_hi_ms: first_role.think_hi_ms,
        duration: req.duration,
        seed: req.seed,
        tokens: !leader,
    };
    let clients_log = match rig.cluster.quorum() {
        Some(c) => c.decision_log().with_actor("client"),
        None => crate::store::decision::DecisionLog::off(),
    };
    let epoch = rig.started;
    let stop = Arc::new(AtomicBool::new(false));
    let load_thread = std::thread::Builder::new()
        .name("store-run-load".into())
        .spawn({
            let stop = Arc::clone(&stop);
            move || client::run_load(&load, &clients_log, epoch, stop)
        })
        .map_err(|e| format!("cannot start the load: {e}"))?;
    let rollout_times_ms =
        rollout.map_or(Vec::new(), |r| r.times_ms((duration_ms * CALM_PERMILLE / 1000, duration_ms)));
    let faults = rig.faults.clone();
    let (steps, mut heal_at_ms) =
        timeline(scenario, &faults, duration_ms, ms_per_tick, req.seed, &rollout_times_ms)?;
    let mut started_ms: Vec<(Fault, u64)> = Vec::new();
    let mut healed = false;
    for (at_ms, step) in steps {
        if !sleep_until(&mut rig, at_ms, req.interrupt) {
            // SIGINT or SIGTERM: the load stops, the store heals, and what ran is checked.
            rig.event(
                "INTERRUPTED by a signal: the load stops, the store heals, and what ran is checked".into(),
            );
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            if !healed {
                heal_at_ms = rig.now_ms();
                rig.heal()?;
            }
            break;
        }
        healed |= matches!(step, Step::Heal);
        match (step, rollout) {
            (Step::Fault(fault), _) => {
                rig.apply(&fault)?;
                started_ms.push((fault, at_ms));
            }
            (Step::End(fault), _) => {
                let began = started_ms.iter().find(|(f, _)| *f == fault).map_or(at_ms, |(_, at)| *at);
                rig.end(&fault, at_ms - began)?;
            }
            (Step::Heal, _) => rig.heal()?,
            (Step::Rollout(i), Some(r)) => r.apply(&mut rig, i)?,
            (Step::Rollout(_), None) => unreachable!("a rollout step without a rollout"),
        }
    }
    // The load runs to its end unless interrupted.
    while !load_thread.is_finished() {
        if interrupted(req.interrupt) {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        rig.watch_promotions();
        std::thread::sleep(Duration::from_millis(INTERRUPT_POLL_MS));
    }
    let load = load_thread.join().map_err(|_| "the load thread panicked".to_string())??;
    rig.event(format!("load stopped after {} operations", load.history.len()));
    let load_end_ms = rig.now_ms();
    if let Some(t) = rig.cluster.quorum().and_then(Cluster::trace) {
        t.line(&TraceLine::End { at_ms: t.now_ms() });
        t.flush()?;
    }
    // Every coordinator counts what it refused and where it breached a capacity.
    let follower_infos: Vec<String> = match rig.cluster.quorum() {
        Some(c) => (1..c.coordinator_count() as u8).map(|d| c.coordinator_of(d).info()).collect(),
        None => Vec::new(),
    };
    // Let the last catch-up copies and deadlines run out before the final reads.
    let settle_ms = 2 * u64::from(policy.replica_ack_timeout_ticks) + 200;
    std::thread::sleep(Duration::from_millis(settle_ms.min(3_000)));
    let finals = final_reads(&rig, &load, request_timeout_ms, u64::from(policy.replica_ack_timeout_ticks))?;
    rig.watch_promotions();
    let info = rig.cluster.info();
    // The leader family keeps no decision log: its promotions are read from INFO.
    let log_text = match rig.cluster.quorum() {
        Some(c) => {
            c.decision_log().flush().map_err(|e| format!("decision log: {e}"))?;
            std::fs::read_to_string(&log_path)
                .map_err(|e| format!("cannot read the decision log {}: {e}", log_path.display()))?
        }
        None => String::new(),
    };
    let mut outcome = measure(&load, &finals, &log_text, &rig.node_faulted_at_ms)?;
    if traced {
        let trace_text = std::fs::read_to_string(&trace_path)
            .map_err(|e| format!("cannot read the trace {}: {e}", trace_path.display()))?;
        outcome.trace_verdict = Some(trace::validate(scenario, &trace_text)?);
    }
    outcome.history_files =
        write_history_files(&load, &finals, req.history.as_deref(), !outcome.not_linearizable.is_empty())?;
    outcome.events = std::mem::take(&mut rig.events);
    outcome.interrupted = interrupted(req.interrupt);
    outcome.faults_over_at_ms = rig.faults_over_at_ms;
    outcome.rollout = rollout.is_some();
    outcome.bounds = ModelBounds::of(scenario, policy, ms_per_tick);
    outcome.promotions = std::mem::take(&mut rig.promotions.promotions);
    if let Store::Leader(cluster) = &rig.cluster {
        let two_primaries = two_primaries_named(scenario, cluster.two_primaries()?);
        read_leader_info(&mut outcome, &info, rig.promotions.late_epoch_acks, two_primaries);
    } else {
        read_info(&mut outcome, &info, &follower_infos, scenario.nodes.len())?;
    }
    let retry_round_ms = retry_round_ms(policy, request_timeout_ms);
    judge_phases(&mut outcome, &load, heal_at_ms, load_end_ms, retry_round_ms);
    outcome.churn_budget_ms =
        rig.scenario.coordinator.churn_budget.map(|(n, ticks)| (n, u64::from(ticks) * ms_per_tick));
    Ok(outcome)
}

/// Leader family: each partition and epoch in which two nodes took writes as primary, named
/// as the model names them ("s1 epoch 2: n1, n2").
pub(crate) fn two_primaries_named(scenario: &Scenario, found: Vec<(u8, u64, Vec<NodeId>)>) -> Vec<String> {
    let name = |n: &NodeId| scenario.nodes[usize::from(*n)].name.clone();
    found
        .into_iter()
        .map(|(p, epoch, nodes)| {
            let nodes: Vec<String> = nodes.iter().map(name).collect();
            format!("{} epoch {epoch}: {}", scenario.shards[usize::from(p)].name, nodes.join(", "))
        })
        .collect()
}

/// Sleep until `at_ms` into the run (watching for promotions); `false` at once if the run is
/// interrupted.
fn sleep_until(rig: &mut Rig, at_ms: u64, interrupt: Option<&AtomicBool>) -> bool {
    loop {
        if interrupted(interrupt) {
            return false;
        }
        rig.watch_promotions();
        let now = rig.now_ms();
        if at_ms <= now {
            return true;
        }
        std::thread::sleep(Duration::from_millis((at_ms - now).min(INTERRUPT_POLL_MS)));
    }
}

/// The last value of every key, read directly from the coordinator (no proxy), as operations
/// of a client of its own, after every other operation ended. A read is retried for as long
/// as a catch-up copy may keep a move's or eviction's target out of quorums (it first waits
/// for the writes in flight to end), since a rebalancer that oscillates keeps starting new ones.
fn final_reads(
    rig: &Rig,
    load: &LoadReport,
    request_timeout_ms: u64,
    ack_timeout_ms: u64,
) -> Result<Vec<Op>, String> {
    const RETRY_PAUSE_MS: u64 = 200;
    let attempts = ((2 * ack_timeout_ms + 2_000) / RETRY_PAUSE_MS).max(5);
    let mut keys: Vec<&str> = load.history.iter().map(|op| op.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let checker = 1_000_000;
    let timeout = Duration::from_millis(request_timeout_ms.max(1000));
    let mut finals = Vec::new();
    for key in keys {
        let mut last_error = String::new();
        let mut read = None;
        for _ in 0..attempts {
            let call_ns = rig.started.elapsed().as_nanos() as u64;
            let attempt = resp::Client::connect_timeout(rig.cluster.client_addr(), timeout)
                .and_then(|mut c| c.get(key.as_bytes()));
            match attempt {
                Ok(value) => {
                    let value = value
                        .map(|b| String::from_utf8_lossy(&b).parse::<u64>())
                        .transpose()
                        .map_err(|_| format!("final read of {key}: not a value the load wrote"))?;
                    let return_ns = rig.started.elapsed().as_nanos() as u64;
                    read = Some(Op {
                        client: checker,
                        key: key.to_string(),
                        input: Input::Read,
                        call_ns,
                        outcome: Outcome::Ok { return_ns, read: value },
                        attempts: 1,
                        cut_off: false,
                    });
                    break;
                }
                Err(e) => last_error = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
        }
        finals
            .push(read.ok_or_else(|| format!("final read of {key} failed {attempts} times: {last_error}"))?);
    }
    Ok(finals)
}

fn interrupted(interrupt: Option<&AtomicBool>) -> bool {
    interrupt.is_some_and(|i| i.load(std::sync::atomic::Ordering::SeqCst))
}

/// 1 if the store violated a property the model says holds (a store bug, or an environment
/// outside the model's scope); else 3 if the run was interrupted (it covers less than was
/// asked), else 0. The reverse (the model found a violation this one run did not hit) is
/// expected of a single schedule and is not a failure.
pub fn exit_code(outcome: &RunOutcome, model: &[(PropertyName, Found)]) -> u8 {
    let broken =
        model.iter().any(|(p, m)| *m == Found::Holds && outcome.verdict(*p) == Some(Found::Violated));
    if broken {
        1
    } else if outcome.interrupted {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
