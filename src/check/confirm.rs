//! `lint --model`: back lint's static findings with an exploration of the model under the
//! policy, so that lint's errors are violations the checker found (see `lint`'s module docs).

use super::RunOptions;
use crate::config::ConfigError;
use crate::lint::{Checked, Linted};

/// Explore the linted model under the linted policy (as `check MODEL --policy POLICY` does)
/// and back every finding with the verdicts.
pub fn confirm_lint(linted: &mut Linted, opts: &RunOptions) -> Result<(), ConfigError> {
    let model = linted.model.as_deref().expect("only a lint with --model is confirmed");
    let result = super::run_one(model, Some(&linted.policy), "", opts)?;
    let verdicts: Vec<_> = result
        .properties
        .iter()
        .map(|p| (p.name, p.found, p.counterexample.as_ref().map_or(0, |c| c.steps.len())))
        .collect();
    linted.report.back_with(&verdicts);
    linted.checked = Some(Checked { unique_states: result.unique_states, complete: result.complete });
    Ok(())
}
