//! Several coordinators: one membership leader (coordinator 0) orders every replica-set
//! change; the others learn each shard's view from it and ack it.
//!
//! Why a leader and not gossip: the one-change rule (one membership change per shard at a
//! time) and the churn bound need the changes in one total order, which a single sequencer
//! gives for free (in production: the membership service's replicated log, e.g. etcd); gossip
//! would let two coordinators start two changes of a shard that then have to be reconciled.
//!
//! A change passes three views, and the leader moves to the next only once every coordinator
//! acked the current one, so two coordinators' views differ by at most one step:
//! - **join**: the replacement learns; writes reach the members and the learner and need one
//!   more ack, reads go to the members. A coordinator acks once every write it began before
//!   has ended, so the copies (requested after every ack) carry every acked write.
//! - **swapping**: the replacement caught up; reads go to the new replica set, writes still
//!   reach the old and new members with one more ack.
//! - **done**: the new replica set alone.
//!
//! Any two neighbouring views are safe together: a write under either lands on at least a
//! write quorum of the replica set a read under the other asks. (Join next to done is not:
//! a read of the old set could miss a write of the new one; the swapping view is what keeps
//! them apart.) With one coordinator there is nobody to wait for: the views collapse into
//! the single coordinator's own steps and no view message is ever sent.

use super::*;

/// The coordinators other than the leader, a bit each.
pub fn followers(cfg: &Resolved) -> u8 {
    let n = cfg.coordinators.len();
    debug_assert!(n <= 8);
    (((1u16 << n) - 1) as u8) & !1
}

/// Whether view epoch `a` is after `b`. Epochs count up by one a view and wrap (the store
/// runs for ever; the model renumbers them from the oldest one held each step): they are
/// compared as serial numbers, which is exact because two epochs in use never lie more than a
/// few views apart (the leader moves on only once every coordinator acked, so a follower is
/// one view behind at most, and a stale re-send one more).
pub(super) fn epoch_after(a: u8, b: u8) -> bool {
    (a.wrapping_sub(b) as i8) > 0
}

fn members_bits(members: &[NodeId]) -> u8 {
    members.iter().fold(0, |m, &n| m | bit(n))
}

impl<D: Data> Coordinator<D> {
    /// Leader: whether some coordinator has not acked the shard's current view yet.
    pub(super) fn view_pending(&self, cfg: &Resolved, v: &ShardView<D>) -> bool {
        self.me == 0 && v.acked != followers(cfg)
    }

    /// The nodes a read of `shard` asks: the members, or once a replacement caught up (a
    /// swapping join), the new replica set.
    pub(super) fn read_set(&self, shard: u8) -> u8 {
        let view = &self.shards[usize::from(shard)];
        let members = members_bits(&view.members);
        match &view.join {
            Some(j) if j.swapping => (members & !bit(j.evicted)) | bit(j.replacement),
            _ => members,
        }
    }

    /// Leader: a new view of `shard` (a step of a change): count the epoch up and send it to
    /// every other coordinator. Nothing to do with one coordinator.
    pub(super) fn publish(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let followers = followers(cfg);
        if followers == 0 {
            return;
        }
        debug_assert_eq!(self.me, 0, "only the leader publishes views");
        let view = &mut self.shards[usize::from(shard)];
        view.epoch = view.epoch.wrapping_add(1);
        view.acked = 0;
        view.view_ticks = ticks(cfg.policy.replica_ack_timeout_ticks);
        self.send_view(cfg, shard, followers, io);
    }

    fn send_view(&self, cfg: &Resolved, shard: u8, to: u8, io: &mut impl Io<D>) {
        let view = &self.shards[usize::from(shard)];
        let join = view.join.as_ref().map(|j| JoinView {
            evicted: j.evicted,
            replacement: j.replacement,
            is_move: j.is_move,
            swapping: j.swapping,
        });
        let msg = Msg::View { shard, epoch: view.epoch, members: members_bits(&view.members), join };
        for c in (1..cfg.coordinators.len() as u8).filter(|c| to & (1 << c) != 0) {
            io.send(Endpoint::Coordinator(c), msg.clone());
        }
    }

    /// Leader: the view was not acked by everyone in time: send it again to those missing.
    pub(super) fn on_view_resend(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let view = &mut self.shards[usize::from(shard)];
        view.view_ticks = ticks(cfg.policy.replica_ack_timeout_ticks);
        let missing = followers(cfg) & !view.acked;
        self.send_view(cfg, shard, missing, io);
    }

    /// Leader: coordinator `from` runs view `epoch`. Once all do, the change moves on.
    pub(super) fn on_view_ack(
        &mut self,
        cfg: &Resolved,
        shard: u8,
        epoch: u8,
        from: u8,
        io: &mut impl Io<D>,
    ) {
        let view = &mut self.shards[usize::from(shard)];
        if epoch != view.epoch {
            return;
        }
        view.acked |= 1 << from;
        if view.acked != followers(cfg) {
            return;
        }
        match view.join.as_ref() {
            Some(j) if j.swapping => self.complete_join(cfg, shard, io),
            Some(_) => self.start_copies_when_clear(cfg, shard, io),
            None => {}
        }
    }

