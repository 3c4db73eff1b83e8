//! The coordinator: sequences writes, gathers quorums before the ack deadline, detects failed
//! replicas, evicts them through a bounded membership-update queue, and catches replacements
//! up. As the request router it also admits writes against partition capacity and places them
//! on ingest backends. The rebalancer runs inside it on its own timer.
//!
//! Its state is what a real coordinator holds in memory. Timers are remaining ticks: the ack
//! deadline of each request, the head of the membership queue, the heartbeat round, the
//! rebalancer and a catch-up's copy round. [`Coordinator::due`] lists the timers at zero; time
//! may pass only when none is.
//!
//! A membership change (an eviction, or a rebalancing move) is a join: the replacement first
//! learns, then takes the leaving replica's place.
//! - While it learns, every write and read write-back of the shard also goes to it and needs
//!   one more ack than the quorum, from any of the members and the learner (Cassandra's rule
//!   for pending replicas): whatever such a write reaches, at least a write quorum of the
//!   replica set after the swap holds it.
//! - Writes that began before the join do not reach the learner: the copies are requested only
//!   once every one of them has ended (acked or past its deadline), so each acked one is on the
//!   sources when they copy. A read quorum of copies then meets every write quorum.
//! - A copy round that is not complete within the ack timeout parks; a source that has not
//!   copied yet is asked again when it is next heard from (a retry per sign of life, not per
//!   tick: a slow source is not flooded with copies, a dead one is not asked forever).

use super::{filled, Data, Endpoint, Event, Failure, Io, ModelData, Msg, PerNode, PerShard, Stored};
use crate::config::{OpKind, Resolved};
use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, Candidate, ClusterView, EvictionDecision};
use crate::policy::rebalancer::{self, NodeLoad, ShardLoad};
use crate::policy::routing::{self, BackendLoad, WriteRoute};
use crate::policy::{quorum, retry, NodeId};

/// A remaining-ticks counter.
pub type TimerTicks = u16;

/// A replica joining a shard's replica set in place of a leaving one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Join {
    pub evicted: NodeId,
    pub replacement: NodeId,
    pub is_move: bool,
    /// The copies were requested (every write that began before the join has ended).
    pub copying: bool,
    /// Bit i set: the copy from node i reached the replacement.
    pub copied_from: u8,
    /// Ticks until an incomplete copy round is asked again (while copying and not parked).
    pub copy_ticks: TimerTicks,
    /// The round ran out of time: a source still to copy is asked again when it is heard from.
    pub parked: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardView<D: Data = ModelData> {
    /// The replica set, sorted by node id.
    pub members: PerNode<NodeId>,
    pub join: Option<Join>,
    pub next_version: D::Version,
    /// Rebalancing: ticks until the shard may move again, and the cooldown its last move got.
    pub cooldown_ticks: TimerTicks,
    pub cooldown_len_ticks: TimerTicks,
}

/// A membership update waiting in the coordinator's bounded queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MembershipUpdate {
    pub shard: u8,
    /// The replica leaving: evicted as dead, or the source of a rebalancing move.
    pub evicted: NodeId,
    pub replacement: NodeId,
    /// A rebalancing move: the leaving replica is healthy and copies its data too.
    pub is_move: bool,
}

/// A request the coordinator is working on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoordOp<D: Data = ModelData> {
    pub op: D::Op,
    pub attempt: u8,
    pub kind: OpKind,
    pub shard: u8,
    pub key: D::Key,
    pub version: D::Version,
    pub value: D::Value,
    /// Nodes asked (bit per node): the members, and the learner of a write; only their
    /// answers count.
    pub asked: u8,
    /// The joining replica a write (or write-back) also went to: then one more ack is needed.
    pub learner: Option<NodeId>,
    pub answered: u8,
    /// Asked nodes that have not answered but were heard from (any message) since the
    /// request was sent: alive, if late.
    pub heard: u8,
    pub responded: bool,
    /// Best read reply so far.
    pub best: Stored<D>,
    /// With `read_repair`: the members that answered the read with `best`'s version (0
    /// without read repair, so states that differ only in it are one state).
    pub holders: u8,
    /// A read writing `best` back to a write quorum before it answers (read repair):
    /// `answered` now counts the holders and the acks of the write-back.
    pub repairing: bool,
    /// Ticks until the ack deadline (`replica_ack_timeout`) fires; a write-back gets a whole
    /// deadline of its own.
    pub deadline_ticks: TimerTicks,
}

impl<D: Data> CoordOp<D> {
    /// Writes to replicas in flight: a write, or a read's write-back, not yet answered.
    fn writing(&self) -> bool {
        (self.kind == OpKind::Write || self.repairing) && !self.responded
    }

    fn needed(&self, cfg: &Resolved) -> u8 {
        let quorum = match (self.kind, self.repairing) {
            (OpKind::Write, _) | (OpKind::Read, true) => cfg.policy.write_quorum,
            (OpKind::Read, false) => cfg.policy.read_quorum,
        };
        quorum + u8::from(self.learner.is_some())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coordinator<D: Data = ModelData> {
    pub shards: PerShard<ShardView<D>>,
    pub health: PerNode<Health>,
    /// Independent detection: ticks since the node was last heard from (saturating).
    pub silence_ticks: PerNode<TimerTicks>,
    pub heartbeat_ticks: TimerTicks,
    pub ops: Vec<CoordOp<D>>,
    /// Idempotency tokens: the version each write was sequenced at, by its token.
    pub tokens: Vec<(D::TokenId, D::Version)>,
    pub queue: Vec<MembershipUpdate>,
    /// Ticks until the head of the queue is applied.
    pub queue_ticks: TimerTicks,
    /// Ticks until the rebalancer runs (when enabled).
    pub rebalance_ticks: TimerTicks,
    /// Ticks left of the current capacity window (0 where a window is one tick, as in models).
    pub window_ticks: TimerTicks,
    /// Writes the clients offered to each partition this window (kept only when the scenario
    /// has partition capacities; background load is in the config).
    pub partition_load: PerShard<u16>,
    /// Writes placed on each backend this window (kept only when backends have capacities).
    pub backend_load: PerNode<u16>,
}

/// Where load first exceeded capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapacityUnit {
    Partition(u8),
    Backend(crate::policy::NodeId),
}

/// The first time a partition or backend was offered more writes in a tick than it can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CapacityBreach {
    pub unit: CapacityUnit,
    /// Writes offered in that tick, background included.
    pub offered: u16,
    pub capacity: u16,
}

