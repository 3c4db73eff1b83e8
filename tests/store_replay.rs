//! `replicheck store sim --replay` (and `store run --replay`): a counterexample of the model
//! played on the store's own code, each message delivered or lost at the trace's moment. The
//! store follows the trace and shows the same violation: a state the model judges (an
//! acknowledged write on too few replicas), a stale read the clients see, a coordinator restart
//! with catch-up copies, a livelock's loop, a rollout. A shell whose clock runs fast leaves the
//! trace, and the replay names where. Every run here is well under a second.

use std::process::{Command, Output};

fn replicheck(args: &[&str], shell_fault: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_replicheck"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(args);
    command.env_remove("REPLICHECK_SHELL_FAULT");
    if let Some(fault) = shell_fault {
        command.env("REPLICHECK_SHELL_FAULT", fault);
    }
    command.output().expect("run replicheck")
}

fn replay(model: &str, variant: &str, property: &str, shell_fault: Option<&str>) -> Output {
    replicheck(&["store", "sim", model, "--variant", variant, "--replay", property], shell_fault)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), String::from_utf8_lossy(&out.stderr))
}

const FOLLOWED: &str =
    "the store followed the trace: it sent every message the trace sent, in the same ticks";
const REPRODUCED: &str = "reproduced: the store shows the model's violation";

#[test]
fn a_state_the_model_judges_is_judged_on_the_stores_state() {
    // One replica acknowledges the write: no client sees it lost, but every read quorum of two
    // could miss it, which is what the model's acked_writes_persist says of the state.
    let out = replay("models/basic-quorum.toml", "write-quorum-1", "acked_writes_persist", None);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(report.contains(FOLLOWED), "{report}");
    assert!(
        report.contains("the store's state when the trace ends violates acked_writes_persist as the model judges it: the acknowledged write of s1:"),
        "{report}"
    );
    assert!(report.contains("is on 1 of its replicas [n1, n2, n3]"), "{report}");
    assert!(report.ends_with(&format!("{REPRODUCED}\n")), "{report}");
}

#[test]
fn a_stale_read_is_seen_by_the_clients_and_a_replay_is_the_same_twice() {
    let runs: Vec<Output> =
        (0..2).map(|_| replay("models/basic-quorum.toml", "no-read-repair", "linearizable", None)).collect();
    let report = stdout(&runs[0]);
    assert_eq!(runs[0].status.code(), Some(0), "{}", text(&runs[0]));
    assert_eq!(report, stdout(&runs[1]), "one counterexample replayed twice printed two runs");
    assert!(report.contains(FOLLOWED), "{report}");
    assert!(report.contains("the store: linearizable violated, as in the trace: keys s1:"), "{report}");
    // Side by side: the trace's delivery and when the store sent that message.
    assert!(
        report.contains(
            "deliver coordinator -> reader: Response reader.read#2 attempt=1 ok value=0 store sent it at"
        ),
        "{report}"
    );
}

#[test]
fn restarts_copies_loops_and_rollouts_are_followed() {
    let cases = [
        // A coordinator restart that forgets a membership change, with two catch-up copies.
        ("models/coordinator-restart.toml", "membership-in-memory", "linearizable"),
        // A lasso: the rebalancer moves the hot shard back and forth; its loop is played 3 times.
        ("models/rebalancer-compaction.toml", "incident", "converges"),
        // A rollout: one coordinator on the new stage reads with a quorum the old one's writes miss.
        ("models/quorum-rollout.toml", "rollout", "linearizable"),
        // No clients: the detector evicts a slow replica.
        ("models/detector-timing.toml", "continuous", "no_healthy_eviction"),
        // Two timers due in one tick, fired in the trace's order (the backlog's fan-out before
        // the ack deadline; the machine lists the deadline first).
        ("models/remirror-storm.toml", "incident", "no_healthy_eviction"),
    ];
    for (model, variant, property) in cases {
        let out = replay(model, variant, property, None);
        let report = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{model} / {variant} / {property}:\n{}", text(&out));
        assert!(report.contains(FOLLOWED), "{model} / {variant} / {property}:\n{report}");
        assert!(report.contains(REPRODUCED), "{report}");
    }
    let lasso = stdout(&replay("models/rebalancer-compaction.toml", "incident", "converges", None));
    assert!(lasso.lines().next().unwrap().contains("; its loop (steps "), "{lasso}");
    assert!(lasso.contains("played 3 times"), "{lasso}");
}

