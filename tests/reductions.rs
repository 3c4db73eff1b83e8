//! Partial-order reduction (`check --reduce por`, the default) against the full state graph
//! (`--reduce none`): every library model and variant, and seeded random small models, must
//! give the same verdict for every property with no more states, and every counterexample
//! found under the reduction must replay, action by action, in the unreduced world and end
//! in the violation it reports.

#[path = "support/bin.rs"]
mod bin;

use rand::{Rng, SeedableRng};
use replicheck::check::{self, Counterexample, PolicyChoice, RunOptions, RunResult};
use replicheck::model::{
    properties, reduction, silence, Action, ClientPhase, Reduction, World, WorldConfig, WorldState,
};
use stateright::Model;
use std::path::{Path, PathBuf};

fn run(job: &check::Job, reduction: Reduction, threads: usize, max_states: Option<u64>) -> RunResult {
    let opts = RunOptions { threads, reduction, max_states, ..RunOptions::default() };
    check::run(job, &opts).expect("the model runs")
}

/// The states of `world` along a counterexample's explorer link (indices into each state's
/// enabled actions, as `replicheck explore` numbers them), checking each step's text.
fn replay(world: &World, cx: &Counterexample) -> Vec<WorldState> {
    let indices: Vec<usize> = cx
        .explorer_url
        .split("/#/steps/")
        .nth(1)
        .expect("an explorer link")
        .split('/')
        .map(|i| i.parse().expect("indices"))
        .collect();
    let mut states = vec![world.init_states().into_iter().nth(indices[0]).expect("an initial state")];
    for (n, &i) in indices[1..].iter().enumerate() {
        let last = states.last().expect("a state");
        let mut actions: Vec<Action> = Vec::new();
        world.actions(last, &mut actions);
        let action = actions.get(i).cloned().unwrap_or_else(|| panic!("step {}: no action {i}", n + 1));
        assert!(
            cx.steps[n].action.starts_with(&world.format_action(&action)),
            "step {}: the link's action is the reported one",
            n + 1
        );
        states.push(world.next_state(last, action).expect("an enabled action has a next state"));
    }
    states
}

/// The reduced run's verdicts are the full run's, with no more states; its counterexamples
/// are behaviours of the full world.
fn compare(job: &check::Job, full: &RunResult, reduced: &RunResult) {
    let what = format!("{} / {}", job.scenario.name, job.variant);
    assert_eq!(full.reduction, Reduction::None);
    assert_eq!(full.ample_states, 0, "{what}: no ample set without reduction");
    assert!(
        reduced.unique_states <= full.unique_states,
        "{what}: {} reduced states > {} full",
        reduced.unique_states,
        full.unique_states
    );
    let world = World::new(WorldConfig::new(&job.scenario, &job.policy).expect("resolves"));
    for (f, r) in full.properties.iter().zip(&reduced.properties) {
        assert_eq!(f.name, r.name);
        assert_eq!(f.found, r.found, "{what}: {} differs under reduction", f.name);
        let Some(cx) = &r.counterexample else { continue };
        let states = replay(&world, cx);
        let last = states.last().expect("a state");
        match cx.loop_from_step {
            None => assert!(
                !properties::holds(r.name, &world.cfg, last),
                "{what}: the {} counterexample ends in a violation",
                r.name
            ),
            Some(from) => {
                assert_eq!(&states[from - 1], last, "{what}: the {} lasso closes", r.name);
                assert!(
                    cx.steps[from - 1..].iter().any(|s| s.action == world.format_action(&Action::Tick)),
                    "{what}: time passes on the {} loop",
                    r.name
                );
            }
        }
    }
}

fn library_jobs(model: &str) -> Vec<check::Job> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models").join(format!("{model}.toml"));
    check::plan(&[file], &PolicyChoice::Variants(None)).expect("the library model loads")
}

fn library_model_agrees(model: &str) {
    library_variants_agree(model, |_| true);
}

/// Every variant of a model file outside the library, both ways.
fn file_agrees(relative: &str) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    for job in check::plan(&[file], &PolicyChoice::Variants(None)).expect("the model loads") {
        job_agrees(relative, &job);
    }
}

