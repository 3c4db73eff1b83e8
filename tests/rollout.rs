//! Several coordinators and rollouts: the mixed fleet is explored, a violation that neither
//! policy has alone is found and reported as such, a staged order is proved safe, and bad
//! rollout or coordinator keys are refused with the file, the key and the value.

#[path = "support/bin.rs"]
mod bin;

use bin::{check_json, json_property, replicheck, root, stderr, stdout};

const QUORUM: &str = "models/quorum-rollout.toml";

fn found(run: &serde_json::Value, property: &str) -> String {
    json_property(run, property)["found"].as_str().unwrap().to_string()
}

fn steps(run: &serde_json::Value, property: &str) -> Vec<String> {
    json_property(run, property)["counterexample"]["steps"]
        .as_array()
        .expect("a counterexample")
        .iter()
        .map(|s| s["action"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_mixed_fleet_violation_that_neither_policy_has() {
    for alone in ["base", "candidate"] {
        let run = check_json(QUORUM, alone, &[]);
        assert_eq!(run["complete"], true);
        assert_eq!(found(&run, "acked_writes_persist"), "holds", "{alone}");
        assert_eq!(found(&run, "linearizable"), "holds", "{alone}");
    }
    let run = check_json(QUORUM, "rollout", &[]);
    assert_eq!(found(&run, "acked_writes_persist"), "violated");
    let cx = &json_property(&run, "acked_writes_persist")["counterexample"];
    let final_state = cx["final_state"].as_str().unwrap();
    // The writer's coordinator runs the candidate, the reader's still the base.
    assert!(final_state.contains("ca policy candidate"), "{final_state}");
    assert!(final_state.contains("cb policy base"), "{final_state}");
    let actions = steps(&run, "acked_writes_persist");
    assert_eq!(actions.iter().filter(|a| a.starts_with("ROLLOUT: ca")).count(), 1, "{actions:#?}");
    assert!(!actions.iter().any(|a| a.starts_with("ROLLOUT: cb")), "{actions:#?}");
}

#[test]
fn the_staged_order_holds_and_its_rollback_does_not() {
    let staged = check_json(QUORUM, "staged", &[]);
    assert_eq!(staged["complete"], true);
    for p in ["acked_writes_persist", "linearizable", "converges", "ops_complete"] {
        assert_eq!(found(&staged, p), "holds", "{p}");
    }
    // Without waves the same three stages can mix W=1 with R=2.
    let back = check_json(QUORUM, "staged-rollback", &[]);
    assert_eq!(found(&back, "acked_writes_persist"), "violated");
    let actions = steps(&back, "acked_writes_persist");
    assert!(actions.iter().any(|a| a.starts_with("ROLLBACK:")), "{actions:#?}");
}

/// A rollout runs each stage's policy on some coordinator: lint reads every stage, not only
/// the one the fleet starts on (the 500 ms deadline is the second stage here).
#[test]
fn every_stage_of_a_rollout_is_linted() {
    let out = replicheck(&[
        "check",
        "models/ack-timeout-staged-rollout.toml",
        "--variant",
        "rollout",
        "--max-states",
        "100",
    ]);
    assert_eq!(out.status.code(), Some(3), "cut short: {}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("lint ack-timeout-staged-rollout / rollout, stage after: warning[RC003]"), "{err}");
    assert!(!err.contains("stage before: warning[RC003]"), "{err}");
}

#[test]
fn diff_rollout_reports_a_mixed_fleet_regression_with_its_counterexample() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("w2r2.toml");
    let candidate = dir.path().join("w1r3.toml");
    std::fs::write(&base, "write_quorum = 2\nread_quorum = 2\n").unwrap();
    std::fs::write(&candidate, "write_quorum = 1\nread_quorum = 3\n").unwrap();
    let (b, c) = (base.to_str().unwrap(), candidate.to_str().unwrap());

    // Without --rollout the change looks safe: both policies hold everything.
    let plain = replicheck(&["diff", QUORUM, "--base", b, "--candidate", c, "-q"]);
    assert_eq!(plain.status.code(), Some(0), "{}", stdout(&plain));

    let out = replicheck(&["diff", QUORUM, "--base", b, "--candidate", c, "--rollout", "-q"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("MIXED-FLEET REGRESSION"), "{text}");
    assert!(text.contains("during the rollout, with both policies running"), "{text}");
    assert!(text.contains(&format!("--policy {c} --rollout-from {b}")), "{text}");

    let json = replicheck(&["diff", QUORUM, "--base", b, "--candidate", c, "--rollout", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let rows = doc["models"][0]["properties"].as_array().unwrap();
    let acked = rows.iter().find(|r| r["property"] == "acked_writes_persist").unwrap();
    assert_eq!(acked["change"], "mixed_fleet");
    assert_eq!(acked["rollout"], "violated");
    assert_eq!(doc["models"][0]["regressions"][0]["property"], "acked_writes_persist");

    // The staged order, as a diff: the reads-first policy rolled out over the base is safe.
    let reads_first = dir.path().join("w2r3.toml");
    std::fs::write(&reads_first, "write_quorum = 2\nread_quorum = 3\n").unwrap();
    let r = reads_first.to_str().unwrap();
    let safe = replicheck(&["diff", QUORUM, "--base", b, "--candidate", r, "--rollout", "-q"]);
    assert_eq!(safe.status.code(), Some(0), "{}", stdout(&safe));

    // A candidate a rollout cannot run (it changes the clients' retries) is bad input, said
    // before any run, naming the candidate's file, the key and both values.
    let retries = dir.path().join("w1r3-retry.toml");
    std::fs::write(&retries, "write_quorum = 1\nread_quorum = 3\nmax_attempts = 3\n").unwrap();
    let r = retries.to_str().unwrap();
    let refused = replicheck(&["diff", QUORUM, "--base", b, "--candidate", r, "--rollout"]);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(stdout(&refused).is_empty(), "{}", stdout(&refused));
    assert!(err.starts_with(&format!("replicheck: error: {r}: --rollout over {QUORUM}")), "{err}");
    assert!(err.contains("key `max_attempts` from 1 (stage \"base\") to 3"), "{err}");
}

/// With one coordinator a rollout is the switch itself: the report does not speak of a fleet.
#[test]
fn diff_rollout_with_one_coordinator_reports_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("w2r2.toml");
    let candidate = dir.path().join("w3r1.toml");
    std::fs::write(&base, "write_quorum = 2\nread_quorum = 2\n").unwrap();
    std::fs::write(&candidate, "write_quorum = 3\nread_quorum = 1\n").unwrap();
    let (b, c) = (base.to_str().unwrap(), candidate.to_str().unwrap());
    let out = replicheck(&[
        "diff",
        "tests/data/small-quorum.toml",
        "--base",
        b,
        "--candidate",
        c,
        "--rollout",
        "-q",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("MIXED-FLEET REGRESSION"), "{text}");
    assert!(text.contains("during the switch, the candidate running on what the base left"), "{text}");
    assert!(!text.contains("with both policies running"), "{text}");
}

#[test]
fn two_writers_through_two_coordinators_stay_linearizable() {
    // Each write reads a quorum's versions first and takes a version above them in its
    // coordinator's own class: without that, the later write could lose to the earlier one.
    // Mutation-checked: with `version_above` ignoring what was read (each coordinator on its
    // own counter), `linearizable` is violated here (3,055 states).
    let run = check_json("tests/data/two-coordinators-two-writers.toml", "default", &[]);
    assert_eq!(run["complete"], true);
    assert_eq!(found(&run, "linearizable"), "holds");
    assert_eq!(found(&run, "acked_writes_persist"), "holds");
}

#[test]
fn routers_that_count_only_their_own_writes_overfill_a_backend() {
    let one = dir_policy(
        "placement = \"capacity_aware\"\nupload_planner = \"capacity_aware\"\nspill_threshold = 1.0\n",
    );
    let single =
        replicheck(&["check", "models/capacity-routing-bypass.toml", "--policy", one.1.to_str().unwrap()]);
    assert_eq!(single.status.code(), Some(0), "one router fills n1 and spills: {}", stdout(&single));
    let two = check_json("models/capacity-routing-two-routers.toml", "fixed-full", &[]);
    assert_eq!(found(&two, "capacity_respected"), "violated");
    let final_state = json_property(&two, "capacity_respected")["counterexample"]["final_state"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(final_state.contains("backend n1 was offered 4 writes in one tick, capacity 3"), "{final_state}");
}

#[test]
fn the_canary_coordinator_proposes_and_the_leader_orders() {
    let run = check_json("models/ack-timeout-staged-rollout.toml", "rollout", &[]);
    assert_eq!(found(&run, "no_healthy_eviction"), "violated");
    let actions = steps(&run, "no_healthy_eviction");
    // cb (not the leader) runs the cut and decides the eviction; the rollout step is cb's.
    assert!(actions.iter().any(|a| a.starts_with("ROLLOUT: cb")), "{actions:#?}");
    assert!(actions.iter().any(|a| a.starts_with("cb: ack deadline")), "{actions:#?}");
    let before = check_json("models/ack-timeout-staged-rollout.toml", "before", &[]);
    assert_eq!(found(&before, "no_healthy_eviction"), "holds");
}

fn dir_policy(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// `models/quorum-rollout.toml` with `old` replaced by `new`, checked: exit 2, and the error
/// names the file and each of `wants`.
fn refused(old: &str, new: &str, wants: &[&str]) {
    let text = std::fs::read_to_string(root().join(QUORUM)).unwrap();
    assert!(text.contains(old), "{old}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text.replacen(old, new, 1)).unwrap();
    let out = replicheck(&["check", path.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
    for want in wants {
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_coordinator_and_rollout_keys_are_refused_by_name() {
    refused("coordinator = \"cb\"", "coordinator = \"cc\"", &["clients[1].coordinator", "\"cc\"", "ca, cb"]);
    refused(
        "[coordinator]\n",
        "[coordinator]\nzone = \"a\"\n",
        &["coordinator.zone", "\"a\"", "[[coordinators]]"],
    );
    refused("name = \"cb\"", "name = \"ca\"", &["coordinators[1].name", "\"ca\""]);
    refused("crash = [\"n2\"]", "crash = [\"n2\", \"coordinator\"]", &["faults.crash", "coordinator"]);
    refused(
        "rollout = [\"base\", \"candidate\"]",
        "rollout = [\"base\", \"candidat\"]",
        &["variants.rollout.rollout[1]", "\"candidat\"", "no such variant"],
    );
    refused(
        "rollout = [\"base\", \"candidate\"]",
        "rollout = [\"base\"]",
        &["variants.rollout.rollout", "at least two"],
    );
    // More stages than a coordinator's stage index holds (257 wrapped to 1: never rolled out).
    let long = vec!["\"base\", \"candidate\""; 129].join(", ");
    refused(
        "rollout = [\"base\", \"candidate\"]",
        &format!("rollout = [{long}]"),
        &["variants.rollout.rollout", "258 stages", "at most 16"],
    );
    refused(
        "\nrollout_order = \"stage_by_stage\"",
        "\nrollout_order = \"waves\"",
        &["variants.staged.rollout_order", "\"waves\"", "stage_by_stage"],
    );
    refused(
        "rollout = [\"base\", \"candidate\"]",
        "rollout = [\"base\", \"candidate\"]\npolicy = { read_quorum = 3 }",
        &["variants.rollout.policy", "variants.rollout.rollout"],
    );
    refused(
        "policy = { write_quorum = 1, read_quorum = 3 }",
        "policy = { write_quorum = 1, read_quorum = 3, max_attempts = 3 }",
        &["rollout stage \"candidate\"", "key `max_attempts` from 1 (stage \"base\") to 3"],
    );
    // A stage that is itself a rollout, declared after the one naming it (`staged` comes
    // later in the file than `rollout`).
    refused(
        "rollout = [\"base\", \"candidate\"]",
        "rollout = [\"base\", \"staged\"]",
        &["variants.rollout.rollout[1]", "\"staged\"", "not a rollout"],
    );
    refused(
        "rollout = [\"base\", \"candidate\"]",
        "rollout = [\"base\", \"base\"]",
        &["variants.rollout.rollout[1]", "\"base\"", "the same stage as the one before"],
    );
}
