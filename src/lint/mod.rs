//! `replicheck lint`: static rules over a resolved policy, run before any exploration.
//!
//! Each rule is a pure function of the resolved [`Policy`] and, for the rules that compare
//! timeouts with the network, the [`Scenario`] (its links, fault menu and coordinator). The
//! rules ask `src/policy` the questions they can (do two quorums intersect? what health does a
//! silence imply? does the breaker ever trip? what does a retry wait?), so lint and the model
//! read the same policy semantics.
//!
//! What lint cannot see: anything that depends on the interleaving of events (that is what
//! `check` is for). Its rules are cheap bounds: a policy with no static finding can still fail
//! a model check, and the round-trip bounds are worst cases over every node, whether or not
//! the workload ever sends it a request.
//!
//! So a rule's finding is only a *candidate*: an `error` is what the checker confirms. With
//! `--model`, `replicheck lint` explores the model under the policy (`check::confirm_lint`):
//! a candidate whose protected properties the checker finds violated is an error; one the
//! checker refutes (complete exploration, every protected property holds) or cannot decide
//! is a warning; and a violation that no rule flagged becomes an error of its own
//! ([`CHECKER_VIOLATION`]). Without a model (or with `--static`) nothing is confirmed and
//! every finding is a warning. An error therefore never contradicts the checker.

mod render;
mod rules;
mod table;

pub use render::Format;
pub use table::{CHECKER_VIOLATION, RULES};

use crate::config::duration::format_ms;
use crate::config::{self, ConfigError, Found, Policy, PropertyName, Scenario, SourcedPolicy};
use crate::model::WorldConfig;
use crate::policy::leader::Replication;
use crate::policy::Ticks;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// What a rule sees: the policy, the tick its durations are counted in, and the environment
/// when a model was given.
pub struct Input<'a> {
    pub policy: &'a Policy,
    pub tick_ms: u64,
    pub scenario: Option<&'a Scenario>,
    /// The scenario resolved under this policy (partition loads and capacities per tick).
    pub world: Option<&'a WorldConfig>,
}

impl Input<'_> {
    fn dur(&self, ticks: Ticks) -> String {
        format_ms(u64::from(ticks) * self.tick_ms)
    }
}

/// A static rule. `check` returns one message per problem it finds (possibly several).
pub struct Rule {
    pub id: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// What the rule flags, in a few words (the README's table).
    pub what: &'static str,
    /// The properties a violation endangers.
    pub protects: &'static [&'static str],
    /// The incident or well-known failure the rule comes from.
    pub origin: &'static str,
    /// One paragraph: why the configuration is dangerous.
    pub explanation: &'static str,
    /// The rule compares the policy with the environment, so it runs only with a model.
    pub needs_model: bool,
    /// The protocol families whose policies it judges.
    pub families: Families,
    check: fn(&Input) -> Vec<String>,
}

/// Which protocol families a rule is about: quorums, eviction, read repair and routing by
/// capacity are the quorum family's; the detector and client retries are both families'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Families {
    Both,
    Quorum,
    Leader,
}

impl Families {
    pub fn contains(self, family: Replication) -> bool {
        match self {
            Families::Both => true,
            Families::Quorum => family == Replication::Quorum,
            Families::Leader => family == Replication::Leader,
        }
    }
}

/// One problem found by one rule.
pub struct Finding {
    pub rule: &'static Rule,
    pub message: String,
    /// What the checker said about it.
    pub backing: Backing,
}

/// What the model checker says about a finding: only a violation it finds makes an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Not checked: no model was given, or `--static`.
    Static,
    /// The checker finds these protected properties violated in the model under this policy
    /// (each with its counterexample's length in steps; at least one).
    Violation { violated: Vec<(String, usize)> },
    /// The checker explored the model completely and every property the rule protects that
    /// the model checks (these) holds.
    Refuted { properties: Vec<String> },
    /// The exploration was cut short (a state or memory limit) before it decided them.
    Undecided,
    /// The model checks none of the properties the rule protects.
    NotInModel,
}

impl Finding {
    /// An error only when the rule is one that names a hazard (not a mere smell) and the
    /// checker found the violation.
    pub fn severity(&self) -> Severity {
        match (&self.rule.severity, &self.backing) {
            (Severity::Error, Backing::Violation { .. }) => Severity::Error,
            _ => Severity::Warning,
        }
    }