/// One job explored both ways: both complete, the same verdicts (see `compare`), and the
/// model's expectations met.
fn job_agrees(what: &str, job: &check::Job) {
    // The two runs side by side: the largest variant has four million states.
    let (full, reduced) = std::thread::scope(|scope| {
        let full = scope.spawn(|| run(job, Reduction::None, 1, None));
        let reduced = run(job, Reduction::Por, 1, None);
        (full.join().expect("the full run"), reduced)
    });
    assert!(full.complete && reduced.complete, "{what} / {}: both runs complete", job.variant);
    compare(job, &full, &reduced);
    for p in &reduced.properties {
        assert!(p.as_expected(), "{what} / {}: {} is not as the model expects", job.variant, p.name);
    }
}

/// The liveness properties that read whether a node is up or slow, and per-client outstanding
/// operations, with the reduction on and off.
#[test]
fn do_nothing_properties_agree() {
    file_agrees("tests/data/dead-replaced.toml");
    file_agrees("tests/data/hot-shard-slow-node.toml");
    file_agrees("tests/data/two-endless-clients.toml");
}

fn library_variants_agree(model: &str, which: impl Fn(&str) -> bool) {
    for job in library_jobs(model).into_iter().filter(|j| which(&j.variant)) {
        job_agrees(model, &job);
    }
}

#[test]
fn ack_timeout_eviction_agrees() {
    library_variants_agree("ack-timeout-eviction", |v| v != "fixed");
}

/// The `fixed` variant has four million states (about 40 s for both runs on two cores): a test
/// of its own, so it runs beside the others.
#[test]
fn ack_timeout_eviction_fixed_agrees() {
    library_variants_agree("ack-timeout-eviction", |v| v == "fixed");
}

#[test]
fn basic_quorum_agrees() {
    library_model_agrees("basic-quorum");
}

#[test]
fn capacity_routing_bypass_agrees() {
    library_model_agrees("capacity-routing-bypass");
}

#[test]
fn coordinator_restart_agrees() {
    library_model_agrees("coordinator-restart");
}

#[test]
fn hot_partition_retry_storm_agrees() {
    library_model_agrees("hot-partition-retry-storm");
}

#[test]
fn rebalancer_compaction_agrees() {
    library_model_agrees("rebalancer-compaction");
}

/// Faults that end (a link slow for 1-3 s) and a detector judging silences: a heartbeat's
/// `Pong` is ample only while no timer of the coordinator (the round that judges) is due.
/// (With that condition dropped for a `Pong`, pong-at-the-round's healthy eviction, where the
/// round judges just before the last possible pong, is not found.)
#[test]
fn detector_timing_and_timed_fault_models_agree() {
    library_model_agrees("detector-timing");
    file_agrees("tests/data/timed-faults.toml");
    file_agrees("tests/data/pong-at-the-round.toml");
}

/// The first scope-up of issue #15 (`tests/data/scale/`, docs/reductions.md) on a smaller
/// scope the unreduced run can finish: a fault budget of 1 instead of 2.
#[test]
fn scale_three_clients_budget_1_agrees() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/scale/basic-quorum-3-clients.toml");
    let text = std::fs::read_to_string(&src).expect("the scope-up file");
    assert!(text.contains("\nbudget = 2\n"));
    let file = dir.path().join("basic-quorum-3-clients-budget-1.toml");
    std::fs::write(&file, text.replace("\nbudget = 2\n", "\nbudget = 1\n")).expect("written");
    for job in check::plan(&[file], &PolicyChoice::Variants(None)).expect("loads") {
        let (full, reduced) = std::thread::scope(|scope| {
            let full = scope.spawn(|| run(&job, Reduction::None, 1, None));
            let reduced = run(&job, Reduction::Por, 1, None);
            (full.join().expect("the full run"), reduced)
        });
        assert!(full.complete && reduced.complete);
        compare(&job, &full, &reduced);
        assert!(reduced.unique_states * 4 < full.unique_states, "the reduction reduces this scope");
    }
}