/// A timer of the coordinator's that is due (at zero ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer<Op = crate::protocol::OpId> {
    /// A request's ack deadline (`replica_ack_timeout`).
    AckDeadline { op: Op, attempt: u8 },
    /// The membership update at the head of the queue is applied.
    ApplyMembershipUpdate,
    /// A heartbeat round (independent failure detection).
    Heartbeat,
    /// The rebalancer runs.
    Rebalance,
    /// A shard's copy round did not complete in time: ask the missing sources again.
    CopyRetry { shard: u8 },
}

/// What the coordinator persists, and so what survives its crash. A driver writes it durably
/// whenever a step changed it, before any of that step's sends leave (the model's restart
/// keeps exactly this; the rest of [`Coordinator`] is memory).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Durable<D: Data = ModelData> {
    /// Per shard: the replica set (`None` without `durable_membership`) and the version
    /// counter's floor: no version below it is ever handed out again.
    pub shards: PerShard<(Option<PerNode<NodeId>>, D::Version)>,
    /// Idempotency tokens, when the policy promises them: a retry after a restart must get
    /// the version its first attempt got.
    pub tokens: Vec<(D::TokenId, D::Version)>,
}

fn bit(n: NodeId) -> u8 {
    1 << n
}

fn independent(cfg: &Resolved) -> bool {
    cfg.policy.failure_detection == FailureDetection::Independent
}

/// A breach by background load alone (a burst above a partition's capacity, a backend already
/// over its capacity): it holds in every tick, the first included.
pub fn background_breach(cfg: &Resolved) -> Option<CapacityBreach> {
    let partitions = cfg
        .partition_background
        .iter()
        .enumerate()
        .map(|(p, &load)| (CapacityUnit::Partition(p as u8), load, cfg.partition_capacity_per_tick));
    let backends = cfg.nodes.iter().enumerate().map(|(n, spec)| {
        (CapacityUnit::Backend(n as NodeId), spec.base_load_per_tick, spec.write_capacity_per_tick)
    });
    partitions.chain(backends).find_map(|(unit, offered, capacity)| {
        capacity.filter(|&cap| offered > cap).map(|capacity| CapacityBreach { unit, offered, capacity })
    })
}

impl<D: Data> Coordinator<D> {
    /// A coordinator starting with the scenario's replica sets, every node alive, every timer
    /// at its full interval.
    pub fn new(cfg: &Resolved) -> Coordinator<D> {
        let node_count = cfg.nodes.len();
        let shard_count = cfg.shard_names.len();
        let independent = independent(cfg);
        let p = &cfg.policy;
        Coordinator {
            shards: cfg
                .initial_members
                .iter()
                .map(|m| ShardView {
                    members: m.iter().copied().collect(),
                    join: None,
                    next_version: D::next_version(D::Version::default()),
                    cooldown_ticks: 0,
                    cooldown_len_ticks: 0,
                })
                .collect(),
            health: filled(Health::Alive, node_count),
            silence_ticks: filled(0, if independent { node_count } else { 0 }),
            heartbeat_ticks: if independent { ticks(p.heartbeat_interval_ticks) } else { 0 },
            ops: Vec::new(),
            tokens: Vec::new(),
            queue: Vec::new(),
            queue_ticks: 0,
            rebalance_ticks: p.rebalance.as_ref().map_or(0, |r| ticks(r.interval_ticks)),
            window_ticks: cfg.capacity_window_ticks - 1,
            partition_load: filled(0, shard_count),
            backend_load: filled(0, node_count),
        }
    }

    /// What must survive a crash now. The version floor is the next version rounded up to a
    /// whole block (`version_block`; one in the models): it changes, and must be written,
    /// once a block.
    pub fn durable(&self, cfg: &Resolved) -> Durable<D> {
        let tokens = if cfg.policy.retry.idempotency_tokens { self.tokens.clone() } else { Vec::new() };
        Durable { tokens, ..self.durable_shards(cfg) }
    }

    /// What must survive a crash, but the idempotency tokens (a driver that does not keep them
    /// across restarts, as the store, which says so).
    pub fn durable_shards(&self, cfg: &Resolved) -> Durable<D> {
        let p = &cfg.policy;
        let block = cfg.version_block;
        Durable {
            shards: self
                .shards
                .iter()
                .map(|v| {
                    let next: u64 = v.next_version.into();
                    let floor = next.div_ceil(block) * block;
                    let floor =
                        D::Version::try_from(floor).unwrap_or_else(|_| panic!("version floor {floor}"));
                    (p.durable_membership.then(|| v.members.clone()), floor)
                })
                .collect(),
            tokens: Vec::new(),
        }
    }

    /// A coordinator restarting from what it persisted: replica sets and version floors from
    /// `durable` (the configured replica sets where it kept none), everything else as at
    /// start. Requests in flight, failure-detector state, queued and half-done membership
    /// changes and cooldowns are gone: a catch-up that was under way is started again by the
    /// detector, since its replacement never joined.
    pub fn recover(cfg: &Resolved, durable: &Durable<D>) -> Coordinator<D> {
        let mut c = Coordinator::new(cfg);
        assert_eq!(durable.shards.len(), c.shards.len());
        for (v, (members, floor)) in c.shards.iter_mut().zip(&durable.shards) {
            if let Some(members) = members {
                v.members = members.clone();
            }
            assert!(*floor > D::Version::default(), "version 0 is the initial value, never handed out");
            v.next_version = *floor;
        }
        c.tokens = durable.tokens.clone();
        c
    }

