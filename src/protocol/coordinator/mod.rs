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

mod load;
mod membership;
mod recovery;
mod requests;
mod views;

use super::{filled, Data, Endpoint, Event, Failure, Io, JoinView, ModelData, Msg, PerNode, Stored};
use crate::config::{OpKind, Resolved};
use crate::policy::coordinator_load;
use crate::policy::detector::{self, FailureDetection, Health, HealthCheck};
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
    /// The round ran out of time: a source still to copy is asked again when it is heard from
    /// or, with a copy backoff, once `retry_ticks` ends.
    pub parked: bool,
    /// Copy backoff: the window of ticks (earliest, latest) before a parked round's missing
    /// sources are asked again (`None` without a backoff, or while a round runs).
    pub retry_ticks: Option<(TimerTicks, TimerTicks)>,
    /// Copy backoff: the rounds of this join that ran out of time, counted up to
    /// `recovery::copy_rounds_tracked` (0 without a backoff).
    pub failed_rounds: u8,
    /// `join_timeout`: ticks until the join is abandoned unless it completed (leader only;
    /// `None` without a timeout). It stops once reads moved to the new replica set.
    pub timeout_ticks: Option<TimerTicks>,
    /// Several coordinators: the replacement is caught up and reads go to the new replica
    /// set, while the leader waits for every coordinator to say so before the swap.
    pub swapping: bool,
}

impl Join {
    /// A join as it starts: the replacement learns, nothing copied yet.
    pub fn learning(evicted: NodeId, replacement: NodeId, is_move: bool) -> Join {
        Join {
            evicted,
            replacement,
            is_move,
            copying: false,
            copied_from: 0,
            copy_ticks: 0,
            parked: false,
            retry_ticks: None,
            failed_rounds: 0,
            timeout_ticks: None,
            swapping: false,
        }
    }
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
    /// Several coordinators: the view's number. The leader counts one up per step of a change
    /// and sends the view to the others; another coordinator runs the newest it got.
    pub epoch: u8,
    /// Leader: the other coordinators (a bit each) that acked `epoch`. A change moves on to its
    /// next step only once all have.
    pub acked: u8,
    /// Leader: ticks until the view is sent again to those that have not acked it.
    pub view_ticks: TimerTicks,
    /// Another coordinator: it owes the leader the ack of a join's first view, sent once every
    /// write it began before it has ended.
    pub ack_owed: bool,
    /// The targets of this shard's abandoned joins (`join_timeout`), a bit each: none is
    /// chosen again until a join of the shard completes, since a late copy ack from the
    /// abandoned join would count for the new one (copy messages carry no join identity).
    pub abandoned_targets: u8,
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
    /// Asked nodes that refused (`Msg::Refused`): they will not answer this request.
    pub refused: u8,
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
    /// Several coordinators: a write first reads a read quorum's versions and takes a version
    /// above all of them (each coordinator's own class of versions), so writes through
    /// different coordinators are ordered as they happened.
    pub querying: bool,
    /// The idempotency token of a write still querying (it is remembered with its version).
    pub token: Option<D::TokenId>,
    /// A saturated coordinator: ticks until the request reaches the front of the work queue
    /// and is sent to the replicas (`None`: sent). Its deadline runs meanwhile.
    pub fan_out_ticks: Option<TimerTicks>,
    /// The coordinator's backlog when the request arrived (0 where its load is not modelled):
    /// what the request waited behind, the load its deadline miss says most about.
    pub queued_behind_work: u16,
}

impl<D: Data> CoordOp<D> {
    /// Writes to replicas in flight: a write, or a read's write-back, not yet answered. A
    /// request still waiting to be sent is none: it goes to a joining replica when it is sent.
    fn writing(&self) -> bool {
        (self.kind == OpKind::Write || self.repairing) && !self.responded && self.fan_out_ticks.is_none()
    }

    /// Whether enough of the nodes asked may still answer.
    fn quorum_possible(&self, cfg: &Resolved) -> bool {
        (self.asked & !self.refused).count_ones() as u8 >= self.needed(cfg)
    }

