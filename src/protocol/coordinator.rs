//! The coordinator: sequences writes, gathers quorums before the ack deadline, detects failed
//! replicas, evicts them through a bounded membership-update queue, and catches replacements
//! up. As the request router it also admits writes against partition capacity and places them
//! on ingest backends. The rebalancer runs inside it on its own timer.
//!
//! Its state is what a real coordinator holds in memory. Timers are remaining ticks: the ack
//! deadline of each request, the head of the membership queue, the heartbeat round and the
//! rebalancer. [`Coordinator::due`] lists the timers at zero; time may pass only when none is.

use super::{filled, Endpoint, Event, Io, Msg, OpId, PerNode, PerShard, Stored};
use crate::config::{OpKind, Resolved};
use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, Candidate, ClusterView, EvictionDecision};
use crate::policy::rebalancer::{self, NodeLoad, ShardLoad};
use crate::policy::routing::{self, BackendLoad};
use crate::policy::{quorum, retry, NodeId, Version};

/// A replica joining a shard's replica set in place of an evicted one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Join {
    pub evicted: NodeId,
    pub replacement: NodeId,
    /// Bit i set: the copy from node i reached the replacement.
    pub copied_from: u8,
    /// The newest version the replacement reported holding.
    pub replacement_version: Version,
    pub is_move: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardView {
    /// The replica set, sorted by node id.
    pub members: PerNode<NodeId>,
    pub join: Option<Join>,
    pub next_version: Version,
    /// The newest version the coordinator acknowledged to a client.
    pub acked_version: Version,
    /// Rebalancing: ticks until the shard may move again, and the cooldown its last move got.
    pub cooldown_ticks: u8,
    pub cooldown_len_ticks: u8,
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
pub struct CoordOp {
    pub op: OpId,
    pub attempt: u8,
    pub kind: OpKind,
    pub shard: u8,
    pub version: Version,
    pub value: u8,
    /// Members asked (bit per node); only their answers count toward the quorum.
    pub asked: u8,
    pub answered: u8,
    pub responded: bool,
    /// Best read reply so far.
    pub best: Stored,
    /// With `read_repair`: the members that answered the read with `best`'s version (0
    /// without read repair, so states that differ only in it are one state).
    pub holders: u8,
    /// A read writing `best` back to a write quorum before it answers (read repair):
    /// `answered` now counts the holders and the acks of the write-back.
    pub repairing: bool,
    /// Ticks until the ack deadline (`replica_ack_timeout`) fires; a write-back gets a whole
    /// deadline of its own.
    pub deadline_ticks: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coordinator {
    pub shards: PerShard<ShardView>,
    pub health: PerNode<Health>,
    /// Independent detection: ticks since the node was last heard from (saturating).
    pub silence_ticks: PerNode<u8>,
    pub heartbeat_ticks: u8,
    pub ops: Vec<CoordOp>,
    /// Idempotency tokens: the version each write operation was sequenced at.
    pub tokens: Vec<(OpId, Version)>,
    pub queue: Vec<MembershipUpdate>,
    /// Ticks until the head of the queue is applied.
    pub queue_ticks: u8,
    /// Ticks until the rebalancer runs (when enabled).
    pub rebalance_ticks: u8,
    /// Writes the modelled clients offered to each partition this tick (kept only when the
    /// scenario has partition capacities; background load is in the config).
    pub partition_load: PerShard<u8>,
    /// Writes placed on each backend this tick (kept only when backends have capacities).
    pub backend_load: PerNode<u8>,
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
pub enum Timer {
    /// A request's ack deadline (`replica_ack_timeout`).
    AckDeadline { op: OpId, attempt: u8 },
    /// The membership update at the head of the queue is applied.
    ApplyMembershipUpdate,
    /// A heartbeat round (independent failure detection).
    Heartbeat,
    /// The rebalancer runs.
    Rebalance,
}

/// What the coordinator persists, and so what survives its crash. A driver writes it durably
/// whenever a step changed it, before any of that step's sends leave (the model's restart
/// keeps exactly this; the rest of [`Coordinator`] is memory).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Durable {
    /// Per shard: the replica set (`None` without `durable_membership`) and the version
    /// counter's floor: no version below it is ever handed out again.
    pub shards: PerShard<(Option<PerNode<NodeId>>, Version)>,
    /// Idempotency tokens, when the policy promises them: a retry after a restart must get
    /// the version its first attempt got.
    pub tokens: Vec<(OpId, Version)>,
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

impl Coordinator {
    /// A coordinator starting with the scenario's replica sets, every node alive, every timer
    /// at its full interval.
    pub fn new(cfg: &Resolved) -> Coordinator {
        let node_count = cfg.nodes.len();
        let shard_count = cfg.shard_names.len();
        let independent = independent(cfg);
        Coordinator {
            shards: cfg
                .initial_members
                .iter()
                .map(|m| ShardView {
                    members: m.iter().copied().collect(),
                    join: None,
                    next_version: 1,
                    acked_version: 0,
                    cooldown_ticks: 0,
                    cooldown_len_ticks: 0,
                })
                .collect(),
            health: filled(Health::Alive, node_count),
            silence_ticks: filled(0, if independent { node_count } else { 0 }),
            heartbeat_ticks: if independent { cfg.policy.heartbeat_interval_ticks as u8 } else { 0 },
            ops: Vec::new(),
            tokens: Vec::new(),
            queue: Vec::new(),
            queue_ticks: 0,
            rebalance_ticks: cfg.policy.rebalance.as_ref().map_or(0, |r| r.interval_ticks as u8),
            partition_load: filled(0, shard_count),
            backend_load: filled(0, node_count),
        }
    }

    /// What must survive a crash now.
    pub fn durable(&self, cfg: &Resolved) -> Durable {
        let p = &cfg.policy;
        Durable {
            shards: self
                .shards
                .iter()
                .map(|v| (p.durable_membership.then(|| v.members.clone()), v.next_version))
                .collect(),
            tokens: if p.retry.idempotency_tokens { self.tokens.clone() } else { Vec::new() },
        }
    }

    /// A coordinator restarting from what it persisted: replica sets and version floors from
    /// `durable` (the configured replica sets where it kept none), everything else as at
    /// start. Requests in flight, failure-detector state, queued and half-done membership
    /// changes, cooldowns and the acknowledged-version watermark are gone: a catch-up that
    /// was under way is started again by the detector, since its replacement never joined.
    pub fn recover(cfg: &Resolved, durable: &Durable) -> Coordinator {
        let mut c = Coordinator::new(cfg);
        assert_eq!(durable.shards.len(), c.shards.len());
        for (v, (members, next_version)) in c.shards.iter_mut().zip(&durable.shards) {
            if let Some(members) = members {
                v.members = members.clone();
            }
            assert!(*next_version >= 1, "version 0 is the initial value, never handed out");
            v.next_version = *next_version;
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
    }

    /// The timers at zero, in a fixed order.
    pub fn due(&self, cfg: &Resolved, out: &mut impl Extend<Timer>) {
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
    }

    /// Fire a due timer.
    pub fn on_timer(&mut self, cfg: &Resolved, timer: Timer, io: &mut impl Io) {
        match timer {
            Timer::AckDeadline { op, attempt } => self.on_deadline(cfg, op, attempt, io),
            Timer::ApplyMembershipUpdate => self.on_apply_membership(cfg, io),
            Timer::Heartbeat => self.on_heartbeat(cfg, io),
            Timer::Rebalance => self.on_rebalance(cfg, io),
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
            let cap = cfg.policy.dead_after_ticks as u8;
            for t in &mut self.silence_ticks {
                *t = (*t + 1).min(cap);
            }
        }
        if cfg.policy.rebalance.is_some() {
            self.rebalance_ticks -= 1;
        }
        // Capacities are per tick.
        self.partition_load.iter_mut().for_each(|l| *l = 0);
        self.backend_load.iter_mut().for_each(|l| *l = 0);
        for v in &mut self.shards {
            v.cooldown_ticks = v.cooldown_ticks.saturating_sub(1);
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
    fn on_rebalance(&mut self, cfg: &Resolved, io: &mut impl Io) {
        let r = cfg.policy.rebalance.as_ref().expect("the rebalancer runs only when enabled");
        self.rebalance_ticks = r.interval_ticks as u8;
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
        v.cooldown_len_ticks = len as u8;
        v.cooldown_ticks = len as u8;
        let update = MembershipUpdate { shard: m.shard, evicted: m.from, replacement: m.to, is_move: true };
        self.enqueue(cfg, update, io);
    }

    /// A message arrives from `src`.
    pub fn on_msg(&mut self, cfg: &Resolved, src: Endpoint, msg: Msg, io: &mut impl Io) {
        if let Endpoint::Node(n) = src {
            self.heard_from(cfg, n);
        }
        match msg {
            Msg::Request { op, attempt, kind, shard, value } => {
                self.on_request(cfg, op, attempt, kind, shard, value, io)
            }
            Msg::ReplicateAck { op, attempt, .. } => {
                let Endpoint::Node(n) = src else { unreachable!("acks come from nodes") };
                self.on_answer(cfg, op, attempt, n, None, io);
            }
            Msg::ReadReply { op, attempt, version, value, .. } => {
                let Endpoint::Node(n) = src else { unreachable!("read replies come from nodes") };
                self.on_answer(cfg, op, attempt, n, Some(Stored { version, value }), io);
            }
            Msg::CopyAck { shard, from, version } => self.on_copy_ack(cfg, shard, from, version, io),
            Msg::Pong => {}
            Msg::Response { .. }
            | Msg::Replicate { .. }
            | Msg::ReadReq { .. }
            | Msg::CopyRequest { .. }
            | Msg::CopyData { .. }
            | Msg::Ping => unreachable!("the coordinator is never sent {msg:?}"),
        }
    }

    /// Any message is proof of life, however late it comes.
    fn heard_from(&mut self, cfg: &Resolved, n: NodeId) {
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
                load_per_tick: spec.base_load_per_tick + u16::from(self.backend_load[n]),
            })
            .collect()
    }

    /// Count one write offered to a partition or backend, and note a breach.
    fn offer(&mut self, unit: CapacityUnit, offered_before: u16, capacity: Option<u16>, io: &mut impl Io) {
        let offered = offered_before + 1;
        let load = match unit {
            CapacityUnit::Partition(p) => &mut self.partition_load[usize::from(p)],
            CapacityUnit::Backend(n) => &mut self.backend_load[usize::from(n)],
        };
        *load = load.saturating_add(1);
        if let Some(cap) = capacity.filter(|&cap| offered > cap) {
            io.event(Event::CapacityBreached(CapacityBreach { unit, offered, capacity: cap }));
        }
    }

    /// Route a write (`routing::route_write`) and count the load it offered. `false`:
    /// throttled or shed, the client gets an error.
    fn admit_write(&mut self, cfg: &Resolved, partition: u8, io: &mut impl Io) -> bool {
        let p = usize::from(partition);
        let before = cfg.partition_background[p] + u16::from(self.partition_load[p]);
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
        route.admitted()
    }

    #[allow(clippy::too_many_arguments)]
    fn on_request(
        &mut self,
        cfg: &Resolved,
        op: OpId,
        attempt: u8,
        kind: OpKind,
        shard: u8,
        value: u8,
        io: &mut impl Io,
    ) {
        if kind == OpKind::Write && !self.admit_write(cfg, shard, io) {
            io.send(Endpoint::Client(op.client), Msg::Response { op, attempt, ok: false, value: 0 });
            return;
        }
        let p = &cfg.policy;
        let view = &mut self.shards[usize::from(shard)];
        let asked = view.members.iter().fold(0u8, |m, &n| m | bit(n));
        let learner = view.join.as_ref().map(|j| j.replacement);
        let mut version = 0;
        if kind == OpKind::Write {
            let known = self.tokens.iter().find(|(o, _)| *o == op).map(|(_, v)| *v);
            let next = view.next_version;
            version = retry::version_for_attempt(p.retry.idempotency_tokens, known, next);
            if version == next {
                view.next_version += 1;
                if p.retry.idempotency_tokens {
                    self.tokens.push((op, version));
                    self.tokens.sort();
                }
            }
        }
        for &n in &view.members {
            let msg = match kind {
                OpKind::Write => Msg::Replicate { op, attempt, shard, version, value },
                OpKind::Read => Msg::ReadReq { op, attempt, shard },
            };
            io.send(Endpoint::Node(n), msg);
        }
        // Writes also reach a joining replica so it misses nothing; reads go to members only.
        if let (OpKind::Write, Some(n)) = (kind, learner) {
            io.send(Endpoint::Node(n), Msg::Replicate { op, attempt, shard, version, value });
        }
        self.ops.push(CoordOp {
            op,
            attempt,
            kind,
            shard,
            version,
            value,
            asked,
            answered: 0,
            responded: false,
            best: Stored::default(),
            holders: 0,
            repairing: false,
            deadline_ticks: p.replica_ack_timeout_ticks as u8,
        });
    }

    fn on_answer(
        &mut self,
        cfg: &Resolved,
        op: OpId,
        attempt: u8,
        n: NodeId,
        read: Option<Stored>,
        io: &mut impl Io,
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
        if let (Some(r), false) = (read, o.repairing) {
            if r.version > o.best.version || o.answered.count_ones() == 1 {
                o.best = r;
                o.holders = if p.read_repair { bit(n) } else { 0 };
            } else if p.read_repair && r.version == o.best.version {
                o.holders |= bit(n);
            }
        }
        let needed = match (o.kind, o.repairing) {
            (OpKind::Write, _) | (OpKind::Read, true) => p.write_quorum,
            (OpKind::Read, false) => p.read_quorum,
        };
        if !o.responded && quorum::quorum_reached(o.answered.count_ones() as usize, needed) {
            let repair = o.kind == OpKind::Read
                && !o.repairing
                && p.read_repair
                && o.best.version > 0
                && !quorum::quorum_reached(o.holders.count_ones() as usize, p.write_quorum);
            if repair {
                // Once a reader saw a value, every later read quorum must meet a member that
                // holds it: write it back to a write quorum first (ABD's second phase).
                o.repairing = true;
                o.answered = o.holders;
                o.deadline_ticks = p.replica_ack_timeout_ticks as u8;
                let (shard, best, to) = (o.shard, o.best, o.asked & !o.holders);
                for m in (0..cfg.nodes.len() as NodeId).filter(|&m| to & bit(m) != 0) {
                    let msg = Msg::Replicate { op, attempt, shard, version: best.version, value: best.value };
                    io.send(Endpoint::Node(m), msg);
                }
                return;
            }
            o.responded = true;
            let (kind, shard, version, value, best) = (o.kind, o.shard, o.version, o.value, o.best);
            let response_value = match kind {
                OpKind::Write => value,
                OpKind::Read => best.value,
            };
            if kind == OpKind::Write {
                let view = &mut self.shards[usize::from(shard)];
                view.acked_version = view.acked_version.max(version);
                io.event(Event::WriteAcked { shard, version });
            }
            io.send(
                Endpoint::Client(op.client),
                Msg::Response { op, attempt, ok: true, value: response_value },
            );
        }
        let o = &self.ops[i];
        if o.responded && o.answered == o.asked {
            // Nothing more to learn from this request.
            self.ops.remove(i);
        }
    }

    fn on_deadline(&mut self, cfg: &Resolved, op: OpId, attempt: u8, io: &mut impl Io) {
        let i = self
            .ops
            .iter()
            .position(|o| o.op == op && o.attempt == attempt)
            .expect("deadline of a live request");
        let o = self.ops.remove(i);
        if !o.responded {
            io.send(Endpoint::Client(op.client), Msg::Response { op, attempt, ok: false, value: 0 });
        }
        let missing = o.asked & !o.answered;
        if let Some(h) = detector::health_after_deadline_miss(cfg.policy.failure_detection) {
            for n in 0..cfg.nodes.len() as NodeId {
                if missing & bit(n) != 0 {
                    self.health[usize::from(n)] = h;
                }
            }
            self.consider_evictions(cfg, io);
        }
    }

    fn on_heartbeat(&mut self, cfg: &Resolved, io: &mut impl Io) {
        let p = &cfg.policy;
        self.heartbeat_ticks = p.heartbeat_interval_ticks as u8;
        for n in 0..cfg.nodes.len() {
            let silence = u32::from(self.silence_ticks[n]);
            self.health[n] =
                detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks);
            io.send(Endpoint::Node(n as NodeId), Msg::Ping);
        }
        self.consider_evictions(cfg, io);
    }

    /// Ask the eviction policy about every member the detector declared dead; queue the
    /// membership updates it decides on. One membership change per shard at a time.
    fn consider_evictions(&mut self, cfg: &Resolved, io: &mut impl Io) {
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
                    EvictionDecision::Suppressed(_) => continue,
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

    fn enqueue(&mut self, cfg: &Resolved, update: MembershipUpdate, io: &mut impl Io) {
        io.event(Event::ChangeRequested(update));
        if self.queue.len() >= usize::from(cfg.coordinator.membership_queue_capacity) {
            io.event(Event::ChangeRejected(update));
            return;
        }
        if self.queue.is_empty() {
            self.queue_ticks = cfg.coordinator.membership_update_ticks as u8;
        }
        self.queue.push(update);
    }

    fn on_apply_membership(&mut self, cfg: &Resolved, io: &mut impl Io) {
        let u = self.queue.remove(0);
        if !self.queue.is_empty() {
            self.queue_ticks = cfg.coordinator.membership_update_ticks as u8;
        }
        let view = &mut self.shards[usize::from(u.shard)];
        assert!(view.join.is_none(), "one membership change per shard at a time");
        view.join = Some(Join {
            evicted: u.evicted,
            replacement: u.replacement,
            copied_from: 0,
            replacement_version: 0,
            is_move: u.is_move,
        });
        self.request_copies(u.shard, io);
    }

    /// Catch-up copy: every remaining member sends its data to the replacement; a read quorum
    /// of them is enough. A moving replica is healthy and sends its copy too.
    fn request_copies(&self, shard: u8, io: &mut impl Io) {
        let view = &self.shards[usize::from(shard)];
        let join = view.join.as_ref().expect("a join is in progress");
        let to = join.replacement;
        for &src in view.members.iter().filter(|&&m| join.is_move || m != join.evicted) {
            io.send(Endpoint::Node(src), Msg::CopyRequest { shard, to });
        }
    }

    /// The replacement takes the evicted replica's place once a read quorum of copies reached
    /// it and it holds every acknowledged write. A write acknowledged while the copies were on
    /// their way may be missing from them: then copy again.
    fn on_copy_ack(&mut self, cfg: &Resolved, shard: u8, from: NodeId, version: Version, io: &mut impl Io) {
        let view = &mut self.shards[usize::from(shard)];
        let acked_version = view.acked_version;
        let Some(join) = view.join.as_mut() else {
            return;
        };
        let sources = if join.is_move { view.members.len() } else { view.members.len() - 1 };
        let needed = usize::from(quorum::copies_needed(cfg.policy.read_quorum, sources));
        join.copied_from |= bit(from);
        join.replacement_version = join.replacement_version.max(version);
        if (join.copied_from.count_ones() as usize) < needed {
            return;
        }
        if join.replacement_version < acked_version {
            join.copied_from = 0;
            self.request_copies(shard, io);
            return;
        }
        let (evicted, replacement) = (join.evicted, join.replacement);
        view.members.retain(|m| *m != evicted);
        view.members.push(replacement);
        view.members.sort();
        view.join = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scenario;
    use crate::protocol::Outbox;

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
        let request = Msg::Request { op, attempt: 1, kind: OpKind::Write, shard: 0, value: op.write_value() };
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
        assert_eq!(after.shards[0].acked_version, 0);
    }

    #[test]
    fn replica_sets_in_memory_are_lost_on_restart_but_versions_never_go_back() {
        let cfg = resolved("membership-in-memory");
        let before = after_a_write_and_a_replacement(&cfg);
        let after = Coordinator::recover(&cfg, &before.durable(&cfg));
        assert_eq!(after.shards[0].members.as_slice(), cfg.initial_members[0].as_slice());
        assert_eq!(after.shards[0].next_version, 2);
    }
}
