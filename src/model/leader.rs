//! The leader family in the timed world: a replica machine per storage node and the failover
//! manager as coordinator 0 (`protocol::leader`), on the same links, clients and fault budget
//! as the quorum family's machines.
//!
//! The world only drives the machines: it delivers their messages, fires the timers they list
//! as due, lets time pass when none is, and applies faults. A crashed replica keeps what its
//! machine said must survive ([`Replica::durable`], and its data, which lives in the node's
//! `shards` as for the quorum family); a restart is [`Replica::restart`]. A crash of the
//! coordinator (`crash = ["coordinator"]`) restarts the manager at once from
//! [`Manager::durable`]. Everything else here is ghost bookkeeping for the properties
//! (`acked_writes_persist`, `single_primary`) and the renaming of epochs that keeps the state
//! space finite across promotions.

use super::shared::Shared;
use super::{env, Action, Endpoint, Event, Msg, PerNode, PerShard, WorldConfig, WorldState};
use crate::policy::NodeId;
use crate::protocol::leader::{
    LeaderEvent, Manager, ManagerTimer, Pos, Replica, ReplicaDurable, ReplicaTimer, Role,
};
use crate::protocol::{filled, ModelData, Outbox};

/// A place in a shard's log, in the model's types.
pub type Position = Pos<ModelData>;

/// A storage node's replica machine: running, or crashed with what it persisted. (Most nodes
/// are up in most states, and the actors are cloned as one `Arc`: a box would cost an
/// allocation per running replica per step to save bytes on the few that are down.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaderNode {
    Up(Replica),
    Down(ReplicaDurable),
}

impl LeaderNode {
    /// The newest entry it holds of `shard` (durable: a crashed replica still holds it), and
    /// the epoch it knows; `None` where it is not a replica of `shard`.
    pub fn shard(&self, shard: u8) -> Option<(Position, u8)> {
        let i = usize::from(shard);
        match self {
            LeaderNode::Up(r) => r.shards[i].as_ref().map(|s| (s.last, s.epoch)),
            LeaderNode::Down(d) => d.shards[i].as_ref().map(|s| (s.last, s.epoch)),
        }
    }

    /// Its role in `shard` in the epoch it knows (durable).
    pub fn role(&self, shard: u8) -> Option<Role> {
        let i = usize::from(shard);
        match self {
            LeaderNode::Up(r) => r.shards[i].as_ref().map(|s| s.role),
            LeaderNode::Down(d) => d.shards[i].as_ref().map(|s| s.role),
        }
    }
}

/// A breach of `single_primary`, as first seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SplitBrain {
    /// `first` and `second` both took writes of `shard` as primaries of `epoch`.
    TwoPrimaries { shard: u8, epoch: u8, first: NodeId, second: NodeId },
    /// A write stored by `node` as primary of `epoch` was acknowledged after a write of the
    /// newer epoch `newer` was: a deposed primary's write reached a client.
    DeposedAck { shard: u8, node: NodeId, epoch: u8, newer: u8 },
}

/// Ghost variables of the leader family: bookkeeping for the properties, never read by the
/// machines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderGhost {
    /// Per shard, the newest position (epoch first) at which a write was acknowledged.
    pub acked: PerShard<Option<Position>>,
    /// Per shard, the newest epoch a write was acknowledged in.
    pub acked_epoch_max: PerShard<Option<u8>>,
    /// Per shard, (epoch, node) for each replica that took a write as primary of that epoch,
    /// sorted; an epoch older than every replica's own is forgotten (nobody can take a write
    /// in it any more).
    pub writers: PerShard<Vec<(u8, NodeId)>>,
    pub split_brain: Option<SplitBrain>,
}

/// The leader family's actors and ghost variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderActors {
    /// The failover manager and router (coordinator 0).
    pub manager: Manager,
    /// Per node, its replica machine.
    pub replicas: PerNode<LeaderNode>,
    pub ghost: LeaderGhost,
}

/// Whether the world runs the leader family.
pub fn runs(cfg: &WorldConfig) -> bool {
    cfg.policy.leader.is_some()
}

/// The machines as the configuration starts them: each shard's first replica its primary in
/// epoch 0, every replica in sync.
pub fn initial(cfg: &WorldConfig) -> LeaderActors {
    let shard_count = cfg.shard_names.len();
    LeaderActors {
        manager: Manager::new(cfg),
        replicas: (0..cfg.nodes.len() as NodeId).map(|n| LeaderNode::Up(Replica::new(cfg, n))).collect(),
        ghost: LeaderGhost {
            acked: filled(None, shard_count),
            acked_epoch_max: filled(None, shard_count),
            writers: filled(Vec::new(), shard_count),
            split_brain: None,
        },
    }
}

