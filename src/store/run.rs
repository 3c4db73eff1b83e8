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
//!   and table capacities, counted per window of one tick; INFO's `capacity_breaches` counts
//!   writes offered above a capacity (`capacity_respected`);
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

use super::client::{self, ClientRole, Input, LoadConfig, LoadReport, Op, Outcome};
use super::cluster::{Cluster, ClusterConfig, VALUE_BYTES_MAX_DEFAULT};
use super::coordinator::LoadFacts;
use super::decision::{EventLine, LogLine};
use super::layout::Layout;
use super::proxy::{Proxy, ProxyHandle};
use super::resp;
use super::trace::{self, TraceFault, TraceLine, TraceVerdict};
use super::StoreError;
use crate::config::{self, Found, LatencyTicks, OpKind, Policy, PropertyName, Scenario, SourcedPolicy};
use crate::lincheck::register::{Register, RegisterInput, RegisterOutput};
use crate::lincheck::{self, Budget, Operation, Verdict};
use crate::policy::detector::FailureDetection;
use crate::policy::routing;
use crate::policy::NodeId;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Phases, in thousandths of the run's duration.
const CALM_PERMILLE: u64 = 150;
/// Faults start one after another, this far apart.
const FAULT_STAGGER_PERMILLE: u64 = 50;
const HEAL_PERMILLE: u64 = 650;
/// A run lasts at most this long, so a typo cannot keep a test machine busy for hours.
pub const DURATION_MS_MAX: u64 = 600_000;
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
    pub clients: usize,
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
    /// The `replicheck` executable that runs the nodes.
    pub binary: PathBuf,
}

/// Explores a model for `store run --model-verdicts check`: the model file, and the policy
/// file or else the variant to check; gives every property's verdict. The store does not
/// explore models itself (it sits beside the checker, not above it): the CLI hands it one.
pub type ModelChecker<'a> = &'a dyn Fn(
    &std::path::Path,
    Option<&std::path::Path>,
    &str,
) -> Result<Vec<(PropertyName, Found)>, String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelVerdicts {
    /// Run the model check for this variant or policy (may take minutes).
    Check,
    /// The verdicts the variant declares (its `expect`), without exploring.
    Declared,
    /// Do not compare with the model.
    Skip,
}

/// One fault of the schedule, as applied.
#[derive(Clone, Debug)]
enum Fault {
    Crash(NodeId),
    /// The coordinator crashes and a new one starts from what it saved.
    CoordinatorCrash,
    Partition(u8),
    Degrade {
        zones: (u8, u8),
        latency: LatencyTicks,
        text: String,
    },
    Drop,
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
    /// (ms, evicted node, replacement, healthy: the schedule had not crashed/partitioned it).
    pub evictions: Vec<(u64, NodeId, NodeId, bool)>,
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
    pub info_counters: BTreeMap<String, u64>,
    pub decisions: usize,
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

/// The model's worst cases for a node no fault crashed or cut off, in real ms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelBounds {
    /// Per node: twice the worst one-way latency between the coordinator's zone and the
    /// node's, the fault menu's degradations included.
    pub round_trip_max_ms: Vec<u64>,
    /// `heartbeat_interval` (pings go out that often under independent detection).
    pub heartbeat_interval_ms: u64,
    pub dead_after_ms: u64,
    pub ack_timeout_ms: u64,
    pub independent: bool,
}

impl ModelBounds {
    fn of(scenario: &Scenario, policy: &Policy, ms_per_tick: u64) -> ModelBounds {
        let coordinator = scenario.coordinator.zone;
        ModelBounds {
            round_trip_max_ms: scenario
                .nodes
                .iter()
                .map(|n| 2 * u64::from(scenario.worst_latency_ticks(n.zone, coordinator)) * ms_per_tick)
                .collect(),
            heartbeat_interval_ms: u64::from(policy.heartbeat_interval_ticks),
            dead_after_ms: u64::from(policy.dead_after_ticks),
            ack_timeout_ms: u64::from(policy.replica_ack_timeout_ticks),
            independent: policy.failure_detection == FailureDetection::Independent,
        }
    }

    /// The longest silence of a reachable node in the model: the next ping goes out one
    /// heartbeat interval after the last, and its pong may take the worst round trip.
    pub fn silence_max_ms(&self, node: NodeId) -> Option<u64> {
        let rtt = self.round_trip_max_ms.get(usize::from(node))?;
        self.independent.then_some(self.heartbeat_interval_ms + rtt)
    }
}

impl RunOutcome {
    /// Whether more membership changes (evictions and moves) than the churn budget allows
    /// started within one window, as the model's `churn_bounded` counts them.
    pub fn churn_exceeded(&self, changes_max: u8, window_ms: u64) -> bool {
        let mut at_ms: Vec<u64> =
            self.evictions.iter().map(|e| e.0).chain(self.moves.iter().map(|m| m.0)).collect();
        at_ms.sort_unstable();
        at_ms.windows(usize::from(changes_max) + 1).any(|w| w[w.len() - 1] - w[0] < window_ms)
    }

    pub fn healthy_evictions(&self) -> usize {
        self.evictions.iter().filter(|e| e.3).count()
    }

    /// The store's verdict for a model property, where the run measures it.
    pub fn verdict(&self, property: PropertyName) -> Option<Found> {
        let violated = |bad: bool| Some(if bad { Found::Violated } else { Found::Holds });
        match property {
            PropertyName::AckedWritesPersist => violated(!self.acked_writes_lost.is_empty()),
            PropertyName::Linearizable => violated(!self.not_linearizable.is_empty()),
            PropertyName::NoDuplicateEffects => violated(self.duplicate_effects > 0),
            PropertyName::NoHealthyEviction => violated(self.healthy_evictions() > 0),
            PropertyName::ChurnBounded => {
                self.churn_budget_ms.and_then(|(n, window_ms)| violated(self.churn_exceeded(n, window_ms)))
            }
            PropertyName::CapacityRespected => violated(self.capacity_breaches > 0),
            PropertyName::OpsComplete => violated(!self.ops_never_completed.is_empty()),
            PropertyName::Converges => {
                violated(!self.changes_after_settle.is_empty() || self.changes_in_progress_at_end > 0)
            }
        }
    }
}

