//! `replicheck sweep MODEL --from BASE --to CANDIDATE`: why a config change regresses.
//!
//! The knobs (policy keys) whose resolved values differ between the base and the candidate are
//! found, both policies are checked, and for every property the base keeps and the candidate
//! breaks (a *regression*, as `diff` has it):
//!
//! - the *smallest breaking move*: each differing knob on its own is walked from the base
//!   value toward the candidate value (durations by the model's tick, integers by 1, other
//!   values: just the two), everything else at the base, and the first value on that path where
//!   the property is violated is reported (or that the knob alone never breaks it);
//! - the *nearest safe candidate*: from the candidate, each differing knob on its own is walked
//!   back toward the base value, everything else at the candidate, and the first value where
//!   every regressed property holds again is reported (or that no single-knob retreat does).
//!
//! Each walk is a one-knob sweep of its own and is searched as `sweep` searches a line: the
//! ends and a few samples, then bisection between checked values that disagree; values not
//! checked are inferred only between agreeing checked values. Points are cached by their
//! resolved policy, so the same policy is never explored twice.

use super::diff::{change, Change};
use super::sweep::{self, Cell, Plan, SearchOptions, Shape, SkippedValue};
use super::{RunOptions, RunResult};
use crate::config::duration::format_ms;
use crate::config::{ConfigError, Dur, Found, PropertyName, Scenario, SourcedPolicy};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// A knob that differs between the base and the candidate, and the path between its values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DifferingKnob {
    pub key: String,
    pub base: String,
    pub candidate: String,
    /// The values from the base's to the candidate's, both included.
    pub path: Vec<String>,
    /// How the path steps (`by the tick of 100ms`, `by 1`, `the two values`).
    pub step: String,
}

/// What a walk along one knob found for one property (or, walking back, for every regressed
/// property at once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum WalkResult {
    /// The first value on the path where the verdict changed, and the value before it.
    Found { at: String, index: usize, checked: bool, before: String, before_checked: bool },
    /// No value on the path changes the verdict.
    Never,
    /// A value on the path before any change has no verdict (cut short by a limit).
    Incomplete { at: String },
}

/// One walk: a knob from one end toward the other, the others fixed.
#[derive(Clone, Debug, Serialize)]
pub struct Walk {
    pub knob: String,
    /// The value the walk starts at and the one it heads for.
    pub from: String,
    pub to: String,
    /// The path's values, in walking order.
    pub values: Vec<String>,
    /// The regressed properties' cells along the path, in walking order.
    pub cells: BTreeMap<String, Vec<Cell>>,
    /// Per regressed property (breaking walks) or for all of them (`"all"`, restoring walks).
    pub results: BTreeMap<String, WalkResult>,
    /// The explore command at the first breaking value, when that point was checked.
    pub explore_command: Option<String>,
    /// Values of the path left out of `values`: with the other knobs fixed they break a rule
    /// between keys, so there is no policy to check there.
    pub skipped: Vec<SkippedValue>,
}

/// A checked point: its policy (the keys it sets beyond the model's `[policy]`) and verdicts.
#[derive(Clone, Debug)]
pub struct Checked {
    pub label: String,
    pub policy_toml: String,
    pub run: RunResult,
}

pub struct Explanation {
    pub scenario: Scenario,
    pub base_label: String,
    pub candidate_label: String,
    pub knobs: Vec<DifferingKnob>,
    pub base: RunResult,
    pub candidate: RunResult,
    /// Per property: its verdicts under the base and the candidate, and the change.
    pub rows: Vec<(PropertyName, Found, Found, Change)>,
    pub regressions: Vec<PropertyName>,
    pub breaking: Vec<Walk>,
    pub restoring: Vec<Walk>,
    /// Every point explored, in the order explored (the base and candidate first).
    pub checked: Vec<Checked>,
    pub elapsed_ms: u64,
}

fn unquote(text: &str) -> String {
    text.trim_matches('"').to_string()
}

