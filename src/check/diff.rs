//! `replicheck diff`: the same models under a base and a candidate policy, side by side.
//! A regression is a property that holds under the base and is violated under the candidate:
//! exactly what a reviewer of a config change needs to see before it rolls out.

use super::{plan, run, Found, PolicyChoice, RunOptions, RunResult};
use crate::config::{ConfigError, PropertyName};
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Same,
    /// Held under the base, violated under the candidate.
    Regression,
    /// Violated under the base, holds under the candidate.
    Fix,
    /// One side has no verdict (exploration cut short).
    Unknown,
}

#[derive(Clone, Debug, Serialize)]
pub struct DiffRow {
    pub property: PropertyName,
    pub base: Found,
    pub candidate: Found,
    pub change: Change,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModelDiff {
    pub model: String,
    pub file: PathBuf,
    pub rows: Vec<DiffRow>,
    pub base: RunResult,
    pub candidate: RunResult,
}

pub fn change(base: Found, candidate: Found) -> Change {
    match (base, candidate) {
        (Found::Unknown, _) | (_, Found::Unknown) => Change::Unknown,
        (Found::Holds, Found::Violated) => Change::Regression,
        (Found::Violated, Found::Holds) => Change::Fix,
        _ => Change::Same,
    }
}

/// Check every model under both policies. `on_run(i, n, model, side)` is called before each
/// of the `n` runs (`side` is `base` or `candidate`), for a progress line.
pub fn diff(
    files: &[PathBuf],
    base: &PolicyChoice,
    candidate: &PolicyChoice,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(usize, usize, &str, &str),
) -> Result<Vec<ModelDiff>, ConfigError> {
    let base_jobs = plan(files, base)?;
    let candidate_jobs = plan(files, candidate)?;
    assert_eq!(base_jobs.len(), candidate_jobs.len(), "one job per model and policy");
    let n = base_jobs.len() * 2;
    let mut out = Vec::new();
    for (i, (b, c)) in base_jobs.iter().zip(&candidate_jobs).enumerate() {
        on_run(2 * i, n, &b.scenario.name, "base");
        let base = run(b, opts)?;
        on_run(2 * i + 1, n, &c.scenario.name, "candidate");
        let candidate = run(c, opts)?;
        let rows = base
            .properties
            .iter()
            .zip(&candidate.properties)
            .map(|(pb, pc)| {
                assert_eq!(pb.name, pc.name);
                DiffRow {
                    property: pb.name,
                    base: pb.found,
                    candidate: pc.found,
                    change: change(pb.found, pc.found),
                }
            })
            .collect();
        out.push(ModelDiff { model: base.model.clone(), file: base.file.clone(), rows, base, candidate });
    }
    Ok(out)
}

/// 1 if the candidate regresses anything, else 3 if a verdict is missing, else 0.
pub fn exit_code(diffs: &[ModelDiff]) -> u8 {
    let rows = || diffs.iter().flat_map(|d| &d.rows);
    if rows().any(|r| r.change == Change::Regression) {
        1
    } else if rows().any(|r| r.change == Change::Unknown) {
        3
    } else {
        0
    }
}

pub fn human(diffs: &[ModelDiff], base_name: &str, candidate_name: &str) -> String {
    let mut out = String::new();
    for d in diffs {
        let _ = writeln!(out, "model {} ({})", d.model, d.file.display());
        let _ = writeln!(
            out,
            "  base:      {base_name} ({} states, {})",
            d.base.unique_states,
            if d.base.complete { "complete" } else { "incomplete" }
        );
        let _ = writeln!(
            out,
            "  candidate: {candidate_name} ({} states, {})",
            d.candidate.unique_states,
            if d.candidate.complete { "complete" } else { "incomplete" }
        );
        let _ = writeln!(out, "    {:<22} {:<22} {:<22} change", "property", "base", "candidate");
        for r in &d.rows {
            let mark = match r.change {
                Change::Same => "",
                Change::Regression => "REGRESSION",
                Change::Fix => "fixed",
                Change::Unknown => "unknown (incomplete)",
            };
            let _ = writeln!(
                out,
                "    {:<22} {:<22} {:<22} {mark}",
                r.property.as_str(),
                r.base.to_string(),
                r.candidate.to_string()
            );
        }
        for r in d.rows.iter().filter(|r| r.change == Change::Regression) {
            let p = d.candidate.properties.iter().find(|p| p.name == r.property).expect("row has a result");
            if let Some(cx) = &p.counterexample {
                let _ = writeln!(
                    out,
                    "  regression {} under the candidate ({} steps):",
                    r.property,
                    cx.steps.len()
                );
                for s in &cx.steps {
                    if cx.loop_from_step == Some(s.step) {
                        let _ = writeln!(out, "    --- loop: the steps below repeat forever ---");
                    }
                    let _ = writeln!(out, "    {:>3}. [t={:>5}ms] {}", s.step, s.time_ms, s.action);
                }
                let _ = writeln!(out, "    explore: {}", cx.explore_command);
                let _ = writeln!(out, "    then open {}", cx.explorer_url);
            }
        }
    }
    let regressions = diffs.iter().flat_map(|d| &d.rows).filter(|r| r.change == Change::Regression).count();
    let fixes = diffs.iter().flat_map(|d| &d.rows).filter(|r| r.change == Change::Fix).count();
    let _ = writeln!(out, "{regressions} regression(s), {fixes} fix(es)");
    out
}

/// One test suite per model (`replicheck.MODEL.diff`), one test case per property: a
/// regression is a `<failure>` with the candidate's trace, a verdict left unknown on either
/// side an `<error>`; an unchanged verdict or a fix passes. The suite's time is both runs'.
pub fn junit(diffs: &[ModelDiff]) -> String {
    use super::report::{junit_classname, junit_document, junit_trace, CaseOutcome, Suite};
    let suites: Vec<Suite> = diffs
        .iter()
        .map(|d| Suite {
            name: junit_classname(&d.model, "diff"),
            elapsed_ms: (d.base.elapsed_ms + d.candidate.elapsed_ms) as f64,
            cases: d
                .rows
                .iter()
                .map(|r| {
                    let message = format!("base {}, candidate {}", r.base, r.candidate);
                    let outcome = match r.change {
                        Change::Same | Change::Fix => CaseOutcome::Passed,
                        Change::Unknown => CaseOutcome::Error {
                            message: format!("{message}: exploration cut short, no verdict to compare"),
                        },
                        Change::Regression => {
                            let mut body = format!("regression: {message}");
                            if let Some(cx) = d
                                .candidate
                                .properties
                                .iter()
                                .find(|p| p.name == r.property)
                                .and_then(|p| p.counterexample.as_ref())
                            {
                                body.push_str(&junit_trace(cx));
                            }
                            CaseOutcome::Failure { message: format!("regression: {message}"), body }
                        }
                    };
                    (r.property.as_str().to_string(), outcome)
                })
                .collect(),
        })
        .collect();
    junit_document(&suites)
}

/// `{"exit_code", "models": [...]}`; see docs/output-formats.md and
/// docs/schemas/diff.schema.json.
pub fn json(diffs: &[ModelDiff], code: u8) -> String {
    let side = |r: &RunResult| {
        serde_json::json!({
            "unique_states": r.unique_states,
            "complete": r.complete,
            "stopped": r.stopped,
            "elapsed_ms": r.elapsed_ms,
        })
    };
    let models: Vec<serde_json::Value> = diffs
        .iter()
        .map(|d| {
            let regressions: Vec<serde_json::Value> = d
                .rows
                .iter()
                .filter(|r| r.change == Change::Regression)
                .map(|r| {
                    let p = d
                        .candidate
                        .properties
                        .iter()
                        .find(|p| p.name == r.property)
                        .expect("row has a result");
                    serde_json::json!({ "property": r.property, "counterexample": p.counterexample })
                })
                .collect();
            serde_json::json!({
                "model": d.model,
                "file": d.file,
                "base": side(&d.base),
                "candidate": side(&d.candidate),
                "properties": d.rows,
                "regressions": regressions,
            })
        })
        .collect();
    let interrupted = diffs.iter().any(|d| d.base.interrupted() || d.candidate.interrupted());
    serde_json::to_string_pretty(&serde_json::json!({
        "exit_code": code,
        "interrupted": interrupted,
        "models": models,
    }))
    .expect("serializes")
}