/// Multiply every duration of a policy resolved in ticks by `ms_per_tick`: the store reads
/// `_ticks` as milliseconds.
pub fn policy_in_ms(policy: &Policy, ms_per_tick: u64) -> Policy {
    let factor = u32::try_from(ms_per_tick).unwrap_or(u32::MAX);
    let ms = |ticks: u32| ticks.saturating_mul(factor);
    let mut p = policy.clone();
    p.replica_ack_timeout_ticks = ms(p.replica_ack_timeout_ticks);
    p.heartbeat_interval_ticks = ms(p.heartbeat_interval_ticks);
    p.suspect_after_ticks = ms(p.suspect_after_ticks);
    p.dead_after_ticks = ms(p.dead_after_ticks);
    p.retry.backoff_base_ticks = ms(p.retry.backoff_base_ticks);
    p.retry.backoff_max_ticks = ms(p.retry.backoff_max_ticks);
    if let Some(r) = &mut p.rebalance {
        r.interval_ticks = ms(r.interval_ticks);
        r.move_cooldown_ticks = ms(r.move_cooldown_ticks);
        r.cooldown_max_ticks = ms(r.cooldown_max_ticks);
    }
    p
}

/// The policy `store run` uses, with where it came from.
fn choose_policy(scenario: &Scenario, req: &RunRequest) -> Result<(String, SourcedPolicy), String> {
    match (&req.policy, &req.variant) {
        (Some(path), _) => {
            let patch = config::load_policy(path).map_err(|e| e.to_string())?;
            Ok((path.display().to_string(), scenario.base_policy.then(&patch)))
        }
        (None, name) => {
            let name = name.clone().unwrap_or_else(|| scenario.variants[0].name.clone());
            let variant = scenario.variant(&name).ok_or_else(|| {
                let known: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
                format!("{}: no variant \"{name}\" (variants: {})", req.model.display(), known.join(", "))
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
    let scenario = Scenario::load(&req.model).map_err(|e| e.to_string())?;
    let (label, sourced) = choose_policy(&scenario, req)?;
    let ticks_policy = sourced.resolve(scenario.tick_ms, scenario.nodes.len()).map_err(|e| e.to_string())?;
    let ms_per_tick = req.ms_per_tick.unwrap_or(scenario.tick_ms);
    validate(req, ms_per_tick)?;
    let policy = policy_in_ms(&ticks_policy, ms_per_tick);
    let layout = Layout::of_model(&scenario, &sourced, policy.replication_factor, ms_per_tick)?;
    let load = Workload::of_model(&scenario, &layout, req, ms_per_tick);
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
    let outcome =
        run_store(&scenario, &policy, layout, &load, ms_per_tick, req).map_err(StoreError::Runtime)?;
    let model = model_verdicts(&scenario, req, &label, check_model)?;
    report(out, &scenario, &outcome, &model);
    Ok((outcome, model))
}

fn validate(req: &RunRequest, ms_per_tick: u64) -> Result<(), String> {
    if req.model_verdicts == ModelVerdicts::Declared && req.policy.is_some() {
        return Err("--model-verdicts declared needs a --variant: a policy file declares no verdicts".into());
    }
    if ms_per_tick == 0 || ms_per_tick > 10_000 {
        return Err(format!("--time-scale {ms_per_tick}: must be 1 to 10000 ms per tick"));
    }
    let duration_ms = req.duration.as_millis() as u64;
    if !(500..=DURATION_MS_MAX).contains(&duration_ms) {
        return Err(format!("--duration {duration_ms}ms: must be 500ms to {DURATION_MS_MAX}ms"));
    }
    if req.keys == 0 || req.keys > client::LOAD_KEYS_MAX {
        return Err(format!("--keys {}: must be 1 to {}", req.keys, client::LOAD_KEYS_MAX));
    }
    Ok(())
}

/// The scheduled faults, at most `budget`: the first of each kind on the menu (crash,
/// partition, degrade, drop), then the second of each, and so on, so that a budget of two on a
/// menu of crashes and partitions gives one of each rather than two crashes.
fn schedule(scenario: &Scenario) -> Vec<Fault> {
    let f = &scenario.faults;
    let kinds: [Vec<Fault>; 4] = [
        f.crash
            .iter()
            .map(|n| Fault::Crash(*n))
            .chain(f.crash_coordinator.then_some(Fault::CoordinatorCrash))
            .collect(),
        f.partition.iter().map(|z| Fault::Partition(*z)).collect(),
        f.degrade
            .iter()
            .map(|d| Fault::Degrade { zones: d.zones, latency: d.latency, text: d.text.clone() })
            .collect(),
        if f.drop { vec![Fault::Drop] } else { Vec::new() },
    ];
    let rounds = kinds.iter().map(Vec::len).max().unwrap_or(0);
    let mut chosen: Vec<Fault> =
        (0..rounds).flat_map(|round| kinds.iter().filter_map(move |kind| kind.get(round).cloned())).collect();
    chosen.truncate(usize::from(f.budget));
    chosen
}

/// Everything `run_store` starts, so that faults can be applied and undone.
struct Rig<'a> {
    scenario: &'a Scenario,
    cluster: Cluster,
    client_proxy: Proxy,
    ms_per_tick: u64,
    started: Instant,
    /// First time (ms since start) each node was crashed or cut off by the schedule.
    node_faulted_at_ms: BTreeMap<NodeId, u64>,
    events: Vec<Event>,
}

impl Rig<'_> {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn event(&mut self, what: String) {
        let at_ms = self.now_ms();
        self.events.push(Event { at_ms, what });
    }

    fn link_latency(&self, a: u8, b: u8) -> LatencyTicks {
        self.scenario.latency[usize::from(a)][usize::from(b)]
    }

    fn set_latency(&self, proxy: &ProxyHandle, latency: LatencyTicks) -> Result<(), String> {
        proxy.set_latency_ms(
            u64::from(latency.lo) * self.ms_per_tick,
            u64::from(latency.hi) * self.ms_per_tick,
        )
    }

    /// Nodes on the other side of a partition of `zone` from the coordinator.
    fn cut_off_by(&self, zone: u8) -> Vec<NodeId> {
        let coordinator_zone = self.scenario.coordinator.zone;
        (0..self.scenario.nodes.len() as NodeId)
            .filter(|n| {
                let node_zone = self.scenario.nodes[usize::from(*n)].zone;
                (node_zone == zone) != (coordinator_zone == zone)
            })
            .collect()
    }

    fn client_zone(&self) -> u8 {
        self.scenario.clients.first().map(|c| c.zone).unwrap_or(self.scenario.coordinator.zone)
    }

    fn mark_faulted(&mut self, node: NodeId) {
        let now = self.now_ms();
        self.node_faulted_at_ms.entry(node).or_insert(now);
    }

    fn trace(&self, fault: TraceFault) {
        if let Some(t) = self.cluster.trace() {
            t.fault(fault);
        }
    }

    fn apply(&mut self, fault: &Fault) -> Result<(), String> {
        let traced = match fault {
            Fault::Crash(node) => TraceFault::Crash { node: *node },
            Fault::CoordinatorCrash => TraceFault::CoordinatorRestart,
            Fault::Partition(zone) => TraceFault::Partition { zone: *zone },
            Fault::Degrade { zones, latency, .. } => {
                let index = self
                    .scenario
                    .faults
                    .degrade
                    .iter()
                    .position(|d| d.zones == *zones && d.latency == *latency)
                    .ok_or("a degradation the model's fault menu does not list")?;
                TraceFault::Degrade { index: index as u8 }
            }
            Fault::Drop => TraceFault::Drop,
        };
        // Before the fault: a message it loses is then excused by it.
        self.trace(traced);
        match fault {
            Fault::Crash(node) => {
                self.cluster.kill(*node)?;
                self.mark_faulted(*node);
                self.event(format!("FAULT crash {}", self.scenario.nodes[usize::from(*node)].name));
            }
            Fault::CoordinatorCrash => {
                self.cluster.restart_coordinator()?;
                self.event("FAULT the coordinator crashes and restarts with what it saved".into());
            }
            Fault::Partition(zone) => {
                for node in self.cut_off_by(*zone) {
                    self.cluster.proxy(node).set_partitioned(true);
                    self.mark_faulted(node);
                }
                let coordinator_zone = self.scenario.coordinator.zone;
                if (self.client_zone() == *zone) != (coordinator_zone == *zone) {
                    self.client_proxy.handle().set_partitioned(true);
                }
                self.event(format!("FAULT zone {} partitioned", self.scenario.zones[usize::from(*zone)]));
            }
            Fault::Degrade { zones, latency, text } => {
                let cz = self.scenario.coordinator.zone;
                for node in 0..self.scenario.nodes.len() as NodeId {
                    let nz = self.scenario.nodes[usize::from(node)].zone;
                    if (cz, nz) == *zones || (nz, cz) == *zones {
                        self.set_latency(&self.cluster.proxy(node), *latency)?;
                    }
                }
                let z = |i: u8| self.scenario.zones[usize::from(i)].clone();
                self.event(format!("FAULT link {}<->{} degraded to {text} one way", z(zones.0), z(zones.1)));
            }
            Fault::Drop => {
                let cz = usize::from(self.scenario.coordinator.zone);
                let lossy = &self.scenario.lossy;
                if lossy[usize::from(self.client_zone())][cz] {
                    self.client_proxy.handle().set_drop_permille(DROP_PERMILLE)?;
                }
                for node in 0..self.scenario.nodes.len() as NodeId {
                    if lossy[cz][usize::from(self.scenario.nodes[usize::from(node)].zone)] {
                        self.cluster.proxy(node).set_drop_permille(DROP_PERMILLE)?;
                    }
                }
                self.event(format!("FAULT lossy links drop {DROP_PERMILLE}/1000 chunks"));
            }
        }
        Ok(())
    }

    /// Every link at its scenario latency, no loss, no partition.
    fn set_scenario_links(&self) -> Result<(), String> {
        let cz = self.scenario.coordinator.zone;
        for node in 0..self.scenario.nodes.len() as NodeId {
            let proxy = self.cluster.proxy(node);
            proxy.clear();
            self.set_latency(&proxy, self.link_latency(cz, self.scenario.nodes[usize::from(node)].zone))?;
        }
        let client_proxy = self.client_proxy.handle();
        client_proxy.clear();
        self.set_latency(&client_proxy, self.link_latency(self.client_zone(), cz))
    }

    /// Every fault undone: links as in the scenario, crashed nodes restarted.
    fn heal(&mut self) -> Result<(), String> {
        self.set_scenario_links()?;
        for node in 0..self.scenario.nodes.len() as NodeId {
            if !self.cluster.is_running(node) {
                self.cluster.restart(node)?;
            }
        }
        self.trace(TraceFault::Heal);
        self.event("HEAL every fault undone".into());
        Ok(())
    }
}

/// The client threads of a run, and what each plays.
struct Workload {
    threads: usize,
    roles: Vec<ClientRole>,
}

impl Workload {
    /// One role per model client. Clients whose keys land on the same partition through the
    /// same suffix (same shard, same `key_hash`) share keys, as they share a register in the
    /// model; each group gets `req.keys / groups` keys (at least one).
    fn of_model(scenario: &Scenario, layout: &Layout, req: &RunRequest, ms_per_tick: u64) -> Workload {
        let mut groups: Vec<(u8, u8)> = scenario.clients.iter().map(|c| (c.shard, c.key_hash)).collect();
        groups.sort_unstable();
        groups.dedup();
        let keys_per_group = (req.keys / groups.len().max(1)).max(1);
        let keys_of = |shard: u8, hash: u8| -> Vec<String> {
            let name = &layout.shards[usize::from(shard)].name;
            (0u32..)
                .map(|j| format!("{name}:{j}"))
                .filter(|key| routing::key_hash(key.as_bytes()) == hash)
                .take(keys_per_group)
                .collect()
        };
        let roles: Vec<ClientRole> = scenario
            .clients
            .iter()
            .map(|c| {
                let (reads, writes) = (c.ops.contains(&OpKind::Read), c.ops.contains(&OpKind::Write));
                ClientRole {
                    keys: keys_of(c.shard, c.key_hash),
                    write_permille: match (reads, writes) {
                        (true, true) => req.write_permille,
                        (false, _) => 1000,
                        (true, false) => 0,
                    },
                    think_lo_ms: u64::from(c.think_ticks.lo) * ms_per_tick,
                    think_hi_ms: u64::from(c.think_ticks.hi) * ms_per_tick,
                }
            })
            .collect();
        let has_capacity = layout.partition_write_capacity_per_window.is_some()
            || layout.table_write_capacity_per_window.is_some()
            || layout.backends_modelled();
        let threads = if has_capacity { roles.len() } else { req.clients };
        Workload { threads, roles }
    }

    fn key_count(&self) -> usize {
        let mut keys: Vec<&String> = self.roles.iter().flat_map(|r| &r.keys).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    }
}

fn run_store(
    scenario: &Scenario,
    policy: &Policy,
    layout: Layout,
    workload: &Workload,
    ms_per_tick: u64,
    req: &RunRequest,
) -> Result<RunOutcome, String> {
    let dir = ScratchDir::new()?;
    let log_path = req.decision_log.clone().unwrap_or_else(|| dir.path.join("decisions.jsonl"));
    let trace_path = req.trace.clone().unwrap_or_else(|| dir.path.join("trace.jsonl"));
    let before_start = Instant::now();
    let cluster = Cluster::start(ClusterConfig {
        binary: req.binary.clone(),
        node_count: scenario.nodes.len(),
        node_zones: scenario.nodes.iter().map(|n| n.zone).collect(),
        policy: policy.clone(),
        data_dir: dir.path.join("data"),
        client_addr: "127.0.0.1:0".parse().expect("an address"),
        value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
        decision_log: Some(log_path.clone()),
        proxy_seed: req.seed,
        load: load_facts(scenario),
        layout,
        // The model's membership queue, its update time in milliseconds as every duration.
        trace: Some((trace_path.clone(), ms_per_tick)),
        membership: Some(config::CoordinatorSpec {
            membership_update_ticks: scenario.coordinator.membership_update_ticks * ms_per_tick as u32,
            ..scenario.coordinator.clone()
        }),
    })
    .map_err(|e| e.to_string())?;
    // The decision log's clock started inside `Cluster::start`: at most this much after ours.
    let log_offset_ms = before_start.elapsed().as_millis() as u64;
    let client_proxy = Proxy::start_seeded(cluster.client_addr(), req.seed ^ 0xc1)
        .map_err(|e| format!("cannot start the client proxy: {e}"))?;
    let mut rig = Rig {
        scenario,
        cluster,
        client_proxy,
        ms_per_tick,
        started: before_start,
        node_faulted_at_ms: BTreeMap::new(),
        events: Vec::new(),
    };
    rig.set_scenario_links()?;
    rig.event("links at the scenario's latencies; load starts".into());
    let duration_ms = req.duration.as_millis() as u64;
    let request_timeout_ms = scenario
        .clients
        .first()
        .map(|c| u64::from(c.request_timeout_ticks) * ms_per_tick)
        .unwrap_or(u64::from(policy.replica_ack_timeout_ticks) * 2);
    let first_role = workload.roles.first().ok_or("the model has no clients")?;
    let load = LoadConfig {
        addr: rig.client_proxy.addr(),
        clients: workload.threads,
        keys: first_role.keys.clone(),
        write_permille: first_role.write_permille,
        roles: workload.roles.clone(),
        request_timeout_ms,
        retry: policy.retry,
        ms_per_tick: 1,
        think_lo_ms: first_role.think_lo_ms,
        think_hi_ms: first_role.think_hi_ms,
        duration: req.duration,
        seed: req.seed,
    };
    let clients_log = rig.cluster.decision_log().with_actor("client");
    let epoch = rig.started;
    let stop = Arc::new(AtomicBool::new(false));
    let load_thread = std::thread::Builder::new()
        .name("store-run-load".into())
        .spawn(move || client::run_load(&load, &clients_log, epoch, stop))
        .map_err(|e| format!("cannot start the load: {e}"))?;
    let faults = schedule(scenario);
    for (i, fault) in faults.iter().enumerate() {
        sleep_until(&rig, duration_ms * (CALM_PERMILLE + FAULT_STAGGER_PERMILLE * i as u64) / 1000);
        rig.apply(fault)?;
    }
    let heal_at_ms = duration_ms * HEAL_PERMILLE / 1000;
    sleep_until(&rig, heal_at_ms);
    rig.heal()?;
    let load = load_thread.join().map_err(|_| "the load thread panicked".to_string())??;
    rig.event(format!("load stopped after {} operations", load.history.len()));
    let load_end_ms = rig.now_ms();
    if let Some(t) = rig.cluster.trace() {
        t.line(&TraceLine::End { at_ms: t.now_ms() });
        t.flush()?;
    }
    // Let the last catch-up copies and deadlines run out before the final reads.
    let settle_ms = 2 * u64::from(policy.replica_ack_timeout_ticks) + 200;
    std::thread::sleep(Duration::from_millis(settle_ms.min(3_000)));
    let finals = final_reads(&rig, &load, request_timeout_ms, u64::from(policy.replica_ack_timeout_ticks))?;
    let info = rig.cluster.info();
    rig.cluster.decision_log().flush().map_err(|e| format!("decision log: {e}"))?;
    let log_text = std::fs::read_to_string(&log_path)
        .map_err(|e| format!("cannot read the decision log {}: {e}", log_path.display()))?;
    let mut outcome = measure(&load, &finals, &log_text, log_offset_ms, &rig.node_faulted_at_ms)?;
    let trace_text = std::fs::read_to_string(&trace_path)
        .map_err(|e| format!("cannot read the trace {}: {e}", trace_path.display()))?;
    outcome.trace_verdict = Some(trace::validate(scenario, &trace_text, trace_slack_ms(ms_per_tick))?);
    outcome.history_files = write_history_files(&load, &finals, req, !outcome.not_linearizable.is_empty())?;
    outcome.events = std::mem::take(&mut rig.events);
    outcome.info_counters = info_counters(&info);
    outcome.links = link_facts(&info, scenario.nodes.len())?;
    outcome.bounds = ModelBounds::of(scenario, policy, ms_per_tick);
    let counter = |name: &str| outcome.info_counters.get(name).copied().unwrap_or(0);
    outcome.capacity_breaches = counter("capacity_breaches");
    outcome.writes_throttled = counter("writes_throttled");
    outcome.changes_in_progress_at_end = counter("evictions_in_progress") + counter("moves_in_progress");
    outcome.first_capacity_breach =
        info.lines().find_map(|line| line.trim().strip_prefix("first_capacity_breach:")).map(str::to_string);
    let heal_ns = heal_at_ms * 1_000_000;
    outcome.ops_never_completed = load
        .history
        .iter()
        .filter(|op| op.cut_off && op.call_ns < heal_ns)
        .map(|op| {
            format!(
                "client {} {}: {} attempts since {} ms",
                op.client,
                op.key,
                op.attempts,
                op.call_ns / 1_000_000
            )
        })
        .collect();
    // The second half of the healed phase: whatever the faults set off has had half of it.
    outcome.settle_at_ms = heal_at_ms + load_end_ms.saturating_sub(heal_at_ms) / 2;
    let settle = outcome.settle_at_ms;
    let mut after: Vec<(u64, String)> = outcome
        .evictions
        .iter()
        .filter(|e| e.0 >= settle)
        .map(|e| (e.0, format!("eviction of node {}", e.1)))
        .chain(
            outcome.moves.iter().filter(|m| m.0 >= settle).map(|m| (m.0, format!("move {} -> {}", m.2, m.3))),
        )
        .collect();
    after.sort();
    outcome.changes_after_settle = after;
    outcome.churn_budget_ms =
        rig.scenario.coordinator.churn_budget.map(|(n, ticks)| (n, u64::from(ticks) * ms_per_tick));
    Ok(outcome)
}

/// What a real round trip may take beyond the model's latencies: a tick (time is discrete in
/// the model), fsync and scheduling.
pub fn trace_slack_ms(ms_per_tick: u64) -> u64 {
    ms_per_tick + 500
}

/// The rebalancer's view of the scenario's nodes (the shards' sizes and heat are in the
/// layout).
fn load_facts(scenario: &Scenario) -> LoadFacts {
    LoadFacts {
        node_disk_used_pct: scenario.nodes.iter().map(|n| n.disk_used_pct).collect(),
        node_compaction_debt_pct: scenario.nodes.iter().map(|n| n.compaction_debt_pct).collect(),
        slow_compaction_debt_pct: scenario.slow_compaction_debt_pct,
    }
}

fn sleep_until(rig: &Rig, at_ms: u64) {
    let now = rig.now_ms();
    if at_ms > now {
        std::thread::sleep(Duration::from_millis(at_ms - now));
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

/// The history as Jepsen EDN where `--history` asks for it, and, when some key is not
/// linearizable, a picture of it (`history check --html`'s page) beside that file or in the
/// temporary directory. Returns one report line per file written.
fn write_history_files(
    load: &LoadReport,
    finals: &[Op],
    req: &RunRequest,
    not_linearizable: bool,
) -> Result<Vec<String>, String> {
    let ops: Vec<_> = load.history.iter().chain(finals).filter_map(|op| op.as_kv_op()).collect();
    let mut lines = Vec::new();
    if let Some(path) = &req.history {
        std::fs::write(path, lincheck::generate::to_edn(&ops))
            .map_err(|e| format!("cannot write --history {}: {e}", path.display()))?;
        lines.push(format!(
            "history (Jepsen EDN, for `replicheck history check`, Knossos, Elle): {}",
            path.display()
        ));
    }
    if not_linearizable {
        let options = lincheck::Options { threads: 1, every_key: false };
        let checked = lincheck::cli::check_kv(&ops, true, Budget::steps(LINCHECK_STEPS_MAX), options);
        let path = match &req.history {
            Some(edn) => edn.with_extension("html"),
            None => std::env::temp_dir().join(format!("replicheck-store-run-{}.html", std::process::id())),
        };
        std::fs::write(&path, lincheck::html::page("store run history", &checked))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        lines.push(format!("picture of the non-linearizable history: {}", path.display()));
    }
    Ok(lines)
}

/// Everything measured from the history, the final reads and the decision log.
fn measure(
    load: &LoadReport,
    finals: &[Op],
    log_text: &str,
    log_offset_ms: u64,
    faulted_at_ms: &BTreeMap<NodeId, u64>,
) -> Result<RunOutcome, String> {
    let mut outcome = RunOutcome {
        ops: load.history.len(),
        ops_ok: load.count(|op| matches!(op.outcome, Outcome::Ok { .. })),
        writes_unknown: load.count(|op| op.outcome == Outcome::Unknown),
        reads_failed: load.count(|op| op.outcome == Outcome::Failed),
        retries: load.retries,
        ..RunOutcome::default()
    };
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in load.history.iter().chain(finals) {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut pairs: Vec<(String, Operation<RegisterInput, RegisterOutput>)> = Vec::new();
    for (key, ops) in &by_key {
        let last = finals.iter().find(|f| f.key == *key).expect("a final read per key");
        if let Some(why) = acked_write_missed(ops, last) {
            outcome.acked_writes_lost.push(format!("{key}: {why}"));
        }
        pairs.extend(ops.iter().filter_map(|op| op.as_register_op()).map(|op| (key.to_string(), op)));
    }
    // Every key's verdict (the report lists each key that is not linearizable), searched in
    // turns under one memory bound for all keys.
    let partitions = lincheck::partition_pairs(pairs);
    let options = lincheck::Options { threads: 1, every_key: true };
    let checked =
        lincheck::check_partitions_with(&Register, &partitions, Budget::steps(LINCHECK_STEPS_MAX), options);
    for (key, verdict) in checked.per_key {
        match verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { .. } => outcome.not_linearizable.push(key),
            Verdict::Unknown { reason } => outcome.undecided.push(format!("{key}: {reason}")),
        }
    }
    // The detector's latest death verdict on each node, for the eviction that follows it.
    let mut death: BTreeMap<NodeId, DeathEvidence> = BTreeMap::new();
    for (index, raw) in log_text.lines().enumerate() {
        if let Ok(line) = serde_json::from_str::<EventLine>(raw) {
            let at_ms = line.elapsed_ms + log_offset_ms;
            let event = ProtocolEvent::parse(&line.event)
                .ok_or_else(|| format!("decision log line {}: unknown event {:?}", index + 1, line.event))?;
            match event {
                ProtocolEvent::DeclaredDead { node, silence_ms: Some(silence_ms) } => {
                    death.insert(node, DeathEvidence::Silence { silence_ms });
                }
                ProtocolEvent::DeclaredDead { node, silence_ms: None } => {
                    outcome.deadline_deaths += 1;
                    death.insert(node, DeathEvidence::DeadlineMiss);
                }
                ProtocolEvent::ChangeRequested { shard, from, to, is_move: true } => {
                    outcome.moves.push((at_ms, shard, from, to));
                }
                ProtocolEvent::ChangeRequested { from, to, is_move: false, .. } => {
                    let healthy = faulted_at_ms.get(&from).is_none_or(|t| *t > at_ms);
                    outcome.evictions.push((at_ms, from, to, healthy));
                    outcome.evicted_because.push(death.get(&from).copied());
                }
                ProtocolEvent::DuplicateEffect => outcome.duplicate_effects += 1,
                ProtocolEvent::Other => {}
            }
            continue;
        }
        let _: LogLine = serde_json::from_str(raw)
            .map_err(|e| format!("decision log line {}: not a decision: {e}", index + 1))?;
        outcome.decisions += 1;
    }
    Ok(outcome)
}

/// A protocol event line of the decision log, as the run's report needs it.
enum ProtocolEvent {
    DeclaredDead { node: NodeId, silence_ms: Option<u64> },
    ChangeRequested { shard: u8, from: NodeId, to: NodeId, is_move: bool },
    DuplicateEffect,
    Other,
}

impl ProtocolEvent {
    /// `declared_dead node=1 silence_ms=3100`, `change_requested shard=0 evicted=1
    /// replacement=3 move=false`, ... (`None`: malformed).
    fn parse(text: &str) -> Option<ProtocolEvent> {
        let mut words = text.split(' ');
        let name = words.next()?;
        let fields: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
        let number = |k: &str| fields.get(k).and_then(|v| v.parse::<u64>().ok());
        let node = |k: &str| fields.get(k).and_then(|v| v.parse::<NodeId>().ok());
        Some(match name {
            "declared_dead" => {
                ProtocolEvent::DeclaredDead { node: node("node")?, silence_ms: number("silence_ms") }
            }
            "change_requested" => ProtocolEvent::ChangeRequested {
                shard: node("shard")?,
                from: node("evicted")?,
                to: node("replacement")?,
                is_move: *fields.get("move")? == "true",
            },
            "duplicate_effect" => ProtocolEvent::DuplicateEffect,
            _ => ProtocolEvent::Other,
        })
    }
}

/// Why the final read `last` misses an acknowledged write of `ops`, if it does: it returned
/// nothing, or a value whose write was over before the newest acknowledged write began.
fn acked_write_missed(ops: &[&Op], last: &Op) -> Option<String> {
    let writes = || {
        ops.iter().filter_map(|op| match op.input {
            Input::Write(value) => Some((value, *op)),
            Input::Read => None,
        })
    };
    let newest_acked = writes()
        .filter_map(|(value, op)| match op.outcome {
            Outcome::Ok { return_ns, .. } => Some((return_ns, value, op.call_ns)),
            _ => None,
        })
        .max()?;
    let Outcome::Ok { read, .. } = last.outcome else { return None };
    let Some(read) = read else {
        return Some(format!("reads nothing, but write {} was acknowledged", newest_acked.1));
    };
    let (_, op) = writes().find(|(value, _)| *value == read)?;
    match op.outcome {
        Outcome::Ok { return_ns, .. } if return_ns < newest_acked.2 => {
            Some(format!("reads {read}, written before acknowledged write {} began", newest_acked.1))
        }
        _ => None,
    }
}

/// Each node's link measurements from INFO's `nodeN:...,max_silence_ms=...` lines.
fn link_facts(info: &str, node_count: usize) -> Result<Vec<LinkFacts>, String> {
    (0..node_count)
        .map(|n| {
            let prefix = format!("node{n}:");
            let line = info
                .lines()
                .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
                .ok_or_else(|| format!("INFO has no line for node {n}"))?;
            let field = |name: &str| -> Result<u64, String> {
                line.split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("INFO's node {n} line has no number {name}: {line}"))
            };
            Ok(LinkFacts {
                max_silence_ms: field("max_silence_ms")?,
                max_round_trip_ms: field("max_round_trip_ms")?,
                late_replies: field("late_replies")?,
            })
        })
        .collect()
}

/// INFO's `name:number` lines.
fn info_counters(info: &str) -> BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            Some((name.to_string(), value.parse::<u64>().ok()?))
        })
        .collect()
}