    /// `error[RC003] ack-deadline-within-round-trip: message`
    pub fn one_line(&self) -> String {
        format!("{}[{}] {}: {}", self.severity().as_str(), self.rule.id, self.rule.name, self.message)
    }

    /// What the checker said, in one line (`None` for a warning-class rule left unchecked).
    pub fn backing_line(&self) -> Option<String> {
        match &self.backing {
            Backing::Static if self.rule.severity == Severity::Error => Some(
                "checker: not run (give --model, without --static): a candidate, reported as a warning"
                    .into(),
            ),
            Backing::Static => None,
            Backing::Violation { violated } => {
                let each: Vec<String> =
                    violated.iter().map(|(p, steps)| format!("{p} ({steps}-step counterexample)")).collect();
                Some(format!(
                    "checker: violated in this model: {} (run `replicheck check` with this policy)",
                    each.join(", ")
                ))
            }
            Backing::Refuted { properties } => Some(format!(
                "checker: {} hold(s) in this model (complete exploration): a warning, not an error",
                properties.join(", ")
            )),
            Backing::Undecided => {
                Some("checker: exploration cut short before a verdict: a warning, not an error".into())
            }
            Backing::NotInModel => Some(format!(
                "checker: this model checks none of {}: a warning, not an error",
                self.rule.protects.join(", ")
            )),
        }
    }
}

/// Every finding of every rule, and the rules that could not run.
pub struct Report {
    pub findings: Vec<Finding>,
    /// Rules that need a model and were given none.
    pub not_run: Vec<&'static Rule>,
    /// Rules about the other protocol family than the policy's (not run, and not listed).
    pub other_family: usize,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.findings.iter().filter(|f| f.severity() == Severity::Error).count()
    }

    pub fn warnings(&self) -> usize {
        self.findings.iter().filter(|f| f.severity() == Severity::Warning).count()
    }

    /// Back every finding with the checker's verdicts for the model and policy linted (each
    /// checked property, what was found, and the counterexample's length in steps), and add a
    /// [`CHECKER_VIOLATION`] finding (an error) for each violated property that no error-class
    /// finding protects: every violation the checker finds gives at least one error, and every
    /// error is a violation it found.
    pub fn back_with(&mut self, verdicts: &[(PropertyName, Found, usize)]) {
        for f in &mut self.findings {
            let protected: Vec<&(PropertyName, Found, usize)> =
                verdicts.iter().filter(|(p, _, _)| f.rule.protects.contains(&p.as_str())).collect();
            let violated: Vec<(String, usize)> = protected
                .iter()
                .filter(|(_, found, _)| *found == Found::Violated)
                .map(|(p, _, steps)| (p.to_string(), *steps))
                .collect();
            f.backing = match violated.is_empty() {
                false => Backing::Violation { violated },
                true if protected.is_empty() => Backing::NotInModel,
                true if protected.iter().all(|(_, found, _)| *found == Found::Holds) => {
                    Backing::Refuted { properties: protected.iter().map(|(p, _, _)| p.to_string()).collect() }
                }
                true => Backing::Undecided,
            };
        }
        for (p, found, steps) in verdicts {
            let protecting = |f: &&Finding| f.rule.protects.contains(&p.as_str());
            let flagged = self.findings.iter().filter(protecting).any(|f| f.rule.severity == Severity::Error);
            if *found == Found::Violated && !flagged {
                let warned: Vec<&str> = self.findings.iter().filter(protecting).map(|f| f.rule.id).collect();
                let by = match warned.as_slice() {
                    [] => "no rule flags it".to_string(),
                    ids => format!("only warnings flag it ({})", ids.join(", ")),
                };
                self.findings.push(Finding {
                    rule: &CHECKER_VIOLATION,
                    message: format!("{p} is violated in this model under this policy, and {by}"),
                    backing: Backing::Violation { violated: vec![(p.to_string(), *steps)] },
                });
            }
        }
    }

    /// 1 if any finding is an error, 0 with warnings only (2, bad input, never gets here).
    pub fn exit_code(&self) -> u8 {
        if self.errors() > 0 {
            1
        } else {
            0
        }
    }
}

