//! `replicheck diff`: the same models under a base and a candidate policy, side by side.
//! A regression is a property that holds under the base and is violated under the candidate:
//! exactly what a reviewer of a config change needs to see before it rolls out.
//!
//! With `--rollout` a third run checks the change as it is rolled out: the coordinators start on
//! the base and each moves to the candidate at a moment the checker chooses (and with
//! `--rollback`, may go back), so the states in which both policies run side by side are
//! explored. A property that holds under both policies and is violated during the rollout is a
//! mixed-fleet regression.

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
    /// Held under the base and under the candidate, violated while both run (`--rollout`).
    MixedFleet,
}

/// `diff --rollout`: also check the mixed fleet.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct RolloutArgs {
    /// Also check the rollout: every coordinator starts on the base and moves to the
    /// candidate at a moment the checker chooses, so old and new policies run side by side.
    #[arg(long)]
    pub rollout: bool,
    /// With --rollout: each coordinator may also go back to the base (a rollback).
    #[arg(long, requires = "rollout")]
    pub rollback: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct DiffRow {
    pub property: PropertyName,
    pub base: Found,
    pub candidate: Found,
    /// The verdict during the rollout (`--rollout` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Found>,
    pub change: Change,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModelDiff {
    pub model: String,
    pub file: PathBuf,
    pub rows: Vec<DiffRow>,
    pub base: RunResult,
    pub candidate: RunResult,
    /// The mixed fleet's run (`--rollout` only).
    pub rollout: Option<RunResult>,
    /// How many coordinators the model has: with one, the rollout is the switch itself.
    #[serde(skip)]
    pub coordinators: usize,
}

pub fn change(base: Found, candidate: Found) -> Change {
    match (base, candidate) {
        (Found::Unknown, _) | (_, Found::Unknown) => Change::Unknown,
        (Found::Holds, Found::Violated) => Change::Regression,
        (Found::Violated, Found::Holds) => Change::Fix,
        _ => Change::Same,
    }
}

/// The change with the rollout's verdict too: a violation neither policy has alone is a
/// mixed-fleet regression; a rollout left without a verdict leaves the change unknown only
/// where it could matter (both policies hold).
pub fn change_with_rollout(base: Found, candidate: Found, rollout: Found) -> Change {
    match (change(base, candidate), base, candidate, rollout) {
        (Change::Same, Found::Holds, Found::Holds, Found::Violated) => Change::MixedFleet,
        (Change::Same, Found::Holds, Found::Holds, Found::Unknown) => Change::Unknown,
        (c, ..) => c,
    }
}

/// The job that rolls `candidate` out over `base`: the same model, starting on the base.
fn rollout_job(base: &super::Job, candidate: &super::Job, args: RolloutArgs) -> super::Job {
    use crate::config::{RolloutOrder, RolloutPlan};
    let plan = RolloutPlan {
        stages: vec![("base".into(), base.policy.clone()), ("candidate".into(), candidate.policy.clone())],
        rollback: args.rollback,
        order: RolloutOrder::Any,
    };
    let mut policy = base.policy.clone();
    policy.rollout = Some(Box::new(plan));
    let file = base.scenario.path.display();
    let from = base.explore_args.rsplit("--policy ").next().unwrap_or_default();
    let to = candidate.explore_args.rsplit("--policy ").next().unwrap_or_default();
    super::Job {
        scenario: base.scenario.clone(),
        variant: if args.rollback { "rollout and rollback".into() } else { "rollout".into() },
        description: "the coordinators move from the base to the candidate one at a time".into(),
        expect: base.expect.clone(),
        explore_args: format!(
            "{file} --policy {to} --rollout-from {from}{}",
            if args.rollback { " --rollback" } else { "" }
        ),
        policy,
    }
}

/// Check every model under both policies. `on_run(i, n, model, side)` is called before each
/// of the `n` runs (`side` is `base` or `candidate`), for a progress line.
pub fn diff(
    files: &[PathBuf],
    base: &PolicyChoice,
    candidate: &PolicyChoice,
    rollout: RolloutArgs,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(usize, usize, &str, &str),
) -> Result<Vec<ModelDiff>, ConfigError> {
    let base_jobs = plan(files, base)?;
    let candidate_jobs = plan(files, candidate)?;
    assert_eq!(base_jobs.len(), candidate_jobs.len(), "one job per model and policy");
    // A rollout the model cannot run (a stage that changes the clients or the replica sets)
    // is bad input: said before anything runs, naming the candidate's file.
    let mut rollout_jobs = Vec::new();
    if rollout.rollout {
        for (b, c) in base_jobs.iter().zip(&candidate_jobs) {
            let job = rollout_job(b, c, rollout);
            if let Err(m) = crate::model::WorldConfig::new(&job.scenario, &job.policy) {
                let message = format!("--rollout over {}: {m}", job.scenario.path.display());
                return Err(match candidate {
                    PolicyChoice::File { path, .. } => ConfigError::new(path, message),
                    PolicyChoice::Variants(_) => ConfigError::new(&job.scenario.path, message),
                });
            }
            rollout_jobs.push(job);
        }
    }
    let per_model = if rollout.rollout { 3 } else { 2 };
    let n = base_jobs.len() * per_model;
    let mut out = Vec::new();
    for (i, (b, c)) in base_jobs.iter().zip(&candidate_jobs).enumerate() {
        on_run(per_model * i, n, &b.scenario.name, "base");
        let base = run(b, opts)?;
        on_run(per_model * i + 1, n, &c.scenario.name, "candidate");
        let candidate = run(c, opts)?;
        let mixed = match rollout_jobs.get(i) {
            Some(job) => {
                on_run(per_model * i + 2, n, &c.scenario.name, "rollout");
                Some(run(job, opts)?)
            }
            None => None,
        };
        let rows = base
            .properties
            .iter()
            .zip(&candidate.properties)
            .enumerate()
            .map(|(k, (pb, pc))| {
                assert_eq!(pb.name, pc.name);
                let during = mixed.as_ref().map(|m| m.properties[k].found);
                DiffRow {
                    property: pb.name,
                    base: pb.found,
                    candidate: pc.found,
                    rollout: during,
                    change: match during {
                        Some(r) => change_with_rollout(pb.found, pc.found, r),
                        None => change(pb.found, pc.found),
                    },
                }
            })
            .collect();
        out.push(ModelDiff {
            model: base.model.clone(),
            file: base.file.clone(),
            rows,
            base,
            candidate,
            rollout: mixed,
            coordinators: b.scenario.coordinators.len(),
        });
    }
    Ok(out)
}

/// 1 if the candidate (or the rollout) regresses anything, else 3 if a verdict is missing,
/// else 0.
pub fn exit_code(diffs: &[ModelDiff]) -> u8 {
    let rows = || diffs.iter().flat_map(|d| &d.rows);
    if rows().any(|r| matches!(r.change, Change::Regression | Change::MixedFleet)) {
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
        if let Some(m) = &d.rollout {
            let _ = writeln!(
                out,
                "  rollout:   {} from the base to the candidate ({} states, {})",
                m.variant,
                m.unique_states,
                if m.complete { "complete" } else { "incomplete" }
            );
        }
        let during = if d.rollout.is_some() { format!("{:<22} ", "rollout") } else { String::new() };
        let _ = writeln!(out, "    {:<22} {:<22} {:<22} {during}change", "property", "base", "candidate");
        for r in &d.rows {
            let mark = match r.change {
                Change::Same => "",
                Change::Regression => "REGRESSION",
                Change::MixedFleet => "MIXED-FLEET REGRESSION",
                Change::Fix => "fixed",
                Change::Unknown => "unknown (incomplete)",
            };
            let during = r.rollout.map(|f| format!("{:<22} ", f.to_string())).unwrap_or_default();
            let _ = writeln!(
                out,
                "    {:<22} {:<22} {:<22} {during}{mark}",
                r.property.as_str(),
                r.base.to_string(),
                r.candidate.to_string()
            );
        }
        for r in d.rows.iter().filter(|r| matches!(r.change, Change::Regression | Change::MixedFleet)) {
            let (run, whence) = match (r.change, &d.rollout) {
                (Change::MixedFleet, Some(m)) if d.coordinators > 1 => {
                    (m, "during the rollout, with both policies running")
                }
                // One coordinator: no fleet to mix; what breaks is the switch, the candidate
                // running on state the base left (a write acked under one policy, read under
                // the other).
                (Change::MixedFleet, Some(m)) => {
                    (m, "during the switch, the candidate running on what the base left")
                }
                _ => (&d.candidate, "under the candidate"),
            };
            let p = run.properties.iter().find(|p| p.name == r.property).expect("row has a result");
            if let Some(cx) = &p.counterexample {
                let _ = writeln!(out, "  regression {} {whence} ({} steps):", r.property, cx.steps.len());
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
    let count = |c: Change| diffs.iter().flat_map(|d| &d.rows).filter(|r| r.change == c).count();
    let (regressions, fixes) = (count(Change::Regression), count(Change::Fix));
    let mixed = if diffs.iter().any(|d| d.rollout.is_some()) {
        format!(", {} mixed-fleet regression(s)", count(Change::MixedFleet))
    } else {
        String::new()
    };
    let _ = writeln!(out, "{regressions} regression(s){mixed}, {fixes} fix(es)");
    out
}

/// One test suite per model (`replicheck.MODEL.diff`), one test case per property: a
/// regression is a `<failure>` with the candidate's trace, a verdict left unknown on either
/// side an `<error>`; an unchanged verdict or a fix passes. The suite's time is all the runs'
/// (the rollout's too).
pub fn junit(diffs: &[ModelDiff]) -> String {
    use super::report::{junit_classname, junit_document, junit_trace, CaseOutcome, Suite};
    let suites: Vec<Suite> = diffs
        .iter()
        .map(|d| Suite {
            name: junit_classname(&d.model, "diff"),
            elapsed_ms: (d.base.elapsed_ms
                + d.candidate.elapsed_ms
                + d.rollout.as_ref().map_or(0, |m| m.elapsed_ms)) as f64,
            cases: d
                .rows
                .iter()
                .map(|r| {
                    let mut message = format!("base {}, candidate {}", r.base, r.candidate);
                    if let Some(f) = r.rollout {
                        message.push_str(&format!(", rollout {f}"));
                    }
                    let outcome = match r.change {
                        Change::Same | Change::Fix => CaseOutcome::Passed,
                        Change::MixedFleet => {
                            let mut body = format!("mixed-fleet regression: {message}");
                            if let Some(cx) = d.rollout.as_ref().and_then(|m| {
                                m.properties.iter().find(|p| p.name == r.property)?.counterexample.as_ref()
                            }) {
                                body.push_str(&junit_trace(cx));
                            }
                            CaseOutcome::Failure {
                                message: format!("mixed-fleet regression: {message}"),
                                body,
                            }
                        }
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
                .filter(|r| matches!(r.change, Change::Regression | Change::MixedFleet))
                .map(|r| {
                    let run = match (r.change, &d.rollout) {
                        (Change::MixedFleet, Some(m)) => m,
                        _ => &d.candidate,
                    };
                    let p = run.properties.iter().find(|p| p.name == r.property).expect("row has a result");
                    serde_json::json!({ "property": r.property, "counterexample": p.counterexample })
                })
                .collect();
            serde_json::json!({
                "model": d.model,
                "file": d.file,
                "base": side(&d.base),
                "candidate": side(&d.candidate),
                "rollout": d.rollout.as_ref().map(side),
                "properties": d.rows,
                "regressions": regressions,
            })
        })
        .collect();
    let interrupted = diffs.iter().any(|d| {
        d.base.interrupted()
            || d.candidate.interrupted()
            || d.rollout.as_ref().is_some_and(|m| m.interrupted())
    });
    serde_json::to_string_pretty(&serde_json::json!({
        "exit_code": code,
        "interrupted": interrupted,
        "models": models,
    }))
    .expect("serializes")
}