fn model_verdicts(
    scenario: &Scenario,
    req: &RunRequest,
    label: &str,
    check_model: ModelChecker,
) -> Result<Vec<(PropertyName, Found)>, String> {
    match req.model_verdicts {
        ModelVerdicts::Skip => Ok(Vec::new()),
        ModelVerdicts::Declared => {
            let variant = scenario.variant(label).expect("chosen above");
            Ok(variant
                .expect
                .iter()
                .map(|(p, v)| (*p, if *v == config::Verdict::Holds { Found::Holds } else { Found::Violated }))
                .collect())
        }
        ModelVerdicts::Check => check_model(&req.model, req.policy.as_deref(), label),
    }
}

/// Why the store and the model disagree on a property, in one line: what was measured where
/// the run measures the cause, else what usually explains it.
fn disagreement(
    property: PropertyName,
    store: Found,
    model: Found,
    o: &RunOutcome,
    scenario: &Scenario,
) -> String {
    if (property, store, model) == (PropertyName::NoHealthyEviction, Found::Violated, Found::Holds) {
        return healthy_eviction_facts(o, scenario);
    }
    disagreement_usual(property, store, model).to_string()
}

/// For each node evicted while healthy: why the detector declared it dead, and its round
/// trips and silence against the model's bounds. Delays are said to exceed the model's range
/// only when a round trip was measured above it.
fn healthy_eviction_facts(o: &RunOutcome, scenario: &Scenario) -> String {
    let b = &o.bounds;
    let mut nodes: Vec<(NodeId, Option<DeathEvidence>)> = Vec::new();
    for (e, because) in o.evictions.iter().zip(&o.evicted_because) {
        if e.3 && !nodes.iter().any(|(n, _)| *n == e.1) {
            nodes.push((e.1, *because));
        }
    }
    let facts: Vec<String> = nodes
        .iter()
        .map(|&(node, because)| {
            let name = &scenario.nodes[usize::from(node)].name;
            let link = o.links.get(usize::from(node)).copied().unwrap_or_default();
            let rtt_max_ms = b.round_trip_max_ms.get(usize::from(node)).copied().unwrap_or(0);
            let verdict = match because {
                Some(DeathEvidence::Silence { silence_ms }) => {
                    format!("declared dead after {silence_ms} ms of silence (dead_after {} ms)", b.dead_after_ms)
                }
                Some(DeathEvidence::DeadlineMiss) => {
                    format!("declared dead for missing a {} ms ack deadline (coupled detection)", b.ack_timeout_ms)
                }
                None => "declared dead (no verdict in the decision log)".to_string(),
            };
            let delays = if link.max_round_trip_ms > rtt_max_ms {
                format!(
                    "its round trips (the node's own processing included) reached {} ms, {} ms above the model's worst {rtt_max_ms} ms: real delays exceeded the model's latency range",
                    link.max_round_trip_ms,
                    link.max_round_trip_ms - rtt_max_ms
                )
            } else {
                format!(
                    "its round trips stayed within the model's worst ({} ms <= {rtt_max_ms} ms), so the delays were the model's",
                    link.max_round_trip_ms
                )
            };
            let silence = match b.silence_max_ms(node) {
                Some(bound_ms) => format!(
                    "; its longest silence was {} ms, the model's longest for a reachable node {bound_ms} ms (heartbeat_interval + worst round trip)",
                    link.max_silence_ms
                ),
                None => String::new(),
            };
            format!("{name} {verdict}; {delays}{silence}")
        })
        .collect();
    if facts.is_empty() {
        return "a node was evicted although the schedule never crashed or cut it off".into();
    }
    facts.join("; ")
}