/// The reduction must actually reduce somewhere, and be deterministic across thread counts.
#[test]
fn reduction_reduces_and_is_deterministic() {
    let job = library_jobs("coordinator-restart").remove(0);
    let one = run(&job, Reduction::Por, 1, None);
    let two = run(&job, Reduction::Por, 2, None);
    let full = run(&job, Reduction::None, 2, None);
    assert_eq!(
        (one.unique_states, one.transitions, one.max_depth, one.ample_states),
        (two.unique_states, two.transitions, two.max_depth, two.ample_states)
    );
    assert!(one.ample_states > 0 && one.unique_states < full.unique_states);
}

/// A seeded random three-node model: policy knobs, fault menu and budget, links and clients.
/// `crashes`: most nodes in the crash menu with a budget of up to 2 (the reduction's crash,
/// restart and coordinator-answer rules are exercised where several faults may interleave).
/// With `recovery`, also a spare (n4, in zone c, with room for one replica)
/// and random detector timing and re-replication throttles: down/out interval, recovery
/// limit, copy backoff, join timeout. With `timed`, faults that end by themselves: each
/// crashed node, the cut and the degradation get a `duration` at random.
fn random_model_with(rng: &mut rand::rngs::StdRng, crashes: bool, recovery: bool, timed: bool) -> String {
    let pick = |rng: &mut rand::rngs::StdRng, xs: &[&str]| xs[rng.random_range(0..xs.len())].to_string();
    let ac_latency = pick(rng, &["100ms", "100ms..200ms", "200ms", "0ms..100ms"]);
    let (p_node, p_coord) = if crashes { (0.7, 0.15) } else { (0.4, 0.4) };
    let mut crash: Vec<&str> = ["n1", "n2", "n3", "coordinator"]
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| rng.random_bool(if i < 3 { p_node } else { p_coord }))
        .map(|(_, c)| c)
        .collect();
    let budget = if crash.is_empty() { rng.random_range(0..=1) } else { rng.random_range(0..=2) };
    if budget == 2 && !crashes {
        crash.truncate(1);
    }
    let window = |rng: &mut rand::rngs::StdRng| {
        if timed && rng.random_bool(0.7) {
            format!(", duration = \"{}\"", pick(rng, &["200ms", "100ms..400ms", "300ms..800ms", "1s..2s"]))
        } else {
            String::new()
        }
    };
    let partition = if rng.random_bool(0.4) {
        format!(r#"partition = [{{ zone = "c"{} }}]"#, window(rng))
    } else {
        String::new()
    };
    let lossy = rng.random_bool(0.25);
    let drop = if lossy { "drop = true" } else { "" };
    let degrade = if rng.random_bool(if timed { 0.5 } else { 0.25 }) {
        format!(r#"degrade = [{{ zones = ["a", "b"], latency = "200ms..300ms"{} }}]"#, window(rng))
    } else {
        String::new()
    };
    let writer_ops = pick(rng, &[r#"["write"]"#, r#"["write", "write"]"#, r#"["write", "read"]"#]);
    let second_writer = if rng.random_bool(0.4) {
        "[[clients]]\nname = \"writer2\"\nzone = \"b\"\nops = [\"write\"]\nrequest_timeout = \"1500ms\"\n"
            .to_string()
    } else {
        String::new()
    };
    let reader_think = pick(rng, &["0ms", "0ms..500ms", "200ms..300ms"]);
    let timeout = pick(rng, &["700ms", "1500ms"]);
    let w = rng.random_range(1..=3);
    let r = rng.random_range(1..=3);
    let max_attempts = rng.random_range(1..=3);
    let tokens = rng.random_bool(0.5);
    let read_repair = rng.random_bool(0.5);
    let ack_timeout = pick(rng, &["300ms", "1s"]);
    let detection = pick(rng, &["coupled", "independent"]);
    let crash: Vec<String> = crash
        .iter()
        .map(|c| match window(rng) {
            w if !w.is_empty() && *c != "coordinator" => format!("{{ node = \"{c}\"{w} }}"),
            _ => format!("\"{c}\""),
        })
        .collect();
    let (spare, recovery_policy) = if recovery {
        let keys = [
            format!("health_check = \"{}\"", pick(rng, &["rounds", "continuous"])),
            "heartbeat_interval = \"300ms\"\nsuspect_after = \"600ms\"\ndead_after = \"900ms\"".to_string(),
            format!("down_out_interval = \"{}\"", pick(rng, &["0ms", "300ms", "800ms"])),
            format!("max_recoveries_per_node = {}", rng.random_range(0..=2)),
            format!("recovery_backoff = \"{}\"", pick(rng, &["on_contact", "fixed", "exponential_jitter"])),
            "recovery_backoff_base = \"200ms\"\nrecovery_backoff_max = \"500ms\"".to_string(),
            format!("join_timeout = \"{}\"", pick(rng, &["500ms", "1500ms"])),
        ];
        let chosen: Vec<String> = keys.into_iter().filter(|_| rng.random_bool(0.6)).collect();
        let spare = "[[nodes]]\nname = \"n4\"\nzone = \"c\"\nreplica_slots = 1\n";
        (spare.to_string(), chosen.join("\n"))
    } else {
        (String::new(), String::new())
    };
    format!(
        r#"name = "random"
description = "a seeded random model"
tick = "100ms"
zones = ["a", "b", "c"]

[[nodes]]
name = "n1"
zone = "a"

[[nodes]]
name = "n2"
zone = "b"

[[nodes]]
name = "n3"
zone = "c"

{spare}
[[shards]]
name = "s1"
replicas = ["n1", "n2", "n3"]

[network]
latency = "100ms"

[[network.links]]
zones = ["a", "c"]
latency = "{ac_latency}"
lossy = {lossy}

[coordinator]
zone = "a"
membership_queue_capacity = 2
membership_update_time = "500ms"

[[clients]]
name = "writer"
zone = "a"
ops = {writer_ops}
request_timeout = "{timeout}"

[[clients]]
name = "reader"
zone = "a"
ops = ["read"]
request_timeout = "{timeout}"
think_time = "{reader_think}"

{second_writer}
[faults]
budget = {budget}
crash = [{crash}]
{partition}
{drop}
{degrade}

[policy]
replication_factor = 3
write_quorum = {w}
read_quorum = {r}
replica_ack_timeout = "{ack_timeout}"
failure_detection = "{detection}"
max_attempts = {max_attempts}
backoff = "fixed"
backoff_base = "300ms"
backoff_max = "300ms"
idempotency_tokens = {tokens}
read_repair = {read_repair}
{recovery_policy}

[expect]
acked_writes_persist = "holds"
linearizable = "holds"
no_duplicate_effects = "holds"
no_healthy_eviction = "holds"
churn_bounded = "holds"
converges = "holds"
ops_complete = "holds"
"#,
        crash = crash.join(", ")
    )
}

#[test]
fn random_small_models_agree() {
    random_models_agree(0x5eed_0015, false, 40, 60_000, 15);
}

/// Models where several nodes may crash and restart within the budget.
#[test]
fn random_crash_models_agree() {
    random_models_agree(0x5eed_c4a5, true, 50, 150_000, 15);
}

/// Models with a spare, detector timing and re-replication throttles: the reduction's rules
/// must stay sound with the coordinator's recovery timers (down/out, copy backoff windows,
/// join timeouts).
#[test]
fn random_recovery_models_agree() {
    random_models_agree_with(0x5eed_4ec0, true, true, false, 30, 150_000, 10);
}

/// Faults that end by themselves: crashes that restart, cuts that heal and links that recover
/// within windows, so restarts, heals and restores become urgent; with a spare and detector
/// timing, so that a node's pings show when it was down. (With a timed crash deferred to the
/// node's next message, as untimed ones are, model 26 loses a client-visible outcome.)
#[test]
fn random_timed_fault_models_agree() {
    random_models_agree_with(0x5eed_71ed + 7919, true, true, true, 30, 150_000, 10);
}

fn random_models_agree(seed: u64, crashes: bool, models: usize, max_full: u64, compared_min: usize) {
    random_models_agree_with(seed, crashes, false, false, models, max_full, compared_min)
}

fn random_models_agree_with(
    seed: u64,
    crashes: bool,
    recovery: bool,
    timed: bool,
    models: usize,
    max_full: u64,
    compared_min: usize,
) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut compared, mut reduced_somewhere, mut slack_runs) = (0, false, 0);
    for k in 0..models {
        let text = random_model_with(&mut rng, crashes, recovery, timed);
        let file: &Path = &dir.path().join(format!("random-{k}.toml"));
        std::fs::write(file, &text).expect("written");
        let jobs = match check::plan(&[file.to_path_buf()], &PolicyChoice::Variants(None)) {
            Ok(jobs) => jobs,
            Err(e) => panic!("random model {k} does not load: {e}\n{text}"),
        };
        for job in &jobs {
            // Models too big for a quick test are skipped (both runs must complete).
            let full = run(job, Reduction::None, 1, Some(max_full));
            if !full.complete {
                continue;
            }
            let reduced = run(job, Reduction::Por, 1, None);
            assert!(reduced.complete);
            compare(job, &full, &reduced);
            if crashes {
                let cfg = WorldConfig::new(&job.scenario, &job.policy).expect("resolves");
                // Reduced as `check --reduce por` explores: ample sets, silence regions, and
                // pings answered early where the model declares no violation.
                let reduced_world = World::with_arrival_slack(cfg.clone());
                assert_eq!(
                    final_histories(&World::new(cfg), false),
                    final_histories(&reduced_world, true),
                    "random model {k}: the reduction loses or adds a client-visible outcome\n{text}"
                );
            }
            compared += 1;
            reduced_somewhere |= reduced.unique_states < full.unique_states;
            slack_runs += usize::from(reduced.arrival_slack);
        }
    }
    eprintln!("{compared} random models compared, {slack_runs} with arrival slack");
    if timed {
        assert!(slack_runs > 0, "no random model answered a ping early");
    }
    assert!(compared >= compared_min, "only {compared} random models were small enough to compare");
    assert!(reduced_somewhere, "no random model was reduced");
}

/// Silence regions where a liveness property is violated: the rebalancer's endless moves with
/// independent detection judged at rounds (thresholds off the rounds) and a node that may
/// crash. Each lasso must close on a concrete state (`compare`), not only on a state of the
/// same region (the engine's unit test walks a loop that needs three laps).
#[test]
fn silence_regions_keep_lassos_concrete() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = bin::rebalancer_with_rounds_detection(dir.path());
    let jobs = check::plan(&[file], &PolicyChoice::Variants(None)).expect("the model loads");
    let mut lassos = 0;
    for job in &jobs {
        let full = run(job, Reduction::None, 1, None);
        let reduced = run(job, Reduction::Por, 1, None);
        assert!(full.complete && reduced.complete);
        assert!(reduced.silence_regions, "{}: silence regions apply", job.variant);
        assert!(reduced.unique_states < full.unique_states, "{}: states are merged", job.variant);
        compare(job, &full, &reduced);
        lassos += reduced
            .properties
            .iter()
            .filter(|p| p.counterexample.as_ref().is_some_and(|c| c.loop_from_step.is_some()))
            .count();
    }
    assert!(lassos >= 2, "the incident and cooldown-only variants give lassos ({lassos})");
}

