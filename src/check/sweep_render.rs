//! A sweep's report: a table for the terminal, JSON for tools, and an SVG picture (a strip of
//! verdicts per property for one knob, a heat map per property for two) for a review.

use super::shard::Shard;
use super::sweep::{Boundary, Cell, Outcome, Plan, PropertySweep};
use super::{format_duration, Found};
use std::fmt::Write;
use std::time::Duration;

fn word(c: Cell) -> &'static str {
    match c {
        Cell::Holds => "holds",
        Cell::Violated => "VIOLATED",
        Cell::Incomplete => "incomplete",
        Cell::InferredHolds => "(holds)",
        Cell::InferredViolated => "(violated)",
        Cell::Unchecked => "-",
    }
}

const LEGEND_WORDS: &str = "holds, VIOLATED: checked; (holds), (violated): not checked, inferred from the checked values on both sides; incomplete: cut short by a limit; -: not checked";
const LEGEND_LETTERS: &str = "H, V: checked holds / violated; h, v: not checked, inferred from the checked values on both sides; ?: cut short by a limit; .: not checked";

/// The header lines: what was swept, over what, how many points were checked.
fn header(plan: &Plan, outcome: &Outcome, shard: Option<Shard>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sweep of {} ({}) over {}",
        plan.scenario.name,
        plan.scenario.path.display(),
        plan.base_label
    );
    for k in &plan.knobs {
        let _ = writeln!(out, "  {}: {} values", k.spec, k.values.len());
        if let Some(f) = k.fault {
            let shortest =
                crate::config::duration::format_ms(u64::from(f.shortest_ticks) * plan.scenario.tick_ms);
            let _ = writeln!(
                out,
                "    each value is the longest the fault lasts: it ends by itself from {shortest} up to the value"
            );
        }
    }
    let shard = shard.map(|s| format!(" (shard {}/{})", s.index, s.count)).unwrap_or_default();
    let _ = writeln!(
        out,
        "  {} of {} points checked{shard} in {}",
        outcome.checked.len(),
        plan.point_count(),
        format_duration(Duration::from_millis(outcome.elapsed_ms))
    );
    out
}

