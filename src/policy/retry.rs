//! Client retries: when to try again, and whether a retry may repeat a write's effect.

use super::Ticks;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// Every retry waits exactly `backoff_base`: clients that failed together retry together.
    Fixed,
    /// The n-th retry waits somewhere in `[backoff_base, min(backoff_max, backoff_base * 2^n)]`:
    /// even the first retry is spread over a window, so clients that failed together do not
    /// all come back in the same tick.
    ExponentialJitter,
}

/// The client's retry knobs, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts per operation, the first included; `None` retries until success (the naive
    /// retry loop of a retry storm).
    pub max_attempts: Option<u8>,
    pub backoff: Backoff,
    pub backoff_base_ticks: Ticks,
    pub backoff_max_ticks: Ticks,
    /// Retries a client may spend over its whole run; `None` is unlimited.
    pub retry_budget: Option<u8>,
    pub idempotency_tokens: bool,
}

/// What a client does after attempt number `attempts_made` of an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryDecision {
    GiveUp,
    /// Retry after a delay anywhere in `[earliest_ticks, latest_ticks]` (the jitter window).
    RetryAfter {
        earliest_ticks: Ticks,
        latest_ticks: Ticks,
    },
}

/// Decide whether and when to retry. `retries_used` counts the client's retries so far,
/// over all its operations, for the retry budget.
pub fn after_failure(policy: &RetryPolicy, attempts_made: u8, retries_used: u8) -> RetryDecision {
    assert!(attempts_made >= 1);
    assert!(policy.backoff_base_ticks <= policy.backoff_max_ticks);
    if policy.max_attempts.is_some_and(|max| attempts_made >= max) {
        return RetryDecision::GiveUp;
    }
    if let Some(budget) = policy.retry_budget {
        if retries_used >= budget {
            return RetryDecision::GiveUp;
        }
    }
    let (earliest_ticks, latest_ticks) =
        backoff_window(policy.backoff, policy.backoff_base_ticks, policy.backoff_max_ticks, attempts_made);
    RetryDecision::RetryAfter { earliest_ticks, latest_ticks }
}

/// The window of ticks to wait after the `failures`-th failure in a row (at least 1): `Fixed`
/// waits exactly `base`; `ExponentialJitter` anywhere in `[base, min(max, base * 2^failures)]`.
/// Client retries and catch-up copy retries back off alike.
pub fn backoff_window(backoff: Backoff, base_ticks: Ticks, max_ticks: Ticks, failures: u8) -> (Ticks, Ticks) {
    assert!(failures >= 1);
    assert!(base_ticks <= max_ticks);
    match backoff {
        Backoff::Fixed => (base_ticks, base_ticks),
        Backoff::ExponentialJitter => {
            let doublings = u32::from(failures).min(16);
            (base_ticks, base_ticks.saturating_mul(1 << doublings).min(max_ticks))
        }
    }
}

/// How many failures in a row a backoff must tell apart: from this many on, `backoff_window`
/// gives the same window, so a count that saturates here keeps a model finite.
pub fn failures_tracked(backoff: Backoff, base_ticks: Ticks, max_ticks: Ticks) -> u8 {
    let doublings_to_max = match backoff {
        Backoff::Fixed => 0,
        Backoff::ExponentialJitter if base_ticks == 0 => 0,
        Backoff::ExponentialJitter => {
            (0..16u8).find(|&n| base_ticks.saturating_mul(1 << n) >= max_ticks).unwrap_or(16)
        }
    };
    doublings_to_max.max(1)
}

/// How many attempt numbers a client must tell apart: past this many, `after_failure` decides
/// the same whatever the count (the attempt limit is reached, or the jitter window has grown
/// to `backoff_max`). A client that retries without limit counts its attempts up to here and
/// no further, which keeps a model's state space finite.
pub fn attempts_tracked(policy: &RetryPolicy) -> u8 {
    if let Some(max) = policy.max_attempts {
        return max;
    }
    // Attempt 1 is the first try; from `failures_tracked` failed attempts on the window is full.
    2.max(failures_tracked(policy.backoff, policy.backoff_base_ticks, policy.backoff_max_ticks) + 1)
}