    /// Whether no timer is due: only then may time pass.
    pub fn no_timer_due(&self, cfg: &Resolved) -> bool {
        self.ops.iter().all(|o| o.deadline_ticks > 0)
            && (self.queue.is_empty() || self.queue_ticks > 0)
            && (!independent(cfg) || self.heartbeat_ticks > 0)
            && (cfg.policy.rebalance.is_none() || self.rebalance_ticks > 0)
            && self
                .shards
                .iter()
                .all(|v| v.join.as_ref().is_none_or(|j| !j.copying || j.parked || j.copy_ticks > 0))
    }

    /// The timers at zero, in a fixed order.
    pub fn due(&self, cfg: &Resolved, out: &mut impl Extend<Timer<D::Op>>) {
        for o in &self.ops {
            if o.deadline_ticks == 0 {
                out.extend([Timer::AckDeadline { op: o.op, attempt: o.attempt }]);
            }
        }
        if !self.queue.is_empty() && self.queue_ticks == 0 {
            out.extend([Timer::ApplyMembershipUpdate]);
        }
        if independent(cfg) && self.heartbeat_ticks == 0 {
            out.extend([Timer::Heartbeat]);
        }
        if cfg.policy.rebalance.is_some() && self.rebalance_ticks == 0 {
            out.extend([Timer::Rebalance]);
        }
        for (shard, v) in self.shards.iter().enumerate() {
            if v.join.as_ref().is_some_and(|j| j.copying && !j.parked && j.copy_ticks == 0) {
                out.extend([Timer::CopyRetry { shard: shard as u8 }]);
            }
        }
    }

    /// Fire a due timer.
    pub fn on_timer(&mut self, cfg: &Resolved, timer: Timer<D::Op>, io: &mut impl Io<D>) {
        match timer {
            Timer::AckDeadline { op, attempt } => self.on_deadline(cfg, op, attempt, io),
            Timer::ApplyMembershipUpdate => self.on_apply_membership(cfg, io),
            Timer::Heartbeat => self.on_heartbeat(cfg, io),
            Timer::Rebalance => self.on_rebalance(cfg, io),
            Timer::CopyRetry { shard } => self.on_copy_deadline(shard),
        }
    }

    /// One tick passes. No timer may be due (see [`Coordinator::no_timer_due`]).
    pub fn tick(&mut self, cfg: &Resolved) {
        for o in &mut self.ops {
            o.deadline_ticks -= 1;
        }
        if !self.queue.is_empty() {
            self.queue_ticks -= 1;
        }
        if independent(cfg) {
            self.heartbeat_ticks -= 1;
            // Saturate at `dead_after`: longer silence says nothing more.
            let cap = ticks(cfg.policy.dead_after_ticks);
            for t in &mut self.silence_ticks {
                *t = (*t + 1).min(cap);
            }
        }
        if cfg.policy.rebalance.is_some() {
            self.rebalance_ticks -= 1;
        }
        // Capacities are per window.
        if self.window_ticks == 0 {
            self.window_ticks = cfg.capacity_window_ticks - 1;
            self.partition_load.iter_mut().for_each(|l| *l = 0);
            self.backend_load.iter_mut().for_each(|l| *l = 0);
        } else {
            self.window_ticks -= 1;
        }
        for v in &mut self.shards {
            v.cooldown_ticks = v.cooldown_ticks.saturating_sub(1);
            if let Some(j) = v.join.as_mut().filter(|j| j.copying && !j.parked) {
                j.copy_ticks -= 1;
            }
        }
    }

    /// Disk use (outside data plus the shards a node holds or is receiving), compaction debt
    /// and slowness of every node, as the coordinator knows them.
    pub fn node_loads(&self, cfg: &Resolved) -> Vec<NodeLoad> {
        let holds = |shard: usize, n: NodeId| {
            let v = &self.shards[shard];
            v.members.contains(&n) || v.join.as_ref().is_some_and(|j| j.replacement == n)
        };
        (0..cfg.nodes.len() as NodeId)
            .map(|n| {
                let spec = &cfg.nodes[usize::from(n)];
                let held = (0..cfg.shards.len()).filter(|&k| holds(k, n));
                let disk_pct = u16::from(spec.disk_used_pct)
                    + held.clone().map(|k| u16::from(cfg.shards[k].size_pct)).sum::<u16>();
                let hosts_hot = held.clone().any(|k| cfg.shards[k].hot);
                NodeLoad {
                    node: n,
                    disk_pct,
                    compaction_debt_pct: spec.compaction_debt_pct,
                    slow: rebalancer::is_slow(
                        hosts_hot,
                        spec.compaction_debt_pct,
                        cfg.slow_compaction_debt_pct,
                    ),
                }
            })
            .collect()
    }

