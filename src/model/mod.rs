//! The timed world: storage nodes, a coordinator and clients, on links with latency ranges,
//! under a fault budget, as a `stateright::Model`.
//!
//! Time is discrete. A message sent on a link with one-way latency `[lo, hi]` ticks may be
//! delivered at any tick in that window and no later. Timers fire exactly when they expire.
//! `Tick` (time passes by one tick) is enabled only when nothing is overdue: no message at the
//! end of its window, no timer at zero. Between ticks every enabled delivery, firing and
//! environment action interleaves in every order.

mod canon;
mod client;
pub mod display;
mod env;
pub mod history;
pub mod intern;
pub mod leader;
mod leader_display;
pub mod properties;
#[cfg(test)]
mod quiet_tests;
pub mod reduction;
pub mod shared;
pub mod silence;
pub mod slack;
pub mod state;

pub use crate::protocol::coordinator::{CoordOp, Join, MembershipUpdate, ShardView, Timer};
pub use crate::protocol::{
    filled, CapacityBreach, CapacityUnit, Coordinator, Endpoint, Event, Msg, OpId, PerClient, PerNode,
    PerShard, Stored,
};
pub use reduction::Reduction;
pub use state::*;

use crate::policy::NodeId;
use crate::protocol::coordinator::{fleet_breach, RouterLoad};
use crate::protocol::{compaction, node, Outbox};
use arrayvec::ArrayVec;
use shared::Shared;
use stateright::{Model, Property};

/// The world is configured by a scenario resolved under one policy.
pub type WorldConfig = crate::config::Resolved;

/// The model checked: one scenario under one policy.
#[derive(Clone, Debug)]
pub struct World {
    pub cfg: WorldConfig,
    /// Pings whose arrival tick only their pong can observe are answered at once, the pong
    /// carrying the slack (`slack`; a reduction, on with `--reduce por` where it applies).
    pub arrival_slack: bool,
}

/// What can happen next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Deliver(Envelope),
    /// A request's ack deadline fires at the coordinator.
    AckDeadline {
        op: OpId,
        attempt: u8,
    },
    /// A request that waited behind the saturated coordinator's backlog is sent to replicas.
    FanOut {
        op: OpId,
        attempt: u8,
    },
    /// The coordinator finishes applying the membership update at the head of its queue.
    ApplyMembershipUpdate,
    /// The coordinator's heartbeat timer fires (independent failure detection).
    Heartbeat,
    /// The rebalancer's timer fires: it may move one shard.
    Rebalance,
    /// A shard's catch-up copy round ran out of time: the missing copies are asked again.
    CopyRetry(u8),
    ClientInvoke(u8),
    ClientTimeout(u8),
    ClientRetry(u8),
    Crash(NodeId),
    Restart(NodeId),
    /// The coordinator crashes and comes back at once with only what it persisted.
    CoordinatorRestart,
    Partition(u8),
    Heal(u8),
    Degrade(u8),
    Restore(u8),
    /// A lossy link loses a message.
    Lose(Envelope),
    /// Shard p's burst ends (`burst_ends = true`): the environment, not a fault.
    BurstEnds(u8),
    Tick,
    /// A timer of coordinator `coord` fires: every timer of a coordinator other than the
    /// leader, and the leader's timers that have no action of their own.
    PeerTimer {
        coord: u8,
        timer: Timer,
    },
    /// Rollout: coordinator `c` moves on to the next stage's policy.
    Upgrade(u8),
    /// Rollback: coordinator `c` goes back to the previous stage's policy.
    Rollback(u8),
    /// Leader family: a timer of the failover manager (coordinator 0) fires.
    ManagerTimer(crate::protocol::leader::ManagerTimer),
    /// Leader family: a timer of `node`'s replica fires.
    ReplicaTimer {
        node: NodeId,
        timer: crate::protocol::leader::ReplicaTimer,
    },
}

impl World {
    pub fn new(cfg: WorldConfig) -> World {
        World { cfg, arrival_slack: false }
    }

    /// The world explored with arrival slack where it applies (`slack::applies`).
    pub fn with_arrival_slack(cfg: WorldConfig) -> World {
        let arrival_slack = slack::applies(&cfg);
        World { cfg, arrival_slack }
    }

