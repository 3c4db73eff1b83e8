//! Issue #5: the hot-partition and capacity-routing models give the verdicts their semantics
//! imply for policies no variant lists (per-partition caps against the burst, suffix counts,
//! retry limits and budgets, placement thresholds), clients that retry without limit stay
//! finite, and counterexamples show per-partition and per-backend load.

use replicheck::check::{plan, run, Found, PolicyChoice, RunOptions, RunResult};
use replicheck::config::{load_policy, PropertyName};
use std::path::PathBuf;
use std::process::Command;

const HOT: &str = "models/hot-partition-retry-storm.toml";
const ROUTING: &str = "models/capacity-routing-bypass.toml";

/// Check `toml` over a model's `[policy]`; every run here is small and must complete.
fn check(model: &str, toml: &str) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, toml).unwrap();
    let policy = Box::new(load_policy(&path).unwrap());
    let jobs = plan(&[PathBuf::from(model)], &PolicyChoice::File { path, policy }).unwrap();
    assert_eq!(jobs.len(), 1);
    let r = run(&jobs[0], &RunOptions { threads: 2, ..RunOptions::default() }).unwrap();
    assert!(r.complete, "{model} with {toml:?} must be explored completely");
    r
}

fn found(r: &RunResult, p: PropertyName) -> Found {
    r.properties.iter().find(|x| x.name == p).unwrap_or_else(|| panic!("{p} is checked")).found
}

const CAPACITY: PropertyName = PropertyName::CapacityRespected;
const COMPLETE: PropertyName = PropertyName::OpsComplete;

#[test]
fn two_suffixes_already_spread_the_burst_enough() {
    // The burst of 2 per tick becomes 1 on p1 and 1 on p2; each client's key lands on its own.
    let r = check(HOT, "write_shard_suffixes = 2\n");
    assert_eq!(found(&r, CAPACITY), Found::Holds);
    assert_eq!(found(&r, COMPLETE), Found::Holds, "nothing is throttled, so nothing is retried");
}

#[test]
fn a_partition_cap_with_room_for_every_client_holds_and_one_less_does_not() {
    // One suffix: p1 takes the burst (2) and both clients' writes in the same tick (4).
    let room = check(HOT, "partition_write_capacity = \"40/s\"\ntable_write_capacity = \"160/s\"\n");
    assert_eq!(found(&room, CAPACITY), Found::Holds);
    assert_eq!(found(&room, COMPLETE), Found::Holds);
    let short = check(HOT, "partition_write_capacity = \"30/s\"\ntable_write_capacity = \"160/s\"\n");
    assert_eq!(found(&short, CAPACITY), Found::Violated);
}

#[test]
fn the_table_share_caps_a_partition_too() {
    // The per-partition cap would leave room, but 4 partitions share 80/s: 2 per tick each.
    let r = check(HOT, "partition_write_capacity = \"40/s\"\ntable_write_capacity = \"80/s\"\n");
    assert_eq!(found(&r, CAPACITY), Found::Violated);
}

#[test]
fn jitter_alone_does_not_end_the_storm_but_a_limit_or_a_budget_does() {
    // The partition is full in every tick of the burst: spreading retries out does not help.
    let jitter = check(HOT, "backoff = \"exponential_jitter\"\nbackoff_max = \"800ms\"\n");
    assert_eq!(found(&jitter, COMPLETE), Found::Violated);
    let limited = check(HOT, "max_attempts = 3\n");
    assert_eq!(found(&limited, COMPLETE), Found::Holds, "clients give up after 3 attempts");
    assert_eq!(found(&limited, CAPACITY), Found::Violated);
    let budget = check(HOT, "retry_budget = 1\n");
    assert_eq!(found(&budget, COMPLETE), Found::Holds, "one retry per client, then errors");
}

#[test]
fn a_client_retrying_without_limit_past_late_replies_stays_finite_and_completes() {
    // Every reply arrives after the 200ms request timeout; attempts are numbered up to the
    // point the policy stops telling them apart, and a late success completes the operation.
    let data = "tests/data/stale-retries.toml";
    let r = check(data, "");
    assert_eq!(found(&r, COMPLETE), Found::Holds);
    assert_eq!(found(&r, PropertyName::NoDuplicateEffects), Found::Holds, "tokens make retries one write");
    let tokenless = check(data, "idempotency_tokens = false\n");
    assert_eq!(found(&tokenless, PropertyName::NoDuplicateEffects), Found::Violated);
    let jitter = check(data, "backoff = \"exponential_jitter\"\nbackoff_max = \"800ms\"\n");
    assert_eq!(found(&jitter, COMPLETE), Found::Holds);
}

#[test]
fn capacity_aware_placement_at_a_full_spill_threshold_still_respects_capacity() {
    // At 100% a backend takes writes up to exactly its capacity, then placement moves on.
    let r = check(
        ROUTING,
        "placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = 1.0\n",
    );
    assert_eq!(found(&r, CAPACITY), Found::Holds);
}

#[test]
fn routing_variants_each_overload_their_own_backend() {
    for (toml, backend) in [
        ("placement = \"sorted\"\nupload_planner = \"capacity_aware\"\n", "backend n1"),
        ("placement = \"capacity_aware\"\nupload_planner = \"smallest_first\"\n", "backend n3"),
    ] {
        let r = check(ROUTING, toml);
        let p = r.properties.iter().find(|x| x.name == CAPACITY).unwrap();
        assert_eq!(p.found, Found::Violated, "{toml}");
        let cx = p.counterexample.as_ref().expect("a counterexample");
        let last = &cx.final_state;
        assert!(last.contains(&format!("capacity exceeded: {backend}")), "{toml}:\n{last}");
    }
}

#[test]
fn the_incident_counterexample_shows_per_partition_load() {
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["check", HOT, "--variant", "incident"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "the declared verdicts: {stdout}");
    assert!(
        stdout.contains("partition writes this tick: p1 3/2 (burst 2) OVER, p2 0/2 (burst 0)"),
        "{stdout}"
    );
    assert!(stdout.contains("--- loop"), "the retry storm is a lasso: {stdout}");
}

#[test]
fn a_rate_that_is_not_whole_per_tick_is_rejected_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(&path, "partition_write_capacity = \"15/s\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["check", HOT, "--policy", path.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("partition_write_capacity") && stderr.contains("15/s"), "{stderr}");
    assert!(stderr.contains("p.toml"), "names the file: {stderr}");
    assert!(!stderr.contains("panicked"));
}
