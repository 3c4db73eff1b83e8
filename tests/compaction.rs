//! Compaction debt that grows and drains (issue 14): with `compaction_debt_per_write_pct` and
//! `compaction_debt_drain`, debt is node state, and the coordinator learns it from the nodes'
//! load reports. `models/rebalancer-compaction-debt.toml` is
//! `rebalancer-compaction-continuous.toml` with such debt.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property};
use serde_json::Value;

const STATIC: &str = "models/rebalancer-compaction-continuous.toml";
const DEBT: &str = "models/rebalancer-compaction-debt.toml";

fn found(run: &Value, name: &str) -> String {
    assert_eq!(run["complete"], true, "{} / {}", run["model"], run["variant"]);
    json_property(run, name)["found"].as_str().unwrap().to_string()
}

fn actions(run: &Value, name: &str) -> Vec<String> {
    let cx = &json_property(run, name)["counterexample"];
    cx["steps"].as_array().unwrap().iter().map(|s| s["action"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_fix_moves_the_shard_onto_a_drained_node_and_the_debt_follows() {
    // With static debt, n2 is never a target of the compaction-aware rebalancer.
    let fixed_static = check_json(STATIC, "fixed", &[]);
    assert_eq!(found(&fixed_static, "converges"), "holds");
    // With debt that drains, n2 becomes one once its backlog is gone, as its report says; the
    // hot writes then make it slow, and no node can take the shard: it stays on a slow node.
    let fixed = check_json(DEBT, "fixed", &[]);
    assert_eq!(found(&fixed, "converges"), "holds");
    assert_eq!(found(&fixed, "hot_shard_leaves_slow_node"), "violated");
    let steps = actions(&fixed, "hot_shard_leaves_slow_node");
    let reported = steps.iter().position(|a| a.contains("n2 -> coordinator: LoadReport debt=0%"));
    let moved = steps.iter().position(|a| a.contains("queued: move hot n1 -> n2"));
    assert!(reported.is_some() && moved.is_some(), "{steps:?}");
    assert!(reported < moved, "the coordinator moves the shard after n2 reported its debt gone: {steps:?}");
}

#[test]
fn with_room_to_move_back_the_fix_ping_pongs_as_the_debt_follows_the_shard() {
    let roomy = check_json(DEBT, "fixed-roomy", &[]);
    assert_eq!(found(&roomy, "converges"), "violated");
    let incident = check_json(DEBT, "incident", &[]);
    assert_eq!(found(&incident, "converges"), "violated");
    assert_eq!(found(&incident, "churn_bounded"), "violated");
}

#[test]
fn debt_as_node_state_is_explored_without_the_reduction() {
    // The reduction does not argue for a node's load: with debt that changes, `por` expands
    // every action, and the counts are those of the full graph.
    let por = check_json(DEBT, "fixed", &[]);
    let none = check_json(DEBT, "fixed", &["--reduce", "none"]);
    assert_eq!(por["unique_states"], none["unique_states"]);
    assert_eq!(por["unique_states"], 81_893, "re-pin deliberately when the model changes");
}