    /// The initial state with each client's key on the first of its partitions.
    pub fn initial_state(&self) -> WorldState {
        let cfg = &self.cfg;
        let node_count = cfg.nodes.len();
        let shard_count = cfg.shard_names.len();
        WorldState {
            nodes: Shared::new(
                cfg.nodes
                    .iter()
                    .map(|spec| NodeState {
                        up: true,
                        shards: filled(Stored::default(), shard_count),
                        debt_pct: spec.compaction_debt_pct,
                    })
                    .collect(),
            ),
            coord: Shared::new(Coordinator::new(cfg, 0)),
            peers: (1..cfg.coordinators.len() as u8).map(|c| Shared::new(Coordinator::new(cfg, c))).collect(),
            stages: match &cfg.rollout {
                Some(_) => filled(Stage::default(), cfg.coordinators.len()),
                None => Default::default(),
            },
            clients: cfg
                .clients
                .iter()
                .enumerate()
                .map(|(i, _)| ClientState {
                    partition: cfg.client_partitions[i][0],
                    next_op: 0,
                    phase: client::idle(cfg, i as u8),
                    retries_used: 0,
                })
                .collect(),
            net: Vec::new(),
            leader: leader::runs(cfg).then(|| Shared::new(leader::initial(cfg))),
            env: EnvState {
                faults_left: cfg.faults.budget,
                partitioned: 0,
                degraded: 0,
                bursts_ended: 0,
                ending: ArrayVec::new(),
            },
            ghost: Shared::new(Ghost {
                acked_version: filled(0, shard_count),
                history: std::sync::Arc::new(filled(history::History::default(), shard_count)),
                linearizable: true,
                effects: Vec::new(),
                duplicate_effect: false,
                faulted_since_heard: filled(0, node_count),
                fault_epoch: filled(0, node_count),
                healthy_evicted: None,
                churn_exceeded: false,
                change_ages: Vec::new(),
                capacity_breach: crate::protocol::coordinator::background_breach(cfg),
            }),
        }
    }

    /// Whether time may pass: nothing is due now.
    pub fn tick_enabled(&self, s: &WorldState) -> bool {
        let machines = if s.leader.is_some() {
            leader::no_timer_due(&self.cfg, s)
        } else {
            (0..self.cfg.coordinators.len() as u8)
                .all(|c| s.coordinator(c).no_timer_due(self.cfg.for_stage(s.stage(c))))
        };
        s.net.iter().all(|e| e.latest_ticks > 0)
            && s.env.ending.iter().all(|f| f.latest_ticks > 0)
            && machines
            && client::no_timer_due(s)
    }
}

/// A coordinator's due timers, as the world's actions (the leader's by name, the others'
/// as `PeerTimer`).
struct TimerActions<'a>(&'a mut Vec<Action>, u8);

impl Extend<Timer> for TimerActions<'_> {
    fn extend<I: IntoIterator<Item = Timer>>(&mut self, timers: I) {
        let coord = self.1;
        self.0.extend(timers.into_iter().map(|t| match t {
            _ if coord != 0 => Action::PeerTimer { coord, timer: t },
            Timer::AckDeadline { op, attempt } => Action::AckDeadline { op, attempt },
            Timer::FanOut { op, attempt } => Action::FanOut { op, attempt },
            Timer::ApplyMembershipUpdate => Action::ApplyMembershipUpdate,
            Timer::Heartbeat => Action::Heartbeat,
            Timer::Rebalance => Action::Rebalance,
            Timer::CopyRetry { shard } => Action::CopyRetry(shard),
            Timer::ViewResend { .. }
            | Timer::SilenceCrossed { .. }
            | Timer::DownOut { .. }
            | Timer::CopyBackoffOver { .. }
            | Timer::JoinTimeout { .. } => Action::PeerTimer { coord, timer: t },
        }));
    }
}

impl Action {
    /// The quorum coordinator timer this action fires, and whose (`TimerActions` the other way).
    pub fn coordinator_timer(&self) -> Option<(u8, Timer)> {
        Some(match *self {
            Action::AckDeadline { op, attempt } => (0, Timer::AckDeadline { op, attempt }),
            Action::FanOut { op, attempt } => (0, Timer::FanOut { op, attempt }),
            Action::ApplyMembershipUpdate => (0, Timer::ApplyMembershipUpdate),
            Action::Heartbeat => (0, Timer::Heartbeat),
            Action::Rebalance => (0, Timer::Rebalance),
            Action::CopyRetry(shard) => (0, Timer::CopyRetry { shard }),
            Action::PeerTimer { coord, timer } => (coord, timer),
            _ => return None,
        })
    }
}

