//! Check reports: for people (human), for tools (json), for CI dashboards (junit).

use super::{Found, RunResult};
use crate::config::Verdict;
use std::fmt::Write;

fn rate(r: &RunResult) -> String {
    format!("{:.0} states/s", r.states_per_second)
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
            "  variant {}: {} unique states, {} transitions, max depth {}, {:.2}s, {}; exploration {}",
            r.variant,
            r.unique_states,
            r.transitions,
            r.max_depth,
            r.elapsed_ms as f64 / 1000.0,
            rate(r),
            exploration
        );
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
                let _ = writeln!(out, "    counterexample for {} ({} steps):", p.name, cx.steps.len());
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
                let _ = writeln!(out, "      then open {}", cx.explorer_path);
            }
        }
    }
    let total = results.len();
    let ok = results.iter().filter(|r| r.as_expected()).count();
    let _ = writeln!(out, "{ok} of {total} runs gave the required verdicts");
    out
}

pub fn json(results: &[RunResult], exit_code: u8) -> String {
    let doc = serde_json::json!({ "exit_code": exit_code, "runs": results });
    serde_json::to_string_pretty(&doc).expect("reports serialize")
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One test case per model/variant/property.
pub fn junit(results: &[RunResult]) -> String {
    let cases: usize = results.iter().map(|r| r.properties.len()).sum();
    let failures = results.iter().flat_map(|r| &r.properties).filter(|p| !p.as_expected()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"replicheck\" tests=\"{cases}\" failures=\"{failures}\">");
    for r in results {
        let suite_failures = r.properties.iter().filter(|p| !p.as_expected()).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}/{}\" tests=\"{}\" failures=\"{suite_failures}\" time=\"{:.3}\">",
            xml(&r.model),
            xml(&r.variant),
            r.properties.len(),
            r.elapsed_ms as f64 / 1000.0
        );
        for p in &r.properties {
            let _ = write!(
                out,
                "    <testcase classname=\"{}.{}\" name=\"{}\"",
                xml(&r.model),
                xml(&r.variant),
                p.name
            );
            if p.as_expected() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            let mut body = format!("expected {}, found {}", p.expected, p.found);
            if let Some(cx) = &p.counterexample {
                for s in &cx.steps {
                    if cx.loop_from_step == Some(s.step) {
                        body.push_str("\n--- loop: the steps below repeat forever ---");
                    }
                    let _ = write!(body, "\n{:>3}. [t={}ms] {}", s.step, s.time_ms, s.action);
                }
                let _ = write!(body, "\n{}", cx.explorer_path);
            }
            let _ = writeln!(
                out,
                "      <failure message=\"expected {}, found {}\">{}</failure>",
                p.expected,
                p.found,
                xml(&body)
            );
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
