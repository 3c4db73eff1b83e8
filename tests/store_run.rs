//! `replicheck store run` on the ack-timeout incident (`models/ack-timeout-eviction.toml`),
//! through the real binary: node processes, proxies with the model's latencies, the model's
//! fault menu (the a<->b link degraded to 300-700ms one way, a lossy client link), client load,
//! heal, check. Each run lasts 3 s of load at the model's 100 ms tick.
//!
//! `incident` (a 500ms ack deadline that doubles as the failure detector) must evict a replica
//! that was only slow; `fixed` (heartbeat detection, dead after 3s of silence) must evict none.
//! The model's verdicts are the variants' declared ones (`--model-verdicts declared`): exploring
//! `fixed` takes over a minute, and `tests/models.rs` already checks them.

use std::process::{Command, Output};

fn store_run(variant: &str, log: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["store", "run", "models/ack-timeout-eviction.toml", "--variant", variant])
        .args(["--duration", "3s", "--model-verdicts", "declared", "--decision-log"])
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
        std::thread::spawn(move || store_run("fixed", &log))
    };
    let out = store_run("incident", &incident_log);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("FAULT link a<->b degraded to 300ms..700ms one way"), "{report}");
    assert!(number_after(&report, "deadline misses taken as death: ") >= 1, "{report}");
    assert!(healthy_evictions(&report) >= 1, "{report}");
    assert!(report.contains("evict n2 -> n4: healthy"), "{report}");
    assert_eq!(property_row(&report, "no_healthy_eviction")[1..3], ["violated", "violated"], "{report}");
    assert_eq!(number_after(&report, "acked writes lost: "), 0, "{report}");
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
}