/// The leader family's replicas and failover manager follow its incidents' traces: each
/// message of the trace in its tick, to nodes that are down too (the model delivers those, and
/// they are lost), and the violation shown by the store's own checks.
#[test]
fn the_leader_familys_incidents_are_followed_and_reproduced() {
    let cases = [
        // n2 down while n1 acks alone; n1 crashes; n2 promoted outside the in-sync set.
        (
            "models/in-sync-unclean.toml",
            "acked_writes_persist",
            "the store: acked_writes_persist violated, as in the trace",
        ),
        // The asynchronous ack, the east cut, the follower promoted without the write.
        ("models/async-failover.toml", "linearizable", "the store: linearizable violated, as in the trace"),
        // The slow link deposes a live primary, which takes a write in the old epoch.
        (
            "models/unfenced-primary.toml",
            "single_primary",
            "the store: single_primary violated, as in the trace",
        ),
    ];
    for (model, property, shown) in cases {
        let out = replay(model, "default", property, None);
        let report = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{model} / {property}:\n{}", text(&out));
        assert!(report.contains(FOLLOWED), "{model} / {property}:\n{report}");
        assert!(report.contains(shown), "{model} / {property}:\n{report}");
        // Each message between the machines arrived as the model's links allow.
        assert!(report.contains("the store's trace against the model's environment: conforms"), "{report}");
        assert!(report.ends_with(&format!("{REPRODUCED}\n")), "{report}");
    }
    // A failover's messages side by side with the store's.
    let report = stdout(&replay("models/in-sync-unclean.toml", "default", "acked_writes_persist", None));
    assert!(
        report.contains(
            "deliver n1 -> n2: Append s1 e0v1=1 after e0v0                          store sent it at 0.2"
        ),
        "{report}"
    );
    assert!(
        report.contains("(UNCLEAN: outside the in-sync set, it holds e0v0) store sent it at"),
        "{report}"
    );
}

/// A lasso loops for ever in the model; the store shows it in every pass of the loop, with the
/// faults in force when the loop closes kept in force: remirror-storm's evictions in each pass,
/// and without automatic failover a write to the crashed primary's partition outstanding
/// through all of them. What followed past the trace, where the schedule is no longer forced,
/// is said too.
#[test]
fn a_lassos_livelock_is_shown_in_every_pass_of_its_loop() {
    let cases = [
        (
            "models/remirror-storm.toml",
            "incident",
            "converges",
            "a replica set changed in every pass (in the last: eviction of node",
        ),
        (
            "models/async-failover.toml",
            "no-auto-failover",
            "ops_complete",
            "an operation outstanding through every pass (client 0 s1:",
        ),
    ];
    for (model, variant, property, shown) in cases {
        let out = replay(model, variant, property, None);
        let report = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{model} / {variant} / {property}:\n{}", text(&out));
        assert!(
            report.contains(&format!("the store in the loop's 3 passes, as in the model's loop: {shown}")),
            "{report}"
        );
        assert!(
            report.contains("  past the trace, where the schedule is the store's own again: "),
            "{report}"
        );
        // The manager retries the blocked failover every round; it says so once.
        let said = String::from_utf8_lossy(&out.stderr).matches("no replica to promote in place of").count();
        assert_eq!(said, usize::from(variant == "no-auto-failover"), "{}", text(&out));
        assert!(report.ends_with("reproduced in the loop's passes: under the trace's schedule the store does what the model's loop does, pass after pass\n"), "{report}");
    }
}