/// Silence regions are a bisimulation, checked on the coordinator's own code rather than on the
/// formula: in every state of a breadth-first prefix of worlds with rounds-judged detection (a
/// lossy link; a link that degrades to 300-700ms; thresholds on and off the rounds), a state
/// and its region's representative enable the same actions, each leads to states of one
/// region with the same edge label, and every safety property judges them alike.
#[test]
fn silence_regions_are_a_bisimulation() {
    use std::hash::{Hash, Hasher};
    let hash = |s: &WorldState| {
        let mut d = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut d);
        d.finish()
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let jobs = [
        ("models/detector-timing.toml", "rounds"),
        ("models/ack-timeout-lossy-link.toml", "fixed"),
        ("tests/data/scale/natural-5-nodes.toml", "default"),
        // The leader family: the failover manager's counters.
        ("models/async-failover.toml", "default"),
        ("models/unfenced-primary.toml", "fencing"),
    ]
    .map(|(file, variant)| {
        let jobs = check::plan(&[root.join(file)], &PolicyChoice::Variants(Some(variant.into())));
        jobs.expect("the model loads").remove(0)
    });
    let mut merged_in_all = 0;
    for job in &jobs {
        let what = &job.scenario.name;
        let world = World::new(WorldConfig::new(&job.scenario, &job.policy).expect("resolves"));
        let cfg = &world.cfg;
        assert!(silence::applies(cfg), "{what}: rounds-judged independent detection");
        let region = |s: &WorldState| silence::canonical(cfg, s).map_or_else(|| hash(s), |r| hash(&r));
        let safety: Vec<_> = cfg.properties.iter().copied().filter(|p| !p.is_liveness()).collect();
        let init = world.initial_state();
        let mut seen = std::collections::HashSet::from([hash(&init)]);
        let mut queue = std::collections::VecDeque::from([init]);
        let (mut merged, mut actions, mut of_representative) = (0, Vec::new(), Vec::new());
        while let Some(s) = queue.pop_front() {
            actions.clear();
            world.actions(&s, &mut actions);
            if let Some(r) = silence::canonical(cfg, &s) {
                merged += 1;
                of_representative.clear();
                world.actions(&r, &mut of_representative);
                assert_eq!(actions, of_representative, "{what}: the same actions");
                for p in &safety {
                    assert_eq!(
                        properties::holds(*p, cfg, &s),
                        properties::holds(*p, cfg, &r),
                        "{what}: {p:?}"
                    );
                }
                for a in &actions {
                    let (next, next_r) = (world.next_state(&s, a.clone()), world.next_state(&r, a.clone()));
                    let (Some(next), Some(next_r)) = (next, next_r) else {
                        panic!("{what}: {a:?} steps in both")
                    };
                    assert_eq!(region(&next), region(&next_r), "{what}: {a:?} leads to one region");
                    assert_eq!(
                        properties::edge_label(cfg, &s, a, &next),
                        properties::edge_label(cfg, &r, a, &next_r),
                        "{what}: {a:?} is labelled alike"
                    );
                }
            }
            if seen.len() < 40_000 {
                for a in &actions {
                    let next = world.next_state(&s, a.clone()).expect("an enabled action steps");
                    if seen.insert(hash(&next)) {
                        queue.push_back(next);
                    }
                }
            }
        }
        // The natural model's 40,000-state prefix is shallow: few silences have grown there.
        eprintln!("{what}: {merged} states with a smaller representative");
        assert!(merged >= 20, "{what}: only {merged} states have a smaller representative");
        merged_in_all += merged;
    }
    assert!(merged_in_all >= 500, "{merged_in_all} states with a smaller representative in all");
}

