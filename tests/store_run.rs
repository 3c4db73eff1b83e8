//! `replicheck store run` on the ack-timeout incident (`models/ack-timeout-eviction.toml`),
//! and on the capacity and rebalancer models (the store's verdicts against the model's),
//! through the real binary: node processes, proxies with the model's latencies, the model's
//! fault menu (the a<->b link degraded to 300-700ms one way, a lossy client link), client load,
//! heal, check. Each run lasts 5 s of load at the model's 100 ms tick, the two side by side.
//!
//! `incident` (a 500ms ack deadline that doubles as the failure detector) must evict a replica
//! that was only slow; `fixed` (heartbeat detection, dead after 3s of silence) must evict none.
//! Why 5 s and one client for `incident`: a replica is declared dead only when a write's 500 ms deadline
//! passes with nothing heard from it since the write left (slow is not failed), so a steady
//! stream of late replies from the slow replica hides its slowness. One client in a closed loop
//! leaves gaps in that stream: 2 deaths in each of 9 runs (2 clients: 1-3; 4 clients: 1 each
//! time, and a CI run saw 0).
//! The model's verdicts are the variants' declared ones (`--model-verdicts declared`): checking
//! `fixed` explores 4 million states (about 16 s on two cores), and CI checks the library anyway.

use std::process::{Command, Output};

fn store_run(variant: &str, clients: &str, log: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", variant])
        .args(["--duration", "5s", "--clients", clients, "--model-verdicts", "declared", "--decision-log"])
        .arg(log)
        .output()
        .expect("run replicheck")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The number after `label` in the report, e.g. `evictions: 2 (2 healthy)` -> ("evictions: ", 2).
fn number_after(report: &str, label: &str) -> u64 {
    let start = report.find(label).unwrap_or_else(|| panic!("no `{label}` in:\n{report}")) + label.len();
    report[start..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().expect("a number")
}

fn healthy_evictions(report: &str) -> u64 {
    let evictions = number_after(report, "; evictions: ");
    let healthy = number_after(report, &format!("; evictions: {evictions} ("));
    assert!(healthy <= evictions);
    healthy
}

fn property_row<'a>(report: &'a str, property: &str) -> Vec<&'a str> {
    let line = report
        .lines()
        .find(|l| l.starts_with(property))
        .unwrap_or_else(|| panic!("no row for {property} in:\n{report}"));
    line.split_whitespace().collect()
}

fn conform(log: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck")).arg("conform").arg(log).output().expect("run conform")
}

#[test]
fn incident_evicts_healthy_replicas_and_fixed_evicts_none() {
    let dir = tempfile::tempdir().unwrap();
    let incident_log = dir.path().join("incident.jsonl");
    let fixed_log = dir.path().join("fixed.jsonl");
    // Both runs at once (ephemeral ports, separate directories): half the wall time.
    let fixed_run = {
        let log = fixed_log.clone();
        // `fixed` under four clients: evicting none is the stronger claim under more load.
        std::thread::spawn(move || store_run("fixed", "4", &log))
    };
    let out = store_run("incident", "1", &incident_log);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("FAULT link a<->b degraded to 300ms..700ms one way"), "{report}");
    assert!(number_after(&report, "deadline misses taken as death: ") >= 1, "{report}");
    assert!(healthy_evictions(&report) >= 1, "{report}");
    assert!(report.contains("evict n2 -> n4 in s1: healthy"), "{report}");
    // The store's own messages give the model's name beside its 0-based node number.
    assert!(
        report.contains("eviction of node 1 (n2) from partition s1 requested, replacement node 3 (n4)"),
        "{report}"
    );
    assert_eq!(property_row(&report, "no_healthy_eviction")[1..3], ["violated", "violated"], "{report}");
    assert_eq!(number_after(&report, "acked writes lost: "), 0, "{report}");
    // Evictions the policy asked for, less those a full membership queue dropped, are the
    // ones the coordinator took on (INFO); a dropped one violates `churn_bounded`, as in the
    // model, where the budget is the queue.
    let dropped = number_after(&report, "changes dropped by a full queue: ");
    assert_eq!(
        number_after(&report, "; evictions: ") - dropped,
        number_after(&report, "INFO (changes taken on): evictions "),
        "{report}"
    );
    let churn = if dropped > 0 { "violated" } else { "holds" };
    assert_eq!(property_row(&report, "churn_bounded")[1], churn, "{report}");
    // Every decision of the run, the clients' retries included, is the policy's.
    let replay = conform(&incident_log);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));

    let out = fixed_run.join().expect("the fixed run");
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("FAULT link a<->b degraded"), "{report}");
    assert_eq!(number_after(&report, "deadline misses taken as death: "), 0, "{report}");
    assert_eq!(number_after(&report, "; evictions: "), 0, "{report}");
    assert_eq!(property_row(&report, "no_healthy_eviction")[1..3], ["holds", "holds"], "{report}");
    assert_eq!(number_after(&report, "acked writes lost: "), 0, "{report}");
    assert_eq!(
        number_after(&report, "duplicate effects (a retried token given a new version): "),
        0,
        "{report}"
    );
    let replay = conform(&fixed_log);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));
}