    /// The rebalancer: sees disk use, compaction debt and latency per node as the coordinator
    /// knows them, asks the policy for a move, and queues it as a membership change.
    fn on_rebalance(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let r = cfg.policy.rebalance.as_ref().expect("the rebalancer runs only when enabled");
        self.rebalance_ticks = ticks(r.interval_ticks);
        let nodes = self.node_loads(cfg);
        let shards: Vec<ShardLoad> = (0..cfg.shards.len())
            .map(|k| {
                let v = &self.shards[k];
                ShardLoad {
                    shard: k as u8,
                    holders: v
                        .members
                        .iter()
                        .copied()
                        .chain(v.join.as_ref().map(|j| j.replacement))
                        .collect(),
                    size_pct: cfg.shards[k].size_pct,
                    hot: cfg.shards[k].hot,
                    resting: v.cooldown_ticks > 0
                        || v.join.is_some()
                        || self.queue.iter().any(|u| usize::from(u.shard) == k),
                }
            })
            .collect();
        let Some(m) = rebalancer::choose_move(&nodes, &shards, &r.policy) else { return };
        let v = &mut self.shards[usize::from(m.shard)];
        let len = rebalancer::next_cooldown_ticks(
            u32::from(v.cooldown_len_ticks),
            r.move_cooldown_ticks,
            r.cooldown_backoff,
            r.cooldown_max_ticks,
        );
        v.cooldown_len_ticks = ticks(len);
        v.cooldown_ticks = ticks(len);
        let update = MembershipUpdate { shard: m.shard, evicted: m.from, replacement: m.to, is_move: true };
        self.enqueue(cfg, update, io);
    }

    /// A message arrives from `src`.
    pub fn on_msg(&mut self, cfg: &Resolved, src: Endpoint, msg: Msg<D>, io: &mut impl Io<D>) {
        if let Endpoint::Node(n) = src {
            self.heard_from(cfg, n);
            self.unpark_copies(cfg, n, io);
        }
        match msg {
            Msg::Request { op, attempt, kind, shard, key, value, token } => {
                let token = D::token_id(op, &key, &token);
                self.on_request(cfg, Request { op, attempt, kind, shard, key, value, token }, io)
            }
            Msg::ReplicateAck { op, attempt, .. } => {
                let Endpoint::Node(n) = src else { unreachable!("acks come from nodes") };
                self.on_answer(cfg, op, attempt, n, None, io);
            }
            Msg::ReadReply { op, attempt, version, value, .. } => {
                let Endpoint::Node(n) = src else { unreachable!("read replies come from nodes") };
                self.on_answer(cfg, op, attempt, n, Some(Stored { version, value }), io);
            }
            Msg::CopyAck { shard, from } => {
                let Endpoint::Node(n) = src else { unreachable!("copy acks come from nodes") };
                self.on_copy_ack(cfg, shard, from, n, io)
            }
            Msg::Pong => {}
            Msg::Response { .. }
            | Msg::Replicate { .. }
            | Msg::ReadReq { .. }
            | Msg::CopyRequest { .. }
            | Msg::CopyData { .. }
            | Msg::Ping => unreachable!("the coordinator is never sent {msg:?}"),
        }
    }

    /// A parked copy round whose missing source `n` was just heard from asks `n` again.
    fn unpark_copies(&mut self, cfg: &Resolved, n: NodeId, io: &mut impl Io<D>) {
        for shard in 0..self.shards.len() as u8 {
            let view = &self.shards[usize::from(shard)];
            let waits_for_n = view.join.as_ref().is_some_and(|j| {
                j.parked
                    && view.members.contains(&n)
                    && (j.is_move || n != j.evicted)
                    && j.copied_from & bit(n) == 0
            });
            if waits_for_n {
                self.request_copies_from(cfg, shard, Some(n), io);
            }
        }
    }

    /// Any message is proof of life, however late it comes.
    fn heard_from(&mut self, cfg: &Resolved, n: NodeId) {
        // Only a node that has not answered may need the proof (states differ in it no more
        // than they must).
        for o in self.ops.iter_mut().filter(|o| o.asked & !o.answered & bit(n) != 0) {
            o.heard |= bit(n);
        }
        let i = usize::from(n);
        self.health[i] = detector::health_after_hearing_from();
        if independent(cfg) {
            self.silence_ticks[i] = 0;
        }
    }

    /// The backends as the load balancer sees them now, in preference order (the scenario's).
    pub fn backend_loads(&self, cfg: &Resolved) -> Vec<BackendLoad> {
        cfg.nodes
            .iter()
            .enumerate()
            .map(|(n, spec)| BackendLoad {
                node: n as NodeId,
                up: self.health[n] != Health::Dead,
                capacity_per_tick: spec.write_capacity_per_tick,
                load_per_tick: spec.base_load_per_tick.saturating_add(self.backend_load[n]),
            })
            .collect()
    }

    /// Count one write offered to a partition or backend, and note a breach.
    fn offer(&mut self, unit: CapacityUnit, offered_before: u16, capacity: Option<u16>, io: &mut impl Io<D>) {
        let offered = offered_before.saturating_add(1);
        let load = match unit {
            CapacityUnit::Partition(p) => &mut self.partition_load[usize::from(p)],
            CapacityUnit::Backend(n) => &mut self.backend_load[usize::from(n)],
        };
        *load = load.saturating_add(1);
        if let Some(cap) = capacity.filter(|&cap| offered > cap) {
            io.event(Event::CapacityBreached(CapacityBreach { unit, offered, capacity: cap }));
        }
    }

    /// Route a write (`routing::route_write`) and count the load it offered.
    fn admit_write(&mut self, cfg: &Resolved, partition: u8, io: &mut impl Io<D>) -> WriteRoute {
        let p = usize::from(partition);
        let before = cfg.partition_background[p].saturating_add(self.partition_load[p]);
        let loads = cfg.backends_modelled.then(|| self.backend_loads(cfg));
        let route = routing::route_write(
            &cfg.policy.routing,
            before,
            cfg.partition_capacity_per_tick,
            loads.as_deref(),
        );
        if cfg.partition_capacity_per_tick.is_some() {
            self.offer(CapacityUnit::Partition(partition), before, cfg.partition_capacity_per_tick, io);
        }
        if let (Some(b), Some(loads)) = (route.backend_offered(), &loads) {
            let l = loads[usize::from(b)];
            self.offer(CapacityUnit::Backend(b), l.load_per_tick, l.capacity_per_tick, io);
        }
        route
    }

