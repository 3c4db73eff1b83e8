//! A burst that ends (`burst_ends = true`, issue 14): the environment ends a shard's burst at
//! a moment the checker chooses, the coordinator learns the background it sees, and liveness
//! is asked of the time after the burst. `models/hot-partition-burst-ends.toml` is
//! `hot-partition-retry-storm-continuous.toml` with the burst ending.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, lasso};
use serde_json::Value;

const ENDLESS: &str = "models/hot-partition-retry-storm-continuous.toml";
const ENDS: &str = "models/hot-partition-burst-ends.toml";

fn found(run: &Value, name: &str) -> String {
    assert_eq!(run["complete"], true, "{} / {}", run["model"], run["variant"]);
    json_property(run, name)["found"].as_str().unwrap().to_string()
}

#[test]
fn the_incident_storm_lasts_as_long_as_its_burst() {
    // Under an endless burst, naive retries never get through (the storm is a lasso)...
    assert_eq!(found(&check_json(ENDLESS, "incident", &[]), "ops_complete"), "violated");
    // ...but once the burst ends, the two checkout clients fit the partition: the storm does
    // not outlive its burst, and no operation stays pending for ever. The burst itself still
    // overloads the partition while it lasts.
    let ends = check_json(ENDS, "incident", &[]);
    assert_eq!(found(&ends, "ops_complete"), "holds");
    assert_eq!(found(&ends, "capacity_respected"), "violated");
    assert_eq!(found(&check_json(ENDS, "fixed", &[]), "ops_complete"), "holds");
}

#[test]
fn on_a_smaller_partition_the_storm_outlives_its_burst() {
    let run = check_json(ENDS, "incident-small-partition", &[]);
    assert_eq!(found(&run, "ops_complete"), "violated");
    let (stem, loop_) = lasso(&run, "ops_complete");
    // The loop comes after the burst ended, and is a retry storm: throttled, retried, forever.
    assert!(stem.iter().any(|a| a == "the burst on p1 ends"), "the burst ends first: {stem:?}");
    assert!(loop_.iter().all(|a| !a.contains("burst")), "{loop_:?}");
    assert!(loop_.iter().any(|a| a.starts_with("tick")), "time passes on the loop: {loop_:?}");
    assert!(loop_.iter().any(|a| a.contains("FAILED")), "the loop throttles: {loop_:?}");
    assert!(loop_.iter().any(|a| a.contains("retries")), "and retries: {loop_:?}");
    // The fix completes every operation on the same partition once the burst is over.
    assert_eq!(found(&check_json(ENDS, "fixed-small-partition", &[]), "ops_complete"), "holds");
}

#[test]
fn a_burst_that_ends_gives_the_same_verdicts_with_and_without_the_reduction() {
    for variant in
        ["incident", "retry-budget-only", "fixed", "incident-small-partition", "fixed-small-partition"]
    {
        let por = check_json(ENDS, variant, &[]);
        let none = check_json(ENDS, variant, &["--reduce", "none"]);
        for name in [
            "acked_writes_persist",
            "no_duplicate_effects",
            "capacity_respected",
            "converges",
            "ops_complete",
        ] {
            assert_eq!(found(&por, name), found(&none, name), "{variant} / {name}");
        }
    }
}
