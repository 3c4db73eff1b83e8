//! Why a committed certificate differs from what the tool finds now: the two certificates are
//! compared section by section, and each difference is named by its dotted key with its old
//! and new value (`scope.faults.budget 1 -> 2`, `read_repair (absent) -> true`).

use super::cert::{Certificate, CounterexampleSummary};
use crate::config::PropertyName;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

const ABSENT: &str = "(absent)";

/// A TOML basic string, as a value is quoted in a reason.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every leaf of a TOML value by dotted key (`faults.budget`, `steps[3].action`), with its
/// value as TOML text. Arrays of scalars are one leaf.
fn leaves(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(&name, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().any(|v| v.is_table() || v.is_array()) => {
            for (i, v) in items.iter().enumerate() {
                leaves(&format!("{prefix}[{i}]"), v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), quote(s));
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The leaves of a certificate section (`None`: an absent one, with none).
fn leaves_of<T: Serialize>(section: Option<&T>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(section) = section {
        let value = toml::Value::try_from(section).expect("certificate sections serialize to TOML");
        leaves("", &value, &mut out);
    }
    out
}

/// `key old -> new` for each leaf that differs between two values of a section, in key order.
fn changes<T: Serialize>(old: Option<&T>, new: Option<&T>) -> Vec<String> {
    let (a, b) = (leaves_of(old), leaves_of(new));
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let x = a.get(k).map(String::as_str).unwrap_or(ABSENT);
            let y = b.get(k).map(String::as_str).unwrap_or(ABSENT);
            (x != y).then(|| format!("{k} {x} -> {y}"))
        })
        .collect()
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// Why `old` (the committed certificate) differs from `new` (what the tool writes now), one
/// reason per item, most fundamental first. Empty when they are equal.
pub fn explain(old: &Certificate, new: &Certificate) -> Vec<String> {
    let mut reasons = Vec::new();
    if old.format != new.format {
        reasons.push(format_changed(old.format, new.format));
    }
    if old.tool_version != new.tool_version {
        reasons.push(format!("tool version changed: {} -> {}", old.tool_version, new.tool_version));
    }
    let model_changed = old.model_file != new.model_file;
    if model_changed {
        reasons.push(model_file_changed(old, new));
    }
    reasons.extend(policy_changed(old, new));
    reasons.extend(policy_code_changed(old, new));
    // Part of the scope is derived (partition capacities, where keys land), so it can change
    // with the model file unchanged: through a built-in policy default or the code that
    // derives it. Name those changes too; above they are listed with the model file's.
    if !model_changed && old.scope != new.scope {
        let what: Vec<String> =
            changes(Some(&old.scope), Some(&new.scope)).into_iter().map(|c| format!("scope.{c}")).collect();
        reasons.push(format!("scope changed with the same model file: {}", what.join("; ")));
    }
    for c in changes(Some(&old.verdicts), Some(&new.verdicts)) {
        if let Some((k, rest)) = c.split_once(".found ") {
            reasons.push(format!("verdict changed: {k} {}", rest.replace('"', "")));
        }
    }
    reasons.extend(exploration_changed(old, new));
    reasons.extend(counterexample_changes(old, new));
    if reasons.is_empty() && old != new {
        // Every field is itemised above; this is a guard, not an expected outcome.
        reasons.push("the certificate differs from what `replicheck prove` writes".into());
    }
    reasons
}

/// The reason for a certificate of another format, which is not compared further.
pub fn format_changed(old: i64, new: i64) -> String {
    format!("certificate format changed: {old} -> {new} (regenerate)")
}

/// The model file's hash or path differs: name what the model file decides that changed (its
/// name and description, the scope, the expected verdicts).
fn model_file_changed(old: &Certificate, new: &Certificate) -> String {
    let mut details = Vec::new();
    if old.model != new.model {
        details.push(format!("model {} -> {}", quote(&old.model), quote(&new.model)));
    }
    if old.description != new.description {
        details.push(format!("description {} -> {}", quote(&old.description), quote(&new.description)));
    }
    details.extend(changes(Some(&old.scope), Some(&new.scope)).into_iter().map(|c| format!("scope.{c}")));
    details.extend(
        changes(Some(&old.verdicts), Some(&new.verdicts))
            .into_iter()
            .filter(|c| c.split(' ').next().is_some_and(|k| k.ends_with(".expected")))
            .map(|c| format!("expect {c}")),
    );
    let what = if !details.is_empty() {
        details.join("; ")
    } else if old.policy.sha256 != new.policy.sha256 {
        "the scope and expectations recorded here are the same; its policy is not (below)".to_string()
    } else {
        "the scope, policy and expectations recorded here are the same (a comment, or another variant's policy?)"
            .to_string()
    };
    let (a, b) = (&old.model_file, &new.model_file);
    let moved = if a.path != b.path { format!(", moved {} -> {}", a.path, b.path) } else { String::new() };
    format!("model file changed (sha256 {} -> {}{moved}): {what}", short(&a.sha256), short(&b.sha256))
}

/// An effective policy value (or only the policy's hash) differs.
fn policy_changed(old: &Certificate, new: &Certificate) -> Option<String> {
    let values = changes(Some(&old.policy.values), Some(&new.policy.values));
    if old.policy.sha256 == new.policy.sha256 && values.is_empty() {
        return None;
    }
    let what = if values.is_empty() {
        format!("sha256 {} -> {}", short(&old.policy.sha256), short(&new.policy.sha256))
    } else {
        values.join(", ")
    };
    Some(format!("policy changed: {what}"))
}

/// The policy code's hash differs: name each file modified, added or removed.
fn policy_code_changed(old: &Certificate, new: &Certificate) -> Option<String> {
    let (a, b) = (&old.policy_code, &new.policy_code);
    if a.sha256 == b.sha256 {
        return None;
    }
    let files: BTreeSet<&String> = a.files.keys().chain(b.files.keys()).collect();
    let what: Vec<String> = files
        .into_iter()
        .filter_map(|file| match (a.files.get(file), b.files.get(file)) {
            (None, Some(_)) => Some(format!("{file} added")),
            (Some(_), None) => Some(format!("{file} removed")),
            (Some(x), Some(y)) if x != y => Some(format!("{file} modified")),
            _ => None,
        })
        .collect();
    Some(format!(
        "policy code changed (sha256 {} -> {}): {}",
        short(&a.sha256),
        short(&b.sha256),
        if what.is_empty() { "the policy source hashes differ".to_string() } else { what.join(", ") }
    ))
}

/// The state space or the completeness of its exploration differs.
fn exploration_changed(old: &Certificate, new: &Certificate) -> Option<String> {
    let (a, b) = (&old.exploration, &new.exploration);
    let mut changed = changes(Some(a), Some(b));
    if changed.is_empty() {
        return None;
    }
    let rank = |c: &String| {
        ["complete ", "stopped ", "unique_states ", "transitions ", "max_depth "]
            .iter()
            .position(|k| c.starts_with(k))
            .unwrap_or(usize::MAX)
    };
    changed.sort_by_key(rank);
    let count = a.unique_states != b.unique_states || a.transitions != b.transitions;
    let head = if count { "state count changed" } else { "exploration changed" };
    Some(format!("{head}: {}", changed.join(", ")))
}

/// A trace's steps as compared: the model time and the action.
fn steps(cx: &CounterexampleSummary) -> Vec<String> {
    cx.steps.iter().map(|s| format!("t={}ms {}", s.time_ms, s.action)).collect()
}

/// For each property whose counterexample differs: its length and its first differing step.
fn counterexample_changes(old: &Certificate, new: &Certificate) -> Vec<String> {
    let (a, b) = (&old.counterexamples, &new.counterexamples);
    // Report in the properties' own order, not alphabetically.
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect::<BTreeSet<_>>().into_iter().collect();
    names.sort_by_key(|n| PropertyName::parse(n).map(|p| p as usize).unwrap_or(usize::MAX));
    let mut out = Vec::new();
    for name in names {
        let (x, y) = (a.get(name), b.get(name));
        if x == y {
            continue;
        }
        let line = match (x.map(steps), y.map(steps)) {
            (None, Some(y)) => format!("counterexample for {name}: none -> {} steps", y.len()),
            (Some(x), None) => format!("counterexample for {name}: {} steps -> none", x.len()),
            (Some(x), Some(y)) if x != y => {
                let i = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
                let at = |v: &[String]| v.get(i).map(|s| quote(s)).unwrap_or_else(|| "(end of trace)".into());
                format!(
                    "counterexample for {name} changed: {} steps -> {} steps; first difference at step {}: {} -> {}",
                    x.len(),
                    y.len(),
                    i + 1,
                    at(&x),
                    at(&y)
                )
            }
            _ => format!("counterexample for {name} changed: {}", changes(x, y).join(", ")),
        };
        out.push(line);
    }
    out
}