    fn on_request(&mut self, cfg: &Resolved, r: Request<D>, io: &mut impl Io<D>) {
        let Request { op, attempt, kind, shard, key, value, token } = r;
        if kind == OpKind::Write {
            let route = self.admit_write(cfg, shard, io);
            if !route.admitted() {
                io.event(Event::RequestFailed { op, why: Failure::Throttled(route) });
                let value = D::Value::default();
                io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: false, value });
                return;
            }
        }
        let p = &cfg.policy;
        let view = &mut self.shards[usize::from(shard)];
        let mut asked = view.members.iter().fold(0u8, |m, &n| m | bit(n));
        let mut learner = None;
        let mut version = D::Version::default();
        if kind == OpKind::Write {
            let token = token.filter(|_| p.retry.idempotency_tokens);
            let known =
                token.as_ref().and_then(|t| self.tokens.iter().find(|(o, _)| o == t).map(|(_, v)| *v));
            let next = view.next_version;
            version = retry::version_for_attempt(p.retry.idempotency_tokens, known, next);
            if version == next {
                view.next_version = D::next_version(next);
                if let Some(t) = token {
                    let at = self.tokens.partition_point(|(o, _)| *o < t);
                    self.tokens.insert(at, (t, version));
                    if self.tokens.len() > cfg.tokens_max {
                        // The oldest version is forgotten first.
                        let oldest =
                            (0..self.tokens.len()).min_by_key(|&i| self.tokens[i].1).expect("non-empty");
                        self.tokens.remove(oldest);
                    }
                }
            }
            // Writes also reach a joining replica so it misses nothing, and need its ack or
            // one more member's.
            learner = view.join.as_ref().map(|j| j.replacement);
            asked |= learner.map_or(0, bit);
        }
        for n in (0..cfg.nodes.len() as NodeId).filter(|&n| asked & bit(n) != 0) {
            let msg = match kind {
                OpKind::Write => {
                    Msg::Replicate { op, attempt, shard, key: key.clone(), version, value: value.clone() }
                }
                OpKind::Read => Msg::ReadReq { op, attempt, shard, key: key.clone() },
            };
            io.send(Endpoint::Node(n), msg);
        }
        self.ops.push(CoordOp {
            op,
            attempt,
            kind,
            shard,
            key,
            version,
            value,
            asked,
            learner,
            answered: 0,
            heard: 0,
            responded: false,
            best: Stored::default(),
            holders: 0,
            repairing: false,
            deadline_ticks: ticks(p.replica_ack_timeout_ticks),
        });
    }

    fn on_answer(
        &mut self,
        cfg: &Resolved,
        op: D::Op,
        attempt: u8,
        n: NodeId,
        read: Option<Stored<D>>,
        io: &mut impl Io<D>,
    ) {
        // An answer after the deadline finds no request: it only proved the node alive.
        let Some(i) = self.ops.iter().position(|o| o.op == op && o.attempt == attempt) else {
            return;
        };
        let p = &cfg.policy;
        let o = &mut self.ops[i];
        // A write-back counts acks only; a read reply that comes after it began is too late.
        if o.asked & bit(n) == 0 || (o.repairing && read.is_some()) {
            return;
        }
        o.answered |= bit(n);
        o.heard &= !bit(n);
        if let (Some(r), false) = (read, o.repairing) {
            if r.version > o.best.version || o.answered.count_ones() == 1 {
                o.best = r;
                o.holders = if p.read_repair { bit(n) } else { 0 };
            } else if p.read_repair && r.version == o.best.version {
                o.holders |= bit(n);
            }
        }
        if !o.responded && quorum::quorum_reached(o.answered.count_ones() as usize, o.needed(cfg)) {
            let repair = o.kind == OpKind::Read
                && !o.repairing
                && p.read_repair
                && o.best.version > D::Version::default()
                && !quorum::quorum_reached(o.holders.count_ones() as usize, p.write_quorum);
            if repair {
                // Once a reader saw a value, every later read quorum must meet a member that
                // holds it: write it back to a write quorum first (ABD's second phase), and to
                // a joining replica as writes are.
                let shard = o.shard;
                let learner = self.shards[usize::from(shard)].join.as_ref().map(|j| j.replacement);
                let o = &mut self.ops[i];
                o.repairing = true;
                o.learner = learner;
                o.asked |= learner.map_or(0, bit);
                // Those that answered the read were heard from since the request left.
                o.heard |= o.answered & !o.holders;
                o.answered = o.holders;
                o.deadline_ticks = ticks(p.replica_ack_timeout_ticks);
                let to = o.asked & !o.holders;
                io.event(Event::ReadRepairStarted { op, shard });
                for m in (0..cfg.nodes.len() as NodeId).filter(|&m| to & bit(m) != 0) {
                    let (key, best) = (o.key.clone(), o.best.clone());
                    let msg =
                        Msg::Replicate { op, attempt, shard, key, version: best.version, value: best.value };
                    io.send(Endpoint::Node(m), msg);
                }
                return;
            }
            o.responded = true;
            let (kind, shard, version) = (o.kind, o.shard, o.version);
            let response_value = match kind {
                OpKind::Write => o.value.clone(),
                OpKind::Read => o.best.value.clone(),
            };
            if kind == OpKind::Write {
                io.event(Event::WriteAcked { shard, version });
            }
            io.send(
                Endpoint::Client(D::client(op)),
                Msg::Response { op, attempt, ok: true, value: response_value },
            );
            let o = &self.ops[i];
            let done = o.answered == o.asked;
            if done {
                // Nothing more to learn from this request.
                self.ops.remove(i);
            }
            self.start_copies_when_clear(cfg, shard, io);
            return;
        }
        let o = &self.ops[i];
        if o.responded && o.answered == o.asked {
            self.ops.remove(i);
        }
    }

    fn on_deadline(&mut self, cfg: &Resolved, op: D::Op, attempt: u8, io: &mut impl Io<D>) {
        let i = self
            .ops
            .iter()
            .position(|o| o.op == op && o.attempt == attempt)
            .expect("deadline of a live request");
        let o = self.ops.remove(i);
        if !o.responded {
            let why = Failure::Deadline {
                answered: o.answered.count_ones() as u8,
                needed: o.needed(cfg),
                missing: o.asked & !o.answered,
                repairing: o.repairing,
            };
            io.event(Event::RequestFailed { op, why });
            let value = D::Value::default();
            io.send(Endpoint::Client(D::client(op)), Msg::Response { op, attempt, ok: false, value });
        }
        // A node heard from since the request left is alive, if slow or missing this one
        // message; the learner is no member yet: the detector judges it once it is one.
        let missing = o.asked & !o.answered & !o.heard & !o.learner.map_or(0, bit);
        if let Some(h) = detector::health_after_deadline_miss(cfg.policy.failure_detection) {
            for n in 0..cfg.nodes.len() as NodeId {
                if missing & bit(n) != 0 {
                    if h == Health::Dead && self.health[usize::from(n)] != Health::Dead {
                        io.event(Event::DeclaredDead { node: n, silence_ticks: None });
                    }
                    self.health[usize::from(n)] = h;
                }
            }
            self.consider_evictions(cfg, io);
        }
        self.start_copies_when_clear(cfg, o.shard, io);
    }

    fn on_heartbeat(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let p = &cfg.policy;
        self.heartbeat_ticks = ticks(p.heartbeat_interval_ticks);
        for n in 0..cfg.nodes.len() {
            let silence = u32::from(self.silence_ticks[n]);
            let health = detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks);
            if health == Health::Dead && self.health[n] != Health::Dead {
                io.event(Event::DeclaredDead {
                    node: n as NodeId,
                    silence_ticks: Some(self.silence_ticks[n]),
                });
            }
            self.health[n] = health;
            io.send(Endpoint::Node(n as NodeId), Msg::Ping);
        }
        self.consider_evictions(cfg, io);
    }

    /// Ask the eviction policy about every member the detector declared dead; queue the
    /// membership updates it decides on. One membership change per shard at a time.
    fn consider_evictions(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        for shard in 0..self.shards.len() as u8 {
            let view = &self.shards[usize::from(shard)];
            if view.join.is_some() || self.queue.iter().any(|u| u.shard == shard) {
                continue;
            }
            let dead: PerNode<NodeId> = view
                .members
                .iter()
                .copied()
                .filter(|&m| self.health[usize::from(m)] == Health::Dead)
                .collect();
            for m in dead {
                let cluster = ClusterView {
                    dead_nodes: self.health.iter().filter(|h| **h == Health::Dead).count(),
                    total_nodes: cfg.nodes.len(),
                    evictions_in_progress: self.queue.len()
                        + self.shards.iter().filter(|v| v.join.is_some()).count(),
                };
                let candidates = self.candidates(cfg, shard);
                match eviction::decide_eviction(cfg.policy.eviction, cluster, cfg.node_zone(m), &candidates) {
                    EvictionDecision::Suppressed(why) => {
                        io.event(Event::EvictionSuppressed { shard, node: m, why });
                        continue;
                    }
                    EvictionDecision::Evict { replacement } => {
                        let update = MembershipUpdate { shard, evicted: m, replacement, is_move: false };
                        self.enqueue(cfg, update, io);
                        break;
                    }
                }
            }
        }
    }

    fn candidates(&self, cfg: &Resolved, shard: u8) -> Vec<Candidate> {
        let view = &self.shards[usize::from(shard)];
        (0..cfg.nodes.len() as NodeId)
            .map(|n| Candidate {
                node: n,
                zone: cfg.node_zone(n),
                health: self.health[usize::from(n)],
                is_member: view.members.contains(&n)
                    || view.join.as_ref().is_some_and(|j| j.replacement == n)
                    || self.queue.iter().any(|u| u.shard == shard && u.replacement == n),
            })
            .collect()
    }

    fn enqueue(&mut self, cfg: &Resolved, update: MembershipUpdate, io: &mut impl Io<D>) {
        io.event(Event::ChangeRequested(update));
        if self.queue.len() >= usize::from(cfg.coordinator.membership_queue_capacity) {
            io.event(Event::ChangeRejected(update));
            return;
        }
        if self.queue.is_empty() {
            self.queue_ticks = ticks(cfg.coordinator.membership_update_ticks);
        }
        self.queue.push(update);
    }

    fn on_apply_membership(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        let u = self.queue.remove(0);
        if !self.queue.is_empty() {
            self.queue_ticks = ticks(cfg.coordinator.membership_update_ticks);
        }
        let view = &mut self.shards[usize::from(u.shard)];
        assert!(view.join.is_none(), "one membership change per shard at a time");
        view.join = Some(Join {
            evicted: u.evicted,
            replacement: u.replacement,
            is_move: u.is_move,
            copying: false,
            copied_from: 0,
            copy_ticks: 0,
            parked: false,
        });
        io.event(Event::ChangeStarted(u));
        self.start_copies_when_clear(cfg, u.shard, io);
    }

    /// The copies of a join start once no write that began before it (and so missed the
    /// learner) is still waiting for its acks.
    fn start_copies_when_clear(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        let Some(join) = self.shards[usize::from(shard)].join.as_ref() else { return };
        if join.copying {
            return;
        }
        let replacement = join.replacement;
        let earlier_write =
            |o: &CoordOp<D>| o.shard == shard && o.writing() && o.learner != Some(replacement);
        if self.ops.iter().any(earlier_write) {
            return;
        }
        self.request_copies(cfg, shard, io);
    }

    /// Catch-up copy: every remaining member that has not copied yet sends its data to the
    /// replacement; a read quorum of them is enough. A moving replica is healthy and sends its
    /// copy too.
    fn request_copies(&mut self, cfg: &Resolved, shard: u8, io: &mut impl Io<D>) {
        self.request_copies_from(cfg, shard, None, io);
    }

    /// A copy round asking every source still to copy, or only `only`.
    fn request_copies_from(&mut self, cfg: &Resolved, shard: u8, only: Option<NodeId>, io: &mut impl Io<D>) {
        let view = &mut self.shards[usize::from(shard)];
        let join = view.join.as_mut().expect("a join is in progress");
        join.copying = true;
        join.parked = false;
        join.copy_ticks = ticks(cfg.policy.replica_ack_timeout_ticks);
        let to = join.replacement;
        for &src in view.members.iter() {
            let still_to_copy = (join.is_move || src != join.evicted) && join.copied_from & bit(src) == 0;
            if still_to_copy && only.is_none_or(|o| o == src) {
                io.send(Endpoint::Node(src), Msg::CopyRequest { shard, to });
            }
        }
    }

    /// A copy round ran out of time. It is not the detector's business (a missing copy may be
    /// the source's fault, the replacement's or the link's): the round parks, and a source
    /// still to copy is asked again when it is next heard from.
    fn on_copy_deadline(&mut self, shard: u8) {
        let join = self.shards[usize::from(shard)].join.as_mut().expect("a copy round belongs to a join");
        join.parked = true;
    }

    /// The replacement takes the leaving replica's place once a read quorum of copies reached
    /// it.
    fn on_copy_ack(&mut self, cfg: &Resolved, shard: u8, from: NodeId, sender: NodeId, io: &mut impl Io<D>) {
        let view = &mut self.shards[usize::from(shard)];
        // A copy ack of an earlier join of this shard says nothing about this one.
        let Some(join) = view.join.as_mut().filter(|j| j.copying && j.replacement == sender) else {
            return;
        };
        let sources = if join.is_move { view.members.len() } else { view.members.len() - 1 };
        let needed = usize::from(quorum::copies_needed(cfg.policy.read_quorum, sources));
        join.copied_from |= bit(from);
        if (join.copied_from.count_ones() as usize) < needed {
            return;
        }
        let update = MembershipUpdate {
            shard,
            evicted: join.evicted,
            replacement: join.replacement,
            is_move: join.is_move,
        };
        view.members.retain(|m| *m != update.evicted);
        view.members.push(update.replacement);
        view.members.sort();
        view.join = None;
        io.event(Event::ChangeCompleted(update));
    }
}

