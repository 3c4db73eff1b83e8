//! The replica: per shard it replicates, a follower or the primary. The primary orders the
//! shard's writes (hands out versions), sends them to the followers, tracks how far each has
//! caught up and which are in sync, and acknowledges writes per `acks`. See the module docs of
//! `protocol::leader` for the protocol.

use super::{leader_event, send, LeaderEvent, LeaderMsg, Pos, Refusal, Storage};
use crate::config::Resolved;
use crate::policy::leader::{self as rules, bit, LeaderPolicy, NodeSet};
use crate::policy::NodeId;
use crate::protocol::coordinator::TimerTicks;
use crate::protocol::{Data, Endpoint, Io, ModelData, Msg, PerNode, Stored};
use serde::{Deserialize, Serialize};

/// Writes of one shard a primary keeps waiting for acks at most; more are refused (`Busy`).
pub const PENDING_WRITES_MAX: usize = 64;

/// A replica's role in a shard, in the epoch it knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Primary,
    /// Following `primary` (`None`: deposed by a newer epoch whose primary it has not heard of).
    Follower {
        primary: Option<NodeId>,
    },
}

/// What a primary knows of one follower.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Progress<D: Data = ModelData> {
    pub node: NodeId,
    /// The newest entry of the primary's log the follower holds, as far as the primary heard.
    pub acked: Pos<D>,
    /// Ticks until it lags, while it is behind and not lagging yet (`replica_lag_timeout`).
    pub lag_ticks: Option<TimerTicks>,
    /// It was behind for `replica_lag_timeout` and has not caught up since: out of sync.
    pub lagging: bool,
}

/// A write a primary stored that waits for its acks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pending<D: Data = ModelData> {
    pub op: D::Op,
    pub attempt: u8,
    pub version: D::Version,
}

/// One shard at one replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaShard<D: Data = ModelData> {
    /// Durable: the newest epoch it knows, its role in it, its newest entry, and (as primary)
    /// the in-sync set the manager confirmed with that confirmation's number.
    pub epoch: D::Epoch,
    pub role: Role,
    pub last: Pos<D>,
    pub in_sync: NodeSet,
    pub in_sync_seq: u8,
    /// Primary, in memory: the in-sync set it proposed and the manager has not confirmed.
    pub proposal: Option<NodeSet>,
    /// Primary, in memory: every other replica's progress, by node id (empty for a follower).
    pub followers: PerNode<Progress<D>>,
    /// Primary, in memory: writes waiting for acks, oldest first.
    pub pending: Vec<Pending<D>>,
}

/// What a replica persists of one shard (the durable fields of [`ReplicaShard`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardDurable<D: Data = ModelData> {
    pub epoch: D::Epoch,
    pub role: Role,
    pub last: Pos<D>,
    pub in_sync: NodeSet,
    pub in_sync_seq: u8,
}

/// What a replica persists: per shard it replicates (`None` where it is not a replica).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaDurable<D: Data = ModelData> {
    pub shards: D::Shards<Option<ShardDurable<D>>>,
}

/// A storage node running the leader family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replica<D: Data = ModelData> {
    pub me: NodeId,
    /// Per shard: `None` where this node is not a replica.
    pub shards: D::Shards<Option<ReplicaShard<D>>>,
}

/// A timer of a replica's that is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaTimer {
    /// Primary: `follower` has been behind for `replica_lag_timeout`: it leaves the in-sync set.
    LagExpired { shard: u8, follower: NodeId },
}

fn ticks(t: crate::policy::Ticks) -> TimerTicks {
    TimerTicks::try_from(t).unwrap_or_else(|_| panic!("{t} ticks exceed a timer"))
}

impl<D: Data> Replica<D> {
    /// Node `me` as the configuration starts it: the first replica of each shard is its
    /// primary in epoch 0, every replica in sync, nothing written.
    pub fn new(cfg: &Resolved, me: NodeId) -> Replica<D> {
        assert!(usize::from(me) < cfg.nodes.len());
        let shards = (0..cfg.shard_names.len() as u8)
            .map(|shard| {
                let replicas = super::replicas(cfg, shard);
                (replicas & bit(me) != 0).then(|| {
                    let primary = super::initial_primary(cfg, shard);
                    let mut s = ReplicaShard {
                        epoch: D::Epoch::default(),
                        role: Role::Follower { primary: Some(primary) },
                        last: Pos::<D>::default(),
                        in_sync: replicas,
                        in_sync_seq: 0,
                        proposal: None,
                        followers: PerNode::new(),
                        pending: Vec::new(),
                    };
                    if primary == me {
                        s.role = Role::Primary;
                        s.followers = followers_of::<D>(cfg, me, replicas);
                    }
                    s
                })
            })
            .collect();
        Replica { me, shards }
    }

