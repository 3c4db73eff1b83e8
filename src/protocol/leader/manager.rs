//! The failover manager and request router (coordinator 0): routes each request to the
//! shard's primary (or, for a read the policy lets go anywhere, the nearest replica), relays
//! the outcome, detects failed nodes, and promotes a replica when a primary is judged dead.
//! See the module docs of `protocol::leader` for the protocol.

use super::{leader_event, send, LeaderEvent, LeaderFailure, LeaderMsg, Pos};
use crate::config::{OpKind, Resolved};
use crate::policy::detector::{self, FailureDetection, Health, HealthCheck};
use crate::policy::leader::{
    self as rules, bit, Candidate, NodeSet, Promotion, PromotionRules, ReadCandidate,
};
use crate::policy::NodeId;
use crate::protocol::coordinator::TimerTicks;
use crate::protocol::{filled, Data, Endpoint, Event, Io, ModelData, Msg, PerNode};
use serde::{Deserialize, Serialize};

/// The manager's view of one shard.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardRoute<D: Data = ModelData> {
    /// Durable: the epoch, its primary, and the in-sync set last confirmed (with its number).
    pub epoch: D::Epoch,
    pub primary: NodeId,
    pub in_sync: NodeSet,
    pub in_sync_seq: u8,
    /// The replicas that acked their role in `epoch`; the others are told it again when heard.
    pub role_acked: NodeSet,
    /// A failover under way.
    pub failover: Option<Failover<D>>,
}

/// A failover of a shard whose primary was judged dead: the position query and the delay.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Failover<D: Data = ModelData> {
    /// Ticks until `failover_delay` has passed since the judgement (stays at 0).
    pub delay_ticks: TimerTicks,
    /// Ticks until the position query's deadline (`replica_ack_timeout`; stays at 0).
    pub query_ticks: TimerTicks,
    pub asked: NodeSet,
    /// The answers so far, by node.
    pub answers: PerNode<(NodeId, Pos<D>)>,
}

impl<D: Data> Failover<D> {
    fn answered(&self) -> NodeSet {
        self.answers.iter().fold(0, |m, (n, _)| m | bit(*n))
    }

    fn decides(&self) -> bool {
        rules::failover_decides(
            u32::from(self.delay_ticks),
            self.asked,
            self.answered(),
            u32::from(self.query_ticks),
        )
    }
}

/// A request the manager routed and waits on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Forwarded<D: Data = ModelData> {
    pub op: D::Op,
    pub attempt: u8,
    pub kind: OpKind,
    pub shard: u8,
    /// The replica it went to.
    pub to: NodeId,
    /// It went to the primary: its answer is fenced (a follower's read is not, by design).
    pub to_primary: bool,
    /// A write's value (the client's response repeats it).
    pub value: D::Value,
    /// Ticks until the deadline (`replica_ack_timeout`).
    pub deadline_ticks: TimerTicks,
    /// `to` was heard from since the request left: alive, if late.
    pub heard: bool,
}

/// What the manager persists of one shard (the durable fields of [`ShardRoute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouteDurable<D: Data = ModelData> {
    pub epoch: D::Epoch,
    pub primary: NodeId,
    pub in_sync: NodeSet,
    pub in_sync_seq: u8,
}

/// What the manager persists. A driver writes it whenever a step changed it, before that
/// step's sends leave.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ManagerDurable<D: Data = ModelData> {
    pub shards: D::Shards<RouteDurable<D>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Manager<D: Data = ModelData> {
    pub shards: D::Shards<ShardRoute<D>>,
    pub health: PerNode<Health>,
    /// Independent detection: ticks since each node was last heard from (saturating).
    pub silence_ticks: PerNode<TimerTicks>,
    pub heartbeat_ticks: TimerTicks,
    pub ops: Vec<Forwarded<D>>,
}

/// A timer of the manager's that is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManagerTimer<Op = crate::protocol::OpId> {
    /// A request's deadline (`replica_ack_timeout`).
    Deadline { op: Op, attempt: u8 },
    /// A heartbeat round (independent failure detection).
    Heartbeat,
    /// Continuous health checking: `node`'s silence reached a threshold.
    SilenceCrossed { node: NodeId },
    /// A failover's delay passed and its position query is complete (or out of time).
    Failover { shard: u8 },
}