/// The leader family under silence regions (its failover manager judges at rounds).
#[test]
fn leader_models_agree() {
    library_model_agrees("async-failover");
    library_model_agrees("unfenced-primary");
}

#[test]
fn ack_timeout_lossy_link_agrees() {
    library_model_agrees("ack-timeout-lossy-link");
}

/// The continuous-load models: relative numbering and the reduction together.
#[test]
fn continuous_models_agree() {
    for model in [
        "ack-timeout-eviction-continuous",
        "hot-partition-retry-storm-continuous",
        "capacity-routing-bypass-continuous",
        "rebalancer-compaction-continuous",
        "hot-partition-any-key",
    ] {
        library_model_agrees(model);
    }
}

/// The client-visible outcomes of a world: the register histories (every invocation and
/// return, in real-time order) of the states where every client is done, as hashes. The
/// reduction must keep every one: a reduced path only reorders steps of different actors
/// within a tick (client steps keep their order), adds a step after the clients are done, or
/// drops a deferred crash or restart of a node that gets no message again. A breadth-first
/// search of its own, with the same cycle proviso (stricter: any known state).
fn final_histories(world: &World, reduce: bool) -> std::collections::BTreeSet<u64> {
    use std::hash::{Hash, Hasher};
    let h = |x: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
        let mut d = std::collections::hash_map::DefaultHasher::new();
        x(&mut d);
        d.finish()
    };
    // Under the reduction states are identified up to silence regions, as `check` does.
    let regions = check::silence_regions(world, if reduce { Reduction::Por } else { Reduction::None });
    let state_hash = |s: &WorldState| match silence::canonical(&world.cfg, s).filter(|_| regions) {
        Some(c) => h(&|d| c.hash(d)),
        None => h(&|d| s.hash(d)),
    };
    let init = world.initial_state();
    let mut seen = std::collections::HashSet::from([state_hash(&init)]);
    let mut queue = std::collections::VecDeque::from([init]);
    let mut outcomes = std::collections::BTreeSet::new();
    let (mut actions, mut chosen) = (Vec::new(), Vec::new());
    while let Some(s) = queue.pop_front() {
        if s.net.is_empty() && s.clients.iter().all(|c| c.phase == ClientPhase::Done) {
            outcomes.insert(h(&|d| (&s.ghost.history, &s.nodes, &s.ghost.acked_version).hash(d)));
        }
        actions.clear();
        world.actions(&s, &mut actions);
        chosen.clear();
        if reduce {
            reduction::ample(world, &s, &actions, &mut chosen);
        }
        let mut next: Vec<WorldState> = Vec::new();
        if !chosen.is_empty() && chosen.len() < actions.len() {
            next = chosen.iter().filter_map(|&i| world.next_state(&s, actions[i].clone())).collect();
            if next.iter().any(|n| seen.contains(&state_hash(n))) {
                next.clear();
            }
        }
        if next.is_empty() {
            next = actions.iter().filter_map(|a| world.next_state(&s, a.clone())).collect();
        }
        for n in next {
            if seen.insert(state_hash(&n)) {
                queue.push_back(n);
            }
        }
    }
    outcomes
}