    /// Another coordinator: the leader's view of `shard` as of `epoch`.
    pub(super) fn on_view(
        &mut self,
        cfg: &Resolved,
        shard: u8,
        epoch: u8,
        members: u8,
        join: Option<JoinView>,
        io: &mut impl Io<D>,
    ) {
        let _ = cfg;
        let view = &mut self.shards[usize::from(shard)];
        if epoch_after(view.epoch, epoch) {
            return;
        }
        if epoch == view.epoch {
            // The leader sent it again: our ack was lost (or is still owed).
            if !view.ack_owed {
                io.send(Endpoint::LEADER, Msg::ViewAck { shard, epoch });
            }
            return;
        }
        view.epoch = epoch;
        view.members = (0..8).filter(|n| members & (1 << n) != 0).collect();
        let ended = view.join.as_ref().filter(|_| join.is_none()).map(|j| MembershipUpdate {
            shard,
            evicted: j.evicted,
            replacement: j.replacement,
            is_move: j.is_move,
        });
        view.join = join
            .map(|j| Join { swapping: j.swapping, ..Join::learning(j.evicted, j.replacement, j.is_move) });
        if let Some(update) = ended.filter(|u| view.members.contains(&u.replacement)) {
            io.event(Event::ChangeLearned(update));
        }
        view.ack_owed = true;
        self.ack_when_clear(shard, io);
    }

    /// Another coordinator: ack the shard's view if it owes the ack and, for a join's first
    /// view, no write it began before the join is still waiting for acks (that write missed
    /// the learner, and the copies must carry it).
    pub(super) fn ack_when_clear(&mut self, shard: u8, io: &mut impl Io<D>) {
        let view = &self.shards[usize::from(shard)];
        if !view.ack_owed {
            return;
        }
        if let Some(j) = view.join.as_ref().filter(|j| !j.swapping) {
            if self.earlier_write_in_flight(shard, j.replacement) {
                return;
            }
        }
        let view = &mut self.shards[usize::from(shard)];
        view.ack_owed = false;
        io.send(Endpoint::LEADER, Msg::ViewAck { shard, epoch: view.epoch });
    }

    /// Leader: another coordinator proposes an eviction. It is ordered like the leader's own,
    /// unless the shard changes already or the proposal is out of date.
    pub(super) fn on_propose(
        &mut self,
        cfg: &Resolved,
        shard: u8,
        evicted: NodeId,
        replacement: NodeId,
        io: &mut impl Io<D>,
    ) {
        let view = &self.shards[usize::from(shard)];
        let current = view.join.is_none()
            && !self.queue.iter().any(|u| u.shard == shard)
            && view.members.contains(&evicted)
            && !view.members.contains(&replacement);
        if !current {
            return;
        }
        // The leader does the membership work: its load decides whether changes pause.
        if self.changes_paused(cfg) {
            let why = crate::policy::eviction::Suppressed::CoordinatorOverloaded;
            io.event(Event::EvictionSuppressed { shard, node: evicted, why });
            return;
        }
        self.enqueue(cfg, MembershipUpdate { shard, evicted, replacement, is_move: false }, io);
    }

    /// Several coordinators: the version a write takes once its read quorum answered, newest
    /// `seen`: above `seen` and above every version this coordinator handed out, and in this
    /// coordinator's own class (`me` modulo the coordinator count) so that no two
    /// coordinators ever hand out the same one.
    pub(super) fn version_above(&mut self, cfg: &Resolved, shard: u8, seen: D::Version) -> D::Version {
        let n = cfg.coordinators.len() as u64;
        let view = &mut self.shards[usize::from(shard)];
        let seen: u64 = seen.into();
        let floor = (seen + 1).max(view.next_version.into());
        let version = floor + (u64::from(self.me) + n - floor % n) % n;
        debug_assert_eq!(version % n, u64::from(self.me));
        view.next_version =
            D::Version::try_from(version + 1).unwrap_or_else(|_| panic!("version {version} is the last one"));
        D::Version::try_from(version).unwrap_or_else(|_| panic!("version {version} is out of range"))
    }
}

impl<D: Data> Coordinator<D> {
    /// A policy reload (a rollout stage, the store's `CONFIG SET policy`): the coordinator
    /// keeps everything it knows and runs `to` from now on. Only the timers a policy switches
    /// on or off change: the heartbeat and silence counters of independent detection start
    /// afresh when it is switched on, the rebalancer's interval when it is enabled, and a
    /// running timer is cut to the new, shorter interval.
    pub fn reload(&mut self, from: &Resolved, to: &Resolved) {
        assert_eq!(from.nodes.len(), to.nodes.len(), "a reload keeps the nodes");
        assert_eq!(from.coordinators.len(), to.coordinators.len(), "a reload keeps the coordinators");
        let (was, is) = (independent(from), independent(to));
        if was != is {
            self.silence_ticks = filled(0, if is { to.nodes.len() } else { 0 });
            self.heartbeat_ticks = if is { ticks(to.policy.heartbeat_interval_ticks) } else { 0 };
        } else if is {
            self.heartbeat_ticks = self.heartbeat_ticks.min(ticks(to.policy.heartbeat_interval_ticks));
            let cap = ticks(to.policy.dead_after_ticks);
            self.silence_ticks.iter_mut().for_each(|t| *t = (*t).min(cap));
        }
        self.rebalance_ticks = match (&from.policy.rebalance, &to.policy.rebalance) {
            (_, None) => 0,
            (None, Some(r)) => ticks(r.interval_ticks),
            (Some(_), Some(r)) => self.rebalance_ticks.min(ticks(r.interval_ticks)),
        };
        if self.me != 0 {
            self.rebalance_ticks = 0;
        }
        self.reload_recovery(from, to);
    }
}