fn ticks(t: crate::policy::Ticks) -> TimerTicks {
    TimerTicks::try_from(t).unwrap_or_else(|_| panic!("{t} ticks exceed a timer"))
}

fn independent(cfg: &Resolved) -> bool {
    cfg.policy.failure_detection == FailureDetection::Independent
}

/// The nodes in `set`, in id order.
fn nodes(set: NodeSet) -> impl Iterator<Item = NodeId> {
    (0..8).filter(move |n| set & (1 << n) != 0)
}

impl<D: Data> Manager<D> {
    /// The manager as the configuration starts it: each shard's first replica is its primary
    /// in epoch 0, every replica in sync and aware of its role, every node alive.
    pub fn new(cfg: &Resolved) -> Manager<D> {
        assert_eq!(cfg.coordinators.len(), 1, "the leader family runs one manager");
        let node_count = cfg.nodes.len();
        let independent = independent(cfg);
        Manager {
            shards: (0..cfg.shard_names.len() as u8)
                .map(|shard| {
                    let replicas = super::replicas(cfg, shard);
                    ShardRoute {
                        epoch: D::Epoch::default(),
                        primary: super::initial_primary(cfg, shard),
                        in_sync: replicas,
                        in_sync_seq: 0,
                        role_acked: replicas,
                        failover: None,
                    }
                })
                .collect(),
            health: filled(Health::Alive, node_count),
            silence_ticks: filled(0, if independent { node_count } else { 0 }),
            heartbeat_ticks: if independent { ticks(cfg.policy.heartbeat_interval_ticks) } else { 0 },
            ops: Vec::new(),
        }
    }

    /// What must survive a crash now.
    pub fn durable(&self) -> ManagerDurable<D> {
        ManagerDurable {
            shards: self
                .shards
                .iter()
                .map(|r| RouteDurable {
                    epoch: r.epoch,
                    primary: r.primary,
                    in_sync: r.in_sync,
                    in_sync_seq: r.in_sync_seq,
                })
                .collect(),
        }
    }

    /// The manager restarting from what it persisted: epochs, primaries and in-sync sets as
    /// they were; requests in flight, the detector's view and failovers under way are gone, and
    /// every replica is told its role again when next heard from, but in epoch 0: every
    /// replica starts in its epoch-0 role (`Replica::new`), so a manager recovered then knows
    /// them as a new one does (a first start recovers the state its cluster was created with).
    pub fn recover(cfg: &Resolved, durable: &ManagerDurable<D>) -> Manager<D> {
        let mut m = Manager::<D>::new(cfg);
        assert_eq!(durable.shards.len(), m.shards.len());
        for (r, &RouteDurable { epoch, primary, in_sync, in_sync_seq }) in
            m.shards.iter_mut().zip(durable.shards.iter())
        {
            let role_acked = if epoch == D::Epoch::default() { r.role_acked } else { 0 };
            *r = ShardRoute { epoch, primary, in_sync, in_sync_seq, role_acked, failover: None };
        }
        m
    }

    /// Whether no timer is due: only then may time pass.
    pub fn no_timer_due(&self, cfg: &Resolved) -> bool {
        self.ops.iter().all(|o| o.deadline_ticks > 0)
            && (!independent(cfg) || self.heartbeat_ticks > 0)
            && self.silences_crossed(cfg).next().is_none()
            && self.shards.iter().all(|r| r.failover.as_ref().is_none_or(|f| !f.decides()))
    }

    /// The timers at zero, in a fixed order.
    pub fn due(&self, cfg: &Resolved, out: &mut impl Extend<ManagerTimer<D::Op>>) {
        for o in self.ops.iter().filter(|o| o.deadline_ticks == 0) {
            out.extend([ManagerTimer::Deadline { op: o.op, attempt: o.attempt }]);
        }
        if independent(cfg) && self.heartbeat_ticks == 0 {
            out.extend([ManagerTimer::Heartbeat]);
        }
        out.extend(self.silences_crossed(cfg).map(|node| ManagerTimer::SilenceCrossed { node }));
        for (shard, r) in self.shards.iter().enumerate() {
            if r.failover.as_ref().is_some_and(|f| f.decides()) {
                out.extend([ManagerTimer::Failover { shard: shard as u8 }]);
            }
        }
    }