/// The `nodeN` row of the report's links section, e.g. `n2     max round trip 1402 ms ...`.
fn link_row<'a>(report: &'a str, node: &str) -> &'a str {
    let start =
        report.find("links (measured by the coordinator").unwrap_or_else(|| panic!("no links in:\n{report}"));
    report[start..]
        .lines()
        .find(|l| l.split_whitespace().next() == Some(node))
        .unwrap_or_else(|| panic!("no link row for {node} in:\n{report}"))
}

/// `fixed` over 9 s (4 s with the a<->b link degraded): replies from n2 and n4 take up to
/// 1.4 s, beyond the 500 ms ack deadline and the 1 s heartbeat, but any message heard, late or
/// not, is proof of life, as in the model: no node is ever judged dead (none is crashed or cut
/// off here), nothing is evicted, and every verdict is the model's.
#[test]
fn fixed_hears_replicas_slower_than_its_deadlines_and_judges_none_dead() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixed.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", "fixed"])
        .args(["--duration", "9s", "--clients", "4", "--seed", "2", "--model-verdicts", "declared"])
        .arg("--decision-log")
        .arg(&log)
        .output()
        .expect("run replicheck");
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("FAULT link a<->b degraded to 300ms..700ms one way"), "{report}");
    assert_eq!(number_after(&report, "; evictions: "), 0, "{report}");
    for property in
        ["acked_writes_persist", "no_duplicate_effects", "no_healthy_eviction", "converges", "ops_complete"]
    {
        let row = property_row(&report, property);
        assert_eq!(row[1], row[2], "{property}: the store disagrees with the model:\n{report}");
    }
    assert_eq!(property_row(&report, "no_healthy_eviction")[1..3], ["holds", "holds"], "{report}");
    let decisions = std::fs::read_to_string(&log).unwrap();
    let dead: Vec<&str> = decisions.lines().filter(|l| l.contains(r#""event":"declared_dead"#)).collect();
    assert!(dead.is_empty(), "slow is not dead:\n{}\n{report}", dead.join("\n"));
    // Every request's fate, late replies included, is one the model's environment allows.
    assert!(
        report.contains("trace: every request's fate is a behaviour of model ack-timeout-eviction"),
        "{report}"
    );
    // The degraded replica's write acks missed the 500 ms deadline and were still heard; no
    // zone-b node was silent for dead_after (3 s).
    let n2 = link_row(&report, "n2");
    let late_replies: u64 =
        n2.split(", ").last().and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(late_replies >= 1, "{n2}\n{report}");
    for node in ["n2", "n4"] {
        assert!(number_after(link_row(&report, node), "max silence ") < 3000, "{report}");
    }
    let replay = conform(&log);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));
}

