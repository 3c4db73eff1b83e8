//! `replicheck store sim MODEL`: the store's own code on a simulated network and clock, one
//! seed after another, each the same on every run.
//!
//! What runs is the store's: the coordinator's shell driving the protocol's machine (its clock
//! task, its state file, its catch-up copies), each node's real storage (redb and its write
//! log) and request handler, `store run`'s clients (roles, operations, tokens, retry
//! decisions) and its measurement (the history checker, the decision log's events, INFO). What
//! is simulated is what is between them (`net`): every request and reply is a message with a
//! latency drawn from the scenario's links, lost to a partition, a crashed node or the drop
//! fault; and time, which is tokio's paused clock on one thread, so a run takes as long as its
//! computation and every choice comes from the seed.
//!
//! Each seed draws its own fault schedule from the model's menu: one to `faults.budget`
//! faults, each at a moment of the fault phase (between `store run`'s calm and heal points),
//! each lasting a draw from its `duration` window or until the heal. Then, as in `store run`,
//! the load stops, the last catch-ups settle, every key is read, and the properties are judged
//! from the history, the decision log, INFO and the coordinator's trace (validated against the
//! model's environment).
//!
//! The leader family runs its own store's code the same way (`leader`): each node's replica
//! loop on its redb and the coordinator's failover manager, their messages on `net`.
//!
//! A seed fails when it violates a property the variant expects to hold (every property, for a
//! policy file). A property the variant expects violated and some seed violates is reproduced.

mod leader;
pub mod load;
pub mod net;
pub mod replay;
mod replay_run;
mod seed;

pub use replay_run::{Replay, ReplayPlanner, ReplayQuery};

use crate::config::{Found, PropertyName, Scenario, Verdict};
use crate::policy::NodeId;
use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::link::NodeChannel;
use crate::store::coordinator::peer::PeerChannel;
use crate::store::coordinator::peer::Peering;
use crate::store::coordinator::state::StateFile;
use crate::store::coordinator::{start_shell, Coordinator};
use crate::store::decision::DecisionLog;
use crate::store::run::client::{LoadReport, Op, Outcome};
use crate::store::run::{
    self, judge_phases, load_facts, measure, membership_in_ms, menu, read_info, read_leader_info, Fault,
    Played, RolloutRun, RunOutcome, ScratchDir, Step, Workload, CALM_PERMILLE, HEAL_PERMILLE,
};
use crate::store::trace::{self, TraceFault, TraceLine, TraceVerdict, TraceWriter};
use crate::store::StoreError;
use load::{Front, Served, SimLoad};
use net::{SimNet, SimNode, SimPeers};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use replay::{ClientStep, Holding, Moment, Plan, Replayer};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Seeds in one command at most, and simulated time per seed at most.
pub const SEEDS_MAX: u64 = 100_000;
pub const DURATION_MS_MAX: u64 = 600_000;
/// A final read is retried this many times, 200 ms apart.
const FINAL_READ_ATTEMPTS: u32 = 50;

/// Whose operations the clients play.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadShape {
    /// The model's: each client plays its model client's operations on its key, and faults
    /// fall while they run; the model's verdicts then speak of the same load.
    Model,
    /// `store run`'s: a random mix of reads and writes on many keys for the whole run, faults
    /// in its middle; more than the model explores, so a verdict may differ from the model's
    /// for that reason alone.
    Continuous,
}