    /// At most the ticks that pass before a timer is due, were no message to arrive (`None`:
    /// none can come due): a driver may sleep that long instead of ticking. A lower bound
    /// (waking early finds nothing due): each countdown to zero, each detector threshold a
    /// silence has yet to reach, and each failover's delay and query deadline.
    pub fn quiet_ticks(&self, cfg: &Resolved) -> Option<u32> {
        let mut quiet: Option<u32> = None;
        let mut at = |ticks: u32| quiet = Some(quiet.map_or(ticks, |q| q.min(ticks)));
        for o in &self.ops {
            at(u32::from(o.deadline_ticks));
        }
        if independent(cfg) {
            at(u32::from(self.heartbeat_ticks));
            let p = &cfg.policy;
            for &silence in &self.silence_ticks {
                let silence = u32::from(silence);
                for threshold in [p.suspect_after_ticks, p.dead_after_ticks] {
                    if silence < threshold {
                        at(threshold - silence);
                    }
                }
            }
        }
        for f in self.shards.iter().filter_map(|r| r.failover.as_ref()) {
            at(u32::from(f.delay_ticks.min(f.query_ticks)));
        }
        quiet
    }

    /// One tick passes. No timer may be due.
    pub fn tick(&mut self, cfg: &Resolved) {
        debug_assert!(self.no_timer_due(cfg));
        for o in &mut self.ops {
            o.deadline_ticks -= 1;
        }
        if independent(cfg) {
            self.heartbeat_ticks -= 1;
            // Saturate at `dead_after`: longer silence says nothing more.
            let cap = ticks(cfg.policy.dead_after_ticks);
            for t in &mut self.silence_ticks {
                *t = (*t + 1).min(cap);
            }
        }
        for f in self.shards.iter_mut().filter_map(|r| r.failover.as_mut()) {
            f.delay_ticks = f.delay_ticks.saturating_sub(1);
            f.query_ticks = f.query_ticks.saturating_sub(1);
        }
    }

    /// Fire a due timer.
    pub fn on_timer(&mut self, cfg: &Resolved, timer: ManagerTimer<D::Op>, io: &mut impl Io<D>) {
        match timer {
            ManagerTimer::Deadline { op, attempt } => self.on_deadline(cfg, op, attempt, io),
            ManagerTimer::Heartbeat => {
                let p = &cfg.policy;
                self.heartbeat_ticks = ticks(p.heartbeat_interval_ticks);
                for n in 0..cfg.nodes.len() as NodeId {
                    if p.health_check == HealthCheck::Rounds {
                        self.judge(cfg, n, io);
                    }
                    io.send(Endpoint::Node(n), Msg::Ping);
                }
                self.consider_failovers(cfg, io);
            }
            ManagerTimer::SilenceCrossed { node } => {
                self.judge(cfg, node, io);
                self.consider_failovers(cfg, io);
            }
            ManagerTimer::Failover { shard } => self.decide(cfg, shard, io),
        }
    }

