//! Issue #3: the ack-timeout incident model gives the verdicts its semantics imply for
//! policies no variant lists: the ack deadline against the worst round trip under coupled
//! detection, and silence thresholds against the worst heartbeat gap under independent
//! detection. And `replicheck diff` flags the incident's change.

use replicheck::check::{plan, run, Found, PolicyChoice, RunOptions, RunResult};
use replicheck::config::{load_policy, PropertyName};
use std::path::{Path, PathBuf};
use std::process::Command;

const MODEL: &str = "models/ack-timeout-eviction.toml";

/// Check a policy against the model. A violation is definitive as soon as it is found, so
/// runs that expect one may stop at `max_states`; runs that expect "holds" must complete.
fn check_policy_limited(toml: &str, max_states: Option<u64>) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, toml).unwrap();
    let policy = Box::new(load_policy(&path).unwrap());
    let jobs = plan(&[PathBuf::from(MODEL)], &PolicyChoice::File { path, policy }).unwrap();
    assert_eq!(jobs.len(), 1);
    let r = run(&jobs[0], &RunOptions { threads: 2, max_states, ..RunOptions::default() }).unwrap();
    assert!(r.complete || r.stopped.is_some(), "a run either completes or says why not");
    r
}

fn check_policy(toml: &str) -> RunResult {
    check_policy_limited(toml, None)
}

fn check_policy_for_violation(toml: &str) -> RunResult {
    check_policy_limited(toml, Some(300_000))
}

fn found(r: &RunResult, p: PropertyName) -> Found {
    r.properties.iter().find(|x| x.name == p).unwrap().found
}

#[test]
fn coupled_deadline_equal_to_worst_round_trip_evicts_healthy_replicas() {
    // Worst one-way latency is 700ms: a reply can arrive exactly at 1.4s, the tick the
    // deadline fires. Both orders are possible, so a healthy replica can be declared dead.
    let r = check_policy_for_violation("replica_ack_timeout = \"1400ms\"\nfailure_detection = \"coupled\"\n");
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Violated);
}

#[test]
fn coupled_deadline_above_worst_round_trip_evicts_no_healthy_replica() {
    let r = check_policy("replica_ack_timeout = \"1500ms\"\nfailure_detection = \"coupled\"\n");
    assert!(r.complete);
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Holds);
    assert_eq!(found(&r, PropertyName::ChurnBounded), Found::Holds);
}

#[test]
fn coupled_deadline_below_one_way_latency_evicts() {
    let r = check_policy_for_violation("replica_ack_timeout = \"300ms\"\nfailure_detection = \"coupled\"\n");
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Violated);
    assert_eq!(
        found(&r, PropertyName::AckedWritesPersist),
        Found::Holds,
        "quorum catch-up keeps acked writes"
    );
}

#[test]
fn independent_detection_with_thresholds_above_the_worst_gap_keeps_slow_replicas() {
    // The 500ms request deadline is kept; health comes from heartbeats only.
    let r = check_policy(
        "replica_ack_timeout = \"500ms\"\nfailure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"2s\"\ndead_after = \"3s\"\n",
    );
    assert!(r.complete);
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Holds);
    assert_eq!(found(&r, PropertyName::ChurnBounded), Found::Holds);
}

#[test]
fn independent_detection_with_dead_after_just_above_the_worst_gap_keeps_slow_replicas() {
    let r = check_policy(
        "replica_ack_timeout = \"500ms\"\nfailure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"1s\"\ndead_after = \"2500ms\"\n",
    );
    assert!(r.complete);
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Holds);
}

#[test]
fn independent_detection_with_dead_after_below_the_worst_gap_evicts() {
    // The first pong from zone b answers the ping sent at 1s and may take 1.4s: 2.4s of
    // silence is normal there. dead_after = 2s declares it dead at the heartbeat at 2s.
    let r = check_policy_for_violation(
        "replica_ack_timeout = \"500ms\"\nfailure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"1s\"\ndead_after = \"2s\"\n",
    );
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Violated);
}

#[test]
fn circuit_breaker_stops_the_eviction_an_aggressive_detector_asks_for() {
    // One dead node in four is 25%: a breaker at 20% suppresses every eviction.
    let r = check_policy(
        "replica_ack_timeout = \"500ms\"\nfailure_detection = \"coupled\"\nmax_dead_fraction = 0.2\n",
    );
    assert!(r.complete);
    assert_eq!(found(&r, PropertyName::NoHealthyEviction), Found::Holds);
}

#[test]
fn idempotency_tokens_remove_duplicate_effects_of_retries() {
    let without = check_policy_for_violation("idempotency_tokens = false\n");
    assert_eq!(found(&without, PropertyName::NoDuplicateEffects), Found::Violated);
    let with = check_policy("idempotency_tokens = true\n");
    assert_eq!(found(&with, PropertyName::NoDuplicateEffects), Found::Holds);
}

fn replicheck(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .unwrap()
}

