//! Silence regions: a quotient of the world for independent detection judged at heartbeat
//! rounds (`health_check = "rounds"`).
//!
//! There the coordinator reads a node's silence counter only when a round judges it, against
//! `suspect_after` and `dead_after`. Between rounds the counter only grows by one a tick (up to
//! `dead_after`) or drops to 0 when the node is heard from. So two states that differ only in
//! a silence counter whose every future round would judge the same, were the node not heard
//! from, are bisimilar: every action is enabled in both, and each leads to states that again
//! differ at most in such a counter (a tick keeps the judgements, a round judges the same and
//! starts the next interval, hearing from the node makes the counters equal). Nothing else
//! reads the counter: the model ignores the silence a `DeclaredDead` event carries, and no
//! property or edge label reads it.
//!
//! On a degraded link a reply's exact arrival tick within an interval leaves the counter one
//! of several values that the rounds cannot tell apart; fingerprinting the smallest of them
//! (`detector::least_silence_judged_alike`, beside the rule it follows) merges those states. The engine keeps the concrete states,
//! so counterexamples show the real counters (docs/reductions.md).
//!
//! With a rollout it applies only when every stage judges silence alike (the same interval and
//! thresholds, at rounds): a reload then leaves the counters and the round timer as they are.
//! The leader family's failover manager judges silence the same way (rounds read it only to
//! judge; the timers that read it, `quiet_ticks` and crossings, are the store's and continuous
//! checking's), so its counters are taken to their regions too.

use super::shared::Shared;
use super::{WorldConfig, WorldState};
use crate::policy::detector::{self, FailureDetection, HealthCheck};
use crate::protocol::coordinator::TimerTicks;

/// Whether states may be identified up to silence regions in this world.
pub fn applies(cfg: &WorldConfig) -> bool {
    let judged = |c: &WorldConfig| {
        let p = &c.policy;
        (p.failure_detection == FailureDetection::Independent && p.health_check == HealthCheck::Rounds)
            .then_some((p.heartbeat_interval_ticks, p.suspect_after_ticks, p.dead_after_ticks))
    };
    let stages = cfg.rollout.as_ref().map_or(&[][..], |r| &r.stages[..]);
    judged(cfg).is_some() && stages.iter().all(|stage| judged(stage) == judged(cfg))
}

/// `s` with every judge's silence counters (each coordinator's, the leader family's failover
/// manager's) replaced by their regions' least silences, or `None` when they are already.
/// It runs on every candidate state: each counter's least silence is worked out once, and a
/// state is copied only when one changes.
pub fn canonical(cfg: &WorldConfig, s: &WorldState) -> Option<WorldState> {
    let mut out: Option<WorldState> = None;
    for c in 0..=s.peers.len() as u8 {
        let judge = s.coordinator(c);
        if let Some(change) = first_change(cfg, &judge.silence_ticks, judge.heartbeat_ticks) {
            let judge = out.get_or_insert_with(|| s.clone()).coordinator_mut(c);
            to_regions_from(cfg, &mut judge.silence_ticks, judge.heartbeat_ticks, change);
        }
    }
    if let Some(m) = s.leader.as_ref().map(|l| &l.manager) {
        if let Some(change) = first_change(cfg, &m.silence_ticks, m.heartbeat_ticks) {
            let leader = out.get_or_insert_with(|| s.clone()).leader.as_mut().expect("a leader world");
            let m = &mut Shared::make_mut(leader).manager;
            to_regions_from(cfg, &mut m.silence_ticks, m.heartbeat_ticks, change);
        }
    }
    out
}

/// The first counter that is not its region's least silence, with that least.
fn first_change(
    cfg: &WorldConfig,
    silences: &[TimerTicks],
    to_round_ticks: TimerTicks,
) -> Option<(usize, TimerTicks)> {
    silences.iter().enumerate().find_map(|(i, &t)| {
        let least = least_judged_alike(cfg, t, to_round_ticks);
        (least != t).then_some((i, least))
    })
}

/// The counters from the first change on, taken to their regions (the ones before it are).
fn to_regions_from(
    cfg: &WorldConfig,
    silences: &mut [TimerTicks],
    to_round_ticks: TimerTicks,
    (first, least): (usize, TimerTicks),
) {
    silences[first] = least;
    for t in &mut silences[first + 1..] {
        *t = least_judged_alike(cfg, *t, to_round_ticks);
    }
}

fn least_judged_alike(
    cfg: &WorldConfig,
    silence_ticks: TimerTicks,
    to_round_ticks: TimerTicks,
) -> TimerTicks {
    let p = &cfg.policy;
    let least = detector::least_silence_judged_alike(
        u32::from(silence_ticks),
        u32::from(to_round_ticks),
        p.heartbeat_interval_ticks,
        p.suspect_after_ticks,
        p.dead_after_ticks,
    );
    TimerTicks::try_from(least).expect("no larger than the silence it stands for")
}