fn disagreement_usual(property: PropertyName, store: Found, model: Found) -> &'static str {
    match (property, store, model) {
        (_, Found::Holds, Found::Violated) => {
            "the model found a schedule that violates it; this run's one schedule did not hit it (run longer, or the fault came too late)"
        }
        (PropertyName::Converges, Found::Violated, Found::Holds) => {
            "an eviction or move started late in the healed phase or was still catching up at the end: if it followed a fault, detection (dead_after) and the catch-up copy need more time than half the healed phase (run longer); if it repeats, the store oscillates where the model settles"
        }
        (PropertyName::OpsComplete, Found::Violated, Found::Holds) => {
            "an operation begun before the heal was still being retried when the load ended: the policy's retries outlasted the run (run longer), or the store kept refusing it"
        }
        (PropertyName::NoDuplicateEffects, Found::Violated, Found::Holds) => {
            "a retry was sequenced again: the store forgot the token (token memory limit) or the model's scope hides this retry"
        }
        (_, Found::Violated, Found::Holds) => {
            "the store broke what the model proves: a store bug, or an environment outside the model's scope"
        }
        _ => "",
    }
}

/// Per node, the coordinator's measured round trips and silences beside the model's bounds.
fn write_links(out: &mut String, scenario: &Scenario, o: &RunOutcome) {
    let b = &o.bounds;
    let silence_bound = if b.independent {
        "; the model's longest silence of a reachable node: heartbeat_interval + worst round trip"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "links (measured by the coordinator over the run, faults included; model's worst round trip, degradations included{silence_bound}):"
    );
    for (n, link) in o.links.iter().enumerate() {
        let node = n as NodeId;
        let rtt_max_ms = b.round_trip_max_ms.get(n).copied().unwrap_or(0);
        let silence = match b.silence_max_ms(node) {
            Some(bound_ms) => format!("max silence {} ms (model {bound_ms} ms)", link.max_silence_ms),
            None => format!("max silence {} ms", link.max_silence_ms),
        };
        let _ = writeln!(
            out,
            "  {:<6} max round trip {} ms (model {rtt_max_ms} ms), {silence}, {} replies after their deadline",
            scenario.nodes[n].name, link.max_round_trip_ms, link.late_replies
        );
    }
}