/// The version a write attempt is stored under. With idempotency tokens, a retry of a write
/// the coordinator already sequenced reuses that version, so replicas that applied the first
/// attempt apply nothing new; without tokens every attempt is a new write. Generic over the
/// version type: the model counts versions in a `u8` per shard, the store in a `u64` per key.
pub fn version_for_attempt<Ver: Ord + Copy>(
    idempotency_tokens: bool,
    version_of_token: Option<Ver>,
    next_version: Ver,
) -> Ver {
    match (idempotency_tokens, version_of_token) {
        (true, Some(version)) => {
            assert!(version < next_version);
            version
        }
        _ => next_version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(backoff: Backoff) -> RetryPolicy {
        RetryPolicy {
            max_attempts: Some(4),
            backoff,
            backoff_base_ticks: 2,
            backoff_max_ticks: 6,
            retry_budget: None,
            idempotency_tokens: false,
        }
    }

    #[test]
    fn fixed_backoff_waits_exactly_the_base() {
        let p = policy(Backoff::Fixed);
        assert_eq!(after_failure(&p, 1, 0), RetryDecision::RetryAfter { earliest_ticks: 2, latest_ticks: 2 });
        assert_eq!(after_failure(&p, 3, 0), RetryDecision::RetryAfter { earliest_ticks: 2, latest_ticks: 2 });
        assert_eq!(after_failure(&p, 4, 0), RetryDecision::GiveUp);
    }

    #[test]
    fn exponential_backoff_doubles_up_to_the_cap() {
        let p = policy(Backoff::ExponentialJitter);
        assert_eq!(after_failure(&p, 1, 0), RetryDecision::RetryAfter { earliest_ticks: 2, latest_ticks: 4 });
        assert_eq!(after_failure(&p, 2, 0), RetryDecision::RetryAfter { earliest_ticks: 2, latest_ticks: 6 });
        assert_eq!(after_failure(&p, 3, 0), RetryDecision::RetryAfter { earliest_ticks: 2, latest_ticks: 6 });
    }

    #[test]
    fn retry_budget_is_shared_across_operations() {
        let p = RetryPolicy { retry_budget: Some(1), ..policy(Backoff::Fixed) };
        assert!(matches!(after_failure(&p, 1, 0), RetryDecision::RetryAfter { .. }));
        assert_eq!(after_failure(&p, 1, 1), RetryDecision::GiveUp);
    }

    #[test]
    fn tokens_reuse_the_first_version() {
        assert_eq!(version_for_attempt(true, Some(2), 4), 2);
        assert_eq!(version_for_attempt(false, Some(2), 4), 4);
        assert_eq!(version_for_attempt(true, None, 4), 4);
    }

    proptest! {
        /// Past `attempts_tracked`, a client retrying without limit gets the same decision
        /// whatever its count: saturating the count changes nothing.
        #[test]
        fn decisions_are_constant_past_the_tracked_attempts(
            base in 0u32..20, extra in 0u32..200, jitter in any::<bool>(), beyond in 0u8..20,
        ) {
            let p = RetryPolicy {
                max_attempts: None,
                backoff: if jitter { Backoff::ExponentialJitter } else { Backoff::Fixed },
                backoff_base_ticks: base,
                backoff_max_ticks: base + extra,
                retry_budget: None,
                idempotency_tokens: false,
            };
            let tracked = attempts_tracked(&p);
            prop_assert!(tracked >= 2);
            prop_assert_eq!(after_failure(&p, tracked, 0), after_failure(&p, tracked.saturating_add(beyond), 0));
        }

        /// Attempts never exceed `max_attempts`, and every retry window is non-empty and capped.
        #[test]
        fn retry_windows_are_bounded(
            max_attempts in proptest::option::of(1u8..8), attempts in 1u8..10, base in 0u32..20, extra in 0u32..40,
            used in 0u8..10, budget in proptest::option::of(0u8..10), jitter in any::<bool>(),
        ) {
            let p = RetryPolicy {
                max_attempts,
                backoff: if jitter { Backoff::ExponentialJitter } else { Backoff::Fixed },
                backoff_base_ticks: base,
                backoff_max_ticks: base + extra,
                retry_budget: budget,
                idempotency_tokens: false,
            };
            match after_failure(&p, attempts, used) {
                RetryDecision::GiveUp => prop_assert!(
                    max_attempts.is_some_and(|m| attempts >= m) || budget.is_some_and(|b| used >= b)
                ),
                RetryDecision::RetryAfter { earliest_ticks, latest_ticks } => {
                    prop_assert!(max_attempts.is_none_or(|m| attempts < m));
                    prop_assert!(earliest_ticks <= latest_ticks);
                    prop_assert!(latest_ticks <= base + extra);
                    prop_assert_eq!(earliest_ticks, base);
                }
            }
        }
    }
}