#[test]
fn diff_flags_the_incident_change_as_a_regression() {
    let out = replicheck(&[
        "diff",
        MODEL,
        "--base",
        "examples/policies/production-2s.toml",
        "--candidate",
        "examples/policies/ack-timeout-500ms.toml",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    for p in ["no_healthy_eviction", "churn_bounded"] {
        assert!(
            stdout.lines().any(|l| l.contains(p) && l.contains("REGRESSION")),
            "{p} regresses:\n{stdout}"
        );
        assert!(stdout.contains(&format!("regression {p} under the candidate")), "{stdout}");
    }
    assert!(stdout.contains("http://127.0.0.1:3000/#/steps/0/"));
    assert!(!stdout.lines().any(|l| l.contains("acked_writes_persist") && l.contains("REGRESSION")));
}

#[test]
fn diff_the_other_way_reports_fixes_and_passes() {
    let out = replicheck(&[
        "diff",
        MODEL,
        "--base",
        "examples/policies/ack-timeout-500ms.toml",
        "--candidate",
        "examples/policies/production-2s.toml",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exit_code"], 0);
    let rows = doc["models"][0]["properties"].as_array().unwrap();
    let change =
        |p: &str| rows.iter().find(|r| r["property"] == p).unwrap()["change"].as_str().unwrap().to_string();
    assert_eq!(change("no_healthy_eviction"), "fix");
    assert_eq!(change("churn_bounded"), "fix");
    assert_eq!(change("acked_writes_persist"), "same");
    assert!(doc["models"][0]["regressions"].as_array().unwrap().is_empty());
}

/// BFS's shortest trace to the healthy eviction could spend a fault where an ordinary step of
/// the same length does (losing the client's response instead of delivering it). The reported
/// trace uses the fewest faults: only the degradation the incident needs. Its explorer link
/// still replays, in the real world (full fault budget), to a healthy eviction.
#[test]
fn the_incident_trace_spends_only_the_faults_it_needs() {
    use replicheck::model::properties::no_healthy_eviction;
    use replicheck::model::{World, WorldConfig};
    use stateright::Model;
    let jobs = plan(&[PathBuf::from(MODEL)], &PolicyChoice::Variants(Some("incident".into()))).unwrap();
    let job = &jobs[0];
    let r = run(job, &RunOptions { threads: 2, ..RunOptions::default() }).unwrap();
    let cx = r
        .properties
        .iter()
        .find(|p| p.name == PropertyName::NoHealthyEviction)
        .and_then(|p| p.counterexample.clone())
        .expect("the incident evicts a healthy replica");
    let faults: Vec<&str> =
        cx.steps.iter().map(|s| s.action.as_str()).filter(|a| a.contains("FAULT")).collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains("degrades"), "{faults:?}");

    let world = World::new(WorldConfig::new(&job.scenario, &job.policy).unwrap());
    let indices: Vec<usize> =
        cx.explorer_url.split("/#/steps/").nth(1).unwrap().split('/').map(|i| i.parse().unwrap()).collect();
    let mut state = world.init_states().remove(indices[0]);
    for &i in &indices[1..] {
        let mut actions = Vec::new();
        world.actions(&state, &mut actions);
        state = world.next_state(&state, actions[i].clone()).unwrap();
    }
    assert!(!no_healthy_eviction(&state), "the link ends in the violation");
}

/// The lossy half of the incident (`models/ack-timeout-lossy-link.toml`): a lost message is no
/// fault of the node. The silence threshold must tolerate one lost heartbeat: dead after 3s
/// (the postmortem's remedy, above the worst silence of 2.4s without loss) evicts a healthy n2
/// after one lost ping, because a heartbeat round then sees exactly 3s of silence; one tick
/// more, and the rounds never see enough.
#[test]
fn one_lost_heartbeat_needs_dead_after_above_the_silence_a_round_sees() {
    const LOSSY: &str = "models/ack-timeout-lossy-link.toml";
    let run_with = |dead_after: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        let toml = format!(
            "replication_factor = 3\nwrite_quorum = 2\nread_quorum = 2\nreplica_ack_timeout = \"500ms\"\n\
             failure_detection = \"independent\"\nheartbeat_interval = \"1s\"\nsuspect_after = \"2s\"\n\
             dead_after = \"{dead_after}\"\neviction_enabled = true\nmax_dead_fraction = 0.34\n\
             max_concurrent_evictions = 2\nmax_attempts = 2\nbackoff = \"exponential_jitter\"\n\
             backoff_base = \"500ms\"\nbackoff_max = \"2s\"\nidempotency_tokens = true\n"
        );
        std::fs::write(&path, toml).unwrap();
        let policy = Box::new(load_policy(&path).unwrap());
        let jobs = plan(&[PathBuf::from(LOSSY)], &PolicyChoice::File { path, policy }).unwrap();
        let r = run(&jobs[0], &RunOptions { threads: 2, ..RunOptions::default() }).unwrap();
        assert!(r.complete);
        found(&r, PropertyName::NoHealthyEviction)
    };
    assert_eq!(run_with("2900ms"), Found::Violated);
    assert_eq!(run_with("3s"), Found::Violated);
    assert_eq!(run_with("3100ms"), Found::Holds);
    assert_eq!(run_with("4s"), Found::Holds);
}