#[test]
fn bad_arguments_are_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", "incidnt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("no variant \"incidnt\" (variants: incident, rollback, fixed)"),
        "{}",
        text(&out)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--time-scale", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--time-scale 0: must be 1 to 10000 ms per tick"), "{}", text(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "store",
            "run",
            "models/ack-timeout-eviction.toml",
            "--policy",
            "examples/policies/ack-timeout-500ms.toml",
        ])
        .args(["--model-verdicts", "declared"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--model-verdicts declared needs a --variant"), "{}", text(&out));
    assert!(!text(&out).contains("timeline"), "rejected before running: {}", text(&out));
    // With a capacity, each model client is one thread: another count is not silently dropped.
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/capacity-routing-two-routers.toml", "--clients", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("--clients 8: models/capacity-routing-two-routers.toml has a capacity, so each of its 3 clients is played by one thread"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("timeline"), "rejected before running: {}", text(&out));
}

/// `store run MODEL --variant V` with the variant's declared verdicts, keeping its log.
fn run_variant(model: &str, variant: &str, duration: &str, log: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", model, "--variant", variant, "--duration", duration])
        .args(["--model-verdicts", "declared", "--decision-log"])
        .arg(log)
        .output()
        .expect("run replicheck")
}

/// Run two variants of a model side by side; for each, the store's verdict of every listed
/// property must be the model's, and the decision log must conform.
fn store_agrees_with_the_model(
    model: &str,
    variants: [&str; 2],
    duration: &str,
    properties: &[&str],
) -> [String; 2] {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = variants
        .iter()
        .map(|variant| {
            let (model, variant, duration) = (model.to_string(), variant.to_string(), duration.to_string());
            let log = dir.path().join(format!("{variant}.jsonl"));
            std::thread::spawn(move || (run_variant(&model, &variant, &duration, &log), log))
        })
        .collect();
    let mut reports = Vec::new();
    for (run, variant) in runs.into_iter().zip(variants) {
        let (out, log) = run.join().expect("a store run");
        let report = text(&out);
        assert_eq!(out.status.code(), Some(0), "{variant}:\n{report}");
        for property in properties {
            let row = property_row(&report, property);
            assert_eq!(
                row[1], row[2],
                "{variant}: {property}: the store disagrees with the model:\n{report}"
            );
        }
        let replay = conform(&log);
        assert_eq!(replay.status.code(), Some(0), "{variant}: {}", text(&replay));
        assert!(
            report.contains("trace: every request's fate is a behaviour of model"),
            "{variant}:\n{report}"
        );
        reports.push(report);
    }
    reports.try_into().expect("two reports")
}

#[test]
fn hot_partition_incident_storms_against_the_store_and_fixed_does_not() {
    let [incident, fixed] = store_agrees_with_the_model(
        "models/hot-partition-retry-storm.toml",
        ["incident", "fixed"],
        "4s",
        &["capacity_respected", "ops_complete", "acked_writes_persist", "linearizable"],
    );
    assert_eq!(property_row(&incident, "capacity_respected")[1], "violated", "{incident}");
    assert_eq!(property_row(&incident, "ops_complete")[1], "violated", "{incident}");
    assert!(incident.contains("first: partition p1 offered 3 > capacity 2"), "{incident}");
    assert!(number_after(&incident, "operations begun before the heal and still retried at the end: ") >= 1);
    assert_eq!(property_row(&fixed, "capacity_respected")[1], "holds", "{fixed}");
    assert_eq!(number_after(&fixed, "capacity: "), 0, "{fixed}");
}

#[test]
fn capacity_routing_overloads_a_backend_until_both_changes_are_reverted() {
    let [sorting_only, fixed] = store_agrees_with_the_model(
        "models/capacity-routing-bypass.toml",
        ["sorting-only", "fixed"],
        "3s",
        &["capacity_respected", "ops_complete", "acked_writes_persist"],
    );
    assert!(sorting_only.contains("first: backend n1 (node 0) offered 4 > capacity 3"), "{sorting_only}");
    assert_eq!(property_row(&fixed, "capacity_respected")[1], "holds", "{fixed}");
}

/// Each router counts only the writes it placed: at a spill threshold of 100% both take n1's
/// one free slot in the same window. The store sees the breach as the model does, in what n1
/// takes from both routers together; spilling at 80% leaves room for the other router.
#[test]
fn two_routers_overfill_a_backend_that_each_sees_room_in() {
    let dir = tempfile::tempdir().unwrap();
    let model = "models/capacity-routing-two-routers.toml";
    let runs: Vec<_> = ["fixed-full", "fixed"]
        .into_iter()
        .map(|variant| {
            let log = dir.path().join(format!("{variant}.jsonl"));
            std::thread::spawn(move || run_variant(model, variant, "4s", &log))
        })
        .collect();
    let [full, fixed]: [String; 2] = runs
        .into_iter()
        .map(|run| text(&run.join().expect("a store run")))
        .collect::<Vec<_>>()
        .try_into()
        .expect("two reports");
    assert_eq!(property_row(&full, "capacity_respected")[1..], ["violated", "violated"], "{full}");
    assert!(full.contains("first: backend n1 (node 0) offered 4 > capacity 3"), "{full}");
    assert_eq!(property_row(&fixed, "capacity_respected")[1..], ["holds", "holds"], "{fixed}");
    assert_eq!(number_after(&fixed, "capacity: "), 0, "{fixed}");
    for report in [&full, &fixed] {
        assert_eq!(property_row(report, "acked_writes_persist")[1], "holds", "{report}");
        // Both routers' requests, each judged on the links from its own zone.
        assert!(
            report
                .contains("trace: every request's fate is a behaviour of model capacity-routing-two-routers"),
            "{report}"
        );
    }
}

#[test]
fn the_oscillating_rebalancer_never_settles_and_fixed_does() {
    let [incident, fixed] = store_agrees_with_the_model(
        "models/rebalancer-compaction.toml",
        ["incident", "fixed"],
        "6s",
        &["converges", "churn_bounded", "acked_writes_persist"],
    );
    assert_eq!(property_row(&incident, "converges")[1], "violated", "{incident}");
    assert!(number_after(&incident, "moves: ") >= 3, "{incident}");
    assert_eq!(property_row(&fixed, "converges")[1], "holds", "{fixed}");
    assert_eq!(number_after(&fixed, "moves: "), 0, "{fixed}");
}

#[test]
fn the_history_is_written_as_edn_that_history_check_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let edn = dir.path().join("fixed.edn");
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "store",
            "run",
            "models/hot-partition-retry-storm.toml",
            "--variant",
            "fixed",
            "--duration",
            "2s",
        ])
        .args(["--model-verdicts", "skip", "--history"])
        .arg(&edn)
        .output()
        .expect("run replicheck");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("history (Jepsen EDN"), "{}", text(&out));
    let edn_text = std::fs::read_to_string(&edn).expect("the history file");
    assert!(
        edn_text.contains(":type :invoke, :f :put") && edn_text.contains(":type :ok, :f :get"),
        "{edn_text}"
    );
    let check = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["history", "check"])
        .arg(&edn)
        .output()
        .expect("run replicheck");
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    assert!(String::from_utf8_lossy(&check.stdout).contains("linearizable"), "{}", text(&check));
    assert!(!dir.path().join("fixed.html").exists(), "a picture only of a history that is not linearizable");
}