/// The values from `a` to `b` (both as `describe` writes them): durations by the tick when both
/// are whole ticks, integers by 1, anything else just the two.
fn path_between(a: &str, b: &str, tick_ms: u64) -> (Vec<String>, String) {
    let (ua, ub) = (unquote(a), unquote(b));
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let values = if x <= y {
            (x..=y).map(|n| n.to_string()).collect()
        } else {
            (y..=x).rev().map(|n| n.to_string()).collect()
        };
        return (values, "by 1".into());
    }
    if a.starts_with('"') {
        if let (Ok(x), Ok(y)) = (Dur::parse(&ua), Dur::parse(&ub)) {
            if x.ms.is_multiple_of(tick_ms) && y.ms.is_multiple_of(tick_ms) {
                let steps = x.ms.abs_diff(y.ms) / tick_ms;
                let values = (0..=steps)
                    .map(|i| {
                        if i == 0 {
                            ua.clone()
                        } else if i == steps {
                            ub.clone()
                        } else if x.ms < y.ms {
                            format_ms(x.ms + i * tick_ms)
                        } else {
                            format_ms(x.ms - i * tick_ms)
                        }
                    })
                    .collect();
                return (values, format!("by the tick of {}", format_ms(tick_ms)));
            }
            return (vec![ua, ub], "the two values (not whole numbers of ticks)".into());
        }
    }
    (vec![ua, ub], "the two values".into())
}

/// The knobs whose resolved values differ, in the policy's key order.
pub fn differing_knobs(
    scenario: &Scenario,
    base: &SourcedPolicy,
    candidate: &SourcedPolicy,
) -> Vec<DifferingKnob> {
    let b: BTreeMap<&str, String> = base.patch.describe().into_iter().collect();
    let c: BTreeMap<&str, String> = candidate.patch.describe().into_iter().collect();
    let mut keys: Vec<&str> = candidate.patch.keys();
    for k in base.patch.keys() {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for key in keys {
        match (b.get(key), c.get(key)) {
            (Some(x), Some(y)) if x != y => {
                // Durations written differently but equal (`2s`, `2000ms`) do not differ.
                if let (Ok(dx), Ok(dy)) = (Dur::parse(&unquote(x)), Dur::parse(&unquote(y))) {
                    if dx.ms == dy.ms {
                        continue;
                    }
                }
                let (path, step) = path_between(x, y, scenario.tick_ms);
                out.push(DifferingKnob {
                    key: key.to_string(),
                    base: unquote(x),
                    candidate: unquote(y),
                    path,
                    step,
                });
            }
            _ => {}
        }
    }
    out
}

/// The cache of explored points, keyed by the resolved policy.
struct Runner<'a> {
    scenario: &'a Scenario,
    opts: &'a RunOptions,
    done: BTreeMap<String, usize>,
    checked: Vec<Checked>,
    on_point: &'a mut dyn FnMut(&Checked, usize),
}

impl Runner<'_> {
    fn check(&mut self, label: String, policy: &SourcedPolicy) -> Result<usize, ConfigError> {
        let key = policy_key(policy);
        if let Some(&i) = self.done.get(&key) {
            return Ok(i);
        }
        let run = super::run(
            &sweep::policy_job(
                self.scenario,
                label.clone(),
                policy,
                sweep::explore_args_of(self.scenario, policy),
            ),
            self.opts,
        )?;
        let checked = Checked { label, policy_toml: sweep::policy_toml(self.scenario, policy), run };
        self.checked.push(checked);
        let i = self.checked.len() - 1;
        (self.on_point)(&self.checked[i], i + 1);
        self.done.insert(key, i);
        Ok(i)
    }
}

