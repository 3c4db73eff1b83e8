//! `replicheck conform LOG` through the real binary: a log written by the store's decision
//! wrappers conforms (exit 0 with the count); the same log with one output changed fails
//! naming that line, its inputs and both outputs (exit 1); a line that is not a decision is bad
//! input (exit 2 naming file:line).
//!
//! The log is written by `store::decision`'s wrappers, the functions the store calls for every
//! decision, driven through a coordinator's and a client's decisions under the `incident`
//! policy of `models/ack-timeout-eviction.toml` (coupled detection, eviction on).

use replicheck::config::Scenario;
use replicheck::policy::detector::Health;
use replicheck::policy::eviction::{Candidate, ClusterView};
use replicheck::policy::retry::RetryDecision;
use replicheck::store::decision::{self, DecisionLog};
use std::path::Path;
use std::process::{Command, Output};

fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run replicheck")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Write a log the way the store does: a coordinator that reads, sees a replica miss its
/// deadline, and evicts it; a client that retries. Returns the number of lines.
fn write_log(path: &Path) -> usize {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ack-timeout-eviction.toml");
    let scenario = Scenario::load(&model).expect("the model loads");
    let policy =
        scenario.variant("incident").expect("variant incident").policy.resolve_ms().expect("resolves");
    let log = DecisionLog::create(path, "coordinator").expect("create the log");
    let mut lines = 0;
    for (i, versions) in [vec![3u64, 5], vec![5, 5, 4], vec![]].iter().enumerate() {
        let replies: Vec<(u64, usize)> = versions.iter().map(|v| (*v, i)).collect();
        decision::read_result(&log, &replies);
        lines += 1;
    }
    for answers in 0..=3 {
        decision::quorum_reached(&log, answers, policy.write_quorum);
        lines += 1;
    }
    let miss = decision::health_after_deadline_miss(&log, 2, policy.failure_detection);
    assert_eq!(miss, Some(Health::Dead), "the incident policy couples detection to deadlines");
    lines += 1;
    for silence_ms in [0, 2_999, 3_000, 5_000, 12_000] {
        decision::health_from_silence(
            &log,
            1,
            silence_ms,
            policy.suspect_after_ticks,
            policy.dead_after_ticks,
        );
        lines += 1;
    }
    let candidates: Vec<Candidate> = (0..4)
        .map(|node| Candidate { node, zone: node % 3, health: Health::Alive, is_member: node < 3 })
        .collect();
    for dead_nodes in 1..=3 {
        let view = ClusterView { dead_nodes, total_nodes: 4, evictions_in_progress: dead_nodes - 1 };
        decision::decide_eviction(&log, 2, policy.eviction, view, 2, &candidates);
        decision::breaker_allows(&log, view, policy.eviction.max_dead_fraction_permille);
        lines += 2;
    }
    let client = log.with_actor("client-0");
    let mut attempts = 1;
    while let RetryDecision::RetryAfter { .. } =
        decision::after_failure(&client, &policy.retry, attempts, attempts - 1)
    {
        attempts += 1;
        lines += 1;
    }
    lines += 1;
    for (token, next) in [(None, 7u64), (Some(6), 8)] {
        decision::version_for_attempt(&client, policy.retry.idempotency_tokens, token, next);
        lines += 1;
    }
    log.flush().expect("flush the log");
    lines
}

#[test]
fn a_real_log_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    let lines = write_log(&path);
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains(&format!("{lines} decisions, every one as src/policy decides")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn one_tampered_output_fails_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    // Claim that 12 s of silence left node 1 alive.
    let (index, original) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(r#""silence_ticks":12000"#))
        .expect("the line exists");
    assert!(original.ends_with(r#""output":"dead"}"#), "{original}");
    let tampered: Vec<String> =
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                if i == index {
                    l.replace(r#""output":"dead""#, r#""output":"alive""#)
                } else {
                    l.to_string()
                }
            })
            .collect();
    std::fs::write(&path, tampered.join("\n") + "\n").unwrap();
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    assert!(
        report.contains(&format!("{}:{}: health_from_silence does not conform", path.display(), index + 1)),
        "{report}"
    );
    assert!(report.contains(r#""silence_ticks":12000"#), "{report}");
    assert!(report.contains("logged:     \"alive\""), "{report}");
    assert!(report.contains("recomputed: \"dead\""), "{report}");
}

#[test]
fn a_malformed_line_is_bad_input_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    write_log(&path);
    let mut text = std::fs::read_to_string(&path).unwrap();
    let lines = text.lines().count();
    text.push_str("{\"seq\": 99, \"actor\": \"coordinator\"\n");
    std::fs::write(&path, text).unwrap();
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let expected = format!("replicheck: error: {}:{}: not a decision", path.display(), lines + 1);
    assert!(stderr(&out).starts_with(&expected), "{}", stderr(&out));
}

#[test]
fn a_missing_log_is_bad_input() {
    let out = replicheck(&["conform", "no/such/decisions.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/decisions.jsonl: cannot read file"), "{}", stderr(&out));
}
