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
//! (the region's representative) merges those states. The engine keeps the concrete states,
//! so counterexamples show the real counters (docs/reductions.md).
//!
//! With a rollout it applies only when every stage judges silence alike (the same interval and
//! thresholds, at rounds): a reload then leaves the counters and the round timer as they are.
//! The leader family's failover manager judges silence the same way (rounds read it only to
//! judge; the timers that read it, `quiet_ticks` and crossings, are the store's and continuous
//! checking's), so its counters are taken to their regions too.

use super::{WorldConfig, WorldState};
use crate::policy::detector::{FailureDetection, HealthCheck};
use crate::protocol::coordinator::TimerTicks;
use crate::protocol::Coordinator;
use std::sync::Arc;

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

/// The smallest silence that every round from now on judges as it judges `silence_ticks`,
/// the next round `to_round_ticks` from now and one every `interval_ticks` after it.
///
/// Round `k` sees `min(silence + to_round + k * interval, dead_after)` (if the node is not
/// heard from), so what the rounds say is fixed by the first round at or past each threshold;
/// a smaller silence reaches each threshold at the same round as long as it is no less than
/// `threshold - to_round - k * interval` for that round `k`.
pub fn representative(
    silence_ticks: u32,
    to_round_ticks: u32,
    interval_ticks: u32,
    suspect_after_ticks: u32,
    dead_after_ticks: u32,
) -> u32 {
    let interval = interval_ticks.max(1);
    let seen_now = silence_ticks + to_round_ticks;
    // The least silence whose first round at or past `threshold` is the same round.
    let least = |threshold: u32| -> u32 {
        if seen_now >= threshold {
            threshold.saturating_sub(to_round_ticks)
        } else {
            let rounds = (threshold - seen_now).div_ceil(interval);
            threshold.saturating_sub(to_round_ticks + rounds * interval)
        }
    };
    let representative = least(suspect_after_ticks).max(least(dead_after_ticks));
    debug_assert!(representative <= silence_ticks);
    representative
}

/// `s` with each coordinator's silence counters replaced by their regions' representatives,
/// or `None` when they are already.
pub fn canonical(cfg: &WorldConfig, s: &WorldState) -> Option<WorldState> {
    let changes = |c: &Coordinator| differs(cfg, &c.silence_ticks, c.heartbeat_ticks);
    let manager_changes =
        s.leader.as_ref().is_some_and(|l| differs(cfg, &l.manager.silence_ticks, l.manager.heartbeat_ticks));
    if !changes(&s.coord) && !s.peers.iter().any(|p| changes(p)) && !manager_changes {
        return None;
    }
    let mut s = s.clone();
    for c in std::iter::once(&mut s.coord).chain(s.peers.iter_mut()) {
        if changes(c) {
            let c = Arc::make_mut(c);
            to_regions(cfg, &mut c.silence_ticks, c.heartbeat_ticks);
        }
    }
    if manager_changes {
        let m = &mut Arc::make_mut(s.leader.as_mut().expect("a leader world")).manager;
        to_regions(cfg, &mut m.silence_ticks, m.heartbeat_ticks);
    }
    Some(s)
}

fn differs(cfg: &WorldConfig, silences: &[TimerTicks], to_round_ticks: TimerTicks) -> bool {
    silences.iter().any(|&t| representative_of(cfg, t, to_round_ticks) != t)
}

fn to_regions(cfg: &WorldConfig, silences: &mut [TimerTicks], to_round_ticks: TimerTicks) {
    for t in silences {
        *t = representative_of(cfg, *t, to_round_ticks);
    }
}

fn representative_of(cfg: &WorldConfig, silence_ticks: TimerTicks, to_round_ticks: TimerTicks) -> TimerTicks {
    let p = &cfg.policy;
    let r = representative(
        u32::from(silence_ticks),
        u32::from(to_round_ticks),
        p.heartbeat_interval_ticks,
        p.suspect_after_ticks,
        p.dead_after_ticks,
    );
    TimerTicks::try_from(r).expect("no larger than the silence it stands for")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::detector::health_from_silence;

    /// What the rounds say of `silence`, by running the counter forward (not the formula).
    fn judgements(silence: u32, to_round: u32, interval: u32, suspect: u32, dead: u32) -> Vec<u8> {
        let mut s = silence.min(dead);
        let mut seen = Vec::new();
        for _ in 0..to_round {
            s = (s + 1).min(dead);
        }
        for _ in 0..(dead / interval + 3) {
            seen.push(health_from_silence(s, suspect, dead) as u8);
            for _ in 0..interval {
                s = (s + 1).min(dead);
            }
        }
        seen
    }

    #[test]
    fn the_representative_is_the_least_silence_every_round_judges_alike() {
        for interval in 1..=6 {
            for suspect in 0..=14 {
                for dead in suspect..=16 {
                    for to_round in 0..=interval {
                        for silence in 0..=dead {
                            let r = representative(silence, to_round, interval, suspect, dead);
                            let seen = judgements(silence, to_round, interval, suspect, dead);
                            assert!(r <= silence);
                            assert_eq!(judgements(r, to_round, interval, suspect, dead), seen,
                                "silence {silence} -> {r} (to_round {to_round}, interval {interval}, suspect {suspect}, dead {dead})");
                            if r > 0 {
                                assert_ne!(judgements(r - 1, to_round, interval, suspect, dead), seen,
                                    "{r} is not the least (silence {silence}, to_round {to_round}, interval {interval}, suspect {suspect}, dead {dead})");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn thresholds_on_the_rounds_leave_one_silence_per_interval() {
        // suspect 10 and dead 30 ticks, a round every 5: a silence heard anywhere in the last
        // interval reads the same at every round.
        let regions: std::collections::BTreeSet<u32> =
            (0..5).map(|s| representative(s, 5, 5, 10, 30)).collect();
        assert_eq!(regions.len(), 1);
        assert_eq!(representative(4, 5, 5, 10, 30), 0);
        // Off the rounds (suspect 12): 0-1 and 2-4 are judged apart at the second round.
        assert_eq!(representative(1, 5, 5, 12, 30), 0);
        assert_eq!(representative(4, 5, 5, 12, 30), 2);
    }
}