fn policy_key(policy: &SourcedPolicy) -> String {
    policy
        .patch
        .describe()
        .into_iter()
        .map(|(k, v)| {
            // Equal durations written differently are the same point.
            let v = Dur::parse(&unquote(&v)).map(|d| format!("{}ms", d.ms)).unwrap_or(v);
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn found(run: &RunResult, name: PropertyName) -> Found {
    run.properties.iter().find(|p| p.name == name).map_or(Found::Unknown, |p| p.found)
}

/// Walk `knob` from `start` to `end` over `over` (the policy the other knobs keep), searching
/// as `sweep` does; `regressions` are the properties followed.
#[allow(clippy::too_many_arguments)]
fn walk(
    runner: &mut Runner,
    over_label: &str,
    over: &SourcedPolicy,
    knob: &str,
    path: &[String],
    regressions: &[PropertyName],
    search: &SearchOptions,
    restoring: bool,
) -> Result<Walk, ConfigError> {
    let spec = format!("{knob}={}", path.join(","));
    let (plan, skipped): (Plan, _) =
        sweep::plan_skipping_invalid(runner.scenario.clone(), over_label.to_string(), over.clone(), &spec)?;
    let values: Vec<String> = plan.knobs[0].values.iter().map(|v| v.label.clone()).collect();
    if values.is_empty() {
        // The walk starts at a policy already checked, so this is not reached.
        return Err(ConfigError::new(
            &runner.scenario.path,
            format!("{knob}: no value of {spec} is a valid policy"),
        ));
    }
    let shape = Shape::of(&plan);
    let mut index_of: BTreeMap<usize, usize> = BTreeMap::new();
    let found_map = sweep::search_points(&shape, regressions.len(), search, &mut |p| {
        let label = format!("{over_label} {}", plan.point_label(p));
        let i = runner.check(label, plan.point_policy(p))?;
        index_of.insert(p, i);
        let run = &runner.checked[i].run;
        Ok(regressions.iter().map(|&n| found(run, n)).collect())
    })?;
    let len = values.len();
    let line: Vec<usize> = (0..len).collect();
    let mut cells: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    for (j, name) in regressions.iter().enumerate() {
        let mut c: Vec<Cell> =
            (0..len).map(|p| found_map.get(&p).map_or(Cell::Unchecked, |f| Cell::from_found(f[j]))).collect();
        sweep::infer_line(&line, &mut c);
        cells.insert(name.to_string(), c);
    }
    let mut results = BTreeMap::new();
    let mut explore_command = None;
    let result_at = |pos: usize, checked: &dyn Fn(usize) -> bool| {
        let before = pos.saturating_sub(1);
        WalkResult::Found {
            at: values[pos].clone(),
            index: pos,
            checked: checked(pos),
            before: values[before].clone(),
            before_checked: checked(before),
        }
    };
    let is_checked = |pos: usize| found_map.contains_key(&pos);
    if !restoring {
        for name in regressions {
            let c = &cells[&name.to_string()];
            let mut result = WalkResult::Never;
            for (pos, cell) in c.iter().enumerate() {
                match cell {
                    Cell::Violated | Cell::InferredViolated => {
                        result = result_at(pos, &is_checked);
                        if explore_command.is_none() {
                            explore_command = index_of.get(&pos).and_then(|&i| {
                                runner.checked[i]
                                    .run
                                    .properties
                                    .iter()
                                    .find(|p| p.name == *name)
                                    .and_then(|p| p.counterexample.as_ref())
                                    .map(|ce| ce.explore_command.clone())
                            });
                        }
                        break;
                    }
                    Cell::Holds | Cell::InferredHolds => {}
                    Cell::Incomplete | Cell::Unchecked => {
                        result = WalkResult::Incomplete { at: values[pos].clone() };
                        break;
                    }
                }
            }
            results.insert(name.to_string(), result);
        }
    } else {
        let mut result = WalkResult::Never;
        for pos in 0..len {
            let all: Vec<Cell> = regressions.iter().map(|n| cells[&n.to_string()][pos]).collect();
            if all.iter().all(|c| matches!(c, Cell::Holds | Cell::InferredHolds)) {
                result = result_at(pos, &is_checked);
                break;
            }
            if !all.iter().any(|c| matches!(c, Cell::Violated | Cell::InferredViolated)) {
                result = WalkResult::Incomplete { at: values[pos].clone() };
                break;
            }
        }
        results.insert("all".to_string(), result);
    }
    Ok(Walk {
        knob: knob.to_string(),
        from: path[0].clone(),
        to: path[path.len() - 1].clone(),
        values,
        cells,
        results,
        explore_command,
        skipped,
    })
}

/// Load both policies over the model's `[policy]`, check them, and explain every regression.
pub fn explain(
    scenario: Scenario,
    base_path: &Path,
    candidate_path: &Path,
    search: &SearchOptions,
    opts: &RunOptions,
    on_point: &mut dyn FnMut(&Checked, usize),
) -> Result<Explanation, ConfigError> {
    let start = std::time::Instant::now();
    let base = scenario.base_policy.then(&crate::config::load_policy(base_path)?);
    let candidate = scenario.base_policy.then(&crate::config::load_policy(candidate_path)?);
    let input = |m: String| ConfigError::new(&scenario.path, m);
    crate::model::WorldConfig::new(&scenario, &base)
        .map_err(|m| input(format!("--from {}: {m}", base_path.display())))?;
    crate::model::WorldConfig::new(&scenario, &candidate)
        .map_err(|m| input(format!("--to {}: {m}", candidate_path.display())))?;
    let base_label = format!("policy {}", base_path.display());
    let candidate_label = format!("policy {}", candidate_path.display());
    let knobs = differing_knobs(&scenario, &base, &candidate);
    let mut runner =
        Runner { scenario: &scenario, opts, done: BTreeMap::new(), checked: Vec::new(), on_point };
    let b = runner.check(base_label.clone(), &base)?;
    let c = runner.check(candidate_label.clone(), &candidate)?;
    let (base_run, candidate_run) = (runner.checked[b].run.clone(), runner.checked[c].run.clone());
    let rows: Vec<(PropertyName, Found, Found, Change)> = scenario
        .properties
        .iter()
        .map(|&n| {
            let (fb, fc) = (found(&base_run, n), found(&candidate_run, n));
            (n, fb, fc, change(fb, fc))
        })
        .collect();
    let regressions: Vec<PropertyName> =
        rows.iter().filter(|r| r.3 == Change::Regression).map(|r| r.0).collect();
    let mut breaking = Vec::new();
    let mut restoring = Vec::new();
    if !regressions.is_empty() {
        for k in &knobs {
            breaking.push(walk(
                &mut runner,
                &base_label,
                &base,
                &k.key,
                &k.path,
                &regressions,
                search,
                false,
            )?);
        }
        for k in &knobs {
            let back: Vec<String> = k.path.iter().rev().cloned().collect();
            restoring.push(walk(
                &mut runner,
                &candidate_label,
                &candidate,
                &k.key,
                &back,
                &regressions,
                search,
                true,
            )?);
        }
    }
    let checked = runner.checked;
    Ok(Explanation {
        scenario,
        base_label,
        candidate_label,
        knobs,
        base: base_run,
        candidate: candidate_run,
        rows,
        regressions,
        breaking,
        restoring,
        checked,
        elapsed_ms: start.elapsed().as_millis() as u64,
    })
}

/// 1 if the candidate regresses (as `diff`), else 3 if a point was cut short, else 0.
pub fn exit_code(e: &Explanation) -> u8 {
    if !e.regressions.is_empty() {
        1
    } else if e.checked.iter().any(|c| !c.run.complete) || e.rows.iter().any(|r| r.3 == Change::Unknown) {
        3
    } else {
        0
    }
}

fn found_word(f: Found) -> &'static str {
    match f {
        Found::Holds => "holds",
        Found::Violated => "violated",
        Found::Unknown => "incomplete",
    }
}

fn how(checked: bool) -> &'static str {
    if checked {
        "checked"
    } else {
        "inferred"
    }
}

fn path_lines(out: &mut String, w: &Walk, order: &[PropertyName]) {
    let width = w.values.iter().map(|v| v.len()).max().unwrap_or(1);
    let names: Vec<String> = order.iter().map(|n| n.to_string()).collect();
    let label = names.iter().map(|n| n.len()).chain([w.knob.len()]).max().unwrap_or(1);
    let row = |head: &str, items: Vec<&str>| {
        format!(
            "      {head:>label$}  {}",
            items.iter().map(|v| format!("{v:>width$}")).collect::<Vec<_>>().join(" ")
        )
    };
    let _ = writeln!(out, "{}", row(&w.knob, w.values.iter().map(|v| v.as_str()).collect()));
    for name in &names {
        let _ = writeln!(out, "{}", row(name, w.cells[name].iter().map(|&c| c.letter()).collect()));
    }
}

/// The values a walk left out, and the first one's reason (the others break the same rule).
fn skipped_lines(out: &mut String, w: &Walk, others: &str) {
    let Some(first) = w.skipped.first() else { return };
    let values: Vec<&str> = w.skipped.iter().map(|s| s.value.as_str()).collect();
    let _ = writeln!(
        out,
        "      skipped {} value{} of {}, not a valid policy with the other knobs at {others}: {}",
        values.len(),
        if values.len() == 1 { "" } else { "s" },
        w.knob,
        values.join(", ")
    );
    let _ = writeln!(out, "        (at {} = {}: {})", w.knob, first.value, first.reason);
}

/// The text report.
pub fn human(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "explain {} ({}): from {} to {}",
        e.scenario.name,
        e.scenario.path.display(),
        e.base_label,
        e.candidate_label
    );
    if e.knobs.is_empty() {
        let _ = writeln!(out, "  no knob differs: both resolve to the same policy over the model's [policy]");
    }
    for k in &e.knobs {
        let _ = writeln!(
            out,
            "  {}: {} -> {} ({} values on the path, {})",
            k.key,
            k.base,
            k.candidate,
            k.path.len(),
            k.step
        );
    }
    let state = |r: &RunResult| {
        format!("{} states, {}", r.unique_states, if r.complete { "complete" } else { "INCOMPLETE" })
    };
    let _ = writeln!(out, "  base:      {} ({})", e.base_label, state(&e.base));
    let _ = writeln!(out, "  candidate: {} ({})", e.candidate_label, state(&e.candidate));
    let skipped: usize = e.breaking.iter().chain(&e.restoring).map(|w| w.skipped.len()).sum();
    let _ = writeln!(
        out,
        "  {} points checked in {:.2}s{}",
        e.checked.len(),
        e.elapsed_ms as f64 / 1000.0,
        if skipped > 0 { format!(", {skipped} skipped (not valid policies)") } else { String::new() }
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "    {:<24} {:<12} {:<12} change", "property", "base", "candidate");
    for (n, b, c, ch) in &e.rows {
        let change = match ch {
            Change::Regression => "REGRESSION",
            Change::MixedFleet => "MIXED-FLEET REGRESSION",
            Change::Fix => "fix",
            Change::Unknown => "unknown (incomplete)",
            Change::Same => "",
        };
        let row = format!("    {:<24} {:<12} {:<12} {change}", n.to_string(), found_word(*b), found_word(*c));
        let _ = writeln!(out, "{}", row.trim_end());
    }
    let _ = writeln!(out);
    if e.regressions.is_empty() {
        let unknown = e.rows.iter().filter(|r| r.3 == Change::Unknown).count();
        if unknown > 0 {
            let _ = writeln!(
                out,
                "no regression found, but {unknown} propert{} incomplete on one side (cut short by a limit): no verdict",
                if unknown == 1 { "y is" } else { "ies are" }
            );
        } else {
            let _ = writeln!(out, "no regression: the candidate keeps every property the base keeps");
        }
        return out;
    }
    breaking_moves(&mut out, e);
    restoring_moves(&mut out, e);
    let _ = writeln!(
        out,
        "  (H/V checked, h/v inferred from agreeing checked values on both sides, ? incomplete, . not checked)"
    );
    let _ = writeln!(out, "{} regression(s)", e.regressions.len());
    out
}