/// A coordinator's timers whose window is open (they may fire now, or at any tick before
/// they must), as the world's actions.
struct ReadyActions<'a>(&'a mut Vec<Action>, u8);

impl Extend<(Timer, crate::protocol::coordinator::TimerTicks)> for ReadyActions<'_> {
    fn extend<I: IntoIterator<Item = (Timer, crate::protocol::coordinator::TimerTicks)>>(
        &mut self,
        timers: I,
    ) {
        let coord = self.1;
        self.0.extend(timers.into_iter().map(|(timer, _)| Action::PeerTimer { coord, timer }));
    }
}

/// A timer of coordinator `c` fires.
fn fire(cfg: &WorldConfig, s: &mut WorldState, c: u8, timer: Timer) {
    let mut out = Outbox::default();
    let stage_cfg = cfg.for_stage(s.stage(c));
    s.coordinator_mut(c).on_timer(stage_cfg, timer, &mut out);
    apply(cfg, s, Endpoint::Coordinator(c), out);
}

/// Quorum storage node `n` takes a message: its compaction debt, where debt is node state, and
/// the protocol's node.
fn node_step(cfg: &WorldConfig, n: NodeId, node: &mut NodeState, src: Endpoint, msg: Msg, out: &mut Outbox) {
    if cfg.compaction.dynamic() {
        compaction::on_node_msg(&cfg.compaction, &mut node.debt_pct, src, &msg, out);
    }
    node::on_msg(n, &mut node.shards, src, msg, out);
}

/// Put what a machine did into the world: its messages on the wire, its events into the ghost
/// variables the properties read.
fn apply(cfg: &WorldConfig, s: &mut WorldState, src: Endpoint, out: Outbox) {
    for (dst, msg) in out.sends {
        env::send(cfg, s, src, dst, msg);
    }
    for event in out.events {
        observe(cfg, s, src, event);
    }
}

fn observe(cfg: &WorldConfig, s: &mut WorldState, src: Endpoint, event: Event) {
    // The coordinator an event is from (node events have none).
    let by = match src {
        Endpoint::Coordinator(c) => c,
        _ => 0,
    };
    let reachable = |s: &WorldState, n: usize| {
        s.nodes[n].up && env::connected(s, cfg.nodes[n].zone, cfg.coordinators[usize::from(by)].zone)
    };
    let reachable_evicted = match event {
        Event::ChangeProposed(u) => reachable(s, usize::from(u.evicted)),
        _ => false,
    };
    // Each arm unshares the ghost only where it changes it: most events leave it shared.
    match event {
        Event::WriteAcked { shard, version } => {
            if version > s.ghost.acked_version[usize::from(shard)] {
                s.ghost_mut().acked_version[usize::from(shard)] = version;
            }
        }
        Event::ChangeProposed(update) => {
            // Slow is not failed. Deciding to evict a node that is up, reachable from the
            // deciding coordinator and has had no fault since that coordinator last heard
            // from it is evicting a healthy replica.
            let n = usize::from(update.evicted);
            let healthy = reachable_evicted && s.ghost.faulted_since_heard[n] & (1 << by) == 0;
            if healthy && s.ghost.healthy_evicted.is_none() {
                s.ghost_mut().healthy_evicted = Some(update.evicted);
            }
        }
        Event::ChangeRequested(_) => {
            // A rebalancing move takes a healthy replica out on purpose: it is no eviction,
            // but it is churn. The churn budget counts every change the coordinator takes on.
            if let Some((max, _)) = cfg.coordinator.churn_budget {
                let g = s.ghost_mut();
                g.change_ages.push(0);
                if g.change_ages.len() > usize::from(max) {
                    g.churn_exceeded = true;
                }
            }
        }
        // The coordinator is saturated: the update is lost.
        Event::ChangeRejected(_) => {
            if !s.ghost.churn_exceeded {
                s.ghost_mut().churn_exceeded = true;
            }
        }
        // What only a trace or the store's counters need.
        Event::RequestFailed { .. }
        | Event::ReadRepairStarted { .. }
        | Event::ChangeStarted(_)
        | Event::ChangeCompleted(_)
        | Event::ChangeAbandoned(_)
        | Event::ChangeLearned(_)
        | Event::EvictionSuppressed { .. }
        | Event::DeclaredDead { .. } => {}
        Event::Leader(_) => unreachable!("leader-family events go to `leader::apply`"),
        // The first breach is the one reported.
        Event::CapacityBreached(breach) => {
            if s.ghost.capacity_breach.is_none() {
                s.ghost_mut().capacity_breach = Some(breach);
            }
        }
        Event::WriteApplied { op, version } => {
            // A read's write-back (read repair) stores a value it read: no effect of its own.
            if cfg.clients[usize::from(op.client)].op_kind(op.seq) == crate::config::OpKind::Read {
                return;
            }
            // A write operation whose effect is stored at two versions was applied twice.
            // Every replica after the first applies the same effect: that changes nothing.
            match s.ghost.effects.iter().find(|(o, _)| *o == op) {
                Some(&(_, first)) => {
                    if first != version && !s.ghost.duplicate_effect {
                        s.ghost_mut().duplicate_effect = true;
                    }
                }
                None => {
                    let g = s.ghost_mut();
                    g.effects.push((op, version));
                    g.effects.sort();
                }
            }
        }
    }
}