/// What `store sim` was asked to do: its command line (`store sim --help`).
#[derive(Clone, Debug, clap::Args)]
pub struct SimRequest {
    /// A model file (models/*.toml).
    pub model: PathBuf,
    /// The model's variant whose policy to run (default: its first).
    #[arg(long, conflicts_with = "policy")]
    pub variant: Option<String>,
    /// A policy file over the model's [policy] instead of a variant (every property is then
    /// expected to hold).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The first seed.
    #[arg(long = "seed", default_value = "0")]
    pub first_seed: u64,
    /// How many seeds, from `--seed` on.
    #[arg(long, default_value = "20")]
    pub seeds: u64,
    /// Simulated time per seed ("20s", "1m").
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Simulated milliseconds per model tick (default: the model's tick).
    #[arg(long = "time-scale", value_name = "MS_PER_TICK")]
    pub ms_per_tick: Option<u64>,
    /// Clients (default 3; one per model client where the model has a capacity).
    #[arg(long)]
    pub clients: Option<usize>,
    /// Keys the clients share with `--load continuous`. Many, so that a key written during a
    /// fault is often not written again before it is read: a lost write shows.
    #[arg(long, default_value = "100")]
    pub keys: usize,
    /// Share of writes among operations, in thousandths.
    #[arg(long, default_value = "500")]
    pub write_permille: u16,
    /// Whose operations the clients play: the model's (each client its model client's `ops`,
    /// faults while they run: the model's verdicts speak of the same load), or `store run`'s
    /// continuous random mix on `--keys` keys.
    #[arg(long, value_enum, default_value = "model")]
    pub load: LoadShape,
    /// Write the history of the first failing seed (or of the only seed) here as Jepsen EDN;
    /// a picture of a non-linearizable one goes beside it (`.html`).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Write the store's trace of the first failing seed (or of the only seed) here: each
    /// request or message between the machines, its delivery, and the faults, as JSON lines
    /// (`replicheck conform FILE --model MODEL` checks it again against the model's
    /// environment).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// A line for every seed (by default: only seeds that fail, or that show a violation
    /// first).
    #[arg(long)]
    pub every_seed: bool,
    /// Replay a counterexample of the model on the store instead of drawing seeds: the one
    /// `check` finds for PROPERTY, or the first in FILE (`check --format json`); its faults,
    /// client steps and message deliveries and losses at the trace's moments. Exit 0 if the
    /// store shows the same violation, 1 if it does not.
    #[arg(long, value_name = "PROPERTY|FILE", conflicts_with_all = ["seeds", "every_seed", "clients", "keys", "write_permille"])]
    pub replay: Option<String>,
}

impl SimRequest {
    /// `store run --replay`: a replay of one counterexample, everything else as `store sim`'s
    /// defaults (a replay lasts as long as its trace needs, at least).
    pub fn replay(
        model: PathBuf,
        variant: Option<String>,
        policy: Option<PathBuf>,
        replay: String,
    ) -> SimRequest {
        /// `store sim`'s command line, whose defaults a replay takes.
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            sim: SimRequest,
        }
        use clap::Parser as _;
        // Parsed from no arguments but the model: every other field is `store sim`'s default.
        let defaults = Line::try_parse_from(["store sim", "--", "MODEL"]).expect("`store sim MODEL` parses");
        SimRequest { model, variant, policy, replay: Some(replay), ..defaults.sim }
    }
}

/// What one seed did.
pub struct SeedRun {
    pub seed: u64,
    pub outcome: RunOutcome,
    /// Each of the scenario's properties the run judges, as found.
    pub verdicts: Vec<(PropertyName, Found)>,
    /// The faults as scheduled: "crash n2 at 4.210 s for 1.000 s".
    pub faults: Vec<String>,
    pub messages_sent: u64,
    pub messages_lost: u64,
    pub simulated_ms: u64,
    /// A key the store would not let the checker read after the heal: nothing else was judged.
    pub unavailable: Option<String>,
    history: LoadReport,
    finals: Vec<Op>,
    /// The store's trace (`store::trace`), as written.
    trace: String,
    /// A replay's record of the store's messages against the trace's.
    replayed: Option<Arc<Mutex<Replayer>>>,
    /// A replay: the client keys' replicas when the trace ended.
    held: Option<Vec<Holding>>,
    /// Each write the coordinator acknowledged: (key, value, ns since tick 0).
    acked: Vec<load::Ack>,
}

/// What the seeds found.
pub struct SimSummary {
    pub seeds: u64,
    /// The first seed that violated a property expected to hold (a replay: its seed, if the
    /// store did not show the trace's violation).
    pub first_failing: Option<u64>,
    pub simulated_ms: u64,
}

/// Everything a seed needs that does not change from seed to seed.
struct Setup {
    scenario: Scenario,
    label: String,
    policy: crate::config::Policy,
    layout: Layout,
    workload: Workload,
    membership: crate::config::CoordinatorSpec,
    ms_per_tick: u64,
    duration_ms: u64,
    request_timeout_ms: u64,
    /// When faults may start: the model's clients' span, or the middle of a continuous run.
    fault_window_ms: (u64, u64),
    load: LoadShape,
    expect: BTreeMap<PropertyName, Verdict>,
    /// Where the scratch directories go: memory where the machine has it (a node syncs its
    /// write log on every write).
    scratch_base: PathBuf,
    /// Replaying a counterexample: its plan (faults, client steps, messages).
    replay: Option<Plan>,
    /// A rollout variant: its stages' policies, and (for a seed) its steps, taken in waves
    /// as `store run` takes them, spread over the fault window.
    rollout: Option<RolloutRun>,
    /// The leader family: the policy file its processes run (durations in ms, as `store run`
    /// writes it); `None` for the quorum family.
    leader_policy: Option<String>,
}