/// A shell that drops replies arriving after their ack deadline (what the store did before its
/// coordinator was the protocol's, and the cause of its healthy evictions under `fixed`):
/// the run's trace names the first request whose reply never reached the machine although
/// the model's latencies bring it back, and `conform TRACE --model` names the same line.
#[test]
fn a_shell_that_drops_late_replies_is_named_by_trace_validation() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("REPLICHECK_SHELL_FAULT", "drop_late_replies")
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", "fixed"])
        .args(["--duration", "5s", "--clients", "4", "--model-verdicts", "declared", "--trace"])
        .arg(&trace)
        .output()
        .expect("run replicheck");
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let line = report
        .lines()
        .find(|l| l.starts_with("trace: line "))
        .unwrap_or_else(|| panic!("the trace conforms although late replies were dropped:\n{report}"));
    assert!(line.contains("never reached the coordinator's machine"), "{line}");
    let step: String = line["trace: line ".len()..].chars().take_while(char::is_ascii_digit).collect();
    let again = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("conform")
        .arg(&trace)
        .args(["--model", "models/ack-timeout-eviction.toml", "--variant", "fixed"])
        .output()
        .expect("run conform");
    let verdict = text(&again);
    assert_eq!(again.status.code(), Some(1), "{verdict}");
    assert!(
        verdict.contains(&format!(": line {step} is not a behaviour of model ack-timeout-eviction")),
        "{verdict}"
    );
}