/// The coordinator's answers are ample one at a time only when their order cannot matter:
/// a write's acks may be taken one at a time, a read's replies (whose first quorum decides
/// the value returned) may not. Found by a breadth-first walk of basic-quorum.
#[test]
fn coordinator_answers_one_at_a_time_only_when_they_commute() {
    use replicheck::model::{Endpoint, Msg};
    let job = library_jobs("basic-quorum").remove(0);
    let world = World::new(WorldConfig::new(&job.scenario, &job.policy).expect("resolves"));
    let answers = |actions: &[Action], read: bool| -> usize {
        let mut keys = std::collections::HashMap::new();
        for a in actions {
            if let Action::Deliver(e) = a {
                let key = match e.msg {
                    Msg::ReadReply { op, attempt, .. } if read => (op, attempt),
                    Msg::ReplicateAck { op, attempt, .. } if !read => (op, attempt),
                    _ => continue,
                };
                if e.dst == Endpoint::LEADER && e.latest_ticks == 0 {
                    *keys.entry(key).or_insert(0usize) += 1;
                }
            }
        }
        keys.values().copied().max().unwrap_or(0)
    };
    let mut queue = std::collections::VecDeque::from([world.initial_state()]);
    let mut seen = std::collections::HashSet::new();
    let (mut read_states, mut write_states_reduced) = (0, 0);
    let (mut actions, mut chosen) = (Vec::new(), Vec::new());
    while let Some(s) = queue.pop_front() {
        if seen.len() > 200_000 || (read_states >= 50 && write_states_reduced >= 50) {
            break;
        }
        actions.clear();
        world.actions(&s, &mut actions);
        chosen.clear();
        reduction::ample(&world, &s, &actions, &mut chosen);
        let single_answer = chosen.len() == 1
            && matches!(&actions[chosen[0]], Action::Deliver(e) if e.dst == Endpoint::LEADER);
        let active_read = s.coord.ops.iter().any(|o| !o.responded && !o.repairing);
        if answers(&actions, true) >= 2 && active_read && s.coord.ops.iter().all(|o| !o.repairing) {
            read_states += 1;
            if single_answer {
                let Action::Deliver(e) = &actions[chosen[0]] else { unreachable!() };
                assert!(
                    !matches!(e.msg, Msg::ReadReply { .. }),
                    "a read reply was taken alone while another reply to the same read is due"
                );
            }
        }
        if answers(&actions, false) >= 2 && single_answer {
            write_states_reduced += 1;
        }
        for a in &actions {
            let next = world.next_state(&s, a.clone()).expect("enabled");
            let mut d = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&next, &mut d);
            if seen.insert(std::hash::Hasher::finish(&d)) {
                queue.push_back(next);
            }
        }
    }
    assert!(read_states > 0, "no state with two replies to one read due");
    assert!(write_states_reduced > 0, "no write's acks were taken one at a time");
}