    /// What must survive a crash now.
    pub fn durable(&self) -> ReplicaDurable<D> {
        ReplicaDurable {
            shards: self
                .shards
                .iter()
                .map(|s| {
                    s.as_ref().map(|s| ShardDurable {
                        epoch: s.epoch,
                        role: s.role,
                        last: s.last,
                        in_sync: s.in_sync,
                        in_sync_seq: s.in_sync_seq,
                    })
                })
                .collect(),
        }
    }

    /// Node `me` restarting from what it persisted. A primary resumes as primary of its epoch
    /// with its confirmed in-sync set, knowing nothing of its followers' progress: it sends each
    /// its state (the answers tell it where they are; a follower of a newer epoch refuses it when
    /// fencing, and it steps down). A follower asks its primary to catch it up. Writes that were
    /// waiting for acks are gone; their clients time out.
    pub fn restart(
        cfg: &Resolved,
        me: NodeId,
        durable: &ReplicaDurable<D>,
        data: &(impl Storage<D> + ?Sized),
        io: &mut impl Io<D>,
    ) -> Replica<D> {
        let mut r = Replica::<D>::new(cfg, me);
        assert_eq!(durable.shards.len(), r.shards.len());
        for (shard, (s, d)) in r.shards.iter_mut().zip(durable.shards.iter()).enumerate() {
            let (Some(s), Some(d)) = (s.as_mut(), d.as_ref()) else {
                assert!(s.is_none() && d.is_none(), "the replica sets are the configured ones");
                continue;
            };
            let shard = shard as u8;
            let ShardDurable { epoch, role, last, in_sync, in_sync_seq } = *d;
            *s = ReplicaShard { epoch, role, last, in_sync, in_sync_seq, ..s.clone() };
            match role {
                Role::Primary => {
                    become_primary(cfg, me, shard, s);
                    // Nobody tells the followers of a restart: it shows them its state.
                    let msg = catch_up(shard, s, data);
                    for f in s.followers.iter() {
                        send(io, Endpoint::Node(f.node), msg.clone());
                    }
                }
                Role::Follower { primary } => {
                    s.followers.clear();
                    if let Some(p) = primary {
                        send(io, Endpoint::Node(p), LeaderMsg::Behind { shard, epoch });
                    }
                }
            }
        }
        r
    }

    /// Whether no timer is due: only then may time pass.
    pub fn no_timer_due(&self) -> bool {
        self.lag_timers().all(|(_, _, t)| t > 0)
    }

    /// The ticks that pass before a timer is due, were no message to arrive (`None`: no timer
    /// is set): a driver may sleep that long instead of ticking.
    pub fn quiet_ticks(&self) -> Option<TimerTicks> {
        self.lag_timers().map(|(_, _, t)| t).min()
    }

