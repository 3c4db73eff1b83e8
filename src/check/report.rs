//! Check reports: for people (human), for tools (json), for CI dashboards (junit).

use super::{Found, RunResult};
use crate::config::Verdict;
use std::fmt::Write;

fn rate(r: &RunResult) -> String {
    format!("{:.0} states/s", r.states_per_second)
}

/// `none` (with why, when `por` was asked for), or `por (N states expanded with an ample
/// set)`, and whether silence counters were judged by region.
fn reduction(r: &RunResult) -> String {
    let por = match r.reduction {
        crate::model::Reduction::None => match r.ample_sets_refused {
            Some(why) => format!("none (no ample sets: {why})"),
            None => "none".to_string(),
        },
        crate::model::Reduction::Por => format!("por ({} states expanded with an ample set)", r.ample_states),
    };
    let extra: Vec<&str> = [(r.silence_regions, "silence regions"), (r.arrival_slack, "arrival slack")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    if extra.is_empty() {
        por
    } else {
        format!("{por} and {}", extra.join(" and "))
    }
}

pub fn human(results: &[RunResult]) -> String {
    let mut out = String::new();
    let mut last_model = None;
    for r in results {
        if last_model != Some(&r.file) {
            let _ = writeln!(out, "model {} ({})", r.model, r.file.display());
            last_model = Some(&r.file);
        }
        let exploration = if r.complete {
            "complete".to_string()
        } else {
            format!("INCOMPLETE: {}", r.stopped.as_deref().unwrap_or("stopped early"))
        };
        let _ = writeln!(
            out,
            "  variant {}: {} unique states, {} transitions, max depth {}, {:.2}s, {}; exploration {}; reduction {}; fingerprint collision probability {}",
            r.variant,
            r.unique_states,
            r.transitions,
            r.max_depth,
            r.elapsed_ms as f64 / 1000.0,
            rate(r),
            exploration,
            reduction(r),
            crate::engine::collision::describe(r.fingerprint_collision_probability)
        );
        if let Some(d) = &r.distributed {
            let kept: Vec<String> = d.states_kept_per_worker.iter().map(u64::to_string).collect();
            let _ = writeln!(
                out,
                "    distributed: {} process(es), {} worker(s); {} shared level(s), then states kept per worker: {}{}",
                d.processes,
                d.workers,
                d.shared_levels,
                kept.join(", "),
                d.liveness.as_ref().map(|l| format!("; liveness: {l}")).unwrap_or_default()
            );
        }
        for p in &r.properties {
            let mark = if p.as_expected() {
                "ok  "
            } else if p.found == Found::Unknown {
                "??  "
            } else {
                "FAIL"
            };
            let expected = match p.expected {
                Verdict::Holds => "holds",
                Verdict::Violated => "violated",
            };
            let _ = writeln!(
                out,
                "    {mark} {:<22} {:<22} (expected: {expected})",
                p.name.as_str(),
                p.found.to_string()
            );
        }
        for p in &r.properties {
            if let Some(cx) = &p.counterexample {
                counterexample_lines(&mut out, p.name.as_str(), cx);
            }
            if let Some(why) = &p.counterexample_missing {
                let _ = writeln!(out, "    no counterexample for {}: {why}", p.name.as_str());
            }
        }
    }
    let total = results.len();
    let ok = results.iter().filter(|r| r.as_expected()).count();
    let _ = writeln!(out, "{ok} of {total} runs gave the required verdicts");
    out
}

/// [`json`] for one shard of a check (`--shard I/N`): also the shard and how many runs the
/// whole check has, so `replicheck merge` can put the shards' runs back in order.
pub fn json_sharded(
    results: &[RunResult],
    exit_code: u8,
    runs_not_started: usize,
    shard: Option<super::shard::Shard>,
    runs_total: usize,
) -> String {
    let mut doc = json_doc(results, exit_code, runs_not_started);
    if let Some(sh) = shard {
        doc["shard"] = serde_json::json!({ "index": sh.index, "count": sh.count, "runs_total": runs_total });
    }
    serde_json::to_string_pretty(&doc).expect("reports serialize")
}

/// A counterexample as the human report prints it: the timed steps (a lasso's loop marked),
/// the final state, and how to open it in the explorer.
pub fn counterexample_lines(out: &mut String, property: &str, cx: &super::Counterexample) {
    let _ = writeln!(out, "    counterexample for {property} ({} steps):", cx.steps.len());
    for s in &cx.steps {
        if cx.loop_from_step == Some(s.step) {
            let _ = writeln!(out, "      --- loop: the steps below repeat forever ---");
        }
        let _ = writeln!(out, "      {:>3}. [t={:>5}ms] {}", s.step, s.time_ms, s.action);
    }
    let _ = writeln!(out, "      final state:");
    for line in cx.final_state.lines() {
        let _ = writeln!(out, "        {line}");
    }
    let _ = writeln!(out, "      explore: {}", cx.explore_command);
    let _ = writeln!(out, "      then open {}", cx.explorer_url);
}

/// `{"exit_code", "interrupted", "runs_not_started", "runs": [...]}`; see
/// docs/output-formats.md and docs/schemas/check.schema.json.
pub fn json(results: &[RunResult], exit_code: u8, runs_not_started: usize) -> String {
    serde_json::to_string_pretty(&json_doc(results, exit_code, runs_not_started)).expect("reports serialize")
}

fn json_doc(results: &[RunResult], exit_code: u8, runs_not_started: usize) -> serde_json::Value {
    serde_json::json!({
        "exit_code": exit_code,
        "interrupted": results.iter().any(|r| r.interrupted()),
        "runs_not_started": runs_not_started,
        "runs": results,
    })
}

/// Escape text for an XML attribute or element.
pub fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One identifier of a JUnit classname: ASCII letters, digits and `_` only (CI dashboards
/// split classnames at dots and choke on spaces and slashes), never starting with a digit.
pub fn junit_identifier(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '_' };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_').to_string();
    match out.chars().next() {
        None => "_".into(),
        Some(c) if c.is_ascii_digit() => format!("_{out}"),
        Some(_) => out,
    }
}

/// `replicheck.MODEL.RUN`: a run's JUnit classname (and test suite name), e.g.
/// `replicheck.basic_quorum.write_quorum_1`.
pub fn junit_classname(model: &str, run: &str) -> String {
    format!("replicheck.{}.{}", junit_identifier(model), junit_identifier(run))
}

/// Seconds for a JUnit `time` attribute.
pub fn junit_seconds(ms: f64) -> String {
    format!("{:.3}", ms / 1000.0)
}

/// One JUnit test case's outcome.
pub enum CaseOutcome {
    Passed,
    /// A verdict that is not the required one.
    Failure {
        message: String,
        body: String,
    },
    /// No verdict: exploration was cut short.
    Error {
        message: String,
    },
    /// Not checked: the run was never started (the check was interrupted before it).
    Skipped {
        message: String,
    },
}

/// One `<testsuite>` for the report: its name, time (ms) and cases (name, outcome).
pub struct Suite {
    pub name: String,
    pub elapsed_ms: f64,
    pub cases: Vec<(String, CaseOutcome)>,
}

/// A JUnit document as Jenkins, GitLab and the Ant schema read it: `<testsuites>` with the
/// totals, one `<testsuite>` per suite with `tests`, `failures`, `errors`, `skipped` and `time`,
/// and one `<testcase classname name time>` per case. Every case of a suite is decided by the
/// same exploration, so each carries an equal share of the suite's time.
pub fn junit_document(suites: &[Suite]) -> String {
    let count = |s: &Suite, f: fn(&CaseOutcome) -> bool| s.cases.iter().filter(|(_, o)| f(o)).count();
    let is_failure = |o: &CaseOutcome| matches!(o, CaseOutcome::Failure { .. });
    let is_error = |o: &CaseOutcome| matches!(o, CaseOutcome::Error { .. });
    let is_skipped = |o: &CaseOutcome| matches!(o, CaseOutcome::Skipped { .. });
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures: usize = suites.iter().map(|s| count(s, is_failure)).sum();
    let errors: usize = suites.iter().map(|s| count(s, is_error)).sum();
    let skipped: usize = suites.iter().map(|s| count(s, is_skipped)).sum();
    let time: f64 = suites.iter().map(|s| s.elapsed_ms).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"replicheck\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{}\">",
        junit_seconds(time)
    );
    for (id, suite) in suites.iter().enumerate() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" id=\"{id}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
            xml(&suite.name),
            suite.cases.len(),
            count(suite, is_failure),
            count(suite, is_error),
            count(suite, is_skipped),
            junit_seconds(suite.elapsed_ms)
        );
        let share = suite.elapsed_ms / suite.cases.len().max(1) as f64;
        for (name, outcome) in &suite.cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
                xml(&suite.name),
                xml(name),
                junit_seconds(share)
            );
            match outcome {
                CaseOutcome::Passed => out.push_str("/>\n"),
                CaseOutcome::Failure { message, body } => {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\" type=\"verdict\">{}</failure>\n    </testcase>",
                        xml(message),
                        xml(body)
                    );
                }
                CaseOutcome::Error { message } => {
                    let _ = writeln!(
                        out,
                        ">\n      <error message=\"{}\" type=\"incomplete\"/>\n    </testcase>",
                        xml(message)
                    );
                }
                CaseOutcome::Skipped { message } => {
                    let _ =
                        writeln!(out, ">\n      <skipped message=\"{}\"/>\n    </testcase>", xml(message));
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A counterexample as the text of a JUnit `<failure>`: the timed steps and the explorer link.
pub fn junit_trace(cx: &super::Counterexample) -> String {
    let mut body = String::new();
    for s in &cx.steps {
        if cx.loop_from_step == Some(s.step) {
            body.push_str("\n--- loop: the steps below repeat forever ---");
        }
        let _ = write!(body, "\n{:>3}. [t={}ms] {}", s.step, s.time_ms, s.action);
    }
    let _ = write!(body, "\n{}\n{}", cx.explore_command, cx.explorer_url);
    body
}

/// One test suite per model/variant, one test case per property: a verdict other than the
/// required one is a `<failure>` carrying the trace and the explorer link, a verdict left
/// unknown (exploration cut short) an `<error>`; the runs an interrupt kept from starting
/// (`not_started`) are suites of `<skipped>` cases.
pub fn junit(results: &[RunResult], not_started: &[super::Job]) -> String {
    let mut suites: Vec<Suite> = results
        .iter()
        .map(|r| Suite {
            name: junit_classname(&r.model, &r.variant),
            elapsed_ms: r.elapsed_ms as f64,
            cases: r
                .properties
                .iter()
                .map(|p| {
                    let outcome = if p.as_expected() {
                        CaseOutcome::Passed
                    } else if p.found == Found::Unknown {
                        CaseOutcome::Error {
                            message: format!(
                                "expected {}, found unknown: exploration {}",
                                p.expected,
                                r.stopped.as_deref().unwrap_or("stopped early")
                            ),
                        }
                    } else {
                        let mut body = format!("expected {}, found {}", p.expected, p.found);
                        if let Some(cx) = &p.counterexample {
                            body.push_str(&junit_trace(cx));
                        }
                        CaseOutcome::Failure {
                            message: format!("expected {}, found {}", p.expected, p.found),
                            body,
                        }
                    };
                    (p.name.as_str().to_string(), outcome)
                })
                .collect(),
        })
        .collect();
    suites.extend(not_started.iter().map(|job| {
        Suite {
            name: junit_classname(&job.scenario.name, &job.variant),
            elapsed_ms: 0.0,
            cases: job
                .expect
                .keys()
                .map(|p| {
                    let message =
                        "not checked: the check was interrupted before this run started".to_string();
                    (p.as_str().to_string(), CaseOutcome::Skipped { message })
                })
                .collect(),
        }
    }));
    junit_document(&suites)
}