/// Several coordinators: a backend or partition takes the writes of all of them, while each
/// counts only its own (and its `CapacityBreached` events say what it saw). The ghost adds them
/// up: the breach that no single coordinator sees is a breach too.
fn fleet_capacity(cfg: &WorldConfig, s: &mut WorldState) {
    if s.ghost.capacity_breach.is_some() {
        return;
    }
    let fleet: ArrayVec<RouterLoad<'_>, { crate::config::COORDINATOR_COUNT_MAX }> =
        s.coordinators().map(|c| (&c.partition_load[..], &c.backend_load[..])).collect();
    // Every router sees the same background (a burst's end reaches them all).
    let breach = fleet_breach(cfg, &s.coord.background, &fleet);
    drop(fleet);
    if breach.is_some() {
        s.ghost_mut().capacity_breach = breach;
    }
}

/// Coordinator `c` heard from node `n`: a fault before the send no longer counts against it
/// there.
fn ghost_heard_from(g: &mut Shared<Ghost>, c: u8, n: NodeId, sender_epoch: u8) {
    let i = usize::from(n);
    if sender_epoch == g.fault_epoch[i] && g.faulted_since_heard[i] & (1 << c) != 0 {
        Shared::make_mut(g).faulted_since_heard[i] &= !(1 << c);
    }
}

/// Changes older than the churn window no longer count.
fn ghost_tick(cfg: &WorldConfig, g: &mut Shared<Ghost>) {
    if let Some((_, window)) = cfg.coordinator.churn_budget.filter(|_| !g.change_ages.is_empty()) {
        let g = Shared::make_mut(g);
        for age in &mut g.change_ages {
            *age += 1;
        }
        g.change_ages.retain(|a| u32::from(*a) < window);
    }
}

impl Model for World {
    type State = WorldState;
    type Action = Action;

    /// One initial state per choice of partitions (`key_hash = "any"`); one in most models.
    fn init_states(&self) -> Vec<WorldState> {
        let mut states = vec![self.initial_state()];
        for (c, choices) in self.cfg.client_partitions.iter().enumerate() {
            states = states
                .iter()
                .flat_map(|s| {
                    choices.iter().map(move |&p| {
                        let mut s = s.clone();
                        s.clients[c].partition = p;
                        s
                    })
                })
                .collect();
        }
        states
    }