/// For each knob alone, from the base toward the candidate: the first value that breaks each
/// regressed property.
fn breaking_moves(out: &mut String, e: &Explanation) {
    let _ = writeln!(
        out,
        "  smallest breaking move (one knob from the base toward the candidate, the others at the base):"
    );
    for w in &e.breaking {
        // Group the properties that break at the same value.
        let mut groups: Vec<(WalkResult, Vec<String>)> = Vec::new();
        for name in e.regressions.iter().map(|n| n.to_string()) {
            let r = &w.results[&name];
            match groups.iter_mut().find(|(g, _)| g == r) {
                Some((_, names)) => names.push(name),
                None => groups.push((r.clone(), vec![name])),
            }
        }
        for (r, names) in groups {
            let names = names.join(", ");
            let line = match r {
                WalkResult::Found { at, checked, before, before_checked, .. } => format!(
                    "{} {} -> {at} already breaks {names} ({}; {before} holds, {})",
                    w.knob,
                    w.from,
                    how(checked),
                    how(before_checked)
                ),
                WalkResult::Never => format!("{} {} -> {} alone never breaks {names}", w.knob, w.from, w.to),
                WalkResult::Incomplete { at } => format!(
                    "{} {} -> {}: {names} incomplete at {at} (cut short by a limit): no verdict",
                    w.knob, w.from, w.to
                ),
            };
            let _ = writeln!(out, "    {line}");
        }
        path_lines(out, w, &e.regressions);
        skipped_lines(out, w, "the base");
        if let Some(cmd) = &w.explore_command {
            let _ = writeln!(out, "      explore: {cmd}");
        }
    }
    for n in &e.regressions {
        let name = n.to_string();
        if e.breaking.iter().all(|w| w.results[&name] == WalkResult::Never) {
            let _ = writeln!(
                out,
                "  no single knob breaks {name} alone: the regression needs a combination of knobs"
            );
        }
    }
}