/// Moves per second of the run, one figure per whole second that had any, e.g. "1s: 2, 3s: 1".
fn moves_per_second(o: &RunOutcome) -> String {
    let mut per_second: BTreeMap<u64, usize> = BTreeMap::new();
    for (at_ms, ..) in &o.moves {
        *per_second.entry(at_ms / 1000).or_default() += 1;
    }
    if per_second.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = per_second.iter().map(|(s, n)| format!("{s}s: {n}")).collect();
    format!("per second since start: {}", parts.join(", "))
}

fn report(out: &mut String, scenario: &Scenario, o: &RunOutcome, model: &[(PropertyName, Found)]) {
    let _ = writeln!(out, "timeline (ms since start):");
    let mut timeline: Vec<(u64, String)> = o.events.iter().map(|e| (e.at_ms, e.what.clone())).collect();
    for (at_ms, node, replacement, healthy) in &o.evictions {
        let name = |n: &NodeId| scenario.nodes[usize::from(*n)].name.clone();
        let how = if *healthy { "healthy (never crashed or cut off)" } else { "after a fault hit it" };
        timeline.push((*at_ms, format!("evict {} -> {}: {how}", name(node), name(replacement))));
    }
    let name = |n: &NodeId| scenario.nodes[usize::from(*n)].name.clone();
    for (at_ms, shard, from, to) in &o.moves {
        let shard = scenario.shards.get(usize::from(*shard)).map_or("?", |s| s.name.as_str());
        timeline.push((*at_ms, format!("move {shard} {} -> {}", name(from), name(to))));
    }
    timeline.sort();
    for (at_ms, what) in &timeline {
        let _ = writeln!(out, "  {at_ms:>7}  {what}");
    }
    let _ = writeln!(
        out,
        "operations: {} ({} ok, {} writes with unknown outcome, {} reads failed), {} retries",
        o.ops, o.ops_ok, o.writes_unknown, o.reads_failed, o.retries
    );
    let info: Vec<String> = ["evictions", "moves", "membership_changes", "catchups_completed"]
        .iter()
        .filter_map(|name| o.info_counters.get(*name).map(|n| format!("{name} {n}")))
        .collect();
    let _ = writeln!(
        out,
        "decisions logged: {}; deadline misses taken as death: {}; evictions: {} ({} healthy); INFO: {}",
        o.decisions,
        o.deadline_deaths,
        o.evictions.len(),
        o.healthy_evictions(),
        info.join(", "),
    );
    write_links(out, scenario, o);
    let _ = writeln!(
        out,
        "moves: {} ({}); leader changes: none possible (one coordinator)",
        o.moves.len(),
        moves_per_second(o)
    );
    if let Some(v) = &o.trace_verdict {
        let _ = writeln!(out, "trace: {}", trace::describe(v, &scenario.name));
    }
    let _ = writeln!(out, "acked writes lost: {}", o.acked_writes_lost.len());
    for line in &o.acked_writes_lost {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "linearizability per key: {} not linearizable, {} undecided",
        o.not_linearizable.len(),
        o.undecided.len()
    );
    for key in &o.not_linearizable {
        let _ = writeln!(out, "  not linearizable: {key}");
    }
    for line in &o.history_files {
        let _ = writeln!(out, "  {line}");
    }
    for why in &o.undecided {
        let _ = writeln!(out, "  undecided: {why}");
    }
    let _ = writeln!(out, "duplicate effects (a retried token given a new version): {}", o.duplicate_effects);
    let _ = writeln!(
        out,
        "capacity: {} writes offered above a capacity, {} throttled{}",
        o.capacity_breaches,
        o.writes_throttled,
        o.first_capacity_breach
            .as_ref()
            .map(|b| format!("; first: {}", with_model_names(b, scenario)))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "operations begun before the heal and still retried at the end: {}",
        o.ops_never_completed.len()
    );
    for line in o.ops_never_completed.iter().take(5) {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "membership changes after the settle point ({} ms): {}; in progress at the end: {}",
        o.settle_at_ms,
        o.changes_after_settle.len(),
        o.changes_in_progress_at_end
    );
    for (at_ms, what) in o.changes_after_settle.iter().take(5) {
        let _ = writeln!(out, "  {at_ms} ms: {what}");
    }
    let _ = writeln!(out, "{:<22} {:<10} {:<10}", "property", "store", "model");
    let mut properties: Vec<PropertyName> = scenario.properties.clone();
    for extra in [PropertyName::Linearizable] {
        if !properties.contains(&extra) {
            properties.push(extra);
        }
    }
    for property in properties {
        let store = o.verdict(property);
        let modelled = model.iter().find(|(p, _)| *p == property).map(|(_, f)| *f);
        let show = |f: Option<Found>| f.map(|f| f.to_string()).unwrap_or_else(|| "-".into());
        let _ = write!(out, "{:<22} {:<10} {:<10}", property.as_str(), show(store), show(modelled));
        if let (Some(s), Some(m)) = (store, modelled) {
            let why = disagreement(property, s, m, o, scenario);
            if !why.is_empty() {
                let _ = write!(out, " DIFFERS: {why}");
            }
        }
        let _ = writeln!(out);
    }
}

