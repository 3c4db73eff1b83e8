//! Re-replication throttles (`policy::recovery`): a dead node is out (its replicas re-created
//! elsewhere) only after `down_out_interval`; copy rounds that ran out of time are retried
//! after a backoff instead of at every sign of life; a join that does not complete within
//! `join_timeout` is abandoned; replacements respect replica slots and the recovery limit.
//! With every knob at its default none of this keeps any state.

use super::*;
use crate::policy::recovery::{self, CopyRetry};

impl<D: Data> Coordinator<D> {
    /// The detector's belief about `n` changes to `health`. A node newly dead starts its
    /// down/out interval; a node no longer dead is in again.
    pub(super) fn believe(&mut self, cfg: &Resolved, n: NodeId, health: Health) {
        let i = usize::from(n);
        let was_dead = self.health[i] == Health::Dead;
        self.health[i] = health;
        if self.down_out_ticks.is_empty() || was_dead == (health == Health::Dead) {
            return;
        }
        self.down_out_ticks[i] =
            (health == Health::Dead).then(|| ticks(cfg.policy.recovery.down_out_interval_ticks));
    }

    /// Whether `n` is dead and out: its replicas may be re-created elsewhere.
    pub(super) fn out(&self, n: NodeId) -> bool {
        let i = usize::from(n);
        self.health[i] == Health::Dead && self.down_out_ticks.get(i).is_none_or(Option::is_none)
    }

    /// `n` has been dead for the whole down/out interval: it is out now.
    pub(super) fn on_down_out(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        let i = usize::from(n);
        assert_eq!(self.down_out_ticks[i], Some(0), "a node goes out once its interval is over");
        self.down_out_ticks[i] = None;
        self.consider_evictions(cfg, self.backlog_work, io);
    }

    /// The recovery timers at zero, in a fixed order.
    pub(super) fn recovery_due(&self, out: &mut impl Extend<Timer<D::Op>>) {
        for (n, t) in self.down_out_ticks.iter().enumerate() {
            if *t == Some(0) {
                out.extend([Timer::DownOut { node: n as NodeId }]);
            }
        }
        for (shard, v) in self.shards.iter().enumerate() {
            let Some(j) = v.join.as_ref() else { continue };
            if matches!(j.retry_ticks, Some((_, 0))) {
                out.extend([Timer::CopyBackoffOver { shard: shard as u8 }]);
            }
            if j.timeout_ticks == Some(0) && !j.swapping {
                out.extend([Timer::JoinTimeout { shard: shard as u8 }]);
            }
        }
    }

    pub(super) fn no_recovery_timer_due(&self) -> bool {
        self.down_out_ticks.iter().all(|t| *t != Some(0))
            && self.shards.iter().all(|v| {
                v.join.as_ref().is_none_or(|j| {
                    !matches!(j.retry_ticks, Some((_, 0))) && (j.timeout_ticks != Some(0) || j.swapping)
                })
            })
    }

    /// The ticks until each recovery timer is due, or a copy backoff's window opens (1 while
    /// one is open).
    pub(super) fn recovery_quiet(&self, at: &mut impl FnMut(TimerTicks)) {
        self.down_out_ticks.iter().flatten().for_each(|&t| at(t));
        for j in self.shards.iter().filter_map(|v| v.join.as_ref()) {
            if let Some((earliest, latest)) = j.retry_ticks {
                at(if earliest > 0 { earliest } else { latest.min(1) });
            }
            if let Some(t) = j.timeout_ticks.filter(|_| !j.swapping) {
                at(t);
            }
        }
    }

    /// A tick of the recovery timers (none is due).
    pub(super) fn recovery_tick(&mut self) {
        for t in self.down_out_ticks.iter_mut().flatten() {
            *t -= 1;
        }
        for j in self.shards.iter_mut().filter_map(|v| v.join.as_mut()) {
            if let Some((earliest, latest)) = j.retry_ticks.as_mut() {
                *earliest = earliest.saturating_sub(1);
                *latest -= 1;
            }
            // Once reads moved to the new replica set the join can no longer be abandoned.
            if let Some(t) = j.timeout_ticks.as_mut().filter(|_| !j.swapping) {
                *t -= 1;
            }
        }
    }

    /// A copy round ran out of time. It is not the detector's business (a missing copy may be
    /// the source's fault, the replacement's or the link's): the round parks, and the sources
    /// still to copy are asked again at their next sign of life or, with a copy backoff, once
    /// the backoff's window is over.
    pub(super) fn on_copy_deadline(&mut self, cfg: &Resolved, shard: u8) {
        let retry = cfg.policy.recovery.copy_retry;
        let join = self.shards[usize::from(shard)].join.as_mut().expect("a copy round belongs to a join");
        join.parked = true;
        if let CopyRetry::Backoff { .. } = retry {
            join.failed_rounds = (join.failed_rounds + 1).min(recovery::copy_rounds_tracked(retry));
            let (earliest, latest) =
                recovery::copy_retry_window(retry, join.failed_rounds).expect("a backoff has a window");
            join.retry_ticks = Some((ticks(earliest), ticks(latest)));
        }
    }

