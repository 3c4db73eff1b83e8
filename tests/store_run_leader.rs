//! `replicheck store run` on the leader family's models: the same primaries, followers and
//! failover manager the checker explores (`protocol::leader`), as node processes and the
//! coordinator over proxies with the model's latencies, under the model's faults.
//!
//! Every variant of the three library models is played with the fault of its incident (the
//! east zone cut for async-failover, both crashes for in-sync-unclean, the slow link for
//! unfenced-primary): wherever the model says a property holds, the store must not violate it
//! (exit 1), and each run must measure the leader family's properties. Two runs at a time
//! (ephemeral ports, separate directories), 6 s of load each: a healed phase long enough to judge
//! `ops_complete` (longer than one attempt and its backoff).
//! The model's verdicts are the variants' declared ones: CI checks the library anyway.

use std::process::{Command, Output};

fn store_run(model: &str, variant: Option<&str>, faults: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_replicheck"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(["store", "run", model]);
    if let Some(v) = variant {
        command.args(["--variant", v]);
    }
    if let Some(f) = faults {
        command.args(["--faults", f]);
    }
    // A cut zone's failover (detection, the followers' positions, the promotion) must fit in
    // the model's 1 s cut: at 200 ms a tick it has 2 s, room for a busy machine's delays
    // (at 100 ms it came 750 ms into the cut, and once in eight runs too late).
    if faults.is_some_and(|f| f.starts_with("partition")) {
        command.args(["--time-scale", "200", "--duration", "10s"]);
    } else {
        command.args(["--duration", "6s"]);
    }
    command.args(["--model-verdicts", "declared"]).output().expect("run replicheck")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The store's and the model's verdicts in a property's row of the report.
fn row(report: &str, property: &str) -> (String, String) {
    let line = report
        .lines()
        .find(|l| l.split_whitespace().next() == Some(property))
        .unwrap_or_else(|| panic!("no row for {property} in:\n{report}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    (cells[1].to_string(), cells[2].to_string())
}

fn number_after(report: &str, label: &str) -> u64 {
    let start = report.find(label).unwrap_or_else(|| panic!("no `{label}` in:\n{report}")) + label.len();
    report[start..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().expect("a number")
}

const PROPERTIES: [&str; 5] =
    ["acked_writes_persist", "linearizable", "single_primary", "converges", "ops_complete"];

/// The run agrees with the model wherever the model says "holds", and measured every property
/// of the family.
fn agrees_where_the_model_holds(report: &str, out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{report}");
    for property in PROPERTIES {
        let (store, model) = row(report, property);
        assert!(store == "holds" || store == "violated", "{property} not measured:\n{report}");
        if model == "holds" {
            assert_eq!(store, "holds", "{property}:\n{report}");
        }
    }
    // Nothing of the quorum family's is claimed for a leader run.
    assert!(!report.contains("evictions: "), "{report}");
    assert!(report.contains("failovers (the coordinator's INFO"), "{report}");
    assert!(
        report.contains("two primaries taking writes in one epoch (the nodes' own records): 0"),
        "{report}"
    );
}

#[test]
fn every_leader_variant_agrees_with_the_model_where_it_holds() {
    let runs: [(&str, Option<&str>, Option<&str>); 6] = [
        ("models/async-failover.toml", None, Some("partition:east")),
        ("models/async-failover.toml", Some("semi-sync"), Some("partition:east")),
        ("models/async-failover.toml", Some("no-auto-failover"), Some("crash:n1")),
        ("models/in-sync-unclean.toml", None, None),
        ("models/in-sync-unclean.toml", Some("min-in-sync-2-clean"), None),
        ("models/unfenced-primary.toml", Some("fencing"), None),
    ];
    let mut reports = Vec::new();
    for pair in runs.chunks(2) {
        let handles: Vec<_> = pair
            .iter()
            .map(|&(model, variant, faults)| std::thread::spawn(move || store_run(model, variant, faults)))
            .collect();
        for (handle, run) in handles.into_iter().zip(pair) {
            let out = handle.join().expect("a run");
            reports.push((*run, text(&out), out));
        }
    }
    for ((model, variant, _), report, out) in &reports {
        let report = format!("{model} {variant:?}:\n{report}");
        agrees_where_the_model_holds(&report, out);
    }
    let report_of = |i: usize| &reports[i].1;
    // The cut east zone: its primary is judged dead and the west follower promoted in epoch 1.
    for i in [0, 1] {
        assert!(report_of(i).contains("FAULT zone east partitioned"), "{}", report_of(i));
        assert!(
            report_of(i).lines().any(|l| l.contains("PROMOTION (") && l.contains("s1: epoch 1 primary n2")),
            "{}",
            report_of(i)
        );
    }
    // No failover across zones: while n1 is down nothing is promoted, and writes wait for it.
    let no_failover = report_of(2);
    assert!(no_failover.contains("FAULT crash n1"), "{no_failover}");
    assert_eq!(number_after(no_failover, "INFO, since its last start): "), 0, "{no_failover}");
    assert!(number_after(no_failover, "unclean), ") >= 1, "blocked failovers:\n{no_failover}");
    // Both replicas of in-sync-unclean crash, one after the other.
    for i in [3, 4] {
        assert!(
            report_of(i).contains("FAULT crash n1") && report_of(i).contains("FAULT crash n2"),
            "{}",
            report_of(i)
        );
    }
    // With fencing, no deposed primary's write is ever acknowledged.
    let fencing = report_of(5);
    assert!(fencing.contains("FAULT link a<->c degraded to 600ms one way"), "{fencing}");
    assert_eq!(
        number_after(fencing, "writes acked by a deposed primary after a newer epoch's: "),
        0,
        "{fencing}"
    );
}

#[test]
fn the_failover_manager_crashes_and_restarts_from_what_it_saved() {
    // The manager crashes after the primary: the new one fails over from `manager-state`,
    // and what was acknowledged before either crash is read back.
    let out = store_run("tests/data/leader-coordinator-crash.toml", None, Some("crash:n1,crash:coordinator"));
    let report = text(&out);
    agrees_where_the_model_holds(&report, &out);
    assert!(report.contains("FAULT the coordinator crashes and restarts with what it saved"), "{report}");
    assert!(report.contains("s1: epoch 1 primary n2"), "the restarted manager failed n1 over:\n{report}");
    assert!(number_after(&report, "operations: ") >= 5, "{report}");
    assert_eq!(number_after(&report, "acked writes lost: "), 0, "{report}");
}

#[test]
fn a_leader_model_at_another_time_scale_runs_its_durations_scaled() {
    // 50 ms per 100 ms tick: the store runs the variant's policy with every duration halved,
    // and the run still agrees with the model.
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "store",
            "run",
            "models/async-failover.toml",
            "--variant",
            "semi-sync",
            "--faults",
            "crash:n1",
        ])
        .args(["--time-scale", "50", "--duration", "3s", "--model-verdicts", "declared"])
        .output()
        .expect("run replicheck");
    let report = text(&out);
    agrees_where_the_model_holds(&report, &out);
    assert!(report.contains("1 tick = 50 ms (model tick 100 ms)"), "{report}");
    assert!(
        report.contains("replica_lag_timeout 250 ms, dead_after 200 ms, heartbeat_interval 100 ms"),
        "{report}"
    );
    assert!(report.contains("PROMOTION (1 since the last look): s1: epoch 1 primary n2"), "{report}");
}

/// Refused before anything starts, naming the flag, file and key: a policy file that changes
/// a leader model's family (for `check` as for `store run`: the world and the store are the
/// family's), a trace or decision log the leader store does not keep, and load flags out of
/// range.
#[test]
fn what_a_leader_run_cannot_do_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let quorum = dir.path().join("quorum.toml");
    std::fs::write(&quorum, "replication = \"quorum\"\n").unwrap();
    let quorum = quorum.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .expect("run replicheck");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let family = format!("{quorum}: key `replication` = \"quorum\": a policy may not change the protocol family of models/async-failover.toml (its [policy] runs `replication = \"leader\"`)");
    for args in [
        &["check", "models/async-failover.toml", "--policy", quorum][..],
        &["store", "run", "models/async-failover.toml", "--policy", quorum, "--model-verdicts", "skip"][..],
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&family), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let trace = dir.path().join("t.jsonl");
    let (code, stderr) =
        run(&["store", "run", "models/unfenced-primary.toml", "--trace", trace.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--trace: models/unfenced-primary.toml runs the leader family"), "{stderr}");
    assert!(!trace.exists());
    let (code, stderr) = run(&["store", "run", "models/unfenced-primary.toml", "--clients", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--clients 0: must be 1 to 64"), "{stderr}");
}