/// For each knob alone, from the candidate back toward the base: the first value that
/// restores every regressed property.
fn restoring_moves(out: &mut String, e: &Explanation) {
    let names = e.regressions.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        out,
        "  nearest safe candidate (one knob from the candidate back toward the base, the others at the candidate):"
    );
    for w in &e.restoring {
        let line = match &w.results["all"] {
            WalkResult::Found { at, checked, before, before_checked, .. } => format!(
                "{} {} -> {at} restores {names} ({}; {before} does not, {})",
                w.knob,
                w.from,
                how(*checked),
                how(*before_checked)
            ),
            WalkResult::Never => format!(
                "{} {} -> {}: no value restores {names}: moving this knob alone back does not suffice",
                w.knob, w.from, w.to
            ),
            WalkResult::Incomplete { at } => {
                format!(
                    "{} {} -> {}: incomplete at {at} (cut short by a limit): no verdict",
                    w.knob, w.from, w.to
                )
            }
        };
        let _ = writeln!(out, "    {line}");
        path_lines(out, w, &e.regressions);
        skipped_lines(out, w, "the candidate");
    }
    if !e.restoring.iter().any(|w| matches!(w.results["all"], WalkResult::Found { .. })) {
        let _ = writeln!(out, "  no single-knob retreat restores {names}");
    }
}

