//! Continuous load: clients that never stop make every incident's storm a cycle, and the
//! cycle analysis answers it. Each incident has a `-continuous` model in the library whose
//! incident policy gives a lasso showing the storm and whose fixed policy holds, complete.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, replicheck, root, stderr};
use serde_json::Value;

fn run(model: &str, variant: &str, extra: &[&str]) -> Value {
    check_json(model, variant, extra)
}

fn property<'a>(run: &'a Value, name: &str) -> &'a Value {
    json_property(run, name)
}

/// The actions of a lasso's loop, which must pass time.
fn loop_actions(run: &Value, name: &str) -> Vec<String> {
    let p = property(run, name);
    assert_eq!(p["found"], "violated", "{name}: {p}");
    let cx = &p["counterexample"];
    let from = cx["loop_from_step"].as_u64().expect("a lasso") as usize;
    let steps = cx["steps"].as_array().unwrap();
    let actions: Vec<String> =
        steps[from - 1..].iter().map(|s| s["action"].as_str().unwrap().to_string()).collect();
    assert!(actions.iter().any(|a| a.starts_with("tick")), "time passes on the loop: {actions:?}");
    actions
}

fn all_hold_complete(run: &Value) {
    assert_eq!(run["complete"], true, "{}", run["model"]);
    for p in run["properties"].as_array().unwrap() {
        assert_eq!(p["found"], "holds", "{} / {}: {p}", run["model"], run["variant"]);
    }
}

#[test]
fn ack_timeout_storm_evicts_forever_and_the_fix_settles() {
    const MODEL: &str = "models/ack-timeout-eviction-continuous.toml";
    let incident = run(MODEL, "incident", &[]);
    let lasso = loop_actions(&incident, "converges");
    // The storm: evictions of zone-b replicas, again and again, while the writer keeps writing.
    let evictions: Vec<&String> = lasso.iter().filter(|a| a.contains("queued: evict")).collect();
    assert!(!evictions.is_empty(), "the loop evicts: {lasso:?}");
    assert!(lasso.iter().any(|a| a.contains("replicas now")), "the loop changes the replica set: {lasso:?}");
    assert!(lasso.iter().any(|a| a.contains("invokes its next operation")), "the writes go on: {lasso:?}");
    all_hold_complete(&run(MODEL, "fixed", &[]));
    all_hold_complete(&run(MODEL, "rollback", &[]));
}

#[test]
fn hot_partition_storm_retries_forever_and_the_fix_completes() {
    const MODEL: &str = "models/hot-partition-retry-storm-continuous.toml";
    let lasso = loop_actions(&run(MODEL, "incident", &[]), "ops_complete");
    assert!(lasso.iter().any(|a| a.contains("FAILED")), "the loop throttles: {lasso:?}");
    assert!(lasso.iter().any(|a| a.contains("retries")), "and retries: {lasso:?}");
    all_hold_complete(&run(MODEL, "fixed", &[]));
}

#[test]
fn capacity_routing_storm_starves_an_upload_and_the_fix_places_it() {
    const MODEL: &str = "models/capacity-routing-bypass-continuous.toml";
    for variant in ["incident", "partial-rollback", "sorting-only"] {
        let lasso = loop_actions(&run(MODEL, variant, &[]), "ops_complete");
        assert!(lasso.iter().any(|a| a.contains("FAILED")), "{variant}: the loop throttles: {lasso:?}");
    }
    all_hold_complete(&run(MODEL, "fixed", &[]));
}

#[test]
fn rebalancer_storm_moves_forever_under_writes_and_the_fix_stays() {
    const MODEL: &str = "models/rebalancer-compaction-continuous.toml";
    let lasso = loop_actions(&run(MODEL, "incident", &[]), "converges");
    assert!(lasso.iter().any(|a| a.contains("move hot n1 -> n2")), "{lasso:?}");
    assert!(lasso.iter().any(|a| a.contains("move hot n2 -> n1")), "{lasso:?}");
    assert!(lasso.iter().any(|a| a.contains("invokes its next operation")), "the writes go on: {lasso:?}");
    all_hold_complete(&run(MODEL, "fixed", &[]));
}

/// Relative numbering is part of the model, so the counts are the same on every run and every
/// thread count, with and without the partial-order reduction.
#[test]
fn continuous_counts_are_deterministic() {
    const MODEL: &str = "models/ack-timeout-eviction-continuous.toml";
    for reduce in ["none", "por"] {
        let one = run(MODEL, "incident", &["--threads", "1", "--reduce", reduce]);
        let two = run(MODEL, "incident", &["--threads", "2", "--reduce", reduce]);
        for key in ["unique_states", "transitions", "max_depth"] {
            assert_eq!(one[key], two[key], "{key} with --reduce {reduce}");
        }
    }
}

/// `ops_complete` asks whether one client's operation stays outstanding. Two endless clients
/// whose operations each complete keep *some* operation outstanding at almost every step; that
/// is load, not a livelock. (With a single "some client is waiting" label this model fails.)
#[test]
fn two_endless_clients_are_not_a_livelock() {
    let model = root().join("tests/data/two-endless-clients.toml");
    let r = run(model.to_str().unwrap(), "default", &["--reduce", "none"]);
    all_hold_complete(&r);
}

#[test]
fn linearizable_is_refused_with_a_repeating_client() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("tests/data/two-endless-clients.toml"))
        .unwrap()
        .replace("properties = [", "properties = [\"linearizable\", ");
    let file = dir.path().join("endless-linearizable.toml");
    std::fs::write(&file, text).unwrap();
    let out = replicheck(&["check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("endless-linearizable.toml"), "{err}");
    assert!(err.contains("properties[0]") && err.contains("repeat = true"), "{err}");
}

/// A dead replica must be replaced: eviction off, or coupled detection with no traffic to miss
/// a deadline, leave it in the replica set forever.
#[test]
fn dead_replaced_makes_doing_nothing_fail() {
    let model = root().join("tests/data/dead-replaced.toml");
    let model = model.to_str().unwrap();
    all_hold_complete(&run(model, "heartbeats", &[]));
    for variant in ["never-evicts", "coupled"] {
        let r = run(model, variant, &[]);
        let lasso = loop_actions(&r, "dead_replaced");
        assert!(!lasso.iter().any(|a| a.contains("replicas now")), "{variant}: nothing changes: {lasso:?}");
        assert_eq!(property(&r, "ops_complete")["found"], "holds");
    }
}

/// A hot shard on a slow node must be moved off: without a rebalancer, or without a node with
/// room for it, it stays forever.
#[test]
fn hot_shard_leaves_slow_node_makes_never_rebalancing_fail() {
    let model = root().join("tests/data/hot-shard-slow-node.toml");
    let model = model.to_str().unwrap();
    all_hold_complete(&run(model, "moves-off", &[]));
    for variant in ["no-rebalancer", "no-room"] {
        let r = run(model, variant, &[]);
        let lasso = loop_actions(&r, "hot_shard_leaves_slow_node");
        assert!(!lasso.iter().any(|a| a.contains("replicas now")), "{variant}: the shard stays: {lasso:?}");
    }
}