/// The store's text about a backend ("backend node 2 offered ...") with the model's node name
/// added ("backend n3 (node 2) offered ...").
fn with_model_names(text: &str, scenario: &Scenario) -> String {
    let mut out = text.to_string();
    // Highest index first, so that "node 1" does not match inside "node 12".
    for (i, node) in scenario.nodes.iter().enumerate().rev() {
        out = out.replace(&format!("backend node {i} "), &format!("backend {} (node {i}) ", node.name));
    }
    out
}

/// A directory for one run's node data (and its decision log unless kept elsewhere), removed
/// when the run ends.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new() -> Result<ScratchDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!("replicheck-store-run-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// 1 if the store violated a property the model says holds (a store bug, or an environment
/// outside the model's scope), else 0. The reverse (the model found a violation this one run
/// did not hit) is expected of a single schedule and is not a failure.
pub fn exit_code(outcome: &RunOutcome, model: &[(PropertyName, Found)]) -> u8 {
    let broken =
        model.iter().any(|(p, m)| *m == Found::Holds && outcome.verdict(*p) == Some(Found::Violated));
    u8::from(broken)
}

#[cfg(test)]
mod tests {
    use super::{disagreement, DeathEvidence, Found, LinkFacts, ModelBounds, PropertyName, RunOutcome};