    /// A message arrives from `src`.
    pub fn on_msg(&mut self, cfg: &Resolved, src: Endpoint, msg: Msg<D>, io: &mut impl Io<D>) {
        if let Endpoint::Node(n) = src {
            self.heard_from(cfg, n, io);
        }
        let epochs: D::Shards<D::Epoch> = self.shards.iter().map(|r| r.epoch).collect();
        match msg {
            Msg::Request { op, attempt, kind, shard, key, value, .. } => {
                self.on_request(cfg, op, attempt, kind, shard, key, value, io)
            }
            Msg::Pong => {}
            Msg::Leader(m) => {
                let Endpoint::Node(n) = src else { unreachable!("only replicas send the manager {m:?}") };
                self.on_replica_msg(cfg, n, m, io);
            }
            other => unreachable!("the failover manager is never sent {other:?}"),
        }
        // A replica that has not acked its role in the current epoch is told it again (unless
        // this very step made the epoch and told everyone).
        if let Endpoint::Node(n) = src {
            self.retell_roles(cfg, n, &epochs, io);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_request(
        &mut self,
        cfg: &Resolved,
        op: D::Op,
        attempt: u8,
        kind: OpKind,
        shard: u8,
        key: D::Key,
        value: D::Value,
        io: &mut impl Io<D>,
    ) {
        let p = super::leader_policy(cfg);
        let r = &self.shards[usize::from(shard)];
        let (epoch, primary) = (r.epoch, r.primary);
        let to = match kind {
            OpKind::Write => primary,
            OpKind::Read => {
                let replicas: PerNode<ReadCandidate> = nodes(super::replicas(cfg, shard))
                    .map(|n| ReadCandidate {
                        node: n,
                        zone: cfg.node_zone(n),
                        up: self.health[usize::from(n)] != Health::Dead,
                    })
                    .collect();
                rules::read_target(p.read_from, primary, cfg.coordinators[0].zone, &replicas)
            }
        };
        let msg = match kind {
            OpKind::Write => LeaderMsg::Write { op, attempt, shard, epoch, key, value: value.clone() },
            OpKind::Read => LeaderMsg::Read { op, attempt, shard, epoch, key },
        };
        send(io, Endpoint::Node(to), msg);
        self.ops.push(Forwarded {
            op,
            attempt,
            kind,
            shard,
            to,
            to_primary: to == primary,
            value: if kind == OpKind::Write { value } else { D::Value::default() },
            deadline_ticks: ticks(cfg.policy.replica_ack_timeout_ticks),
            heard: false,
        });
    }

    fn on_replica_msg(&mut self, cfg: &Resolved, n: NodeId, m: LeaderMsg<D>, io: &mut impl Io<D>) {
        match m {
            LeaderMsg::WriteDone { op, attempt, epoch, version } => {
                let Some(o) = self.take_op(op, attempt) else { return };
                if self.fenced_result(cfg, &o, epoch, io) {
                    let shard = o.shard;
                    leader_event(io, LeaderEvent::WriteAcked { shard, node: n, epoch, version });
                    io.send(
                        Endpoint::Client(D::client(op)),
                        Msg::Response { op, attempt, ok: true, value: o.value },
                    );
                }
            }
            LeaderMsg::ReadDone { op, attempt, epoch, value, .. } => {
                let Some(o) = self.take_op(op, attempt) else { return };
                if self.fenced_result(cfg, &o, epoch, io) {
                    io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: true, value });
                }
            }
            LeaderMsg::Refused { op, attempt, why, .. } => {
                if self.take_op(op, attempt).is_some() {
                    fail(op, attempt, LeaderFailure::Refused(why), io);
                }
            }
            LeaderMsg::RoleAck { shard, epoch } => {
                let r = &mut self.shards[usize::from(shard)];
                if epoch == r.epoch {
                    r.role_acked |= bit(n);
                }
            }
            LeaderMsg::InSyncPropose { shard, epoch, seq, in_sync } => {
                self.on_propose(cfg, n, shard, epoch, seq, in_sync, io)
            }
            LeaderMsg::Position { shard, pos, .. } => {
                let r = &mut self.shards[usize::from(shard)];
                let Some(f) = r.failover.as_mut().filter(|f| f.asked & !f.answered() & bit(n) != 0) else {
                    return;
                };
                f.answers.push((n, pos));
                if f.decides() {
                    self.decide(cfg, shard, io);
                }
            }
            LeaderMsg::Write { .. }
            | LeaderMsg::Read { .. }
            | LeaderMsg::Append { .. }
            | LeaderMsg::CatchUp { .. }
            | LeaderMsg::Appended { .. }
            | LeaderMsg::Behind { .. }
            | LeaderMsg::Stale { .. }
            | LeaderMsg::Promote { .. }
            | LeaderMsg::Follow { .. }
            | LeaderMsg::InSyncConfirmed { .. }
            | LeaderMsg::Query { .. } => unreachable!("the manager is never sent {m:?}"),
        }
    }

    fn take_op(&mut self, op: D::Op, attempt: u8) -> Option<Forwarded<D>> {
        let i = self.ops.iter().position(|o| o.op == op && o.attempt == attempt)?;
        Some(self.ops.remove(i))
    }

