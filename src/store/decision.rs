//! The store's decision log: the client's retry decisions, replayed by `replicheck conform LOG`,
//! and the coordinator's protocol events beside them.
//!
//! The coordinator is the protocol's state machine (`src/protocol/coordinator/`, driven by
//! `store/coordinator/shell.rs`): it calls `crate::policy` itself, and the shell records its steps as
//! *event lines* ([`DecisionLog::event`]). Those are the checked code's own outputs, so there
//! is nothing to replay: `conform` counts them and skips them.
//!
//! The one decision the store still makes outside the machine is the client's retry: the
//! client calls [`after_failure`], which calls `policy::retry::after_failure`, appends one JSON
//! line with its inputs and output, and returns the output. `conform` replays each such line
//! through `crate::policy` ([`Decision::replay`]): a log that conforms holds exactly the retry
//! decisions the checked policy code makes on the same inputs.
//!
//! A decision line and an event line:
//!
//! ```text
//! {"seq":7,"elapsed_ms":1203,"actor":"client-0","decision":"after_failure","policy":{...},
//!  "attempts_made":1,"retries_used":0,"output":{"retry_after":{"earliest_ticks":10,"latest_ticks":20}}}
//! {"seq":8,"elapsed_ms":1210,"actor":"coordinator","event":"declared_dead node=2 silence_ms=5100"}
//! ```
//!
//! Fields named `_ticks` are in the policy's time unit: real milliseconds in `store up` (the
//! policy is resolved with a 1 ms tick), model ticks in `store run`.

use crate::policy::retry::{self, RetryDecision, RetryPolicy};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
// tokio's: the simulated store (`store sim`) runs on its paused clock; elsewhere the same as std's.
use tokio::time::Instant;

/// One call of a policy function: its inputs and its output. One variant per function the
/// store calls outside the protocol's machine (today only the client's retry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decision {
    /// `retry::after_failure`.
    AfterFailure { policy: RetryPolicy, attempts_made: u8, retries_used: u8, output: RetryDecision },
}

impl Decision {
    /// The policy function's name, as in the log's `decision` field.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::AfterFailure { .. } => "after_failure",
        }
    }

    /// This decision with its output recomputed from its inputs by `crate::policy`.
    /// Inputs that break the policy function's precondition (which the store never produces,
    /// but an edited log may hold) are an error, not a panic.
    pub fn replay(&self) -> Result<Decision, String> {
        let fail = |why: &str| Err(format!("inputs break {}'s precondition: {why}", self.name()));
        let mut replayed = self.clone();
        match &mut replayed {
            Decision::AfterFailure { policy, attempts_made, retries_used, output } => {
                if *attempts_made == 0 {
                    return fail("attempts_made is 0");
                }
                if policy.backoff_base_ticks > policy.backoff_max_ticks {
                    return fail("backoff_base_ticks > backoff_max_ticks");
                }
                *output = retry::after_failure(policy, *attempts_made, *retries_used)
            }
        }
        Ok(replayed)
    }

    /// The logged output, as JSON.
    pub fn output_json(&self) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).expect("a decision serializes");
        doc.get_mut("output").map(serde_json::Value::take).unwrap_or(serde_json::Value::Null)
    }

    /// The inputs (and context) without the output, as JSON.
    pub fn inputs_json(&self) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).expect("a decision serializes");
        if let Some(map) = doc.as_object_mut() {
            map.remove("output");
        }
        doc
    }
}

/// The client's retry decision (`policy::retry::after_failure`), logged.
pub fn after_failure(
    log: &DecisionLog,
    policy: &RetryPolicy,
    attempts_made: u8,
    retries_used: u8,
) -> RetryDecision {
    let output = retry::after_failure(policy, attempts_made, retries_used);
    log.log(Decision::AfterFailure { policy: *policy, attempts_made, retries_used, output });
    output
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// 1, 2, 3, ... in the order the lines were written.
    pub seq: u64,
    /// Since the log was opened.
    pub elapsed_ms: u64,
    /// Who decided: "client-3", "client", ...
    pub actor: String,
    #[serde(flatten)]
    pub decision: Decision,
}