    /// A stale read: client 1 reads the initial (absent) value after client 0's write of 7
    /// returned. The EDN reads back as the same history, and the picture marks the read.
    #[test]
    fn history_files_are_edn_and_a_picture_of_the_anomaly() {
        use super::super::client::{Input, LoadReport, Op, Outcome};
        let op = |client, input, call_ns, return_ns, read| Op {
            client,
            key: "p1:k".into(),
            input,
            call_ns,
            outcome: Outcome::Ok { return_ns, read },
            attempts: 1,
            cut_off: false,
        };
        let load = LoadReport {
            history: vec![op(0, Input::Write(7), 0, 10, None), op(1, Input::Read, 20, 30, None)],
            retries: 0,
            give_ups: 0,
        };
        let dir = tempfile::tempdir().unwrap();
        let edn = dir.path().join("h.edn");
        let req = super::RunRequest {
            model: "m.toml".into(),
            variant: None,
            policy: None,
            ms_per_tick: None,
            duration: std::time::Duration::from_secs(1),
            clients: 1,
            keys: 1,
            write_permille: 500,
            model_verdicts: super::ModelVerdicts::Skip,
            decision_log: None,
            history: Some(edn.clone()),
            trace: None,
            seed: 1,
            binary: "replicheck".into(),
        };
        let lines = super::write_history_files(&load, &[], &req, true).unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        let text = std::fs::read_to_string(&edn).unwrap();
        let back = crate::lincheck::parse::kv_edn(&text).unwrap();
        let ops: Vec<_> = load.history.iter().filter_map(|o| o.as_kv_op()).collect();
        assert_eq!(back.len(), 2);
        assert_eq!(
            back.iter().map(|o| &o.input).collect::<Vec<_>>(),
            ops.iter().map(|o| &o.input).collect::<Vec<_>>()
        );
        let html = std::fs::read_to_string(dir.path().join("h.html")).unwrap();
        assert_eq!(html.matches(r#"id="unplaced""#).count(), 1, "the stale read is marked");
        assert!(html.contains("cannot be linearized by here"));
    }

    #[test]
    fn churn_counts_moves_and_evictions_within_one_window() {
        let o = RunOutcome {
            moves: vec![(1_000, 0, 0, 1), (2_000, 0, 1, 0), (9_000, 0, 0, 1)],
            evictions: vec![(5_500, 1, 2, false)],
            ..RunOutcome::default()
        };
        // 1000, 2000, 5500 are three changes within 5 s.
        assert!(o.churn_exceeded(2, 5_000));
        // No three within 4.5 s.
        assert!(!o.churn_exceeded(2, 4_500));
        assert!(!o.churn_exceeded(4, 60_000));
    }

    fn ack_timeout_fixed() -> crate::config::Scenario {
        crate::config::Scenario::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/ack-timeout-eviction.toml"
        )))
        .unwrap()
    }

    /// n2 evicted while healthy after 3.2 s of silence, its round trips at `rtt_ms`.
    fn evicted_n2(rtt_ms: u64) -> RunOutcome {
        let link = LinkFacts { max_silence_ms: 3_200, max_round_trip_ms: rtt_ms, late_replies: 4 };
        RunOutcome {
            evictions: vec![(9_000, 1, 3, true), (9_000, 1, 3, true)],
            evicted_because: vec![Some(DeathEvidence::Silence { silence_ms: 3_150 }); 2],
            links: vec![LinkFacts::default(), link, LinkFacts::default(), LinkFacts::default()],
            bounds: ModelBounds {
                round_trip_max_ms: vec![200, 1_400, 200, 1_400],
                heartbeat_interval_ms: 1_000,
                dead_after_ms: 3_000,
                ack_timeout_ms: 500,
                independent: true,
            },
            ..RunOutcome::default()
        }
    }

    #[test]
    fn a_healthy_eviction_is_explained_by_what_was_measured() {
        let scenario = ack_timeout_fixed();
        let (holds, violated) = (Found::Holds, Found::Violated);
        let within =
            disagreement(PropertyName::NoHealthyEviction, violated, holds, &evicted_n2(1_380), &scenario);
        assert_eq!(
            within,
            "n2 declared dead after 3150 ms of silence (dead_after 3000 ms); its round trips stayed within the model's worst (1380 ms <= 1400 ms), so the delays were the model's; its longest silence was 3200 ms, the model's longest for a reachable node 2400 ms (heartbeat_interval + worst round trip)"
        );
        assert!(!within.contains("exceeded"), "no round trip was measured above the range");
        let above =
            disagreement(PropertyName::NoHealthyEviction, violated, holds, &evicted_n2(1_650), &scenario);
        assert!(
            above.contains("reached 1650 ms, 250 ms above the model's worst 1400 ms: real delays exceeded the model's latency range"),
            "{above}"
        );
    }

    #[test]
    fn the_model_bounds_are_the_scenarios_worst_round_trips() {
        let scenario = ack_timeout_fixed();
        let fixed = scenario.variant("fixed").unwrap().policy.resolve(scenario.tick_ms, 4).unwrap();
        let bounds = ModelBounds::of(&scenario, &super::policy_in_ms(&fixed, 100), 100);
        // n1, n3 in the coordinator's zone at 100 ms; n2, n4 across a<->b, degradable to 700 ms.
        assert_eq!(bounds.round_trip_max_ms, [200, 1_400, 200, 1_400]);
        assert_eq!((bounds.dead_after_ms, bounds.ack_timeout_ms), (3_000, 500));
        // The model file's own figure: "dead after 3s of silence, well above the worst of 2.4s".
        assert_eq!((bounds.silence_max_ms(1), bounds.silence_max_ms(0)), (Some(2_400), Some(1_200)));
    }

    #[test]
    fn a_breach_names_the_models_node() {
        let scenario = crate::config::Scenario::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/capacity-routing-bypass.toml"
        )))
        .unwrap();
        assert_eq!(
            super::with_model_names("backend node 2 offered 3 > capacity 2 at 104 ms", &scenario),
            "backend n3 (node 2) offered 3 > capacity 2 at 104 ms"
        );
        assert_eq!(super::with_model_names("partition p1 offered 3", &scenario), "partition p1 offered 3");
    }
}