    fn lag_timers(&self) -> impl Iterator<Item = (u8, NodeId, TimerTicks)> + '_ {
        self.shards.iter().enumerate().flat_map(|(shard, s)| {
            s.iter()
                .flat_map(|s| s.followers.iter())
                .filter_map(move |f| f.lag_ticks.map(|t| (shard as u8, f.node, t)))
        })
    }

    /// The timers at zero, in a fixed order.
    pub fn due(&self, out: &mut impl Extend<ReplicaTimer>) {
        out.extend(
            self.lag_timers()
                .filter(|&(_, _, t)| t == 0)
                .map(|(shard, follower, _)| ReplicaTimer::LagExpired { shard, follower }),
        );
    }

    /// One tick passes. No timer may be due.
    pub fn tick(&mut self) {
        for f in self.shards.iter_mut().flatten().flat_map(|s| s.followers.iter_mut()) {
            if let Some(t) = f.lag_ticks.as_mut() {
                *t = t.checked_sub(1).expect("time passes only when no lag timer is due");
            }
        }
    }

    /// Fire a due timer.
    pub fn on_timer(
        &mut self,
        cfg: &Resolved,
        data: &(impl Storage<D> + ?Sized),
        timer: ReplicaTimer,
        io: &mut impl Io<D>,
    ) {
        let ReplicaTimer::LagExpired { shard, follower } = timer;
        let me = self.me;
        let s = self.shard_mut(shard);
        let f = progress(s, follower);
        assert_eq!(f.lag_ticks, Some(0), "a lag timer fires at zero");
        f.lag_ticks = None;
        f.lagging = true;
        // Its appends may have been lost: one catch-up, before it is only sent appends again.
        send(io, Endpoint::Node(follower), catch_up(shard, s, data));
        propose_in_sync(cfg, me, shard, s, io);
    }

    fn shard_mut(&mut self, shard: u8) -> &mut ReplicaShard<D> {
        self.shards[usize::from(shard)].as_mut().expect("only a shard's replicas are sent its messages")
    }

    /// A message arrives from `src`; `data` is this node's stored data.
    pub fn on_msg(
        &mut self,
        cfg: &Resolved,
        data: &mut (impl Storage<D> + ?Sized),
        src: Endpoint,
        msg: Msg<D>,
        io: &mut impl Io<D>,
    ) {
        match msg {
            Msg::Ping => {
                io.send(src, Msg::Pong);
                // The manager is alive: a proposal it has not confirmed may have been lost.
                for shard in 0..self.shards.len() as u8 {
                    if self.shards[usize::from(shard)].is_some() {
                        resend_proposal(shard, self.shard_mut(shard), io);
                    }
                }
            }
            Msg::Leader(m) => self.on_leader(cfg, data, src, m, io),
            other => unreachable!("a leader-family replica is never sent {other:?}"),
        }
    }

    fn on_leader(
        &mut self,
        cfg: &Resolved,
        data: &mut (impl Storage<D> + ?Sized),
        src: Endpoint,
        m: LeaderMsg<D>,
        io: &mut impl Io<D>,
    ) {
        let me = self.me;
        let p = super::leader_policy(cfg);
        match m {
            LeaderMsg::Write { op, attempt, shard, epoch, key, value } => {
                let s = self.shard_mut(shard);
                resend_proposal(shard, s, io);
                match admit_write(p, me, shard, s, epoch, io) {
                    Err(why) => send(io, src, LeaderMsg::Refused { op, attempt, epoch: s.epoch, why }),
                    Ok(()) => accept_write(cfg, me, shard, s, data, (op, attempt), key, value, io),
                }
            }
            LeaderMsg::Read { op, attempt, shard, epoch, key } => {
                let s = self.shard_mut(shard);
                resend_proposal(shard, s, io);
                let primary = s.role == Role::Primary;
                let why = if primary && rules::refuses_epoch(p.fencing, s.epoch, epoch) {
                    refused_stale(io, me, shard, epoch, s.epoch);
                    Some(Refusal::StaleEpoch)
                } else if !rules::serves_read(p.read_from, primary) || (primary && epoch > s.epoch) {
                    Some(Refusal::NotPrimary)
                } else {
                    None
                };
                let reply = match why {
                    Some(why) => LeaderMsg::Refused { op, attempt, epoch: s.epoch, why },
                    None => {
                        let Stored { version, value } = data.read(shard, &key);
                        LeaderMsg::ReadDone { op, attempt, epoch: s.epoch, version, value }
                    }
                };
                send(io, src, reply);
            }
            LeaderMsg::Append { shard, epoch, prev, version, key, value } => {
                let Endpoint::Node(from) = src else { unreachable!("appends come from primaries") };
                let s = self.shard_mut(shard);
                if !follow_sender(p, me, shard, s, epoch, from, src, io) {
                    return;
                }
                let entry = Pos::<D> { epoch, version };
                let reply = if prev == s.last {
                    data.write(shard, &key, Stored { version, value });
                    s.last = entry;
                    LeaderMsg::Appended { shard, epoch, pos: entry }
                } else if s.last.epoch == epoch && s.last >= entry {
                    // Delivered late: it already holds this entry of the primary's log.
                    LeaderMsg::Appended { shard, epoch, pos: s.last }
                } else {
                    LeaderMsg::Behind { shard, epoch }
                };
                send(io, src, reply);
            }
            LeaderMsg::CatchUp { shard, epoch, last, data: snapshot } => {
                let Endpoint::Node(from) = src else { unreachable!("catch-ups come from primaries") };
                let s = self.shard_mut(shard);
                if !follow_sender(p, me, shard, s, epoch, from, src, io) {
                    return;
                }
                // One writer per epoch: holding an entry of this epoch as new as `last` is
                // holding all of it (a catch-up overtaken by appends changes nothing).
                let newer_held = s.last == last || (s.last.epoch == epoch && s.last >= last);
                if !newer_held {
                    data.restore(shard, &snapshot);
                    s.last = last;
                }
                send(io, src, LeaderMsg::Appended { shard, epoch, pos: s.last });
            }
            LeaderMsg::Appended { shard, epoch, pos } => {
                let Endpoint::Node(from) = src else { unreachable!("acks come from followers") };
                let s = self.shard_mut(shard);
                if s.role != Role::Primary || epoch != s.epoch {
                    return;
                }
                let last = s.last;
                let f = progress(s, from);
                f.acked = f.acked.max(pos);
                if rules::caught_up(f.acked, last) {
                    f.lag_ticks = None;
                    f.lagging = false;
                }
                propose_in_sync(cfg, me, shard, s, io);
                ack_ready(cfg, me, shard, s, io);
            }
            LeaderMsg::Behind { shard, epoch } => {
                let s = self.shard_mut(shard);
                if s.role == Role::Primary && epoch == s.epoch {
                    send(io, src, catch_up(shard, s, data));
                }
            }
            LeaderMsg::Stale { shard, epoch } => {
                let s = self.shard_mut(shard);
                if epoch > s.epoch {
                    step_down(s, epoch, None, io);
                }
            }
            LeaderMsg::Promote { shard, epoch, in_sync } => {
                let s = self.shard_mut(shard);
                if epoch < s.epoch {
                    return; // overtaken by a newer role
                }
                if epoch > s.epoch || s.role != Role::Primary {
                    step_down(s, epoch, None, io);
                    s.role = Role::Primary;
                    s.in_sync = in_sync;
                    s.in_sync_seq = 0;
                    become_primary(cfg, me, shard, s);
                }
                send(io, src, LeaderMsg::RoleAck { shard, epoch });
            }
            LeaderMsg::Follow { shard, epoch, primary } => {
                let s = self.shard_mut(shard);
                if epoch < s.epoch {
                    return;
                }
                if epoch > s.epoch || s.role != (Role::Follower { primary: Some(primary) }) {
                    step_down(s, epoch, Some(primary), io);
                    // Its log may have a tail the new primary lacks: ask for its state.
                    send(io, Endpoint::Node(primary), LeaderMsg::Behind { shard, epoch });
                }
                send(io, src, LeaderMsg::RoleAck { shard, epoch });
            }
            LeaderMsg::InSyncConfirmed { shard, epoch, seq, in_sync } => {
                let s = self.shard_mut(shard);
                // Only the answer to the pending proposal: a late copy of an earlier
                // confirmation must not undo a later one.
                let answers = s.role == Role::Primary
                    && epoch == s.epoch
                    && s.proposal == Some(in_sync)
                    && seq == s.in_sync_seq.wrapping_add(1);
                if answers {
                    s.in_sync = in_sync;
                    s.in_sync_seq = seq;
                    s.proposal = None;
                    propose_in_sync(cfg, me, shard, s, io);
                    ack_ready(cfg, me, shard, s, io);
                }
            }
            LeaderMsg::Query { shard, .. } => {
                let s = self.shard_mut(shard);
                send(io, src, LeaderMsg::Position { shard, epoch: s.epoch, pos: s.last });
            }
            LeaderMsg::WriteDone { .. }
            | LeaderMsg::ReadDone { .. }
            | LeaderMsg::Refused { .. }
            | LeaderMsg::RoleAck { .. }
            | LeaderMsg::InSyncPropose { .. }
            | LeaderMsg::Position { .. } => unreachable!("a replica is never sent {m:?}"),
        }
    }
}