/// `coordinator` in the model's crash menu: the run crashes the coordinator in place (it
/// decides, saves, sends and answers nothing more) and starts a new one from what it saved,
/// with two nodes down. The replica sets are persisted (the default), so no acknowledged write
/// is lost or read stale, and the requests the crash cut off are losses the model allows.
#[test]
fn a_coordinator_crash_in_the_fault_menu_restarts_it_from_what_it_saved() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("default.jsonl");
    let out = run_variant("models/coordinator-restart.toml", "default", "8s", &log);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("FAULT the coordinator crashes and restarts with what it saved"), "{report}");
    assert!(
        report.contains("trace: every request's fate is a behaviour of model coordinator-restart"),
        "{report}"
    );
    assert_eq!(number_after(&report, "acked writes lost: "), 0, "{report}");
    for property in ["acked_writes_persist", "linearizable", "no_healthy_eviction"] {
        assert_eq!(property_row(&report, property)[1], "holds", "{property}:\n{report}");
    }
}

#[test]
fn an_interrupted_run_heals_checks_and_reports_what_ran_and_leaves_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TMPDIR", tmp.path())
        .args([
            "store",
            "run",
            "models/basic-quorum.toml",
            "--duration",
            "60s",
            "--model-verdicts",
            "declared",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run replicheck");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let report = text(&out);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "took {:?} after SIGTERM",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert!(report.contains("INTERRUPTED by a signal"), "{report}");
    assert!(report.contains("operations: "), "{report}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The run report's timeline, the decision log and the trace count from one moment (the
/// run's start): the first fault and the heal are at the same millisecond in the report and in
/// the trace (one reading of the clock for both, however long applying the fault takes). (The trace used to count from inside the cluster's start, some hundreds of ms
/// later, so a send "at 881 ms" in a trace verdict and "n1 restarts at 1223 ms" on the timeline
/// were on two clocks.)
#[test]
fn the_timeline_and_the_trace_read_one_clock() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", "fixed"])
        .args(["--duration", "3s", "--clients", "2", "--model-verdicts", "declared", "--trace"])
        .arg(&trace)
        .output()
        .expect("run replicheck");
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let at = |marker: &str| -> u64 {
        let line =
            report.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("no {marker}:\n{report}"));
        line.split_whitespace().next().unwrap().parse().expect("the timeline's ms")
    };
    let lines = std::fs::read_to_string(&trace).unwrap();
    let faults: Vec<(u64, String)> = lines
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let f = v.get("fault")?;
            Some((f["at_ms"].as_u64()?, f["fault"].to_string()))
        })
        .collect();
    let first = faults.first().expect("the trace records the faults");
    let heal = faults.iter().find(|(_, f)| f == "\"heal\"").expect("the trace records the heal");
    for ((trace_ms, what), report_ms) in [(first, at("  FAULT ")), (heal, at("  HEAL "))] {
        assert_eq!(*trace_ms, report_ms, "{what}: trace {trace_ms} ms, timeline {report_ms} ms");
    }
}