/// Values at `points` of a line as ranges of neighbours: "300ms..1s, 1500ms".
fn ranges(labels: &[String], positions: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < positions.len() {
        let mut j = i;
        while j + 1 < positions.len() && positions[j + 1] == positions[j] + 1 {
            j += 1;
        }
        if i == j {
            parts.push(labels[positions[i]].clone());
        } else {
            parts.push(format!("{}..{}", labels[positions[i]], labels[positions[j]]));
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// Boundaries as lines; on a grid, those of neighbouring lines with the same two values are
/// one line (`write_shard_suffixes=2..16: violated at ..., holds at ...`).
fn boundary_lines(plan: &Plan, boundaries: &[Boundary]) -> Vec<String> {
    // The other knob's value index of a boundary's line.
    let fixed_index = |b: &Boundary| -> Option<usize> {
        let (key, value) = b.fixed.as_ref()?;
        let knob = plan.knobs.iter().find(|k| &k.key == key)?;
        knob.values.iter().position(|v| &v.label == value)
    };
    let mut groups: Vec<Vec<&Boundary>> = Vec::new();
    for b in boundaries {
        if let Some(last) = groups.last_mut() {
            let prev = last[last.len() - 1];
            let same = prev.knob == b.knob
                && prev.violated_at == b.violated_at
                && prev.holds_at == b.holds_at
                && prev.adjacent == b.adjacent;
            let next = matches!((fixed_index(prev), fixed_index(b)), (Some(i), Some(j)) if j == i + 1);
            if same && next {
                last.push(b);
                continue;
            }
        }
        groups.push(vec![b]);
    }
    groups
        .into_iter()
        .map(|g| {
            let (first, last) = (g[0], g[g.len() - 1]);
            let at = match (&first.fixed, &last.fixed) {
                (Some((key, a)), Some((_, b))) if g.len() > 1 => format!("{key}={a}..{b}: "),
                (Some((key, a)), _) => format!("{key}={a}: "),
                _ => String::new(),
            };
            let inferred = g.iter().filter(|b| b.inferred).count();
            let how = match (first.adjacent, inferred) {
                (false, _) => "values between them not decided".to_string(),
                (true, 0) => "neighbouring values, both checked".to_string(),
                (true, n) if g.len() == 1 && n == 1 => "neighbouring values, one inferred".to_string(),
                (true, n) => {
                    format!("neighbouring values; on {n} of these {} lines one is inferred", g.len())
                }
            };
            format!(
                "{at}violated at {}={}, holds at {}={} ({how})",
                first.knob, first.violated_at, first.knob, first.holds_at
            )
        })
        .collect()
}

/// The table and the per-property summary, with the counterexample at each boundary's unsafe
/// side.
pub fn human(plan: &Plan, outcome: &Outcome, shard: Option<Shard>) -> String {
    let mut out = header(plan, outcome, shard);
    out.push('\n');
    if plan.knobs.len() == 1 {
        line_table(&mut out, plan, outcome);
    } else {
        for p in &outcome.properties {
            grid_table(&mut out, plan, p);
        }
        let _ = writeln!(out, "  {LEGEND_LETTERS}");
    }
    out.push('\n');
    for p in &outcome.properties {
        summary(&mut out, plan, outcome, p);
    }
    out
}

fn line_table(out: &mut String, plan: &Plan, outcome: &Outcome) {
    let knob = &plan.knobs[0];
    let first = knob.values.iter().map(|v| v.label.len()).max().unwrap_or(0).max(knob.key.len());
    let _ = write!(out, "  {:<first$}", knob.key);
    for p in &outcome.properties {
        let _ = write!(out, "  {:<w$}", p.name.as_str(), w = p.name.as_str().len().max(10));
    }
    out.push('\n');
    for (i, v) in knob.values.iter().enumerate() {
        let mut row = format!("  {:<first$}", v.label);
        for p in &outcome.properties {
            let _ = write!(row, "  {:<w$}", word(p.cells[i]), w = p.name.as_str().len().max(10));
        }
        let _ = writeln!(out, "{}", row.trim_end());
    }
    let _ = writeln!(out, "  {LEGEND_WORDS}");
}

fn grid_table(out: &mut String, plan: &Plan, p: &PropertySweep) {
    let (a, b) = (&plan.knobs[0], &plan.knobs[1]);
    let _ = writeln!(out, "  {}  (rows: {}, columns: {})", p.name, b.key, a.key);
    let row_w = b.values.iter().map(|v| v.label.len()).max().unwrap_or(0);
    let col_w = a.values.iter().map(|v| v.label.len()).max().unwrap_or(1);
    let _ = write!(out, "    {:<row_w$}", "");
    for v in &a.values {
        let _ = write!(out, " {:>col_w$}", v.label);
    }
    out.push('\n');
    for (j, bv) in b.values.iter().enumerate() {
        let _ = write!(out, "    {:<row_w$}", bv.label);
        for i in 0..a.values.len() {
            let _ = write!(out, " {:>col_w$}", p.cells[plan.point_index(&[i, j])].letter());
        }
        out.push('\n');
    }
    out.push('\n');
}

fn summary(out: &mut String, plan: &Plan, outcome: &Outcome, p: &PropertySweep) {
    let n = plan.point_count();
    let checked = p.cells.iter().filter(|c| c.checked()).count();
    let holds = p.safe_points.len();
    let violated = p.cells.iter().filter(|c| c.verdict() == Some(crate::config::Verdict::Violated)).count();
    let mut line = format!("  {}: ", p.name);
    if holds == n {
        line.push_str("holds at every point");
    } else if violated == n {
        line.push_str("violated at every point");
    } else if plan.knobs.len() == 1 && holds > 0 {
        let labels: Vec<String> = plan.knobs[0].values.iter().map(|v| v.label.clone()).collect();
        let _ = write!(line, "holds for {} in {}", plan.knobs[0].key, ranges(&labels, &p.safe_points));
    } else {
        let _ = write!(line, "holds at {holds} of {n} points");
    }
    let undecided = n - holds - violated;
    if undecided > 0 {
        let _ = write!(line, " ({undecided} undecided)");
    }
    let monotone = if p.monotone {
        format!("verdict monotone along each line at the {checked} points checked")
    } else {
        "NOT MONOTONE: the verdict changes more than once along a line; every change is listed".to_string()
    };
    let _ = writeln!(out, "{line}; {monotone}");
    for line in boundary_lines(plan, &p.boundaries) {
        let _ = writeln!(out, "    boundary: {line}");
    }
    // The counterexample at the unsafe side of the first boundary in full; at the others, how
    // to open it.
    let mut seen = std::collections::BTreeSet::new();
    let found: Vec<(usize, &super::Counterexample)> = p
        .boundaries
        .iter()
        .filter(|b| seen.insert(b.violated_point))
        .filter_map(|b| Some((b.violated_point, outcome.counterexample(b.violated_point, p.name)?)))
        .collect();
    for (i, (point, cx)) in found.iter().enumerate().take(EXTRA_COUNTEREXAMPLES_MAX + 1) {
        let at = plan.point_label(*point);
        if i > 0 {
            let _ = writeln!(
                out,
                "    counterexample at {at} ({} steps): {}, then open {}",
                cx.steps.len(),
                cx.explore_command,
                cx.explorer_url
            );
            continue;
        }
        let _ = writeln!(out, "    counterexample at {at} ({} steps):", cx.steps.len());
        for s in &cx.steps {
            if cx.loop_from_step == Some(s.step) {
                let _ = writeln!(out, "      --- loop: the steps below repeat forever ---");
            }
            let _ = writeln!(out, "      {:>3}. [t={:>5}ms] {}", s.step, s.time_ms, s.action);
        }
        let _ = writeln!(out, "      explore: {}", cx.explore_command);
        let _ = writeln!(out, "      then open {}", cx.explorer_url);
    }
    let more = found.len().saturating_sub(EXTRA_COUNTEREXAMPLES_MAX + 1);
    if more > 0 {
        let _ = writeln!(
            out,
            "    ({more} more counterexamples at other boundaries: --format json lists them all)"
        );
    }
}

/// Counterexamples listed (command and link) after the first, per property; the JSON has all.
const EXTRA_COUNTEREXAMPLES_MAX: usize = 3;

fn found_name(f: Found) -> &'static str {
    match f {
        Found::Holds => "holds",
        Found::Violated => "violated",
        Found::Unknown => "incomplete",
    }
}

/// The JSON document (its shape is in docs/sweep.md).
pub fn json(plan: &Plan, outcome: &Outcome, shard: Option<Shard>, exit_code: u8) -> String {
    use serde_json::json;
    let knobs: Vec<_> = plan
        .knobs
        .iter()
        .map(|k| json!({"key": k.key, "spec": k.spec, "values": k.values.iter().map(|v| &v.label).collect::<Vec<_>>()}))
        .collect();
    let checked: Vec<_> = outcome
        .checked
        .iter()
        .map(|c| {
            json!({
                "point": c.point,
                "values": c.values,
                "unique_states": c.unique_states,
                "complete": c.complete,
                "elapsed_ms": c.elapsed_ms,
                "verdicts": c.verdicts.iter().map(|(n, f)| (n.as_str().to_string(), json!(found_name(*f)))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    let properties: Vec<_> = outcome
        .properties
        .iter()
        .map(|p| {
            let boundaries: Vec<_> = p
                .boundaries
                .iter()
                .map(|b| {
                    let cx = outcome.counterexample(b.violated_point, p.name);
                    json!({
                        "knob": b.knob,
                        "fixed": b.fixed.as_ref().map(|(k, v)| json!({"key": k, "value": v})),
                        "holds_at": b.holds_at,
                        "holds_point": b.holds_point,
                        "violated_at": b.violated_at,
                        "violated_point": b.violated_point,
                        "adjacent": b.adjacent,
                        "inferred": b.inferred,
                        "violated_policy": plan.point_policy_toml(b.violated_point),
                        "counterexample": cx,
                    })
                })
                .collect();
            json!({
                "name": p.name,
                "monotone": p.monotone,
                "cells": p.cells.iter().map(|c| c.name()).collect::<Vec<_>>(),
                "safe_points": p.safe_points,
                "boundaries": boundaries,
            })
        })
        .collect();
    let mut doc = json!({
        "exit_code": exit_code,
        "model": plan.scenario.name,
        "file": plan.scenario.path,
        "base": plan.base_label,
        "knobs": knobs,
        "points": plan.point_count(),
        "shard": shard,
        "elapsed_ms": outcome.elapsed_ms,
        "checked": checked,
        "properties": properties,
    });
    if shard.is_some() {
        // What `replicheck merge` needs to give the merged boundaries their counterexamples.
        let all: Vec<_> = outcome
            .counterexamples
            .iter()
            .flat_map(|(point, found)| {
                found
                    .iter()
                    .map(move |(name, cx)| json!({"point": point, "property": name, "counterexample": cx}))
            })
            .collect();
        doc["counterexamples"] = all.into();
    }
    serde_json::to_string_pretty(&doc).expect("reports serialize")
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn fill(c: Cell) -> &'static str {
    match c {
        Cell::Holds => "#2e9d4a",
        Cell::Violated => "#d7301f",
        Cell::InferredHolds => "#b9e3c2",
        Cell::InferredViolated => "#f5b9ae",
        Cell::Incomplete => "#9e9e9e",
        Cell::Unchecked => "#ffffff",
    }
}

const LABEL_W: usize = 190;
const CELL_H: usize = 22;
const FAMILY: &str = "font-family=\"Helvetica, Arial, sans-serif\"";
const FONT: &str = "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\"";

/// One panel: rows by columns of cells, row labels on the left, column labels below (turned
/// when narrow), and a thick line wherever neighbouring cells disagree (between rows only if
/// `rows_are_a_knob`). Returns the panel's height.
#[allow(clippy::too_many_arguments)]
fn panel(
    out: &mut String,
    y0: usize,
    title: &str,
    rows: &[String],
    cols: &[String],
    cell: &dyn Fn(usize, usize) -> Cell,
    rows_are_a_knob: bool,
    cell_w: usize,
) -> usize {
    let _ =
        writeln!(out, "<text x=\"10\" y=\"{}\" {FONT} font-weight=\"bold\">{}</text>", y0 + 14, xml(title));
    let top = y0 + 24;
    for (r, label) in rows.iter().enumerate() {
        let y = top + r * CELL_H;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" {FONT} text-anchor=\"end\">{}</text>",
            LABEL_W - 6,
            y + 15,
            xml(label)
        );
        for (c, col) in cols.iter().enumerate() {
            let x = LABEL_W + c * cell_w;
            let v = cell(r, c);
            let _ = writeln!(
                out,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{cell_w}\" height=\"{CELL_H}\" fill=\"{}\" stroke=\"#e0e0e0\"><title>{} / {}: {}</title></rect>",
                fill(v),
                xml(label),
                xml(col),
                v.name()
            );
            if v == Cell::Incomplete {
                let _ = writeln!(
                    out,
                    "<text x=\"{}\" y=\"{}\" {FONT} text-anchor=\"middle\" fill=\"#fff\">?</text>",
                    x + cell_w / 2,
                    y + 15
                );
            }
        }
    }
    // Boundaries: between horizontal neighbours, and vertical ones on a grid.
    for r in 0..rows.len() {
        for c in 0..cols.len() {
            let here = cell(r, c).verdict();
            if c + 1 < cols.len()
                && here.is_some()
                && cell(r, c + 1).verdict().is_some()
                && cell(r, c + 1).verdict() != here
            {
                let x = LABEL_W + (c + 1) * cell_w;
                let y = top + r * CELL_H;
                let _ = writeln!(
                    out,
                    "<line x1=\"{x}\" y1=\"{y}\" x2=\"{x}\" y2=\"{}\" stroke=\"#000\" stroke-width=\"3\"/>",
                    y + CELL_H
                );
            }
            if rows_are_a_knob
                && r + 1 < rows.len()
                && here.is_some()
                && cell(r + 1, c).verdict().is_some()
                && cell(r + 1, c).verdict() != here
            {
                let x = LABEL_W + c * cell_w;
                let y = top + (r + 1) * CELL_H;
                let _ = writeln!(
                    out,
                    "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#000\" stroke-width=\"3\"/>",
                    x + cell_w
                );
            }
        }
    }
    // Column labels: every one if there is room, else every k-th, turned.
    let bottom = top + rows.len() * CELL_H;
    let widest = cols.iter().map(|c| c.len()).max().unwrap_or(1);
    let turned = widest * 7 > cell_w;
    let every = if turned { (14 / cell_w.max(1)).max(1) } else { 1 };
    for (c, label) in cols.iter().enumerate() {
        if c % every != 0 && c + 1 != cols.len() {
            continue;
        }
        let x = LABEL_W + c * cell_w + cell_w / 2;
        if turned {
            let y = bottom + 8;
            let _ = writeln!(
                out,
                "<text x=\"{x}\" y=\"{y}\" {FONT} text-anchor=\"end\" transform=\"rotate(-60 {x} {y})\">{}</text>",
                xml(label)
            );
        } else {
            let _ = writeln!(
                out,
                "<text x=\"{x}\" y=\"{}\" {FONT} text-anchor=\"middle\">{}</text>",
                bottom + 16,
                xml(label)
            );
        }
    }
    let label_h = if turned { widest * 6 + 16 } else { 24 };
    (bottom - y0) + label_h
}

/// The picture: for one knob a strip of verdicts per property (a row each), for two knobs a
/// heat map per property; a thick line marks each boundary.
pub fn svg(plan: &Plan, outcome: &Outcome) -> String {
    let cols: Vec<String> = plan.knobs[0].values.iter().map(|v| v.label.clone()).collect();
    let cell_w = (900 / cols.len().max(1)).clamp(14, 48);
    let width = LABEL_W + cols.len() * cell_w + 20;
    let mut body = String::new();
    let mut y = 0;
    let title = format!(
        "{}: {} over {}",
        plan.scenario.name,
        plan.knobs.iter().map(|k| k.key.as_str()).collect::<Vec<_>>().join(" x "),
        plan.base_label
    );
    let _ = writeln!(
        body,
        "<text x=\"10\" y=\"18\" {FAMILY} font-size=\"15\" font-weight=\"bold\">{}</text>",
        xml(&title)
    );
    y += 28;
    if plan.knobs.len() == 1 {
        let rows: Vec<String> = outcome.properties.iter().map(|p| p.name.as_str().to_string()).collect();
        let cell = |r: usize, c: usize| outcome.properties[r].cells[c];
        y += panel(&mut body, y, &plan.knobs[0].key, &rows, &cols, &cell, false, cell_w);
    } else {
        let rows: Vec<String> =
            plan.knobs[1].values.iter().map(|v| format!("{}={}", plan.knobs[1].key, v.label)).collect();
        for p in &outcome.properties {
            let cell = |r: usize, c: usize| p.cells[plan.point_index(&[c, r])];
            let title = format!("{} (columns: {})", p.name, plan.knobs[0].key);
            y += panel(&mut body, y, &title, &rows, &cols, &cell, true, cell_w) + 10;
        }
    }
    // Legend.
    let items = [
        (Cell::Holds, "holds"),
        (Cell::Violated, "violated"),
        (Cell::InferredHolds, "holds (inferred)"),
        (Cell::InferredViolated, "violated (inferred)"),
        (Cell::Incomplete, "incomplete"),
        (Cell::Unchecked, "not checked"),
    ];
    y += 6;
    let mut x = 10;
    for (c, label) in items {
        let _ = writeln!(
            body,
            "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\"/>",
            fill(c)
        );
        let _ = writeln!(body, "<text x=\"{}\" y=\"{}\" {FONT}>{label}</text>", x + 18, y + 12);
        x += 18 + label.len() * 7 + 16;
    }
    let _ = writeln!(
        body,
        "<line x1=\"{x}\" y1=\"{y}\" x2=\"{x}\" y2=\"{}\" stroke=\"#000\" stroke-width=\"3\"/>",
        y + 14
    );
    let _ = writeln!(body, "<text x=\"{}\" y=\"{}\" {FONT}>boundary</text>", x + 6, y + 12);
    let width = width.max(x + 80);
    let height = y + 26;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n{body}</svg>\n"
    )
}

/// One line on stderr per checked point.
pub fn point_line(plan: &Plan, r: &super::RunResult, point: usize, count: usize) -> String {
    let violated: Vec<&str> =
        r.properties.iter().filter(|p| p.found == Found::Violated).map(|p| p.name.as_str()).collect();
    let unknown: Vec<&str> =
        r.properties.iter().filter(|p| p.found == Found::Unknown).map(|p| p.name.as_str()).collect();
    format!(
        "point {count}: {} ({} states, {:.2}s){}: {}",
        plan.point_label(point),
        r.unique_states,
        r.elapsed_ms as f64 / 1000.0,
        if unknown.is_empty() {
            String::new()
        } else {
            format!(", INCOMPLETE: no verdict for {}", unknown.join(", "))
        },
        if violated.is_empty() {
            "nothing violated".to_string()
        } else {
            format!("violated {}", violated.join(", "))
        }
    )
}