    /// Fencing at the manager: whether an answer from a replica at `epoch` may reach the client.
    /// A result from the primary of an epoch older than the view is refused (the client is told
    /// the request failed).
    fn fenced_result(&self, cfg: &Resolved, o: &Forwarded<D>, epoch: D::Epoch, io: &mut impl Io<D>) -> bool {
        let own = self.shards[usize::from(o.shard)].epoch;
        if o.to_primary && rules::refuses_epoch(super::leader_policy(cfg).fencing, own, epoch) {
            leader_event(io, LeaderEvent::StaleRefused { shard: o.shard, by: Endpoint::LEADER, epoch, own });
            fail(o.op, o.attempt, LeaderFailure::StaleResult, io);
            return false;
        }
        true
    }

    /// The primary proposes in-sync change `seq`: taken if it is the next one, confirmed again
    /// if it is the last one (the confirmation was lost), ignored if older or not from the
    /// current epoch's primary.
    #[allow(clippy::too_many_arguments)]
    fn on_propose(
        &mut self,
        cfg: &Resolved,
        n: NodeId,
        shard: u8,
        epoch: D::Epoch,
        seq: u8,
        in_sync: NodeSet,
        io: &mut impl Io<D>,
    ) {
        let r = &mut self.shards[usize::from(shard)];
        if epoch != r.epoch || n != r.primary {
            return;
        }
        assert_ne!(in_sync & bit(n), 0, "the primary is in its in-sync set");
        assert_eq!(in_sync & !super::replicas(cfg, shard), 0, "the in-sync set is of replicas");
        if seq == r.in_sync_seq.wrapping_add(1) {
            r.in_sync = in_sync;
            r.in_sync_seq = seq;
            leader_event(io, LeaderEvent::InSyncChanged { shard, epoch, in_sync });
        } else if !(seq == r.in_sync_seq && in_sync == r.in_sync) {
            return;
        }
        send(io, Endpoint::Node(n), LeaderMsg::InSyncConfirmed { shard, epoch, seq, in_sync });
    }

    /// Any message is proof of life, however late it comes: a failover of that node's shards
    /// is called off.
    fn heard_from(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        for o in self.ops.iter_mut().filter(|o| o.to == n) {
            o.heard = true;
        }
        let i = usize::from(n);
        self.health[i] = detector::health_after_hearing_from();
        if independent(cfg) {
            self.silence_ticks[i] = 0;
        }
        for (shard, r) in self.shards.iter_mut().enumerate() {
            if r.primary == n && r.failover.take().is_some() {
                leader_event(io, LeaderEvent::FailoverCalledOff { shard: shard as u8, primary: n });
            }
        }
    }

    /// Tell `n` its role in every shard where it has not acked it in the current epoch, and
    /// that epoch is not new since `epochs` (a promotion tells every replica itself).
    fn retell_roles(&self, cfg: &Resolved, n: NodeId, epochs: &[D::Epoch], io: &mut impl Io<D>) {
        for (shard, r) in self.shards.iter().enumerate() {
            if super::replicas(cfg, shard as u8) & !r.role_acked & bit(n) == 0 || r.epoch != epochs[shard] {
                continue;
            }
            let shard = shard as u8;
            let epoch = r.epoch;
            let msg = if n == r.primary {
                LeaderMsg::Promote { shard, epoch, in_sync: r.in_sync }
            } else {
                LeaderMsg::Follow { shard, epoch, primary: r.primary }
            };
            send(io, Endpoint::Node(n), msg);
        }
    }

    fn on_deadline(&mut self, cfg: &Resolved, op: D::Op, attempt: u8, io: &mut impl Io<D>) {
        let o = self.take_op(op, attempt).expect("the deadline of a live request");
        fail(op, attempt, LeaderFailure::Deadline, io);
        // A node heard from since the request left is alive, if slow.
        if o.heard {
            return;
        }
        if let Some(h) = detector::health_after_deadline_miss(cfg.policy.failure_detection) {
            self.set_health(o.to, h, None, io);
            self.consider_failovers(cfg, io);
        }
    }

    fn set_health(&mut self, n: NodeId, h: Health, silence_ticks: Option<u16>, io: &mut impl Io<D>) {
        let i = usize::from(n);
        if h == Health::Dead && self.health[i] != Health::Dead {
            io.event(Event::DeclaredDead { node: n, silence_ticks });
        }
        self.health[i] = h;
    }