/// Run every rule. Rules that need a model are listed in `not_run` when there is none.
pub fn lint(input: &Input) -> Report {
    let mut report = Report { findings: Vec::new(), not_run: Vec::new(), other_family: 0 };
    for rule in RULES {
        if !rule.families.contains(input.policy.replication()) {
            report.other_family += 1;
            continue;
        }
        if rule.needs_model && input.scenario.is_none() {
            report.not_run.push(rule);
            continue;
        }
        for message in (rule.check)(input) {
            report.findings.push(Finding { rule, message, backing: Backing::Static });
        }
    }
    report
}

pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().chain([&CHECKER_VIOLATION]).find(|r| r.id == id)
}

// ---------------------------------------------------------------------------------------------
// Loading, for the CLI.

/// What was linted, for the report's header.
pub struct Linted {
    pub policy: PathBuf,
    pub model: Option<PathBuf>,
    pub report: Report,
    /// The exploration that backed the findings, when one ran.
    pub checked: Option<Checked>,
}

impl Linted {
    /// 1 if any finding is an error (a violation found is one, however far the exploration
    /// got); else 3 if the exploration behind the report was cut short by a limit, since what
    /// it did not reach confirms nothing; else 0.
    pub fn exit_code(&self) -> u8 {
        match self.report.exit_code() {
            0 if self.checked.as_ref().is_some_and(|c| !c.complete) => 3,
            code => code,
        }
    }
}

/// The checker's run behind a lint report.
pub struct Checked {
    pub unique_states: u64,
    pub complete: bool,
}

/// Lint a policy file, alone or (with `model`) merged over the model's `[policy]` and against
/// its environment. Bad input is a `ConfigError` (exit 2), as for `check --policy`.
pub fn lint_file(policy_path: &Path, model: Option<&Path>) -> Result<Linted, ConfigError> {
    let sourced = config::load_policy(policy_path)?;
    let report = match model {
        None => {
            let policy = sourced.resolve_ms_any_family().map_err(|m| ConfigError::new(policy_path, m))?;
            lint(&Input { policy: &policy, tick_ms: 1, scenario: None, world: None })
        }
        Some(model) => {
            let scenario = Scenario::load(model)?;
            let merged = scenario.base_policy.then(&sourced);
            lint_scenario(&scenario, &merged)
                .map_err(|m| ConfigError::new(policy_path, format!("against {}: {m}", model.display())))?
        }
    };
    Ok(Linted {
        policy: policy_path.to_path_buf(),
        model: model.map(Path::to_path_buf),
        report,
        checked: None,
    })
}

/// Lint a policy as `check` resolves it against a scenario (same validation, same ticks).
pub fn lint_scenario(scenario: &Scenario, policy: &SourcedPolicy) -> Result<Report, String> {
    let cfg = WorldConfig::new(scenario, policy)?;
    Ok(lint(&Input {
        policy: &cfg.policy,
        tick_ms: scenario.tick_ms,
        scenario: Some(scenario),
        world: Some(&cfg),
    }))
}

/// For `check`: one line per finding, naming the model and variant, for stderr above the
/// results.
pub fn job_lines(scenario: &Scenario, variant: &str, policy: &SourcedPolicy) -> Vec<String> {
    // A rollout runs every stage's policy on some coordinator: each is linted, by name.
    let stages: Vec<(String, &SourcedPolicy)> = match &policy.rollout {
        Some(plan) => plan.stages.iter().map(|(name, p)| (format!("{variant}, stage {name}"), p)).collect(),
        None => vec![(variant.to_string(), policy)],
    };
    let mut lines = Vec::new();
    for (label, policy) in stages {
        match lint_scenario(scenario, policy) {
            Ok(report) => lines.extend(
                report.findings.iter().map(|f| format!("lint {} / {label}: {}", scenario.name, f.one_line())),
            ),
            Err(m) => lines.push(format!("lint {} / {label}: not run: {m}", scenario.name)),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_in_order() {
        for (i, rule) in RULES.iter().enumerate() {
            assert_eq!(rule.id, format!("RC{:03}", i + 1));
            assert!(!rule.protects.is_empty(), "{} names what it protects", rule.id);
            assert!(rule.explanation.len() > 200, "{} explains itself", rule.id);
        }
    }
}
