//! `replicheck conform LOG` through the real binary, on a log laid out as the store writes it:
//! the clients' retry decisions (`store::decision::after_failure`, replayed through
//! `src/policy`) between the coordinator's protocol event lines (`DecisionLog::event`, counted
//! and skipped: they are the checked state machine's own steps).
//!
//! - the log conforms: exit 0 with both counts;
//! - one retry decision's output changed: exit 1 naming that line, its inputs and both outputs;
//! - an event's text changed: still conforms (events are not replayed), same counts;
//! - a line that is neither a decision nor an event (a malformed line, or a coordinator
//!   decision of the kind older logs held): exit 2 naming file:line;
//! - a missing file: exit 2.
//!
//! The retry policies are those of `models/ack-timeout-eviction.toml`: `incident` (fixed
//! backoff, 2 attempts) and `fixed` (exponential backoff with jitter).

use replicheck::config::Scenario;
use replicheck::policy::retry::{RetryDecision, RetryPolicy};
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

fn retry_policy(variant: &str) -> RetryPolicy {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ack-timeout-eviction.toml");
    let scenario = Scenario::load(&model).expect("the model loads");
    let variant = scenario.variant(variant).unwrap_or_else(|| panic!("variant {variant}"));
    variant.policy.resolve_ms().expect("resolves").retry
}

/// What `conform` should count in a log.
struct Written {
    decisions: usize,
    events: usize,
}

/// Write a log the way the store does: the coordinator's event lines (texts as
/// `store/coordinator/shell.rs` writes them) and, between them, two clients retrying until the
/// policy gives up.
fn write_log(path: &Path) -> Written {
    let log = DecisionLog::create(path, "coordinator").expect("create the log");
    let mut written = Written { decisions: 0, events: 0 };
    let mut event = |text: &str| {
        log.event(text);
        written.events += 1;
    };
    event("write_acked shard=0 version=1");
    event("declared_dead node=2 deadline_missed=true");
    event("change_requested shard=0 evicted=2 replacement=3 move=false");
    for (client, variant) in ["incident", "fixed"].into_iter().enumerate() {
        let policy = retry_policy(variant);
        let client_log = log.with_actor(&format!("client-{client}"));
        let mut attempts = 1;
        loop {
            let retry = decision::after_failure(&client_log, &policy, attempts, attempts - 1);
            written.decisions += 1;
            log.event(&format!("request_failed client={client} attempt={attempts}"));
            written.events += 1;
            match retry {
                RetryDecision::RetryAfter { .. } => attempts += 1,
                RetryDecision::GiveUp => break,
            }
        }
    }
    log.event("change_completed shard=0 evicted=2 replacement=3 move=false");
    written.events += 1;
    log.flush().expect("flush the log");
    assert!(written.decisions >= 4, "each client retried at least once");
    written
}

/// The log's text with line `index` (0-based) replaced by `edit` of it.
fn edit_line(path: &Path, index: usize, edit: impl Fn(&str) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> =
        text.lines().enumerate().map(|(i, l)| if i == index { edit(l) } else { l.to_string() }).collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn conforms_message(written: &Written) -> String {
    format!(
        "{} decisions, every one as src/policy decides; {} protocol events (the checked \
         coordinator's own steps, not replayed)",
        written.decisions, written.events
    )
}

#[test]
fn a_store_log_conforms_with_decisions_replayed_and_events_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    let written = write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), written.decisions + written.events);
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), format!("{}: {}\n", path.display(), conforms_message(&written)));
}

#[test]
fn one_tampered_retry_decision_fails_naming_the_line_its_inputs_and_both_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    // Claim that client 0 (incident: 2 attempts) retried after its second attempt.
    let index = text
        .lines()
        .position(|l| l.contains(r#""actor":"client-0""#) && l.contains(r#""attempts_made":2"#))
        .expect("client 0's second decision is logged");
    let original = text.lines().nth(index).unwrap().to_string();
    assert!(original.ends_with(r#""output":"give_up"}"#), "{original}");
    let forged = r#""output":{"retry_after":{"earliest_ticks":500,"latest_ticks":500}}"#;
    edit_line(&path, index, |l| l.replace(r#""output":"give_up""#, forged));
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let report = stdout(&out);
    assert!(
        report.starts_with(&format!("{}:{}: after_failure does not conform\n", path.display(), index + 1)),
        "{report}"
    );
    let inputs = report.lines().find(|l| l.starts_with("  inputs:")).expect("an inputs line");
    for field in [
        r#""decision":"after_failure""#,
        r#""attempts_made":2"#,
        r#""retries_used":1"#,
        r#""max_attempts":2"#,
    ] {
        assert!(inputs.contains(field), "{field} in {inputs}");
    }
    assert!(!inputs.contains("output"), "{inputs}");
    assert!(
        report.contains(r#"  logged:     {"retry_after":{"earliest_ticks":500,"latest_ticks":500}}"#),
        "{report}"
    );
    assert!(report.contains("  recomputed: \"give_up\""), "{report}");
}

#[test]
fn an_edited_event_is_not_replayed_and_still_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    let written = write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let index = text.lines().position(|l| l.contains("declared_dead node=2")).expect("the event");
    edit_line(&path, index, |l| l.replace("node=2", "node=1"));
    let out = replicheck(&["conform", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(&conforms_message(&written)), "{}", stdout(&out));
}

#[test]
fn a_line_that_is_neither_a_decision_nor_an_event_is_bad_input_naming_file_and_line() {
    let coordinator_decision = r#"{"seq":99,"elapsed_ms":5,"actor":"coordinator","decision":"health_from_silence","node":2,"silence_ticks":5100,"suspect_after_ticks":3000,"dead_after_ticks":5000,"output":"dead"}"#;
    let cases = [
        ("{\"seq\": 99, \"actor\": \"coordinator\"", "neither a decision nor an event"),
        (
            r#"{"seq":99,"elapsed_ms":5,"actor":"coordinator","event":"write_acked","shard":0}"#,
            "missing field `decision`",
        ),
        (coordinator_decision, "health_from_silence"),
    ];
    for (bad, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        write_log(&path);
        let mut text = std::fs::read_to_string(&path).unwrap();
        let lines = text.lines().count();
        text.push_str(bad);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        let out = replicheck(&["conform", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
        let expected =
            format!("replicheck: error: {}:{}: neither a decision nor an event", path.display(), lines + 1);
        assert!(stderr(&out).starts_with(&expected), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{bad}: {}", stderr(&out));
    }
}

#[test]
fn a_missing_log_is_bad_input() {
    let out = replicheck(&["conform", "no/such/decisions.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(stderr(&out).contains("no/such/decisions.jsonl: cannot read file"), "{}", stderr(&out));
}