    fn actions(&self, s: &WorldState, actions: &mut Vec<Action>) {
        // Deliveries, in the network's sorted order (duplicates offered once).
        let mut last: Option<&Envelope> = None;
        for e in &s.net {
            if e.earliest_ticks == 0 && last != Some(e) {
                actions.push(Action::Deliver(*e));
            }
            last = Some(e);
        }
        if s.leader.is_some() {
            leader::timer_actions(&self.cfg, s, actions);
        } else {
            for c in 0..self.cfg.coordinators.len() as u8 {
                s.coordinator(c).due(self.cfg.for_stage(s.stage(c)), &mut TimerActions(actions, c));
                s.coordinator(c).ready(&mut ReadyActions(actions, c));
            }
        }
        client::actions(&self.cfg, s, actions);
        env::fault_actions(&self.cfg, s, actions);
        env::rollout_actions(&self.cfg, s, actions);
        if self.tick_enabled(s) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &WorldState, action: Action) -> Option<WorldState> {
        let cfg = &self.cfg;
        let mut s = last.clone();
        match action {
            Action::Deliver(e) => {
                let i = s.net.iter().position(|x| *x == e)?;
                s.net.remove(i);
                if !env::deliverable(cfg, &s, &e) {
                    // Sent across a cut that formed later, or to a node that is down: lost.
                    return Some(s);
                }
                match e.dst {
                    Endpoint::Node(n) if s.leader.is_some() => {
                        leader::deliver_to_node(cfg, &mut s, n, e.src, e.msg)
                    }
                    Endpoint::Coordinator(_) if s.leader.is_some() => {
                        leader::deliver_to_manager(cfg, &mut s, e.src, e.msg)
                    }
                    Endpoint::Node(n) => {
                        let mut out = Outbox::default();
                        let nodes = Shared::make_mut(&mut s.nodes);
                        node_step(cfg, n, &mut nodes[usize::from(n)], e.src, e.msg, &mut out);
                        apply(cfg, &mut s, Endpoint::Node(n), out);
                    }
                    Endpoint::Coordinator(c) => {
                        if let Endpoint::Node(n) = e.src {
                            ghost_heard_from(&mut s.ghost, c, n, e.sender_epoch);
                        }
                        let mut out = Outbox::default();
                        let stage_cfg = cfg.for_stage(s.stage(c));
                        s.coordinator_mut(c).on_msg(stage_cfg, e.src, e.msg, &mut out);
                        apply(cfg, &mut s, Endpoint::Coordinator(c), out);
                    }
                    Endpoint::Client(c) => client::on_msg(cfg, &mut s, c, e.msg),
                }
            }
            _ if let Some((coord, timer)) = action.coordinator_timer() => fire(cfg, &mut s, coord, timer),
            Action::ManagerTimer(_) | Action::ReplicaTimer { .. } => leader::fire(cfg, &mut s, &action),
            Action::Upgrade(c) | Action::Rollback(c) => env::change_stage(cfg, &mut s, &action, c),
            Action::ClientInvoke(c) => client::on_invoke(cfg, &mut s, c),
            Action::ClientTimeout(c) => client::on_timeout(cfg, &mut s, c),
            Action::ClientRetry(c) => client::on_retry(cfg, &mut s, c),
            Action::Tick if s.leader.is_some() => {
                env::tick(&mut s);
                leader::tick(cfg, &mut s);
                client::tick(&mut s);
            }
            Action::Tick => {
                env::tick(&mut s);
                if self.arrival_slack {
                    slack::answer_early(cfg, &mut s);
                }
                env::compact(cfg, &mut s);
                for c in 0..cfg.coordinators.len() as u8 {
                    let stage_cfg = cfg.for_stage(s.stage(c));
                    // Most ticks of a quiet coordinator (no timer running, its counters
                    // saturated) change nothing.
                    Shared::update(s.coordinator_part(c), |coord| coord.tick(stage_cfg));
                }
                ghost_tick(cfg, &mut s.ghost);
                client::tick(&mut s);
            }
            Action::Lose(e) => {
                let i = s.net.iter().position(|x| *x == e)?;
                s.net.remove(i);
                s.env.faults_left -= 1;
            }
            fault if s.leader.is_some() => leader::fault(cfg, &mut s, fault),
            fault => slack::on_latency_change(cfg, &mut s, |s| env::apply_fault(cfg, s, fault)),
        }
        if cfg.coordinators.len() > 1 {
            fleet_capacity(cfg, &mut s);
        }
        s.net.sort();
        canon::canonicalize(cfg, &mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::for_world(&self.cfg.properties)
    }

    fn format_action(&self, action: &Action) -> String {
        display::action(&self.cfg, action)
    }

    fn format_step(&self, last: &WorldState, action: Action) -> Option<String> {
        self.next_state(last, action).map(|s| display::state(&self.cfg, &s))
    }

    fn as_svg(&self, path: stateright::Path<WorldState, Action>) -> Option<String> {
        Some(display::svg(&self.cfg, path))
    }
}
