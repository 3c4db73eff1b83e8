//! A rollout variant played on the store: every coordinator starts on the first stage's
//! policy, and steps reload one coordinator's policy at a time (`CONFIG SET policy`'s reload,
//! which is the model's stage change: `protocol::Coordinator::reload`).
//!
//! The model explores every moment and order; a run plays one: waves, as `stage_by_stage`
//! allows (every coordinator, in the order `[[coordinators]]` lists them, enters stage 1, then
//! stage 2, ...), then, for a rollback, waves back to the first stage. With two stages a wave
//! is also every order `any` allows that ends the rollout. The steps are spread evenly over
//! the rest of the run, so each mixed fleet runs under load for a while.

use super::*;

/// The stages' policies (durations in ms) and the steps, in order.
pub(crate) struct RolloutRun {
    pub(crate) names: Vec<String>,
    pub(crate) policies: Vec<Policy>,
    /// (coordinator, stage it moves to).
    pub(crate) steps: Vec<(u8, usize)>,
}

impl RolloutRun {
    /// The run of `sourced`'s rollout, if it has one.
    pub(crate) fn of(
        scenario: &Scenario,
        sourced: &SourcedPolicy,
        ms_per_tick: u64,
        order: &[String],
    ) -> Result<Option<RolloutRun>, String> {
        let Some(plan) = &sourced.rollout else {
            if !order.is_empty() {
                return Err(format!("--rollout-order {}: the policy run is not a rollout", order.join(",")));
            }
            return Ok(None);
        };
        let order = coordinator_order(scenario, order)?;
        let mut policies = Vec::new();
        for (name, stage) in &plan.stages {
            let ticks = stage
                .resolve(scenario.tick_ms, scenario.nodes.len())
                .map_err(|e| format!("rollout stage \"{name}\": {e}"))?;
            policies.push(policy_in_ms(&ticks, ms_per_tick));
        }
        let last = policies.len() - 1;
        let wave = |k: usize| order.iter().map(move |&c| (c, k));
        let mut steps: Vec<(u8, usize)> = (1..=last).flat_map(wave).collect();
        if plan.rollback {
            steps.extend((0..last).rev().flat_map(wave));
        }
        Ok(Some(RolloutRun { names: plan.stages.iter().map(|(n, _)| n.clone()).collect(), policies, steps }))
    }

    /// When each step is taken, in ms since the run began: evenly between `from` and `to`
    /// (for `store run`, the end of the calm phase and the end of the load, so that a mixed
    /// fleet runs while faults are on and one runs across the heal, when what a fault left
    /// behind, such as a write on one replica, is read again).
    pub(crate) fn times_ms(&self, (from, to): (u64, u64)) -> Vec<u64> {
        let n = self.steps.len() as u64;
        (1..=n).map(|i| from + (to - from) * i / (n + 1)).collect()
    }

    /// Take step `i`: reload the coordinator's policy.
    pub(super) fn apply(&self, rig: &mut Rig, i: usize) -> Result<(), String> {
        let (c, stage) = self.steps[i];
        let cluster = rig.cluster.quorum().ok_or("store run plays rollouts of the quorum family only")?;
        cluster.coordinator_of(c).reload(self.policies[stage].clone())?;
        let name = &rig.scenario.coordinators[usize::from(c)].name;
        let back = self.steps[..i].iter().any(|&(d, k)| d == c && k > stage);
        let what = if back { "ROLLBACK" } else { "ROLLOUT" };
        rig.event(format!("{what} coordinator {name} runs stage \"{}\"", self.names[stage]));
        Ok(())
    }
}

/// The coordinators in the order `--rollout-order` names them: each exactly once.
fn coordinator_order(scenario: &Scenario, names: &[String]) -> Result<Vec<u8>, String> {
    let all = &scenario.coordinators;
    if names.is_empty() {
        return Ok((0..all.len() as u8).collect());
    }
    let known = || all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    let mut order = Vec::new();
    for name in names {
        let c = all.iter().position(|c| &c.name == name).ok_or_else(|| {
            format!("--rollout-order {name}: no such coordinator (coordinators: {})", known())
        })?;
        if order.contains(&(c as u8)) {
            return Err(format!("--rollout-order {}: {name} is named twice", names.join(",")));
        }
        order.push(c as u8);
    }
    if order.len() != all.len() {
        return Err(format!(
            "--rollout-order {}: name every coordinator once (coordinators: {})",
            names.join(","),
            known()
        ));
    }
    Ok(order)
}