fn validate(req: &SimRequest, ms_per_tick: u64) -> Result<(), String> {
    if req.seeds == 0 || req.seeds > SEEDS_MAX {
        return Err(format!("--seeds {}: must be 1 to {SEEDS_MAX}", req.seeds));
    }
    if req.first_seed.checked_add(req.seeds).is_none() {
        return Err(format!("--seed {} with --seeds {}: past the last seed", req.first_seed, req.seeds));
    }
    let duration_ms = req.duration.as_millis() as u64;
    if !(500..=DURATION_MS_MAX).contains(&duration_ms) {
        return Err(format!(
            "--duration {duration_ms}ms: must be 500ms to {DURATION_MS_MAX}ms of simulated time"
        ));
    }
    let model = req.ms_per_tick.is_none().then_some(req.model.as_path());
    run::validate_load(ms_per_tick, model, req.clients, req.keys, req.write_permille)
}

fn setup(req: &SimRequest) -> Result<Setup, StoreError> {
    let scenario = Scenario::load(&req.model)?;
    let input = StoreError::Input;
    let (label, sourced) =
        run::choose_policy(&scenario, req.policy.as_deref(), req.variant.as_deref()).map_err(input)?;
    let ms_per_tick = req.ms_per_tick.unwrap_or(scenario.tick_ms);
    validate(req, ms_per_tick).map_err(input)?;
    let model = req.model.display();
    let Played { rollout, sourced, policy, leader, layout, .. } =
        Played::of(&scenario, &label, sourced, ms_per_tick, &[]).map_err(input)?;
    if scenario.coordinators.len() > 1 && scenario.faults.crash_coordinator {
        return Err(input(format!(
            "{model}: a coordinator crash with {} coordinators: a restart is for one coordinator alone",
            scenario.coordinators.len()
        )));
    }
    // The model's load: one key per group of clients that share a register, one client each.
    let asked = match req.load {
        LoadShape::Model => (1, req.write_permille, Some(scenario.clients.len())),
        LoadShape::Continuous => (req.keys, req.write_permille, req.clients),
    };
    let workload =
        Workload::of_model(&scenario, &layout, asked, ms_per_tick, policy.routing.write_shard_suffixes);
    // A model without clients still has a detector to judge (healthy evictions, churn).
    if workload.roles.is_empty() && req.load == LoadShape::Continuous {
        return Err(input(format!("{model}: the model has no clients to play a continuous load")));
    }
    let request_timeout_ms = scenario
        .clients
        .first()
        .map(|c| u64::from(c.request_timeout_ticks) * ms_per_tick)
        .unwrap_or(u64::from(policy.replica_ack_timeout_ticks) * 2);
    let expect = match (&req.policy, scenario.variant(&label)) {
        (None, Some(v)) => v.expect.iter().map(|(p, v)| (*p, *v)).collect(),
        _ => BTreeMap::new(),
    };
    let membership = membership_in_ms(&scenario, ms_per_tick).map_err(input)?;
    // Before anything runs: a time scale the store's timers cannot count is bad input.
    let stages = rollout.iter().flat_map(|r| r.policies.iter());
    for p in std::iter::once(&policy).chain(stages) {
        crate::store::coordinator::machine::check_timers(p, &membership)
            .map_err(|e| input(format!("--time-scale {ms_per_tick}: {e}")))?;
    }
    let duration_ms = req.duration.as_millis() as u64;
    let continuous = (duration_ms * CALM_PERMILLE / 1000, duration_ms * HEAL_PERMILLE / 1000);
    let fault_window_ms = match req.load {
        LoadShape::Model if scenario.clients.iter().all(|c| !c.repeat) => {
            (0, clients_span_ms(&scenario, &policy, ms_per_tick).max(ms_per_tick))
        }
        _ => continuous,
    };
    // The heal waits for the longest timed fault: the run must outlast it.
    let longest_fault_ms = menu(&scenario)
        .iter()
        .flatten()
        .filter_map(|f| scenario.faults.duration(f.on_menu()?))
        .map(|window| u64::from(window.hi) * ms_per_tick)
        .max()
        .unwrap_or(0);
    let needed_ms = fault_window_ms.1 + longest_fault_ms;
    // A replay's faults are the trace's, and it runs as long as they need.
    if needed_ms >= duration_ms && req.replay.is_none() {
        let most = match req.load {
            LoadShape::Model => format!("{} ms", needed_ms + 1),
            // The window grows with the run: its heal point is HEAL_PERMILLE of it.
            LoadShape::Continuous => format!("{} ms", longest_fault_ms * 1000 / (1000 - HEAL_PERMILLE) + 1),
        };
        return Err(input(format!(
            "--duration {duration_ms}ms: the faults may last until {needed_ms} ms (their window and the longest `duration`); simulate at least {most}"
        )));
    }
    for (flag, path) in [("--history", &req.history), ("--trace", &req.trace)] {
        let Some(path) = path else { continue };
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if path.is_dir() || !parent.is_dir() {
            return Err(input(format!("{flag} {}: not a file in an existing directory", path.display())));
        }
    }
    crate::store::coordinator::shell_fault::ShellFault::from_env().map_err(input)?;
    let shm = Path::new("/dev/shm");
    let scratch_base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let leader_policy = leader.then(|| run::leader_policy_file(&sourced, ms_per_tick, scenario.tick_ms));
    Ok(Setup {
        label,
        policy,
        layout,
        workload,
        membership,
        ms_per_tick,
        duration_ms,
        request_timeout_ms,
        fault_window_ms,
        load: req.load,
        expect,
        scratch_base,
        scenario,
        replay: None,
        rollout,
        leader_policy,
    })
}