fn actors(s: &WorldState) -> &LeaderActors {
    s.leader.as_deref().expect("a leader-family world")
}

fn actors_mut(s: &mut WorldState) -> &mut LeaderActors {
    Shared::make_mut(s.leader.as_mut().expect("a leader-family world"))
}

/// The leader family's state in `s`, if the world runs it.
pub fn of(s: &WorldState) -> Option<&LeaderActors> {
    s.leader.as_deref()
}

/// Whether no machine has a timer due (the network, faults and clients are the world's).
pub fn no_timer_due(cfg: &WorldConfig, s: &WorldState) -> bool {
    let l = actors(s);
    l.manager.no_timer_due(cfg)
        && l.replicas.iter().all(|r| match r {
            LeaderNode::Up(r) => r.no_timer_due(),
            LeaderNode::Down(_) => true,
        })
}

/// The machines' due timers, as the world's actions.
pub fn timer_actions(cfg: &WorldConfig, s: &WorldState, actions: &mut Vec<Action>) {
    let l = actors(s);
    let mut manager: Vec<ManagerTimer> = Vec::new();
    l.manager.due(cfg, &mut manager);
    actions.extend(manager.into_iter().map(Action::ManagerTimer));
    for (n, r) in l.replicas.iter().enumerate() {
        if let LeaderNode::Up(r) = r {
            let mut due: Vec<ReplicaTimer> = Vec::new();
            r.due(&mut due);
            actions.extend(due.into_iter().map(|timer| Action::ReplicaTimer { node: n as NodeId, timer }));
        }
    }
}

/// A message reaches node `n` (up and reachable: the world checked).
pub fn deliver_to_node(cfg: &WorldConfig, s: &mut WorldState, n: NodeId, src: Endpoint, msg: Msg) {
    let i = usize::from(n);
    let mut out = Outbox::default();
    {
        let nodes = Shared::make_mut(&mut s.nodes);
        let l = Shared::make_mut(s.leader.as_mut().expect("a leader-family world"));
        let LeaderNode::Up(r) = &mut l.replicas[i] else { unreachable!("a down node is delivered nothing") };
        r.on_msg(cfg, &mut nodes[i].shards[..], src, msg, &mut out);
    }
    apply(cfg, s, Endpoint::Node(n), out);
}

/// A message reaches the manager.
pub fn deliver_to_manager(cfg: &WorldConfig, s: &mut WorldState, src: Endpoint, msg: Msg) {
    let mut out = Outbox::default();
    actors_mut(s).manager.on_msg(cfg, src, msg, &mut out);
    apply(cfg, s, Endpoint::LEADER, out);
}

/// A machine's timer fires.
pub fn fire(cfg: &WorldConfig, s: &mut WorldState, action: &Action) {
    let mut out = Outbox::default();
    let src = match *action {
        Action::ManagerTimer(timer) => {
            actors_mut(s).manager.on_timer(cfg, timer, &mut out);
            Endpoint::LEADER
        }
        Action::ReplicaTimer { node, timer } => {
            let i = usize::from(node);
            let nodes = &s.nodes;
            let l = Shared::make_mut(s.leader.as_mut().expect("a leader-family world"));
            let LeaderNode::Up(r) = &mut l.replicas[i] else { unreachable!("a down node has no timer due") };
            r.on_timer(cfg, &nodes[i].shards[..], timer, &mut out);
            Endpoint::Node(node)
        }
        ref other => unreachable!("not a leader-family timer: {other:?}"),
    };
    apply(cfg, s, src, out);
}

/// One tick passes for the machines (the world ticks the network, faults and clients).
pub fn tick(cfg: &WorldConfig, s: &mut WorldState) {
    let l = actors_mut(s);
    l.manager.tick(cfg);
    for r in l.replicas.iter_mut() {
        if let LeaderNode::Up(r) = r {
            r.tick();
        }
    }
}

