//! `replicheck lint`: static rules over a resolved policy, run before any exploration.
//!
//! Each rule is a pure function of the resolved [`Policy`] and, for the rules that compare
//! timeouts with the network, the [`Scenario`] (its links, fault menu and coordinator). The
//! rules ask `src/policy` the questions they can (do two quorums intersect? what health does a
//! silence imply? does the breaker ever trip? what does a retry wait?), so lint and the model
//! read the same policy semantics.
//!
//! What lint cannot see: anything that depends on the interleaving of events (that is what
//! `check` is for). Its rules are sufficient conditions for trouble, or cheap bounds: a policy
//! with no finding can still fail a model check, and the round-trip bounds are worst cases
//! over every node, whether or not the workload ever sends it a request.

mod render;
mod rules;
mod table;

pub use render::Format;
pub use table::RULES;

use crate::config::duration::format_ms;
use crate::config::{self, ConfigError, Policy, Scenario, SourcedPolicy};
use crate::model::WorldConfig;
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
    check: fn(&Input) -> Vec<String>,
}

/// One problem found by one rule.
pub struct Finding {
    pub rule: &'static Rule,
    pub message: String,
}

impl Finding {
    /// `error[RC003] ack-deadline-within-round-trip: message`
    pub fn one_line(&self) -> String {
        format!("{}[{}] {}: {}", self.rule.severity.as_str(), self.rule.id, self.rule.name, self.message)
    }
}

/// Every finding of every rule, and the rules that could not run.
pub struct Report {
    pub findings: Vec<Finding>,
    /// Rules that need a model and were given none.
    pub not_run: Vec<&'static Rule>,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.findings.iter().filter(|f| f.rule.severity == Severity::Error).count()
    }

    pub fn warnings(&self) -> usize {
        self.findings.iter().filter(|f| f.rule.severity == Severity::Warning).count()
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
    let mut report = Report { findings: Vec::new(), not_run: Vec::new() };
    for rule in RULES {
        if rule.needs_model && input.scenario.is_none() {
            report.not_run.push(rule);
            continue;
        }
        for message in (rule.check)(input) {
            report.findings.push(Finding { rule, message });
        }
    }
    report
}

pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

// ---------------------------------------------------------------------------------------------
// Loading, for the CLI.

/// What was linted, for the report's header.
pub struct Linted {
    pub policy: PathBuf,
    pub model: Option<PathBuf>,
    pub report: Report,
}

/// Lint a policy file, alone or (with `model`) merged over the model's `[policy]` and against
/// its environment. Bad input is a `ConfigError` (exit 2), as for `check --policy`.
pub fn lint_file(policy_path: &Path, model: Option<&Path>) -> Result<Linted, ConfigError> {
    let sourced = config::load_policy(policy_path)?;
    let report = match model {
        None => {
            let policy = sourced.resolve_ms().map_err(|m| ConfigError::new(policy_path, m))?;
            lint(&Input { policy: &policy, tick_ms: 1, scenario: None, world: None })
        }
        Some(model) => {
            let scenario = Scenario::load(model)?;
            let merged = scenario.base_policy.then(&sourced);
            lint_scenario(&scenario, &merged)
                .map_err(|m| ConfigError::new(policy_path, format!("against {}: {m}", model.display())))?
        }
    };
    Ok(Linted { policy: policy_path.to_path_buf(), model: model.map(Path::to_path_buf), report })
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
    match lint_scenario(scenario, policy) {
        Ok(report) => report
            .findings
            .iter()
            .map(|f| format!("lint {} / {variant}: {}", scenario.name, f.one_line()))
            .collect(),
        Err(m) => vec![format!("lint {} / {variant}: not run: {m}", scenario.name)],
    }
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