    /// Refusals made a quorum that was possible impossible: the client was told then
    /// (`on_refused`). Never so in a model (no model's node refuses).
    fn refused_out(&self, cfg: &Resolved) -> bool {
        self.refused != 0 && self.asked.count_ones() as u8 >= self.needed(cfg) && !self.quorum_possible(cfg)
    }

    fn needed(&self, cfg: &Resolved) -> u8 {
        let quorum = match (self.kind, self.repairing) {
            (OpKind::Write, _) if self.querying => cfg.policy.read_quorum,
            (OpKind::Write, _) | (OpKind::Read, true) => cfg.policy.write_quorum,
            (OpKind::Read, false) => cfg.policy.read_quorum,
        };
        quorum + u8::from(self.learner.is_some())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coordinator<D: Data = ModelData> {
    /// Which coordinator this is: 0 leads membership (orders every change, runs the
    /// rebalancer and the catch-up copies).
    pub me: u8,
    pub shards: D::Shards<ShardView<D>>,
    pub health: PerNode<Health>,
    /// Independent detection: ticks since the node was last heard from (saturating).
    pub silence_ticks: PerNode<TimerTicks>,
    /// `down_out_interval`: per node believed dead, the ticks until it is out (its replicas
    /// re-created elsewhere); `None` once out, or while not dead. Empty without an interval:
    /// a dead node is out at once.
    pub down_out_ticks: PerNode<Option<TimerTicks>>,
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
    pub partition_load: D::Shards<u16>,
    /// Writes placed on each backend this window (kept only when backends have capacities).
    pub backend_load: PerNode<u16>,
    /// Background writes per tick the router sees on each partition (traffic from outside
    /// the model): the configured bursts at start; a driver reports changes
    /// ([`Coordinator::on_background`]).
    pub background: D::Shards<u16>,
    /// Each node's compaction debt as last reported (the configured debt until a node
    /// reports; reports come only when debt is node state, `compaction_debt_drain`).
    pub debt_pct: PerNode<u8>,
    /// Units of control-plane work queued ahead of anything new (`coordinator.work_per_tick`;
    /// always 0 where the coordinator's load is not modelled).
    pub backlog_work: u16,
    /// Ticks left of the current round of work (`coordinator.work_round_ticks`; always 0 in
    /// the models, whose rounds are one tick).
    pub work_round_left_ticks: TimerTicks,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// Leader: a view not acked by every coordinator in time is sent again to those missing.
    ViewResend { shard: u8 },
    /// A request that waited behind the coordinator's backlog is sent to the replicas.
    FanOut { op: Op, attempt: u8 },
    /// Continuous health checking: `node`'s silence reached `suspect_after` or `dead_after`.
    SilenceCrossed { node: NodeId },
    /// `down_out_interval`: `node` has been dead that long; its replicas may be re-created.
    DownOut { node: NodeId },
    /// Copy backoff: a parked copy round's wait is over; its missing sources are asked again.
    CopyBackoffOver { shard: u8 },
    /// `join_timeout`: the shard's join did not complete in time and is abandoned.
    JoinTimeout { shard: u8 },
}

/// What the coordinator persists, and so what survives its crash. A driver writes it durably
/// whenever a step changed it, before any of that step's sends leave (the model's restart
/// keeps exactly this; the rest of [`Coordinator`] is memory).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Durable<D: Data = ModelData> {
    /// Per shard: the replica set (`None` without `durable_membership`) and the version
    /// counter's floor: no version below it is ever handed out again.
    pub shards: D::Shards<(Option<PerNode<NodeId>>, D::Version)>,
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

/// One router's own count of the writes it offered this window: per partition and per backend
/// (`Coordinator::partition_load`, `backend_load`).
pub type RouterLoad<'a> = (&'a [u16], &'a [u16]);

/// A capacity unit and what the whole fleet of routers offers it this window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitLoad {
    pub unit: CapacityUnit,
    /// Background (a burst) or base load, plus every router's writes.
    pub offered: u16,
    pub background: u16,
    pub capacity: Option<u16>,
}

/// Each router counts only its own writes, but a partition or backend takes the writes of all
/// of them: what each unit is offered this window, partitions (where they have a capacity)
/// before backends (where backends are modelled). `background`: the partitions' background
/// load as the routers see it now.
pub fn fleet_loads<'a>(
    cfg: &'a Resolved,
    background: &'a [u16],
    fleet: &'a [RouterLoad<'a>],
) -> impl Iterator<Item = UnitLoad> + 'a {
    let partitions = cfg.partition_capacity_per_tick.map_or(0, |_| cfg.shard_names.len());
    let backends = if cfg.backends_modelled { cfg.nodes.len() } else { 0 };
    let partition_loads = (0..partitions).map(move |p| {
        let placed: u16 = fleet.iter().map(|(partition, _)| partition[p]).fold(0, u16::saturating_add);
        UnitLoad {
            unit: CapacityUnit::Partition(p as u8),
            offered: background[p].saturating_add(placed),
            background: background[p],
            capacity: cfg.partition_capacity_per_tick,
        }
    });
    let backend_loads = (0..backends).map(move |n| {
        let placed: u16 = fleet.iter().map(|(_, backend)| backend[n]).fold(0, u16::saturating_add);
        let spec = &cfg.nodes[n];
        UnitLoad {
            unit: CapacityUnit::Backend(n as NodeId),
            offered: spec.base_load_per_tick.saturating_add(placed),
            background: spec.base_load_per_tick,
            capacity: spec.write_capacity_per_tick,
        }
    });
    partition_loads.chain(backend_loads)
}