/// A protocol event line of the log (see [`DecisionLog::event`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLine {
    pub seq: u64,
    pub elapsed_ms: u64,
    pub actor: String,
    /// `change_requested shard=0 evicted=1 replacement=3 move=false`, ...
    pub event: String,
}

/// Whether a log line is a protocol event rather than a decision.
pub fn is_event_line(raw: &str) -> bool {
    serde_json::from_str::<EventLine>(raw).is_ok()
}

struct Sink {
    out: Box<dyn Write + Send>,
    seq: u64,
    /// The first write error; later lines are dropped and `flush` reports it.
    failed: Option<io::Error>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        if self.failed.is_none() {
            // Nothing to report to in a destructor; `DecisionLog::flush` reports errors.
            let _ = self.out.flush();
        }
    }
}

/// A decision log: JSON lines, buffered, shared by every thread of a process (clones write to
/// the same sink under one lock, so `seq` follows the order of the lines). Flushed when the
/// last clone is dropped, and by [`DecisionLog::flush`].
#[derive(Clone)]
pub struct DecisionLog {
    sink: Option<Arc<Mutex<Sink>>>,
    started: Instant,
    actor: Arc<str>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLog").field("on", &self.sink.is_some()).field("actor", &self.actor).finish()
    }
}

impl DecisionLog {
    /// A log that records nothing; [`after_failure`] still calls the policy function.
    pub fn off() -> DecisionLog {
        DecisionLog { sink: None, started: Instant::now(), actor: Arc::from("coordinator") }
    }

    /// A log written to `path` (created or truncated), with lines from `actor`.
    pub fn create(path: &Path, actor: &str) -> io::Result<DecisionLog> {
        let file = File::create(path)?;
        Ok(DecisionLog::to_writer(Box::new(BufWriter::with_capacity(64 * 1024, file)), actor))
    }

    /// A log written to any writer (buffer it yourself if it is slow).
    pub fn to_writer(out: Box<dyn Write + Send>, actor: &str) -> DecisionLog {
        let sink = Sink { out, seq: 0, failed: None };
        DecisionLog {
            sink: Some(Arc::new(Mutex::new(sink))),
            started: Instant::now(),
            actor: Arc::from(actor),
        }
    }

    /// The same log, its milliseconds counted from `epoch` (a moment before now) instead of
    /// its creation.
    pub fn counting_from(self, epoch: impl Into<Instant>) -> DecisionLog {
        let epoch = epoch.into();
        assert!(epoch <= Instant::now(), "a log counts from a moment already past");
        DecisionLog { started: epoch, ..self }
    }

    /// The same log, with lines written as `actor`.
    pub fn with_actor(&self, actor: &str) -> DecisionLog {
        DecisionLog { sink: self.sink.clone(), started: self.started, actor: Arc::from(actor) }
    }

    /// Append one decision.
    pub fn log(&self, decision: Decision) {
        self.append(|seq, elapsed_ms, actor| LogLine { seq, elapsed_ms, actor, decision });
    }

    /// Append one protocol event: what the coordinator's state machine did, recorded beside
    /// the decisions (the machine is the code the models check, so there is nothing to replay).
    pub fn event(&self, event: &str) {
        self.append(|seq, elapsed_ms, actor| EventLine { seq, elapsed_ms, actor, event: event.to_string() });
    }

    /// Append the line `line(seq, elapsed_ms, actor)` builds, numbered under the sink's lock.
    fn append<L: Serialize>(&self, line: impl FnOnce(u64, u64, String) -> L) {
        let Some(sink) = &self.sink else { return };
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        // A thread that panicked while holding the lock left at most a partial line behind;
        // keep logging rather than poison every other thread.
        let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if sink.failed.is_some() {
            return;
        }
        sink.seq += 1;
        let line = line(sink.seq, elapsed_ms, self.actor.to_string());
        let mut text = serde_json::to_string(&line).expect("a log line serializes");
        text.push('\n');
        if let Err(e) = sink.out.write_all(text.as_bytes()) {
            sink.failed = Some(e);
        }
    }