fn walk_json(w: &Walk) -> serde_json::Value {
    json!({
        "knob": w.knob,
        "from": w.from,
        "to": w.to,
        "values": w.values,
        "cells": w.cells.iter().map(|(n, c)| (n.clone(), c.iter().map(|&c| c.name()).collect::<Vec<_>>())).collect::<BTreeMap<_, _>>(),
        "results": w.results,
        "explore_command": w.explore_command,
        "skipped": w.skipped,
    })
}

/// The JSON report.
pub fn json(e: &Explanation, exit_code: u8) -> String {
    let side = |label: &str, r: &RunResult| json!({"policy": label, "unique_states": r.unique_states, "complete": r.complete});
    let doc = json!({
        "exit_code": exit_code,
        "model": e.scenario.name,
        "file": e.scenario.path,
        "base": side(&e.base_label, &e.base),
        "candidate": side(&e.candidate_label, &e.candidate),
        "knobs": e.knobs,
        "properties": e.rows.iter().map(|(n, b, c, ch)| json!({
            "property": n, "base": found_word(*b), "candidate": found_word(*c), "change": ch,
        })).collect::<Vec<_>>(),
        "regressions": e.regressions,
        "breaking": e.breaking.iter().map(walk_json).collect::<Vec<_>>(),
        "restoring": e.restoring.iter().map(walk_json).collect::<Vec<_>>(),
        "checked": e.checked.iter().map(|c| json!({
            "point": c.label,
            "policy": c.policy_toml,
            "unique_states": c.run.unique_states,
            "complete": c.run.complete,
            "elapsed_ms": c.run.elapsed_ms,
            "verdicts": c.run.properties.iter().map(|p| (p.name.to_string(), found_word(p.found))).collect::<BTreeMap<_, _>>(),
        })).collect::<Vec<_>>(),
        "elapsed_ms": e.elapsed_ms,
    });
    serde_json::to_string_pretty(&doc).expect("the report serializes")
}