/// A crash, restart or coordinator crash: the world's part (budget, `up`, fault epochs) as for
/// the quorum family, then the machine's.
pub fn fault(cfg: &WorldConfig, s: &mut WorldState, action: Action) {
    match action {
        Action::Crash(n) => {
            env::apply_fault(cfg, s, action);
            let r = &mut actors_mut(s).replicas[usize::from(n)];
            let LeaderNode::Up(replica) = r else { unreachable!("only a node that is up crashes") };
            *r = LeaderNode::Down(replica.durable());
        }
        Action::Restart(n) => {
            env::apply_fault(cfg, s, action);
            let i = usize::from(n);
            let mut out = Outbox::default();
            {
                let nodes = &s.nodes;
                let l = Shared::make_mut(s.leader.as_mut().expect("a leader-family world"));
                let LeaderNode::Down(durable) = &l.replicas[i] else {
                    unreachable!("only a down node restarts")
                };
                let replica = Replica::restart(cfg, n, durable, &nodes[i].shards[..], &mut out);
                l.replicas[i] = LeaderNode::Up(replica);
            }
            apply(cfg, s, Endpoint::Node(n), out);
        }
        Action::CoordinatorRestart => {
            s.env.faults_left -= 1;
            let l = actors_mut(s);
            l.manager = Manager::recover(cfg, &l.manager.durable());
        }
        other => env::apply_fault(cfg, s, other),
    }
}

/// Put what a machine did into the world: its messages on the wire, its events into the
/// ghost variables.
fn apply(cfg: &WorldConfig, s: &mut WorldState, src: Endpoint, out: Outbox) {
    for (dst, msg) in out.sends {
        env::send(cfg, s, src, dst, msg);
    }
    for event in out.events {
        match event {
            Event::Leader(e) => observe(&mut actors_mut(s).ghost, e),
            // The detector's verdicts are the trace's business; the properties read the
            // promotions they lead to.
            Event::DeclaredDead { .. } => {}
            other => unreachable!("the leader family's machines never report {other:?}"),
        }
    }
}

fn observe(g: &mut LeaderGhost, e: LeaderEvent) {
    match e {
        LeaderEvent::WriteAccepted { shard, node, epoch, .. } => {
            let writers = &mut g.writers[usize::from(shard)];
            if let Some(&(_, first)) = writers.iter().find(|&&(e, n)| e == epoch && n != node) {
                let breach = SplitBrain::TwoPrimaries { shard, epoch, first, second: node };
                g.split_brain.get_or_insert(breach);
            }
            if let Err(at) = writers.binary_search(&(epoch, node)) {
                writers.insert(at, (epoch, node));
            }
        }
        LeaderEvent::WriteAcked { shard, node, epoch, version } => {
            let i = usize::from(shard);
            if let Some(newer) = g.acked_epoch_max[i].filter(|&newer| newer > epoch) {
                g.split_brain.get_or_insert(SplitBrain::DeposedAck { shard, node, epoch, newer });
            }
            g.acked_epoch_max[i] = g.acked_epoch_max[i].max(Some(epoch));
            g.acked[i] = g.acked[i].max(Some(Position { epoch, version }));
        }
        LeaderEvent::Promoted { .. }
        | LeaderEvent::StaleRefused { .. }
        | LeaderEvent::FailoverStarted { .. }
        | LeaderEvent::FailoverCalledOff { .. }
        | LeaderEvent::FailoverBlocked { .. }
        | LeaderEvent::InSyncChanged { .. }
        | LeaderEvent::RequestFailed { .. } => {}
    }
}

/// `acked_writes_persist` for the leader family: per shard, once the replica the manager names
/// primary (reads and writes go there) has taken that role (it is primary in the manager's
/// epoch, running or crashed), its newest entry, which is durable, is the newest acknowledged
/// position or a later one (epoch first). Before it has taken the role it serves nothing, and
/// appends on their way may still reach it; once it has, it takes no older epoch's log, so a
/// write it lacks then is lost for good.
pub fn acked_writes_persist(s: &WorldState) -> bool {
    let l = actors(s);
    l.ghost.acked.iter().enumerate().all(|(shard, acked)| {
        acked.is_none_or(|acked| primary_in_role(l, shard as u8).is_none_or(|last| last >= acked))
    })
}

/// The newest entry the manager's primary of `shard` holds, if it has taken that role: it is
/// primary in the manager's epoch.
pub fn primary_in_role(l: &LeaderActors, shard: u8) -> Option<Position> {
    let view = &l.manager.shards[usize::from(shard)];
    let r = &l.replicas[usize::from(view.primary)];
    let (last, epoch) = r.shard(shard)?;
    (epoch == view.epoch && r.role(shard) == Some(Role::Primary)).then_some(last)
}