    /// Write out buffered lines; reports the first write error since the log was opened.
    pub fn flush(&self) -> io::Result<()> {
        let Some(sink) = &self.sink else { return Ok(()) };
        let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(e) = &sink.failed {
            return Err(io::Error::new(e.kind(), format!("decision log write failed: {e}")));
        }
        sink.out.flush()
    }
}

/// The outcome of replaying a whole log.
#[derive(Debug, PartialEq, Eq)]
pub enum Conformance {
    /// Every decision line replayed to its logged output; `events` protocol event lines were
    /// counted and skipped.
    Conforms { decisions: usize, events: usize },
    /// The first line whose logged output differs from the policy's.
    Mismatch { line: usize, logged: Box<Decision>, recomputed: Box<Decision> },
}

/// A log line that is neither a decision nor an event, or whose inputs the policy function
/// does not accept.
#[derive(Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

/// Replay every decision line of a log's text; count and skip event lines (and blank lines).
/// Stops at the first mismatch.
pub fn conform(text: &str) -> Result<Conformance, BadLine> {
    let (mut decisions, mut events) = (0, 0);
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        if is_event_line(raw) {
            events += 1;
            continue;
        }
        let parsed: LogLine = serde_json::from_str(raw)
            .map_err(|e| BadLine { line, message: format!("neither a decision nor an event: {e}") })?;
        let recomputed = parsed.decision.replay().map_err(|message| BadLine { line, message })?;
        if recomputed != parsed.decision {
            return Ok(Conformance::Mismatch {
                line,
                logged: Box::new(parsed.decision),
                recomputed: Box::new(recomputed),
            });
        }
        decisions += 1;
    }
    Ok(Conformance::Conforms { decisions, events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::retry::Backoff;

    /// A writer whose bytes the test can read after the log is dropped.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn text(shared: &Shared) -> String {
        String::from_utf8(shared.0.lock().unwrap().clone()).unwrap()
    }

    const RETRY: RetryPolicy = RetryPolicy {
        max_attempts: Some(3),
        backoff: Backoff::ExponentialJitter,
        backoff_base_ticks: 10,
        backoff_max_ticks: 80,
        retry_budget: Some(5),
        idempotency_tokens: true,
    };

    #[test]
    fn after_failure_returns_the_policy_output_and_logs_one_line_in_the_line_format() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(BufWriter::new(shared.clone())), "client-1");
        let retry = after_failure(&log, &RETRY, 1, 0);
        assert_eq!(retry, RetryDecision::RetryAfter { earliest_ticks: 10, latest_ticks: 20 });
        assert_eq!(after_failure(&log, &RETRY, 3, 2), RetryDecision::GiveUp);
        drop(log);
        let out = text(&shared);
        let lines: Vec<LogLine> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(lines[0].actor, "client-1");
        // The line format `conform` and older logs share: fields in this order.
        let first = out.lines().next().unwrap();
        let (head, rest) = first.split_once(r#","actor""#).unwrap();
        assert!(head.starts_with(r#"{"seq":1,"elapsed_ms":"#), "{first}");
        assert_eq!(
            rest,
            r#":"client-1","decision":"after_failure","policy":{"max_attempts":3,"backoff":"exponential_jitter","backoff_base_ticks":10,"backoff_max_ticks":80,"retry_budget":5,"idempotency_tokens":true},"attempts_made":1,"retries_used":0,"output":{"retry_after":{"earliest_ticks":10,"latest_ticks":20}}}"#
        );
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 2, events: 0 }));
    }

    #[test]
    fn events_are_numbered_with_the_decisions_counted_and_not_replayed() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "coordinator");
        log.event("declared_dead node=2 silence_ms=5100");
        after_failure(&log.with_actor("client-0"), &RETRY, 1, 0);
        log.event("change_requested shard=0 evicted=2 replacement=3 move=false");
        drop(log);
        let out = text(&shared);
        let events: Vec<EventLine> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(events[0].event, "declared_dead node=2 silence_ms=5100");
        assert!(
            out.lines().filter(|l| is_event_line(l)).count() == 2
                && !is_event_line(out.lines().nth(1).unwrap())
        );
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 1, events: 2 }));
    }

    #[test]
    fn a_tampered_output_is_the_first_mismatch() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "client-0");
        after_failure(&log, &RETRY, 1, 0);
        log.event("write_acked shard=0 version=4");
        after_failure(&log, &RETRY, 3, 2);
        log.flush().unwrap();
        let out = text(&shared);
        let tampered = out.replacen(
            r#""output":"give_up""#,
            r#""output":{"retry_after":{"earliest_ticks":10,"latest_ticks":80}}"#,
            1,
        );
        assert_ne!(tampered, out);
        match conform(&tampered) {
            Ok(Conformance::Mismatch { line, logged, recomputed }) => {
                assert_eq!(line, 3);
                assert_eq!(logged.name(), "after_failure");
                assert_eq!(
                    logged.output_json(),
                    serde_json::json!({"retry_after": {"earliest_ticks": 10, "latest_ticks": 80}})
                );
                assert_eq!(recomputed.output_json(), serde_json::json!("give_up"));
                assert_eq!(logged.inputs_json()["attempts_made"], 3);
                assert!(logged.inputs_json().get("output").is_none());
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn a_line_that_is_neither_or_breaks_a_precondition_is_a_bad_line_not_a_panic() {
        let zero = Decision::AfterFailure {
            policy: RETRY,
            attempts_made: 0,
            retries_used: 0,
            output: RetryDecision::GiveUp,
        };
        assert!(zero.replay().unwrap_err().contains("attempts_made is 0"));
        let inverted = Decision::AfterFailure {
            policy: RetryPolicy { backoff_base_ticks: 90, ..RETRY },
            attempts_made: 1,
            retries_used: 0,
            output: RetryDecision::GiveUp,
        };
        assert!(inverted.replay().unwrap_err().contains("backoff_base_ticks > backoff_max_ticks"));
        // A coordinator decision of an older log is not one the store makes any more.
        let old = r#"{"seq":1,"elapsed_ms":0,"actor":"coordinator","decision":"health_from_silence","node":2,"silence_ticks":60,"suspect_after_ticks":30,"dead_after_ticks":50,"output":"dead"}"#;
        let err = conform(&format!("\n{old}\n")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("neither a decision nor an event"), "{}", err.message);
        assert!(err.message.contains("health_from_silence"), "{}", err.message);
        // An event line with a field too many is not an event.
        let extra = r#"{"seq":1,"elapsed_ms":0,"actor":"coordinator","event":"x","node":1}"#;
        assert!(!is_event_line(extra));
        assert_eq!(conform(extra).unwrap_err().line, 1);
    }

    #[test]
    fn an_off_log_still_decides() {
        let log = DecisionLog::off();
        assert_eq!(after_failure(&log, &RETRY, 3, 0), RetryDecision::GiveUp);
        log.event("ignored");
        assert!(log.flush().is_ok());
    }

    #[test]
    fn lines_from_many_threads_are_whole_and_numbered_in_order() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "coordinator");
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let log = log.with_actor(&format!("client-{t}"));
                std::thread::spawn(move || {
                    for i in 0..200u8 {
                        after_failure(&log, &RETRY, 1 + i % 4, t);
                        log.event(&format!("tick {i}"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(log);
        let out = text(&shared);
        let seqs: Vec<u64> = out
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=1600).collect::<Vec<u64>>());
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 800, events: 800 }));
    }
}