/// The progress entry of `follower` at a primary.
fn progress<D: Data>(s: &mut ReplicaShard<D>, follower: NodeId) -> &mut Progress<D> {
    s.followers.iter_mut().find(|f| f.node == follower).expect("a follower of the shard")
}

/// Every other replica in `replicas`, as a primary starts: nothing heard from any.
fn followers_of<D: Data>(cfg: &Resolved, me: NodeId, replicas: NodeSet) -> PerNode<Progress<D>> {
    (0..cfg.nodes.len() as NodeId)
        .filter(|&n| n != me && replicas & bit(n) != 0)
        .map(|node| Progress { node, acked: Pos::<D>::default(), lag_ticks: None, lagging: false })
        .collect()
}

/// A primary taking over (promoted, or restarted as one): it knows nothing of its followers'
/// progress, so those in sync start their lag timers and those outside lag until they catch
/// up. (Followers the manager told of a promotion ask for its state: `Behind`.)
fn become_primary<D: Data>(cfg: &Resolved, me: NodeId, shard: u8, s: &mut ReplicaShard<D>) {
    assert_eq!(s.role, Role::Primary);
    assert_ne!(s.in_sync & bit(me), 0, "a primary is in its own in-sync set");
    let p = super::leader_policy(cfg);
    assert!(s.pending.is_empty(), "a new primary has no write waiting");
    s.proposal = None;
    s.followers = followers_of(cfg, me, super::replicas(cfg, shard));
    for f in s.followers.iter_mut() {
        f.lagging = s.in_sync & bit(f.node) == 0;
        if !f.lagging && !rules::caught_up(f.acked, s.last) {
            f.lag_ticks = Some(ticks(p.replica_lag_timeout_ticks));
        }
    }
}