#[test]
fn a_shell_that_leaves_the_trace_is_named_where_it_left() {
    // The clock runs twice as fast: the store pings in a tick the trace does not (its first
    // 500 ms round after 250 ms, read at the model's next tick).
    let out = replay("models/detector-timing.toml", "continuous", "no_healthy_eviction", Some("fast_clock"));
    let report = stdout(&out);
    assert!(
        report.contains("where the store left the trace: after step 1: the store sends ping from coordinator to n1 in tick 3"),
        "{report}"
    );
    assert!(!report.contains(FOLLOWED), "{report}");
}

#[test]
fn store_run_replays_a_counterexample_from_checks_json() {
    let dir = std::env::temp_dir().join(format!("replicheck-replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("cx.json");
    let check = replicheck(
        &["check", "models/basic-quorum.toml", "--variant", "write-quorum-1", "--format", "json"],
        None,
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    std::fs::write(&json, &check.stdout).unwrap();
    let json = json.to_str().unwrap();
    let trace = dir.join("trace.jsonl");
    let kept = ["--trace", trace.to_str().unwrap()];
    let args = ["store", "run", "models/basic-quorum.toml", "--variant", "write-quorum-1", "--replay", json];
    let out = replicheck(&[&args[..], &kept[..]].concat(), None);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The file's first counterexample is acked_writes_persist's.
    assert!(report.starts_with("store sim basic-quorum / write-quorum-1: replaying the model's counterexample for acked_writes_persist"), "{report}");
    assert!(report.contains(REPRODUCED), "{report}");
    // The replay's trace, kept, is checked again against the model's environment.
    let again =
        replicheck(&["conform", trace.to_str().unwrap(), "--model", "models/basic-quorum.toml"], None);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(
        stdout(&again).contains("every request's fate is a behaviour of model basic-quorum"),
        "{}",
        text(&again)
    );
    // The file is of another variant: refused, with the reason.
    let other = replicheck(
        &["store", "sim", "models/basic-quorum.toml", "--variant", "no-read-repair", "--replay", json],
        None,
    );
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(text(&other).contains("no run of basic-quorum / no-read-repair in it"), "{}", text(&other));
    // A report of another version of the model: its steps fit, but violate nothing here.
    let changed = dir.join("basic-quorum.toml");
    let model = std::fs::read_to_string("models/basic-quorum.toml").unwrap();
    std::fs::write(&changed, model.replacen("write_quorum = 2\n", "write_quorum = 1\n", 1)).unwrap();
    let stale =
        replicheck(&["check", changed.to_str().unwrap(), "--variant", "default", "--format", "json"], None);
    let stale_json = dir.join("stale.json");
    std::fs::write(&stale_json, &stale.stdout).unwrap();
    let out = replicheck(
        &[
            "store",
            "sim",
            "models/basic-quorum.toml",
            "--variant",
            "default",
            "--replay",
            stale_json.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("does not violate it in this model"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_cannot_be_replayed_is_refused_and_what_the_store_does_not_judge_says_so() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["models/basic-quorum.toml", "--replay", "linearizable"],
            "--replay linearizable: the model finds no violation of it (it holds)",
        ),
        (&["models/basic-quorum.toml", "--replay", "lineariz"], "--replay lineariz: not a property of"),
        (
            &[
                "models/basic-quorum.toml",
                "--variant",
                "write-quorum-1",
                "--replay",
                "linearizable",
                "--load",
                "continuous",
            ],
            "--replay plays the model's load",
        ),
        (
            &[
                "models/basic-quorum.toml",
                "--variant",
                "write-quorum-1",
                "--replay",
                "linearizable",
                "--time-scale",
                "3",
            ],
            "--time-scale 3: the trace takes 4 steps in one tick",
        ),
    ];
    for (args, expected) in cases {
        let out = replicheck(&[&["store", "sim"][..], args].concat(), None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
    }
    // A liveness property only the model judges: replayed, and said to be unjudged.
    let out = replay("models/rebalancer-compaction-debt.toml", "fixed", "hot_shard_leaves_slow_node", None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stdout(&out).contains("hot_shard_leaves_slow_node is not judged by the store"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).ends_with("not judged: the store's checks do not judge this property\n"),
        "{}",
        stdout(&out)
    );
}