/// A client request as the coordinator takes it.
struct Request<D: Data> {
    op: D::Op,
    attempt: u8,
    kind: OpKind,
    shard: u8,
    key: D::Key,
    value: D::Value,
    token: Option<D::TokenId>,
}

/// A duration as a timer's remaining ticks (the config bounds every duration).
fn ticks(t: crate::policy::Ticks) -> TimerTicks {
    TimerTicks::try_from(t).unwrap_or_else(|_| panic!("{t} ticks exceed a timer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::protocol::{OpId, Outbox};

    fn resolved(variant: &str) -> Resolved {
        let path =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models/coordinator-restart.toml"));
        let scenario = Scenario::load(path).expect("the library model loads");
        let v = scenario.variant(variant).expect("the variant exists");
        Resolved::new(&scenario, &v.policy).expect("it resolves")
    }

    /// A coordinator that sequenced one write (token kept) and replaced n1 (node 0) by n4.
    fn after_a_write_and_a_replacement(cfg: &Resolved) -> Coordinator {
        let mut c = Coordinator::new(cfg);
        let op = OpId { client: 0, seq: 0 };
        let request = Msg::Request {
            op,
            attempt: 1,
            kind: OpKind::Write,
            shard: 0,
            key: (),
            value: op.write_value(),
            token: (),
        };
        c.on_msg(cfg, Endpoint::Client(0), request, &mut Outbox::default());
        c.shards[0].members = [1, 2, 3].into_iter().collect();
        c
    }

    #[test]
    fn a_restart_keeps_what_is_durable_and_forgets_the_rest() {
        let cfg = resolved("default");
        let before = after_a_write_and_a_replacement(&cfg);
        assert_eq!(before.ops.len(), 1);
        let after = Coordinator::recover(&cfg, &before.durable(&cfg));
        assert_eq!(after.shards[0].members.as_slice(), &[1, 2, 3]);
        assert_eq!(after.shards[0].next_version, 2, "version 1 was handed out: never again");
        assert_eq!(after.tokens, before.tokens, "idempotency tokens are promised");
        assert!(after.ops.is_empty(), "requests in flight are lost");
    }

    #[test]
    fn replica_sets_in_memory_are_lost_on_restart_but_versions_never_go_back() {
        let cfg = resolved("membership-in-memory");
        let before = after_a_write_and_a_replacement(&cfg);
        let after = Coordinator::recover(&cfg, &before.durable(&cfg));
        assert_eq!(after.shards[0].members.as_slice(), cfg.initial_members[0].as_slice());
        assert_eq!(after.shards[0].next_version, 2);
    }

    fn write(seq: u8) -> Msg {
        let op = OpId { client: 0, seq };
        Msg::Request {
            op,
            attempt: 1,
            kind: OpKind::Write,
            shard: 0,
            key: (),
            value: op.write_value(),
            token: (),
        }
    }

    fn ack(seq: u8) -> Msg {
        Msg::ReplicateAck { op: OpId { client: 0, seq }, attempt: 1, shard: 0 }
    }

    /// Queue "n4 replaces n1" in shard 0 and apply it now; what the step sent.
    fn start_join(cfg: &Resolved, c: &mut Coordinator) -> Outbox {
        let mut out = Outbox::default();
        c.enqueue(cfg, MembershipUpdate { shard: 0, evicted: 0, replacement: 3, is_move: false }, &mut out);
        let mut out = Outbox::default();
        c.on_timer(cfg, Timer::ApplyMembershipUpdate, &mut out);
        out
    }

    fn copy_requests(out: &Outbox) -> Vec<NodeId> {
        out.sends
            .iter()
            .filter_map(|(dst, m)| match (dst, m) {
                (Endpoint::Node(n), Msg::CopyRequest { .. }) => Some(*n),
                _ => None,
            })
            .collect()
    }

    fn responded(out: &Outbox) -> bool {
        out.sends.iter().any(|(_, m)| matches!(m, Msg::Response { ok: true, .. }))
    }

    #[test]
    fn a_write_during_a_join_reaches_the_learner_and_needs_one_more_ack() {
        let cfg = resolved("default");
        let mut c = Coordinator::new(&cfg);
        assert_eq!(copy_requests(&start_join(&cfg, &mut c)), [1, 2], "no earlier write: copies at once");
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut out);
        let to: Vec<Endpoint> = out.sends.iter().map(|(d, _)| *d).collect();
        assert_eq!(to, [Endpoint::Node(0), Endpoint::Node(1), Endpoint::Node(2), Endpoint::Node(3)]);
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Node(1), ack(0), &mut out);
        c.on_msg(&cfg, Endpoint::Node(2), ack(0), &mut out);
        assert!(!responded(&out), "W = 2 acks are not enough while n4 joins");
        c.on_msg(&cfg, Endpoint::Node(3), ack(0), &mut out);
        assert!(responded(&out), "W + 1 acks from the members and the learner");
    }

    #[test]
    fn the_copies_wait_for_the_writes_that_began_before_the_join() {
        let cfg = resolved("default");
        let mut c = Coordinator::new(&cfg);
        c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
        assert!(
            copy_requests(&start_join(&cfg, &mut c)).is_empty(),
            "a write that missed the learner is in flight"
        );
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Node(1), ack(0), &mut out);
        assert!(copy_requests(&out).is_empty());
        c.on_msg(&cfg, Endpoint::Node(2), ack(0), &mut out);
        assert!(responded(&out), "acked by W members (it began before the join)");
        assert_eq!(copy_requests(&out), [1, 2], "the write ended: its acks are on the sources");
    }

    #[test]
    fn a_copy_round_out_of_time_asks_a_source_again_when_it_is_heard_from() {
        let cfg = resolved("default");
        let mut c = Coordinator::new(&cfg);
        start_join(&cfg, &mut c);
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from: 1 }, &mut out);
        assert!(c.shards[0].join.is_some(), "one copy of the two needed");
        for _ in 0..cfg.policy.replica_ack_timeout_ticks {
            let mut due = Vec::new();
            c.due(&cfg, &mut due);
            assert!(due.is_empty(), "{due:?}");
            c.tick(&cfg);
        }
        let mut due = Vec::new();
        c.due(&cfg, &mut due);
        assert_eq!(due, [Timer::CopyRetry { shard: 0 }]);
        let mut out = Outbox::default();
        c.on_timer(&cfg, Timer::CopyRetry { shard: 0 }, &mut out);
        assert!(out.sends.is_empty() && c.no_timer_due(&cfg), "parked: no retry per tick");
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Node(1), Msg::Pong, &mut out);
        assert!(copy_requests(&out).is_empty(), "n2 copied already");
        c.on_msg(&cfg, Endpoint::Node(2), Msg::Pong, &mut out);
        assert_eq!(copy_requests(&out), [2], "n3, still to copy, is asked again");
        let mut out = Outbox::default();
        c.on_msg(&cfg, Endpoint::Node(3), Msg::CopyAck { shard: 0, from: 2 }, &mut out);
        assert_eq!(c.shards[0].members.as_slice(), &[1, 2, 3]);
        assert!(c.shards[0].join.is_none());
    }

    #[test]
    fn a_node_heard_from_since_a_request_left_is_not_declared_dead_at_its_deadline() {
        let cfg = resolved("default");
        assert_eq!(cfg.policy.failure_detection, FailureDetection::Coupled);
        let mut c = Coordinator::new(&cfg);
        c.on_msg(&cfg, Endpoint::Client(0), write(0), &mut Outbox::default());
        c.on_msg(&cfg, Endpoint::Client(0), write(1), &mut Outbox::default());
        // n1 answers the second write only, n3 the first only.
        for (n, seq) in [(1, 0), (2, 0), (0, 1), (1, 1)] {
            c.on_msg(&cfg, Endpoint::Node(n), ack(seq), &mut Outbox::default());
        }
        for _ in 0..cfg.policy.replica_ack_timeout_ticks {
            c.tick(&cfg);
        }
        let mut out = Outbox::default();
        c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 0 }, attempt: 1 }, &mut out);
        assert_eq!(c.health[0], Health::Alive, "n1 missed write 0 but answered write 1 since it left");
        c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 1 }, attempt: 1 }, &mut out);
        assert_eq!(c.health[2], Health::Alive, "n3 missed write 1 but answered write 0 after it left");
        // A third write: n3 is silent from the moment it leaves.
        c.on_msg(&cfg, Endpoint::Client(0), write(2), &mut Outbox::default());
        for n in [0, 1] {
            c.on_msg(&cfg, Endpoint::Node(n), ack(2), &mut Outbox::default());
        }
        for _ in 0..cfg.policy.replica_ack_timeout_ticks {
            c.tick(&cfg);
        }
        c.on_timer(&cfg, Timer::AckDeadline { op: OpId { client: 0, seq: 2 }, attempt: 1 }, &mut out);
        assert_eq!(c.health[2], Health::Dead, "coupled detection: a silent miss is a death");
    }
}
