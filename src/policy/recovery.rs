//! Re-replication: the controls real systems put on re-creating the replicas of a node
//! declared dead, so that a short outage does not become a re-mirroring storm.
//!
//! Without them (every default below) a dead replica is replaced at once, by any live node
//! outside its replica set, with copies asked again at every sign of life from a missing
//! source, and the join runs until it completes. Production systems throttle all of it:
//! Ceph's down/out interval and recovery limits, HDFS's replication work limits, EBS's
//! re-mirroring backoff after its 2011 storm.

use super::retry::{self, Backoff};
use super::Ticks;
use serde::{Deserialize, Serialize};

/// When a catch-up copy round that ran out of time is asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CopyRetry {
    /// A missing source is asked again the next time it is heard from (any message): a retry
    /// per sign of life, however many rounds failed before.
    OnContact,
    /// The missing sources are asked again after a backoff window that grows with the rounds
    /// that failed in a row (`retry::backoff_window`), whatever is heard meanwhile.
    Backoff { backoff: Backoff, base_ticks: Ticks, max_ticks: Ticks },
}

/// `recovery_backoff` as written: when copies that ran out of time are asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryBackoff {
    /// At the next sign of life of a missing source ([`CopyRetry::OnContact`]).
    OnContact,
    /// After exactly `recovery_backoff_base`.
    Fixed,
    /// After a window that doubles with each failed round, capped at `recovery_backoff_max`.
    ExponentialJitter,
}

/// The re-replication knobs, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecoveryPolicy {
    /// A member declared dead is replaced only once it has been dead this long (Ceph's
    /// `mon_osd_down_out_interval`); heard from meanwhile, it keeps its place and nothing is
    /// copied. 0: replaced at once.
    pub down_out_interval_ticks: Ticks,
    pub copy_retry: CopyRetry,
    /// A join not complete this long after it started is abandoned: the leaving member stays
    /// (taken back if it returned) and, if still dead, another target is tried. `None`: a join
    /// runs until it completes.
    pub join_timeout_ticks: Option<Ticks>,
}

impl RecoveryPolicy {
    /// Today's behaviour: no throttle at all.
    pub const UNTHROTTLED: RecoveryPolicy = RecoveryPolicy {
        down_out_interval_ticks: 0,
        copy_retry: CopyRetry::OnContact,
        join_timeout_ticks: None,
    };
}

/// Whether a node already in `recoveries` joins may take part in one more, under
/// `max_recoveries_per_node` (`EvictionPolicy`; `None`: unlimited).
pub fn may_recover(recoveries: u8, max_recoveries_per_node: Option<u8>) -> bool {
    max_recoveries_per_node.is_none_or(|max| recoveries < max)
}

/// When to ask the missing sources of a join again after `failed_rounds` copy rounds in a row
/// ran out of time (at least 1): a window of ticks from now, or `None` for "at the next sign
/// of life".
pub fn copy_retry_window(retry: CopyRetry, failed_rounds: u8) -> Option<(Ticks, Ticks)> {
    assert!(failed_rounds >= 1);
    match retry {
        CopyRetry::OnContact => None,
        CopyRetry::Backoff { backoff, base_ticks, max_ticks } => {
            Some(retry::backoff_window(backoff, base_ticks, max_ticks, failed_rounds))
        }
    }
}

/// How many failed rounds in a row a join must count: past this many the window no longer
/// grows (0 where rounds are retried on contact and nothing is counted).
pub fn copy_rounds_tracked(retry: CopyRetry) -> u8 {
    match retry {
        CopyRetry::OnContact => 0,
        CopyRetry::Backoff { backoff, base_ticks, max_ticks } => {
            retry::failures_tracked(backoff, base_ticks, max_ticks)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_recovery_limit_is_a_count_of_joins_at_once() {
        assert!(may_recover(5, None));
        assert!(may_recover(0, Some(1)));
        assert!(!may_recover(1, Some(1)));
        assert!(!may_recover(0, Some(0)), "a limit of 0 lets no node recover anything");
    }

    #[test]
    fn copies_are_retried_on_contact_or_after_a_growing_backoff() {
        assert_eq!(copy_retry_window(CopyRetry::OnContact, 3), None);
        let jitter = CopyRetry::Backoff { backoff: Backoff::ExponentialJitter, base_ticks: 2, max_ticks: 10 };
        assert_eq!(copy_retry_window(jitter, 1), Some((2, 4)));
        assert_eq!(copy_retry_window(jitter, 2), Some((2, 8)));
        assert_eq!(copy_retry_window(jitter, 3), Some((2, 10)));
        let fixed = CopyRetry::Backoff { backoff: Backoff::Fixed, base_ticks: 5, max_ticks: 5 };
        assert_eq!(copy_retry_window(fixed, 4), Some((5, 5)));
    }

    proptest! {
        /// Counting failed rounds up to `copy_rounds_tracked` and no further changes no window.
        #[test]
        fn windows_are_constant_past_the_tracked_rounds(base in 0u32..20, extra in 0u32..100, beyond in 0u8..20, jitter in any::<bool>()) {
            let backoff = if jitter { Backoff::ExponentialJitter } else { Backoff::Fixed };
            let retry = CopyRetry::Backoff { backoff, base_ticks: base, max_ticks: base + extra };
            let tracked = copy_rounds_tracked(retry);
            prop_assert!(tracked >= 1);
            prop_assert_eq!(copy_retry_window(retry, tracked), copy_retry_window(retry, tracked.saturating_add(beyond)));
        }
    }
}