    /// A parked round's backoff is over: ask its missing sources again.
    pub(super) fn on_copy_backoff_over(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let join = self.shards[usize::from(shard)].join.as_mut().expect("a backoff belongs to a join");
        assert!(join.parked && join.retry_ticks.is_some_and(|(earliest, _)| earliest == 0));
        join.retry_ticks = None;
        self.request_copies(cfg, shard, io);
    }

    /// The join did not complete within `join_timeout`: abandon it. The leaving member never
    /// left (it stays in the replica set until the swap), so it is taken back; if it is still
    /// out, another target is tried, never this one again until a join of the shard completes.
    pub(super) fn on_join_timeout(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let view = &mut self.shards[usize::from(shard)];
        let join = view.join.take().expect("a timeout belongs to a join");
        assert!(!join.swapping, "a join whose reads moved is not abandoned");
        view.abandoned_targets |= bit(join.replacement);
        let update = MembershipUpdate {
            shard,
            evicted: join.evicted,
            replacement: join.replacement,
            is_move: join.is_move,
        };
        io.event(Event::ChangeAbandoned(update));
        self.publish(cfg, shard, io);
        self.consider_evictions(cfg, self.backlog_work, io);
    }

    /// Replicas `n` holds or is to hold: memberships, a join's replacement, a queued one.
    fn replicas_held(&self, n: NodeId) -> usize {
        let joining = |v: &ShardView<D>| v.join.as_ref().is_some_and(|j| j.replacement == n);
        self.shards.iter().filter(|v| v.members.contains(&n) || joining(v)).count()
            + self.queue.iter().filter(|u| u.replacement == n).count()
    }

    /// Whether `n` has a replica slot left.
    pub(super) fn slot_free(&self, cfg: &Resolved, n: NodeId) -> bool {
        cfg.nodes[usize::from(n)].replica_slots.is_none_or(|slots| self.replicas_held(n) < usize::from(slots))
    }

    /// The joins `n` takes part in, under way or queued: as the replacement, or as a member
    /// that sends a copy (every member but an evicted one).
    pub(super) fn recoveries(&self, n: NodeId) -> u8 {
        let sends = |shard: u8, evicted: NodeId, is_move: bool| {
            (is_move || evicted != n) && self.shards[usize::from(shard)].members.contains(&n)
        };
        let joins = self
            .shards
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.join.as_ref().map(|j| (k as u8, j.evicted, j.replacement, j.is_move)));
        let queued = self.queue.iter().map(|u| (u.shard, u.evicted, u.replacement, u.is_move));
        joins.chain(queued).filter(|&(k, evicted, to, is_move)| to == n || sends(k, evicted, is_move)).count()
            as u8
    }

    /// The most joins a member of `shard` other than `leaving` (a copy's source) is in.
    pub(super) fn busiest_source(&self, shard: u8, leaving: NodeId) -> u8 {
        let members = &self.shards[usize::from(shard)].members;
        members.iter().filter(|&&m| m != leaving).map(|&m| self.recoveries(m)).max().unwrap_or(0)
    }

    /// What a policy reload changes here: the down/out intervals start afresh when switched on
    /// (a node dead now is out at once when they are switched off); a parked round waiting
    /// for its backoff waits for contact instead when the backoff is switched off; a join
    /// gets the new timeout, cut to it if shorter.
    pub(super) fn reload_recovery(&mut self, from: &Resolved, to: &Resolved) {
        let (was, is) = (&from.policy.recovery, &to.policy.recovery);
        if (was.down_out_interval_ticks > 0) != (is.down_out_interval_ticks > 0) {
            let n = self.health.len();
            self.down_out_ticks = filled(None, if is.down_out_interval_ticks > 0 { n } else { 0 });
            for i in 0..self.down_out_ticks.len() {
                if self.health[i] == Health::Dead {
                    self.down_out_ticks[i] = Some(ticks(is.down_out_interval_ticks));
                }
            }
        } else {
            let cap = ticks(is.down_out_interval_ticks);
            self.down_out_ticks.iter_mut().flatten().for_each(|t| *t = (*t).min(cap));
        }
        let leader = self.me == 0;
        let tracked = recovery::copy_rounds_tracked(is.copy_retry);
        for j in self.shards.iter_mut().filter_map(|v| v.join.as_mut()) {
            if is.copy_retry == CopyRetry::OnContact {
                j.retry_ticks = None;
            }
            j.failed_rounds = j.failed_rounds.min(tracked);
            j.timeout_ticks = match (is.join_timeout_ticks.filter(|_| leader), j.timeout_ticks) {
                (None, _) => None,
                (Some(t), None) => Some(ticks(t)),
                (Some(t), Some(left)) => Some(left.min(ticks(t))),
            };
        }
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