/// Arrival slack is used where no violation is expected, and a violation found with it is
/// found again without it: the reported counterexample is a behaviour of the world as written.
/// detector-timing's `continuous` evicts a healthy replica; declared "holds" here, its run
/// with early answers finds the eviction and is run again, and the report is that run's.
#[test]
fn a_violation_found_with_arrival_slack_is_reported_from_the_world_as_written() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/detector-timing.toml");
    let text = std::fs::read_to_string(&src).expect("the library model");
    let declared = r#"expect = { no_healthy_eviction = "violated", churn_bounded = "holds", converges = "holds", dead_replaced = "holds" }"#;
    assert!(text.contains(declared), "detector-timing's continuous variant expects an eviction");
    let file = dir.path().join("detector-timing.toml");
    std::fs::write(&file, text.replace(declared, &declared.replace("\"violated\"", "\"holds\"")))
        .expect("written");
    let jobs = check::plan(&[file], &PolicyChoice::Variants(None)).expect("the model loads");
    for job in &jobs {
        let full = run(job, Reduction::None, 2, None);
        let reduced = run(job, Reduction::Por, 2, None);
        compare(job, &full, &reduced);
        let violated = reduced.properties.iter().any(|p| p.found == check::Found::Violated);
        assert_eq!(
            reduced.arrival_slack, !violated,
            "{}: arrival slack is reported exactly where nothing was violated",
            job.variant
        );
        if job.variant == "continuous" {
            assert!(violated, "the continuous variant evicts a healthy replica");
            let eviction = |r: &RunResult| {
                r.properties
                    .iter()
                    .find(|p| p.name.as_str() == "no_healthy_eviction")
                    .cloned()
                    .expect("checked")
            };
            // Cut short without slack, before the eviction: the violation found with slack
            // stands, and says why it has no counterexample.
            let cut = run(job, Reduction::Por, 2, Some(4_000));
            assert!(!cut.complete);
            let p = eviction(&cut);
            assert_eq!(p.found, check::Found::Violated, "a violation found with slack is not dropped");
            assert!(p.counterexample.is_none());
            let why = p.counterexample_missing.expect("a violation without a counterexample says why");
            assert!(why.contains("state limit of 4000"), "{why}");
            // Complete with slack, cut short without it after the eviction: the complete
            // run's report, with the counterexample of the world as written.
            let late = run(job, Reduction::Por, 2, Some(14_000));
            assert!(late.complete && late.arrival_slack);
            let p = eviction(&late);
            let cx = p.counterexample.expect("found again without slack");
            let world = World::new(WorldConfig::new(&job.scenario, &job.policy).expect("resolves"));
            let states = replay(&world, &cx);
            assert!(!properties::holds(p.name, &world.cfg, states.last().expect("a state")));
        }
    }
    // As the library declares it, the continuous variant expects the eviction: no slack.
    let library = library_jobs("detector-timing");
    let continuous = library.iter().find(|j| j.variant == "continuous").expect("the variant");
    assert!(!run(continuous, Reduction::Por, 2, None).arrival_slack);
}