    /// The independent detector's judgement of `n`'s silence now.
    fn judge(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        let p = &cfg.policy;
        let silence = self.silence_ticks[usize::from(n)];
        let h = detector::health_from_silence(u32::from(silence), p.suspect_after_ticks, p.dead_after_ticks);
        self.set_health(n, h, Some(silence), io);
    }

    /// Continuous checking: the nodes whose silence crossed a threshold not acted on yet.
    fn silences_crossed<'a>(&'a self, cfg: &'a Resolved) -> impl Iterator<Item = NodeId> + 'a {
        let p = &cfg.policy;
        let continuous = independent(cfg) && p.health_check == HealthCheck::Continuous;
        (0..if continuous { self.silence_ticks.len() } else { 0 }).filter_map(move |i| {
            let crossed = detector::judge_now(
                p.health_check,
                false,
                self.health[i],
                u32::from(self.silence_ticks[i]),
                p.suspect_after_ticks,
                p.dead_after_ticks,
            );
            crossed.then_some(i as NodeId)
        })
    }

    /// Start a failover for every shard whose primary is judged dead and has none under way:
    /// ask every other replica where it is.
    fn consider_failovers(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let p = super::leader_policy(cfg);
        for shard in 0..self.shards.len() as u8 {
            let r = &mut self.shards[usize::from(shard)];
            if r.failover.is_some() || self.health[usize::from(r.primary)] != Health::Dead {
                continue;
            }
            let asked = super::replicas(cfg, shard) & !bit(r.primary);
            for n in nodes(asked) {
                send(io, Endpoint::Node(n), LeaderMsg::Query { shard, epoch: r.epoch });
            }
            r.failover = Some(Failover {
                delay_ticks: ticks(p.failover_delay_ticks),
                query_ticks: ticks(cfg.policy.replica_ack_timeout_ticks),
                asked,
                answers: PerNode::new(),
            });
            leader_event(io, LeaderEvent::FailoverStarted { shard, primary: r.primary });
        }
    }

    /// The failover decides: promote the replica the policy chooses, or nobody.
    fn decide(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let p = super::leader_policy(cfg);
        let r = &mut self.shards[usize::from(shard)];
        let f = r.failover.take().expect("a failover decides once");
        assert!(f.decides());
        let candidates: PerNode<Candidate<D::Epoch, D::Version>> = nodes(f.asked)
            .map(|n| {
                let answer = f.answers.iter().find(|(m, _)| *m == n);
                Candidate {
                    node: n,
                    zone: cfg.node_zone(n),
                    answered: answer.is_some(),
                    position: answer.map_or_else(Pos::<D>::default, |(_, pos)| *pos),
                    in_sync: r.in_sync & bit(n) != 0,
                }
            })
            .collect();
        let promotion_rules = PromotionRules {
            unclean_election: p.unclean_election,
            failover_cross_zone: p.failover_cross_zone,
        };
        let old = r.primary;
        let (new, clean) = match rules::choose_promotion(promotion_rules, cfg.node_zone(old), &candidates) {
            Promotion::Promote { node, clean } => (node, clean),
            Promotion::Blocked(why) => {
                leader_event(io, LeaderEvent::FailoverBlocked { shard, primary: old, why });
                return;
            }
        };
        // The new view is persisted (`durable`) before any of these sends leave.
        r.epoch = D::next_epoch(r.epoch);
        r.primary = new;
        r.in_sync = rules::in_sync_after_promotion(r.in_sync, old, new, clean);
        r.in_sync_seq = 0;
        r.role_acked = 0;
        let epoch = r.epoch;
        leader_event(io, LeaderEvent::Promoted { shard, old, new, epoch, clean });
        send(io, Endpoint::Node(new), LeaderMsg::Promote { shard, epoch, in_sync: r.in_sync });
        for n in nodes(super::replicas(cfg, shard) & !bit(new)) {
            send(io, Endpoint::Node(n), LeaderMsg::Follow { shard, epoch, primary: new });
        }
    }
}

fn fail<D: Data>(op: D::Op, attempt: u8, why: LeaderFailure, io: &mut impl Io<D>) {
    leader_event(io, LeaderEvent::RequestFailed { op, why });
    io.send(
        Endpoint::Client(D::client(op)),
        Msg::Response { op, attempt, ok: false, value: D::Value::default() },
    );
}