/// The first capacity the fleet's writes breach this window (`fleet_loads`).
pub fn fleet_breach(cfg: &Resolved, background: &[u16], fleet: &[RouterLoad<'_>]) -> Option<CapacityBreach> {
    fleet_loads(cfg, background, fleet).find_map(|u| {
        u.capacity.filter(|&cap| u.offered > cap).map(|capacity| CapacityBreach {
            unit: u.unit,
            offered: u.offered,
            capacity,
        })
    })
}

impl<D: Data> Coordinator<D> {
    /// Coordinator `me` starting with the scenario's replica sets, every node alive, every
    /// timer at its full interval.
    pub fn new(cfg: &Resolved, me: u8) -> Coordinator<D> {
        assert!(usize::from(me) < cfg.coordinators.len());
        let node_count = cfg.nodes.len();
        let shard_count = cfg.shard_names.len();
        let independent = independent(cfg);
        let p = &cfg.policy;
        let leader = me == 0;
        Coordinator {
            me,
            shards: cfg
                .initial_members
                .iter()
                .map(|m| ShardView {
                    members: m.iter().copied().collect(),
                    join: None,
                    next_version: D::next_version(D::Version::default()),
                    cooldown_ticks: 0,
                    cooldown_len_ticks: 0,
                    epoch: 0,
                    acked: if leader { views::followers(cfg) } else { 0 },
                    view_ticks: 0,
                    ack_owed: false,
                    abandoned_targets: 0,
                })
                .collect(),
            health: filled(Health::Alive, node_count),
            silence_ticks: filled(0, if independent { node_count } else { 0 }),
            down_out_ticks: filled(None, if p.recovery.down_out_interval_ticks > 0 { node_count } else { 0 }),
            heartbeat_ticks: if independent { ticks(p.heartbeat_interval_ticks) } else { 0 },
            ops: Vec::new(),
            tokens: Vec::new(),
            queue: Vec::new(),
            queue_ticks: 0,
            rebalance_ticks: p.rebalance.as_ref().filter(|_| leader).map_or(0, |r| ticks(r.interval_ticks)),
            window_ticks: cfg.capacity_window_ticks - 1,
            partition_load: filled(0, shard_count),
            backend_load: filled(0, node_count),
            background: cfg.partition_background.iter().copied().collect(),
            debt_pct: cfg.nodes.iter().map(|spec| spec.compaction_debt_pct).collect(),
            backlog_work: 0,
            work_round_left_ticks: 0,
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
    ///
    /// With several coordinators a whole fleet starts this way together, each from the leader's
    /// replica sets and its own version floor (one coordinator's restart among running peers
    /// is not modelled: its views would have to be learned again first).
    pub fn recover(cfg: &Resolved, me: u8, durable: &Durable<D>) -> Coordinator<D> {
        let mut c = Coordinator::<D>::new(cfg, me);
        assert_eq!(durable.shards.len(), c.shards.len());
        for (v, (members, floor)) in c.shards.iter_mut().zip(durable.shards.iter()) {
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
        self.ops.iter().all(|o| o.deadline_ticks > 0 && o.fan_out_ticks != Some(0))
            && (self.queue.is_empty() || self.queue_ticks > 0)
            && (!independent(cfg) || self.heartbeat_ticks > 0)
            && (!self.rebalances(cfg) || self.rebalance_ticks > 0)
            && self
                .shards
                .iter()
                .all(|v| v.join.as_ref().is_none_or(|j| !j.copying || j.parked || j.copy_ticks > 0))
            && self.shards.iter().all(|v| !self.view_pending(cfg, v) || v.view_ticks > 0)
            && self.silences_crossed(cfg).next().is_none()
            && self.no_recovery_timer_due()
    }

    /// A lower bound on the ticks before a timer is due, were no message to arrive: 0 when one
    /// is due now, 1 while a jittered window is open (the store draws its moment tick by tick),
    /// `None` with no timer set. A driver may sleep that long, then catch the ticks up.
    pub fn quiet_ticks(&self, cfg: &Resolved) -> Option<TimerTicks> {
        if !self.no_timer_due(cfg) {
            return Some(0);
        }
        let mut soonest: Option<TimerTicks> = None;
        let mut at = |t: TimerTicks| soonest = Some(soonest.map_or(t, |s| s.min(t)));
        for o in &self.ops {
            at(o.deadline_ticks);
            o.fan_out_ticks.into_iter().for_each(&mut at);
        }
        if !self.queue.is_empty() {
            at(self.queue_ticks);
        }
        if independent(cfg) {
            at(self.heartbeat_ticks);
            self.silence_quiet(cfg, &mut at);
        }
        if self.rebalances(cfg) {
            at(self.rebalance_ticks);
        }
        for v in self.shards.iter() {
            if let Some(j) = v.join.as_ref().filter(|j| j.copying && !j.parked) {
                at(j.copy_ticks);
            }
            if self.view_pending(cfg, v) {
                at(v.view_ticks);
            }
        }
        self.recovery_quiet(&mut at);
        soonest
    }

    /// Tests: `quiet_ticks` is a lower bound here. A copy left alone for fewer ticks than it
    /// says (at most `probe_max`) has no timer due and no window open; the ticks probed.
    #[cfg(test)]
    pub(crate) fn probe_quiet_ticks(&self, cfg: &Resolved, probe_max: TimerTicks) -> u64 {
        let quiet = self.quiet_ticks(cfg).unwrap_or(probe_max);
        assert!(quiet == 0 || self.no_timer_due(cfg), "quiet {quiet} with a timer due");
        let mut copy = self.clone();
        for k in 1..quiet.min(probe_max) {
            copy.tick(cfg);
            let mut ready = Vec::new();
            copy.ready(&mut ready);
            assert!(
                copy.no_timer_due(cfg) && ready.is_empty(),
                "a timer due after {k} of {quiet} quiet ticks"
            );
        }
        u64::from(quiet.min(probe_max).saturating_sub(1))
    }

    /// Whether this coordinator runs the rebalancer: the leader, when it is enabled.
    fn rebalances(&self, cfg: &Resolved) -> bool {
        cfg.policy.rebalance.is_some() && self.me == 0
    }

    /// The timers at zero, in a fixed order.
    pub fn due(&self, cfg: &Resolved, out: &mut impl Extend<Timer<D::Op>>) {
        for o in &self.ops {
            if o.deadline_ticks == 0 {
                out.extend([Timer::AckDeadline { op: o.op, attempt: o.attempt }]);
            }
            if o.fan_out_ticks == Some(0) {
                out.extend([Timer::FanOut { op: o.op, attempt: o.attempt }]);
            }
        }
        if !self.queue.is_empty() && self.queue_ticks == 0 {
            out.extend([Timer::ApplyMembershipUpdate]);
        }
        if independent(cfg) && self.heartbeat_ticks == 0 {
            out.extend([Timer::Heartbeat]);
        }
        out.extend(self.silences_crossed(cfg).map(|node| Timer::SilenceCrossed { node }));
        self.recovery_due(out);
        if self.rebalances(cfg) && self.rebalance_ticks == 0 {
            out.extend([Timer::Rebalance]);
        }
        for (shard, v) in self.shards.iter().enumerate() {
            if v.join.as_ref().is_some_and(|j| j.copying && !j.parked && j.copy_ticks == 0) {
                out.extend([Timer::CopyRetry { shard: shard as u8 }]);
            }
            if self.view_pending(cfg, v) && v.view_ticks == 0 {
                out.extend([Timer::ViewResend { shard: shard as u8 }]);
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
            Timer::CopyRetry { shard } => self.on_copy_deadline(cfg, shard),
            Timer::ViewResend { shard } => self.on_view_resend(cfg, shard, io),
            Timer::FanOut { op, attempt } => self.on_fan_out(cfg, op, attempt, io),
            Timer::SilenceCrossed { node } => self.on_silence_crossed(cfg, node, io),
            Timer::DownOut { node } => self.on_down_out(cfg, node, io),
            Timer::CopyBackoffOver { shard } => self.on_copy_backoff_over(cfg, shard, io),
            Timer::JoinTimeout { shard } => self.on_join_timeout(cfg, shard, io),
        }
    }

    /// Timers that may fire now but need not yet: a window has opened (a copy backoff with
    /// jitter), each with the ticks left before it must fire. The timed world explores every
    /// moment in the window; the store draws one.
    pub fn ready(&self, out: &mut impl Extend<(Timer<D::Op>, TimerTicks)>) {
        for (shard, v) in self.shards.iter().enumerate() {
            if let Some((0, latest)) = v.join.as_ref().and_then(|j| j.retry_ticks).filter(|&(_, l)| l > 0) {
                out.extend([(Timer::CopyBackoffOver { shard: shard as u8 }, latest)]);
            }
        }
    }

    /// One tick passes. No timer may be due (see [`Coordinator::no_timer_due`]).
    pub fn tick(&mut self, cfg: &Resolved) {
        for o in &mut self.ops {
            o.deadline_ticks -= 1;
            if let Some(t) = o.fan_out_ticks.as_mut() {
                *t -= 1;
            }
        }
        if let Some(w) = cfg.coordinator.work {
            if self.work_round_left_ticks == 0 {
                self.backlog_work = coordinator_load::backlog_after_tick(w, self.backlog_work);
                self.work_round_left_ticks = cfg.coordinator.work_round_ticks - 1;
            } else {
                self.work_round_left_ticks -= 1;
            }
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
        if self.rebalances(cfg) {
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
        let followers = views::followers(cfg);
        for v in self.shards.iter_mut() {
            if self.me == 0 && v.acked != followers {
                v.view_ticks -= 1;
            }
            v.cooldown_ticks = v.cooldown_ticks.saturating_sub(1);
            if let Some(j) = v.join.as_mut().filter(|j| j.copying && !j.parked) {
                j.copy_ticks -= 1;
            }
        }
        self.recovery_tick();
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
            Msg::Refused { op, attempt, .. } => {
                let Endpoint::Node(n) = src else { unreachable!("refusals come from nodes") };
                self.on_refused(cfg, op, attempt, n, io);
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
            Msg::View { shard, epoch, members, join } => self.on_view(cfg, shard, epoch, members, join, io),
            Msg::ViewAck { shard, epoch } => {
                let Endpoint::Coordinator(from) = src else {
                    unreachable!("view acks come from coordinators")
                };
                self.on_view_ack(cfg, shard, epoch, from, io)
            }
            Msg::Propose { shard, evicted, replacement } => {
                self.on_propose(cfg, shard, evicted, replacement, io)
            }
            Msg::LoadReport { compaction_debt_pct } => {
                let Endpoint::Node(n) = src else { unreachable!("load reports come from nodes") };
                self.on_load_report(n, compaction_debt_pct);
            }
            Msg::Response { .. }
            | Msg::Replicate { .. }
            | Msg::ReadReq { .. }
            | Msg::CopyRequest { .. }
            | Msg::CopyData { .. }
            | Msg::LoadQuery
            | Msg::Ping
            | Msg::Leader(_) => unreachable!("the coordinator is never sent {msg:?}"),
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
        self.believe(cfg, n, detector::health_after_hearing_from());
        if independent(cfg) {
            self.silence_ticks[i] = 0;
        }
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
mod tests;