/// The primary's whole state of `shard`, for a follower to adopt.
fn catch_up<D: Data>(shard: u8, s: &ReplicaShard<D>, data: &(impl Storage<D> + ?Sized)) -> LeaderMsg<D> {
    LeaderMsg::CatchUp { shard, epoch: s.epoch, last: s.last, data: data.snapshot(shard) }
}

/// Leave the primary's role (if it had it) for `epoch`: writes waiting for acks are given up.
fn step_down<D: Data>(
    s: &mut ReplicaShard<D>,
    epoch: D::Epoch,
    primary: Option<NodeId>,
    io: &mut impl Io<D>,
) {
    for w in s.pending.drain(..) {
        let msg = LeaderMsg::Refused { op: w.op, attempt: w.attempt, epoch: s.epoch, why: Refusal::Deposed };
        send(io, Endpoint::LEADER, msg);
    }
    s.epoch = epoch;
    s.role = Role::Follower { primary };
    s.proposal = None;
    s.followers.clear();
}

/// Fencing of an append or catch-up from the primary `from` of `epoch`: refused when older
/// (the sender is told), adopted when newer (this replica follows `from`). Whether to go on
/// and apply it: not at a primary, which takes no other's log.
#[allow(clippy::too_many_arguments)]
fn follow_sender<D: Data>(
    p: &LeaderPolicy,
    me: NodeId,
    shard: u8,
    s: &mut ReplicaShard<D>,
    epoch: D::Epoch,
    from: NodeId,
    src: Endpoint,
    io: &mut impl Io<D>,
) -> bool {
    if rules::refuses_epoch(p.fencing, s.epoch, epoch) {
        refused_stale(io, me, shard, epoch, s.epoch);
        send(io, src, LeaderMsg::Stale { shard, epoch: s.epoch });
        return false;
    }
    if epoch > s.epoch {
        step_down(s, epoch, Some(from), io);
    }
    // Without fencing a deposed primary's log is taken by followers, never by a primary.
    s.role != Role::Primary
}

fn refused_stale<D: Data>(io: &mut impl Io<D>, me: NodeId, shard: u8, epoch: D::Epoch, own: D::Epoch) {
    leader_event(io, LeaderEvent::StaleRefused { shard, by: Endpoint::Node(me), epoch, own });
}

/// Whether the primary takes a write routed in `epoch`, or why not.
fn admit_write<D: Data>(
    p: &LeaderPolicy,
    me: NodeId,
    shard: u8,
    s: &ReplicaShard<D>,
    epoch: D::Epoch,
    io: &mut impl Io<D>,
) -> Result<(), Refusal> {
    if rules::refuses_epoch(p.fencing, s.epoch, epoch) {
        refused_stale(io, me, shard, epoch, s.epoch);
        return Err(Refusal::StaleEpoch);
    }
    // A newer epoch: the manager made this node primary and it has not heard yet.
    if s.role != Role::Primary || epoch > s.epoch {
        return Err(Refusal::NotPrimary);
    }
    if !rules::admits_write(p.acks, p.min_in_sync, rules::ack_set(s.in_sync, s.proposal)) {
        return Err(Refusal::NotEnoughInSync);
    }
    if s.pending.len() >= PENDING_WRITES_MAX {
        return Err(Refusal::Busy);
    }
    Ok(())
}