/// The newest entry the manager's primary of `shard` holds.
pub fn primary_last(l: &LeaderActors, shard: u8) -> Option<Position> {
    let primary = l.manager.shards[usize::from(shard)].primary;
    l.replicas[usize::from(primary)].shard(shard).map(|(last, _)| last)
}

/// `single_primary`: no two replicas took writes of a shard as primaries of one epoch, and no
/// write stored in an epoch was acknowledged after a write of a newer epoch was.
pub fn single_primary(s: &WorldState) -> bool {
    actors(s).ghost.split_brain.is_none()
}

/// Whether a step changed who is primary of a shard (a promotion, which always names another
/// replica): `converges` forbids a cycle of them in which time passes. (The epoch is no sign
/// of one: renaming lowers it when an older epoch leaves the state.)
pub fn primary_changed(from: &WorldState, to: &WorldState) -> bool {
    let (a, b) = (actors(from), actors(to));
    a.manager.shards.iter().zip(&b.manager.shards).any(|(x, y)| x.primary != y.primary)
}

/// Rename every epoch of the state (machines, messages, ghost) to its rank among them, 0
/// kept: promotions that come back to the same roles revisit the same state (see
/// `protocol::leader`'s `epochs` for why the renaming is sound). Ghost writers of an epoch
/// no replica is in any more are forgotten first. Whether anything changed (the network must
/// then be sorted again).
pub fn canonicalize(s: &mut WorldState) -> bool {
    let l = actors(s);
    // The manager's epoch is the newest of its shard: all zero, nothing to rename.
    if l.manager.shards.iter().all(|r| r.epoch == 0) {
        return false;
    }
    let stale_writers = l.ghost.writers.iter().enumerate().any(|(shard, w)| {
        let oldest = oldest_replica_epoch(l, shard as u8);
        w.iter().any(|&(e, _)| e < oldest)
    });
    if stale_writers {
        let l = actors_mut(s);
        for shard in 0..l.ghost.writers.len() {
            let oldest = oldest_replica_epoch(l, shard as u8);
            l.ghost.writers[shard].retain(|&(e, _)| e >= oldest);
        }
    }
    let mut epochs = vec![0u8];
    let mut probe = (**s.leader.as_ref().expect("a leader-family world")).clone();
    let mut net: Vec<Msg> = s.net.iter().map(|e| e.msg).collect();
    for_each_epoch(&mut probe, &mut net, &mut |e| epochs.push(*e));
    epochs.sort_unstable();
    epochs.dedup();
    if epochs.iter().enumerate().all(|(i, &e)| usize::from(e) == i) {
        return false;
    }
    let rank = |e: u8| epochs.binary_search(&e).expect("collected above") as u8;
    let l = actors_mut(s);
    let mut net: Vec<Msg> = Vec::new();
    for_each_epoch(l, &mut net, &mut |e| *e = rank(*e));
    for env in &mut s.net {
        if let Msg::Leader(m) = &mut env.msg {
            m.for_each_epoch(&mut |e| *e = rank(*e));
        }
    }
    true
}

/// The oldest epoch a replica of `shard` is in.
fn oldest_replica_epoch(l: &LeaderActors, shard: u8) -> u8 {
    l.replicas.iter().filter_map(|r| r.shard(shard).map(|(_, epoch)| epoch)).min().unwrap_or(0)
}

/// Call `f` on every epoch of the machines, the ghost and the messages `net`.
fn for_each_epoch(l: &mut LeaderActors, net: &mut [Msg], f: &mut impl FnMut(&mut u8)) {
    l.manager.for_each_epoch(f);
    for r in l.replicas.iter_mut() {
        match r {
            LeaderNode::Up(r) => r.for_each_epoch(f),
            LeaderNode::Down(d) => d.for_each_epoch(f),
        }
    }
    let g = &mut l.ghost;
    for p in g.acked.iter_mut().flatten() {
        f(&mut p.epoch);
    }
    for e in g.acked_epoch_max.iter_mut().flatten() {
        f(e);
    }
    for (e, _) in g.writers.iter_mut().flatten() {
        f(e);
    }
    match &mut g.split_brain {
        Some(SplitBrain::TwoPrimaries { epoch, .. }) => f(epoch),
        Some(SplitBrain::DeposedAck { epoch, newer, .. }) => {
            f(epoch);
            f(newer);
        }
        None => {}
    }
    for m in net {
        if let Msg::Leader(m) = m {
            m.for_each_epoch(f);
        }
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