/// Run the seeds; the report goes to `out` (the same for the same request, byte for byte),
/// the speed to `speed`.
/// `planner` finds a replay's counterexample (`--replay`).
pub fn run(
    req: &SimRequest,
    planner: ReplayPlanner,
    out: &mut String,
    speed: &mut String,
) -> Result<SimSummary, StoreError> {
    if let Some(replay) = &req.replay {
        return replay_run::run_replay(req, replay, planner, out, speed);
    }
    let setup = setup(req)?;
    let s = &setup.scenario;
    let last = req.first_seed + req.seeds - 1;
    let _ = writeln!(
        out,
        "store sim {} / {}: {} nodes, {} partitions, 1 tick = {} ms, at most {:.1} simulated s per seed, {} clients playing {}, faults starting {:.1}..{:.1} s, seeds {}..={last}",
        s.name,
        setup.label,
        s.nodes.len(),
        setup.layout.shards.len(),
        setup.ms_per_tick,
        setup.duration_ms as f64 / 1000.0,
        setup.workload.threads,
        match setup.load {
            LoadShape::Model => "the model's operations",
            LoadShape::Continuous => "a continuous mix",
        },
        setup.fault_window_ms.0 as f64 / 1000.0,
        setup.fault_window_ms.1 as f64 / 1000.0,
        req.first_seed,
    );
    let started = std::time::Instant::now();
    let mut summary = SimSummary { seeds: 0, first_failing: None, simulated_ms: 0 };
    // Per property: (seeds that violated it, the first of them).
    let mut violated: BTreeMap<PropertyName, (u64, u64)> = BTreeMap::new();
    let mut kept = false;
    let mut diverging = 0u64;
    let mut unavailable = 0u64;
    // Why the first failing seed failed.
    let mut first_why = String::new();
    // The properties the store's checks judge (others are the model's alone).
    let mut judged: std::collections::BTreeSet<PropertyName> = std::collections::BTreeSet::new();
    for seed in req.first_seed..=last {
        let run = seed::run_seed(&setup, seed).map_err(StoreError::Runtime)?;
        summary.seeds += 1;
        summary.simulated_ms += run.simulated_ms;
        let mut firsts = Vec::new();
        let mut fails = false;
        let mut why = Vec::new();
        for (property, found) in &run.verdicts {
            judged.insert(*property);
            if *found != Found::Violated {
                continue;
            }
            let entry = violated.entry(*property).or_insert((0, seed));
            entry.0 += 1;
            if entry.0 == 1 {
                firsts.push(*property);
            }
            if setup.expect.get(property) != Some(&Verdict::Violated) {
                fails = true;
                why.push(format!("{} violated", property.as_str()));
            }
        }
        // The store did something the model's environment does not allow.
        let diverged = matches!(run.outcome.trace_verdict, Some(TraceVerdict::Diverges { .. }));
        if diverged {
            diverging += 1;
            fails = true;
            why.push("its trace diverges from the model".into());
        }
        if run.unavailable.is_some() {
            unavailable += 1;
            fails = true;
            why.push("the store stopped answering".into());
        }
        if fails && summary.first_failing.is_none() {
            summary.first_failing = Some(seed);
            first_why = why.join(", ");
        }
        if req.every_seed || fails || !firsts.is_empty() {
            seed_lines(out, &setup, &run);
        }
        if !kept && (fails || req.seeds == 1) {
            kept = true;
            keep(out, req, &run)?;
        }
    }
    let _ = writeln!(out, "{:<22} {:<10} seeds that violated it", "property", "expected");
    for property in &s.properties {
        let expected = setup.expect.get(property).map_or("-".to_string(), |v| v.to_string());
        let found = match violated.get(property) {
            Some((n, first)) => format!("{n} of {} (first: seed {first})", summary.seeds),
            None if !judged.contains(property) => "not judged by the store (the model's alone)".to_string(),
            None if setup.expect.get(property) == Some(&Verdict::Violated) => {
                format!("none of {}: not reproduced (more seeds, or --load continuous)", summary.seeds)
            }
            None => format!("none of {}", summary.seeds),
        };
        let _ = writeln!(out, "{:<22} {expected:<10} {found}", property.as_str());
    }
    let _ = writeln!(out, "trace against the model: diverges in {diverging} of {} seeds", summary.seeds);
    let _ = writeln!(out, "store unavailable after the heal: {unavailable} of {} seeds", summary.seeds);
    match summary.first_failing {
        Some(seed) => {
            let _ = writeln!(
                out,
                "first failing seed: {seed} ({first_why}); again: replicheck store sim {}{} --seed {seed} --seeds 1{}{}",
                req.model.display(),
                variant_flag(req, &setup),
                match req.load {
                    LoadShape::Model => "",
                    LoadShape::Continuous => " --load continuous",
                },
                if req.history.is_some() { "" } else { " --history h.edn" }
            );
        }
        None => {
            let _ = writeln!(
                out,
                "no seed violated a property expected to hold, diverged from the model or stopped answering"
            );
            let asked: Vec<&str> = [(req.history.is_some(), "history"), (req.trace.is_some(), "trace")]
                .into_iter()
                .filter_map(|(asked, what)| asked.then_some(what))
                .collect();
            if !kept && !asked.is_empty() {
                let _ = writeln!(
                    out,
                    "no {} written: only the first failing seed's is kept (`--seed N --seeds 1` keeps seed N's)",
                    asked.join(" or ")
                );
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let _ = writeln!(
        speed,
        "{} seeds, {:.1} simulated s in {wall:.1} s of wall time ({:.0} simulated s per s)",
        summary.seeds,
        summary.simulated_ms as f64 / 1000.0,
        summary.simulated_ms as f64 / 1000.0 / wall.max(1e-9)
    );
    Ok(summary)
}

/// `--history FILE` and `--trace FILE`: what they ask for of one run.
fn keep(out: &mut String, req: &SimRequest, run: &SeedRun) -> Result<(), StoreError> {
    if let Some(path) = &req.history {
        keep_history(out, run, path)?;
    }
    if let Some(path) = &req.trace {
        std::fs::write(path, &run.trace)
            .map_err(|e| StoreError::Runtime(format!("cannot write {}: {e}", path.display())))?;
        let _ = writeln!(out, "  trace of seed {} written to {}", run.seed, path.display());
    }
    Ok(())
}

/// `--history FILE`: a run's history as Jepsen EDN (and a picture of a key that is not
/// linearizable); a run without clients has none to write.
fn keep_history(out: &mut String, run: &SeedRun, path: &Path) -> Result<(), StoreError> {
    if run.history.history.is_empty() && run.finals.is_empty() {
        let _ = writeln!(out, "  no history to write to {}: the model has no clients", path.display());
        return Ok(());
    }
    let not_linearizable = !run.outcome.not_linearizable.is_empty();
    let written = run::write_history_files(&run.history, &run.finals, Some(path), not_linearizable);
    for line in written.map_err(StoreError::Runtime)? {
        let _ = writeln!(out, "  {line}");
    }
    Ok(())
}

fn variant_flag(req: &SimRequest, setup: &Setup) -> String {
    match &req.policy {
        Some(path) => format!(" --policy {}", path.display()),
        None => format!(" --variant {}", setup.label),
    }
}

fn seed_lines(out: &mut String, setup: &Setup, run: &SeedRun) {
    let o = &run.outcome;
    let faults = if run.faults.is_empty() { "none".to_string() } else { run.faults.join(", ") };
    let _ = writeln!(
        out,
        "seed {}: {} ops ({} ok, {} writes unknown, {} reads failed, {} retries), {} messages ({} lost); faults: {faults}",
        run.seed, o.ops, o.ops_ok, o.writes_unknown, o.reads_failed, o.retries, run.messages_sent, run.messages_lost
    );
    for (property, found) in &run.verdicts {
        if *found != Found::Violated {
            continue;
        }
        let expected = match setup.expect.get(property) {
            Some(Verdict::Violated) => "as the model expects",
            Some(Verdict::Holds) => "the model expects it to hold",
            None => "no expectation",
        };
        let _ = writeln!(out, "  {} violated ({expected}): {}", property.as_str(), why(o, *property));
    }
    if let Some(why) = &run.unavailable {
        let _ = writeln!(out, "  {why}");
    }
    if let Some(TraceVerdict::Diverges { line, why }) = &o.trace_verdict {
        let _ = writeln!(out, "  trace diverges from the model at line {line}: {why}");
    }
}

/// What a violation looked like, in one line.
fn why(o: &RunOutcome, property: PropertyName) -> String {
    let first = |v: &[String]| v.first().cloned().unwrap_or_default();
    match property {
        PropertyName::AckedWritesPersist => first(&o.acked_writes_lost),
        PropertyName::Linearizable => format!("keys {}", o.not_linearizable.join(", ")),
        PropertyName::NoDuplicateEffects => format!("{} writes applied twice", o.duplicate_effects),
        PropertyName::NoHealthyEviction => {
            let e: Vec<String> = o
                .evictions
                .iter()
                .filter(|e| e.healthy)
                .map(|e| format!("node {} at {} ms", e.node, e.at_ms))
                .collect();
            format!("healthy evictions: {}", e.join(", "))
        }
        PropertyName::OpsComplete => first(&o.ops_never_completed),
        PropertyName::Converges => o.changes_after_settle.first().map_or(
            format!("{} changes in progress at the end", o.changes_in_progress_at_end),
            |(ms, what)| format!("{what} at {ms} ms, after the settle point"),
        ),
        PropertyName::CapacityRespected => o.first_capacity_breach.clone().unwrap_or_default(),
        PropertyName::SinglePrimary => {
            let mut parts = Vec::new();
            if !o.two_primaries.is_empty() {
                parts.push(format!("two primaries took writes in {}", o.two_primaries.join("; ")));
            }
            if o.late_epoch_acks > 0 {
                parts.push(format!(
                    "{} writes acknowledged by a deposed primary after a newer epoch's",
                    o.late_epoch_acks
                ));
            }
            parts.join("; ")
        }
        _ => String::new(),
    }
}

/// The longest the model's clients may take over their operations: each thinks its longest,
/// and each attempt times out, with the longest backoff between (three attempts where the
/// policy sets no limit).
fn clients_span_ms(scenario: &Scenario, policy: &crate::config::Policy, ms_per_tick: u64) -> u64 {
    let attempts = u64::from(policy.retry.max_attempts.unwrap_or(3));
    let backoff_ms = u64::from(policy.retry.backoff_max_ticks); // the policy is in ms here
    scenario
        .clients
        .iter()
        .map(|c| {
            let per_op = u64::from(c.think_ticks.hi) * ms_per_tick
                + attempts * u64::from(c.request_timeout_ticks) * ms_per_tick
                + (attempts - 1) * backoff_ms;
            per_op * c.ops.len() as u64
        })
        .max()
        .unwrap_or(0)
}
