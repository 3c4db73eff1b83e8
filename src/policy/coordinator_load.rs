//! The coordinator's own load: control-plane work (membership updates, catch-up copies) waits
//! in one work queue with the foreground requests, and the remedy of the ack-timeout
//! postmortem, "rate-limit rebalancing by coordinator load": no new membership change while
//! the backlog is above a ceiling.
//!
//! Work is counted in abstract units; a scenario says what an update and a copy cost and how
//! many units the coordinator does per tick. The queue is FIFO: a foreground request that
//! arrives behind a backlog waits until the work ahead of it is done.

use serde::{Deserialize, Serialize};

/// Units of work a coordinator does per tick, at most (and what one change may cost).
pub const WORK_PER_TICK_MAX: u16 = 64;
pub const CHANGE_WORK_MAX: u16 = 64;
/// The backlog is counted up to this many ticks of work: a coordinator that far behind
/// already makes every request miss any deadline a model can express (`TICKS_MAX`).
pub const BACKLOG_TICKS_MAX: u16 = super::TICKS_MAX as u16;
/// The largest backlog any coordinator can have, in units.
pub const BACKLOG_WORK_MAX: u16 = WORK_PER_TICK_MAX * BACKLOG_TICKS_MAX;
const _: () = assert!(WORK_PER_TICK_MAX as u32 * BACKLOG_TICKS_MAX as u32 <= u16::MAX as u32);

/// A coordinator's capacity and what control-plane work costs it, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkCapacity {
    pub work_per_tick: u16,
    /// Publishing one membership update (the replacement joins).
    pub membership_update_work: u16,
    /// Asking one source for a catch-up copy (data movement through the coordinator).
    pub copy_work: u16,
}

impl WorkCapacity {
    /// The backlog counter's cap, in units.
    pub fn backlog_work_max(&self) -> u16 {
        self.work_per_tick * BACKLOG_TICKS_MAX
    }

    fn assert_valid(&self) {
        assert!(self.work_per_tick >= 1);
        assert!(self.work_per_tick <= WORK_PER_TICK_MAX);
        assert!(self.membership_update_work >= 1);
        assert!(self.membership_update_work <= CHANGE_WORK_MAX);
        assert!(self.copy_work >= 1);
        assert!(self.copy_work <= CHANGE_WORK_MAX);
    }
}

/// The backlog after `work` more units are queued (saturating at the cap).
pub fn backlog_after_adding(capacity: WorkCapacity, backlog_work: u16, work: u16) -> u16 {
    capacity.assert_valid();
    assert!(backlog_work <= capacity.backlog_work_max());
    backlog_work.saturating_add(work).min(capacity.backlog_work_max())
}

/// The backlog after one tick of work.
pub fn backlog_after_tick(capacity: WorkCapacity, backlog_work: u16) -> u16 {
    capacity.assert_valid();
    assert!(backlog_work <= capacity.backlog_work_max());
    backlog_work.saturating_sub(capacity.work_per_tick)
}

/// Ticks a foreground request (or the next membership update) waits behind `backlog_work`:
/// the whole ticks of work ahead of it. A backlog the current tick finishes delays nothing;
/// only a saturated coordinator (more queued than a tick's work) makes requests wait.
pub fn foreground_wait_ticks(capacity: WorkCapacity, backlog_work: u16) -> u16 {
    capacity.assert_valid();
    assert!(backlog_work <= capacity.backlog_work_max());
    let wait = backlog_work / capacity.work_per_tick;
    assert!(wait <= BACKLOG_TICKS_MAX);
    wait
}

/// The remedy: whether new membership changes (evictions and moves) pause because the
/// coordinator's load, in units of queued work, is above `ceiling_work` (`None`: never).
pub fn changes_paused(load_work: u16, ceiling_work: Option<u16>) -> bool {
    ceiling_work.is_some_and(|ceiling| load_work > ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TWO_PER_TICK: WorkCapacity =
        WorkCapacity { work_per_tick: 2, membership_update_work: 4, copy_work: 3 };

    #[test]
    fn a_backlog_the_tick_finishes_delays_nothing() {
        assert_eq!(foreground_wait_ticks(TWO_PER_TICK, 0), 0);
        assert_eq!(foreground_wait_ticks(TWO_PER_TICK, 1), 0);
        // Saturated: two whole ticks of work ahead, the third tick's work behind the request.
        assert_eq!(foreground_wait_ticks(TWO_PER_TICK, 4), 2);
        assert_eq!(foreground_wait_ticks(TWO_PER_TICK, 5), 2);
    }

    #[test]
    fn the_backlog_drains_by_the_capacity_and_saturates_at_its_cap() {
        assert_eq!(backlog_after_tick(TWO_PER_TICK, 5), 3);
        assert_eq!(backlog_after_tick(TWO_PER_TICK, 1), 0);
        let max = TWO_PER_TICK.backlog_work_max();
        assert_eq!(max, 2 * BACKLOG_TICKS_MAX);
        assert_eq!(backlog_after_adding(TWO_PER_TICK, max - 1, 4), max);
        assert_eq!(backlog_after_adding(TWO_PER_TICK, 3, 4), 7);
    }

    #[test]
    fn changes_pause_only_above_the_ceiling() {
        assert!(!changes_paused(100, None));
        assert!(!changes_paused(3, Some(3)));
        assert!(changes_paused(4, Some(3)));
        assert!(changes_paused(1, Some(0)));
        assert!(!changes_paused(0, Some(0)));
    }

    #[test]
    #[should_panic]
    fn a_capacity_of_zero_is_our_bug() {
        let zero = WorkCapacity { work_per_tick: 0, ..TWO_PER_TICK };
        foreground_wait_ticks(zero, 0);
    }

    proptest! {
        /// More backlog never means less waiting, and a tick never adds work.
        #[test]
        fn waiting_is_monotone_in_the_backlog(per_tick in 1u16..=WORK_PER_TICK_MAX, a in 0u16..2000, b in 0u16..2000) {
            let c = WorkCapacity { work_per_tick: per_tick, membership_update_work: 1, copy_work: 1 };
            let (a, b) = (a.min(c.backlog_work_max()), b.min(c.backlog_work_max()));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(foreground_wait_ticks(c, lo) <= foreground_wait_ticks(c, hi));
            prop_assert!(backlog_after_tick(c, hi) <= hi);
            // A tick takes one tick off the wait of whatever is queued (until it is gone).
            let wait = foreground_wait_ticks(c, hi);
            prop_assert_eq!(foreground_wait_ticks(c, backlog_after_tick(c, hi)), wait.saturating_sub(1));
        }
    }
}