/// The stderr line of a checked point.
pub fn point_line(c: &Checked, count: usize) -> String {
    let violated: Vec<String> =
        c.run.properties.iter().filter(|p| p.found == Found::Violated).map(|p| p.name.to_string()).collect();
    format!(
        "point {count}: {} ({} states, {:.2}s{}): {}",
        c.label,
        c.run.unique_states,
        c.run.elapsed_ms as f64 / 1000.0,
        if c.run.complete { "" } else { ", INCOMPLETE" },
        if violated.is_empty() {
            "nothing violated".into()
        } else {
            format!("violated {}", violated.join(", "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_step_by_tick_by_one_or_not_at_all() {
        let (p, _) = path_between("\"2s\"", "\"1500ms\"", 100);
        assert_eq!(p, vec!["2s", "1900ms", "1800ms", "1700ms", "1600ms", "1500ms"]);
        let (p, _) = path_between("1", "3", 100);
        assert_eq!(p, vec!["1", "2", "3"]);
        let (p, _) = path_between("4", "2", 100);
        assert_eq!(p, vec!["4", "3", "2"]);
        let (p, _) = path_between("\"coupled\"", "\"independent\"", 100);
        assert_eq!(p, vec!["coupled", "independent"]);
        let (p, _) = path_between("true", "false", 100);
        assert_eq!(p, vec!["true", "false"]);
        let (p, step) = path_between("\"250ms\"", "\"1s\"", 100);
        assert_eq!(p, vec!["250ms", "1s"]);
        assert!(step.contains("not whole numbers of ticks"), "{step}");
    }

    #[test]
    fn equal_durations_written_differently_do_not_differ() {
        let scenario =
            Scenario::load(Path::new("models/ack-timeout-eviction.toml")).expect("the model loads");
        let over = |text: &str| {
            let patch: crate::config::PolicyPatch = toml::from_str(text).expect("a policy");
            scenario.base_policy.then(&SourcedPolicy::new(patch, "test"))
        };
        let a = over("replica_ack_timeout = \"2s\"\nmax_attempts = 2");
        let b = over("replica_ack_timeout = \"2000ms\"\nmax_attempts = 4");
        let knobs = differing_knobs(&scenario, &a, &b);
        assert_eq!(knobs.len(), 1, "{knobs:?}");
        assert_eq!((knobs[0].key.as_str(), knobs[0].path.len()), ("max_attempts", 3));
    }
}
