//! The lint report as text and as JSON.

use super::{Backing, Linted, Rule, RULES};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

impl Linted {
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Human => self.human(),
            Format::Json => format!("{}\n", self.json()),
        }
    }

    fn subject(&self) -> String {
        match &self.model {
            Some(m) => format!("{} over {} [policy]", self.policy.display(), m.display()),
            None => self.policy.display().to_string(),
        }
    }

    pub fn human(&self) -> String {
        let r = &self.report;
        let mut out = format!("lint {}\n", self.subject());
        match &self.checked {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "checked: {} states explored{}; an error is a violation the checker found",
                    c.unique_states,
                    if c.complete { ", complete" } else { ", INCOMPLETE (a limit was reached)" }
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "static only: nothing is confirmed by the checker, so every finding is a warning"
                );
            }
        }
        let mut explained: Vec<&str> = Vec::new();
        for f in &r.findings {
            let _ = writeln!(out, "\n{}", f.one_line());
            if let Some(line) = f.backing_line() {
                let _ = writeln!(out, "    {line}");
            }
            // The paragraph once per rule, under its first finding.
            if !explained.contains(&f.rule.id) {
                explained.push(f.rule.id);
                let _ = writeln!(out, "    protects: {}", f.rule.protects.join(", "));
                let _ = writeln!(out, "    origin: {}", f.rule.origin);
                for line in wrap(f.rule.explanation, 100) {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        if !r.not_run.is_empty() {
            let ids: Vec<&str> = r.not_run.iter().map(|rule| rule.id).collect();
            let _ = writeln!(
                out,
                "\nnot run: {} (they compare timeouts with the network: pass --model)",
                ids.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "\n{} error(s), {} warning(s) ({} rules run)",
            r.errors(),
            r.warnings(),
            RULES.len() - r.not_run.len() - r.other_family
        );
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let r = &self.report;
        let rule_json = |rule: &Rule| {
            serde_json::json!({
                "id": rule.id,
                "name": rule.name,
                "severity": rule.severity.as_str(),
                "protects": rule.protects,
                "origin": rule.origin,
                "explanation": rule.explanation,
            })
        };
        let findings: Vec<serde_json::Value> = r
            .findings
            .iter()
            .map(|f| {
                let mut v = rule_json(f.rule);
                v["rule_severity"] = v["severity"].clone();
                v["severity"] = f.severity().as_str().into();
                v["message"] = f.message.clone().into();
                v["checker"] = match &f.backing {
                    Backing::Static => serde_json::json!({ "verdict": "not_run" }),
                    Backing::Violation { violated } => serde_json::json!({
                        "verdict": "violated",
                        "property": violated[0].0,
                        "steps": violated[0].1,
                        "violated": violated.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
                    }),
                    Backing::Refuted { properties } => {
                        serde_json::json!({ "verdict": "holds", "properties": properties })
                    }
                    Backing::Undecided => serde_json::json!({ "verdict": "unknown" }),
                    Backing::NotInModel => serde_json::json!({ "verdict": "not_in_model" }),
                };
                v
            })
            .collect();
        let not_run: Vec<serde_json::Value> = r
            .not_run
            .iter()
            .map(|rule| serde_json::json!({ "id": rule.id, "name": rule.name, "reason": "needs --model" }))
            .collect();
        serde_json::json!({
            "exit_code": self.exit_code(),
            "policy": self.policy.display().to_string(),
            "model": self.model.as_ref().map(|m| m.display().to_string()),
            "checked": self.checked.as_ref().map(|c| serde_json::json!({
                "unique_states": c.unique_states,
                "complete": c.complete,
            })),
            "errors": r.errors(),
            "warnings": r.warnings(),
            "findings": findings,
            "not_run": not_run,
        })
    }
}

/// Greedy word wrap at `width` columns.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_words_and_width() {
        let lines = wrap("a bb ccc dddd eeeee", 8);
        assert_eq!(lines, ["a bb ccc", "dddd", "eeeee"]);
    }
}
