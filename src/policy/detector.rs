//! Failure detection: when does the coordinator take a replica for dead?
//!
//! The ack-timeout incident came from `Coupled` detection: the request deadline doubled as the
//! failure detector, so a replica that was merely slow (a round trip longer than the deadline)
//! was declared dead. `Independent` detection only looks at how long a node has been silent,
//! with thresholds of its own.

use super::Ticks;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureDetection {
    /// A replica that misses a request's ack deadline is dead.
    Coupled,
    /// Health comes from heartbeats: `suspect_after` / `dead_after` of silence.
    Independent,
}

/// When a silence-based detector looks at a node's silence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthCheck {
    /// At heartbeat rounds only: every `heartbeat_interval` the detector compares each node's
    /// silence with the thresholds (a node may go quiet and come back between two rounds
    /// unseen).
    Rounds,
    /// At every tick: a node is judged the moment its silence reaches a threshold, as a lease
    /// or session that expires (etcd and KRaft sessions, CockroachDB liveness, SWIM suspicion
    /// timeouts). Heartbeats still go out every `heartbeat_interval`, to be answered.
    Continuous,
}

/// Whether the detector must judge a node now that it believes is `believed`, after
/// `silence_ticks` of silence: always at a round; between rounds only when checking
/// continuously and the silence has crossed a threshold the belief does not yet reflect.
/// (Hearing from a node makes it alive at once, so between rounds health only worsens.)
pub fn judge_now(
    check: HealthCheck,
    at_round: bool,
    believed: Health,
    silence_ticks: Ticks,
    suspect_after_ticks: Ticks,
    dead_after_ticks: Ticks,
) -> bool {
    at_round
        || (check == HealthCheck::Continuous
            && health_from_silence(silence_ticks, suspect_after_ticks, dead_after_ticks) > believed)
}

/// The longest of a `silence_ticks` gap the detector sees: all of it when checking
/// continuously; at heartbeat rounds, the last round inside it, a whole number of
/// `heartbeat_interval_ticks` from the last time the node was heard (the coordinator's start
/// counts as hearing from everyone, and its first round is one interval later). A round that
/// falls at the gap's end may judge before the reply that ends it is delivered, so it counts.
pub fn longest_silence_seen(
    check: HealthCheck,
    silence_ticks: Ticks,
    heartbeat_interval_ticks: Ticks,
) -> Ticks {
    match check {
        HealthCheck::Continuous => silence_ticks,
        HealthCheck::Rounds => silence_ticks / heartbeat_interval_ticks.max(1) * heartbeat_interval_ticks,
    }
}

/// What the coordinator believes about one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Alive,
    Suspect,
    Dead,
}

/// The health implied by a replica missing a request's ack deadline, or `None` when the
/// detector does not take deadline misses as evidence.
pub fn health_after_deadline_miss(detection: FailureDetection) -> Option<Health> {
    match detection {
        FailureDetection::Coupled => Some(Health::Dead),
        FailureDetection::Independent => None,
    }
}

/// The health implied by `silence_ticks` without hearing from a node.
pub fn health_from_silence(
    silence_ticks: Ticks,
    suspect_after_ticks: Ticks,
    dead_after_ticks: Ticks,
) -> Health {
    assert!(suspect_after_ticks <= dead_after_ticks);
    if silence_ticks >= dead_after_ticks {
        Health::Dead
    } else if silence_ticks >= suspect_after_ticks {
        Health::Suspect
    } else {
        Health::Alive
    }
}

/// Rounds only: the smallest silence that every round from now on judges as it judges
/// `silence_ticks` (were the node not heard from),
/// the next round `to_round_ticks` from now and one every `interval_ticks` after it. States
/// that differ only in such silences are alike to the detector (the model checker's silence
/// regions).
///
/// Round `k` sees `min(silence + to_round + k * interval, dead_after)` (if the node is not
/// heard from), so what the rounds say is fixed by the first round at or past each threshold;
/// a smaller silence reaches each threshold at the same round as long as it is no less than
/// `threshold - to_round - k * interval` for that round `k`.
pub fn least_silence_judged_alike(
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

/// Any message from a node is proof of life, whichever detector is in use.
pub fn health_after_hearing_from() -> Health {
    Health::Alive
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn coupled_takes_a_deadline_miss_as_death_and_independent_does_not() {
        assert_eq!(health_after_deadline_miss(FailureDetection::Coupled), Some(Health::Dead));
        assert_eq!(health_after_deadline_miss(FailureDetection::Independent), None);
    }

    #[test]
    fn rounds_judge_only_at_rounds_and_continuous_at_a_crossed_threshold() {
        // Silence past dead_after between rounds: only the continuous check acts on it.
        assert!(!judge_now(HealthCheck::Rounds, false, Health::Alive, 30, 20, 30));
        assert!(judge_now(HealthCheck::Continuous, false, Health::Alive, 30, 20, 30));
        assert!(judge_now(HealthCheck::Continuous, false, Health::Alive, 20, 20, 30));
        // Nothing new to judge: the belief already says what the silence says.
        assert!(!judge_now(HealthCheck::Continuous, false, Health::Suspect, 25, 20, 30));
        assert!(!judge_now(HealthCheck::Continuous, false, Health::Dead, 30, 20, 30));
        assert!(!judge_now(HealthCheck::Continuous, false, Health::Alive, 19, 20, 30));
        // A round always judges.
        assert!(judge_now(HealthCheck::Rounds, true, Health::Dead, 0, 20, 30));
    }

    #[test]
    fn rounds_see_a_silence_in_whole_intervals_and_continuous_all_of_it() {
        // 500ms rounds, a 1.9s silence: rounds see 1.5s of it; continuous, all of it.
        assert_eq!(longest_silence_seen(HealthCheck::Rounds, 19, 5), 15);
        assert_eq!(longest_silence_seen(HealthCheck::Rounds, 20, 5), 20);
        assert_eq!(longest_silence_seen(HealthCheck::Continuous, 19, 5), 19);
    }

    #[test]
    fn silence_thresholds_are_inclusive() {
        assert_eq!(health_from_silence(19, 20, 30), Health::Alive);
        assert_eq!(health_from_silence(20, 20, 30), Health::Suspect);
        assert_eq!(health_from_silence(30, 20, 30), Health::Dead);
    }

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
                            let r = least_silence_judged_alike(silence, to_round, interval, suspect, dead);
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
            (0..5).map(|s| least_silence_judged_alike(s, 5, 5, 10, 30)).collect();
        assert_eq!(regions.len(), 1);
        assert_eq!(least_silence_judged_alike(4, 5, 5, 10, 30), 0);
        // Off the rounds (suspect 12): 0-1 and 2-4 are judged apart at the second round.
        assert_eq!(least_silence_judged_alike(1, 5, 5, 12, 30), 0);
        assert_eq!(least_silence_judged_alike(4, 5, 5, 12, 30), 2);
    }

    proptest! {
        /// More silence never makes a node look healthier.
        #[test]
        fn health_is_monotone_in_silence(a in 0u32..100, b in 0u32..100, s in 0u32..50, d in 0u32..50) {
            prop_assume!(s <= d);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(health_from_silence(lo, s, d) <= health_from_silence(hi, s, d));
        }
    }
}