/// The primary stores the write of `(op, attempt)` at its next version, sends it to every
/// follower, and acks it when `acks` allows.
#[allow(clippy::too_many_arguments)]
fn accept_write<D: Data>(
    cfg: &Resolved,
    me: NodeId,
    shard: u8,
    s: &mut ReplicaShard<D>,
    data: &mut (impl Storage<D> + ?Sized),
    (op, attempt): (D::Op, u8),
    key: D::Key,
    value: D::Value,
    io: &mut impl Io<D>,
) {
    let p = super::leader_policy(cfg);
    let prev = s.last;
    let (epoch, version) = (s.epoch, D::next_version(prev.version));
    s.last = Pos::<D> { epoch, version };
    data.write(shard, &key, Stored { version, value: value.clone() });
    leader_event(io, LeaderEvent::WriteAccepted { shard, node: me, epoch, version, op });
    for f in s.followers.iter_mut() {
        // An in-sync follower that was caught up falls behind now: its lag timer starts.
        if !f.lagging && f.lag_ticks.is_none() {
            assert!(rules::caught_up(f.acked, prev), "a follower behind and in sync has a lag timer");
            f.lag_ticks = Some(ticks(p.replica_lag_timeout_ticks));
        }
        let append =
            LeaderMsg::Append { shard, epoch, prev, version, key: key.clone(), value: value.clone() };
        send(io, Endpoint::Node(f.node), append);
    }
    s.pending.push(Pending { op, attempt, version });
    ack_ready(cfg, me, shard, s, io);
}

/// Acknowledge every waiting write the policy now allows (to the manager, which routed it).
fn ack_ready<D: Data>(cfg: &Resolved, me: NodeId, shard: u8, s: &mut ReplicaShard<D>, io: &mut impl Io<D>) {
    let p = super::leader_policy(cfg);
    let replicas = super::replicas(cfg, shard);
    let ack_set = rules::ack_set(s.in_sync, s.proposal);
    let epoch = s.epoch;
    let followers = &s.followers;
    let holders = |version: D::Version| {
        let entry = Pos::<D> { epoch, version };
        followers.iter().filter(|f| f.acked >= entry).fold(bit(me), |m, f| m | bit(f.node))
    };
    let acked =
        |w: &Pending<D>| rules::write_acked(p.acks, p.min_in_sync, replicas, ack_set, holders(w.version));
    // Followers hold prefixes of the log: the acknowledged writes are the oldest ones.
    let n = s.pending.iter().take_while(|w| acked(w)).count();
    for w in s.pending.drain(..n) {
        let done = LeaderMsg::WriteDone { op: w.op, attempt: w.attempt, epoch, version: w.version };
        send(io, Endpoint::LEADER, done);
    }
}

/// Propose the in-sync set the primary wants, if it differs from the confirmed one and no
/// proposal is pending (one change at a time, numbered after the confirmed one).
fn propose_in_sync<D: Data>(
    cfg: &Resolved,
    me: NodeId,
    shard: u8,
    s: &mut ReplicaShard<D>,
    io: &mut impl Io<D>,
) {
    if s.role != Role::Primary || s.proposal.is_some() {
        return;
    }
    let lagging = s.followers.iter().filter(|f| f.lagging).fold(0, |m, f| m | bit(f.node));
    let wanted = rules::desired_in_sync(me, super::replicas(cfg, shard), lagging);
    if wanted != s.in_sync {
        s.proposal = Some(wanted);
        resend_proposal(shard, s, io);
    }
}

/// Send the pending in-sync proposal (again), if there is one.
fn resend_proposal<D: Data>(shard: u8, s: &mut ReplicaShard<D>, io: &mut impl Io<D>) {
    if let (Role::Primary, Some(in_sync)) = (s.role, s.proposal) {
        let seq = s.in_sync_seq.wrapping_add(1);
        send(io, Endpoint::LEADER, LeaderMsg::InSyncPropose { shard, epoch: s.epoch, seq, in_sync });
    }
}
