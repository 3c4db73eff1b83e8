//! The coordinator: sequences writes, gathers quorums before the ack deadline, detects failed
//! replicas, evicts them through a bounded membership-update queue, and catches replacements up.
//! As the request router it also admits writes against partition capacity and places them on
//! ingest backends.

use super::env::{connected, send};
use super::{
    Action, CapacityBreach, CapacityUnit, CoordOp, Endpoint, Envelope, Join, MembershipUpdate, Msg, OpId,
    Stored, WorldConfig, WorldState,
};
use crate::config::OpKind;
use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, Candidate, ClusterView, EvictionDecision};
use crate::policy::rebalancer::{self, NodeLoad, ShardLoad};
use crate::policy::routing::{self, BackendLoad};
use crate::policy::{quorum, retry, NodeId};

fn bit(n: NodeId) -> u8 {
    1 << n
}

fn independent(cfg: &WorldConfig) -> bool {
    cfg.policy.failure_detection == FailureDetection::Independent
}

pub fn no_timer_due(cfg: &WorldConfig, s: &WorldState) -> bool {
    let c = &s.coord;
    c.ops.iter().all(|o| o.deadline_ticks > 0)
        && (c.queue.is_empty() || c.queue_ticks > 0)
        && (!independent(cfg) || c.heartbeat_ticks > 0)
        && (cfg.policy.rebalance.is_none() || c.rebalance_ticks > 0)
}

pub fn timer_actions(cfg: &WorldConfig, s: &WorldState, actions: &mut Vec<Action>) {
    let c = &s.coord;
    for o in &c.ops {
        if o.deadline_ticks == 0 {
            actions.push(Action::AckDeadline { op: o.op, attempt: o.attempt });
        }
    }
    if !c.queue.is_empty() && c.queue_ticks == 0 {
        actions.push(Action::ApplyMembershipUpdate);
    }
    if independent(cfg) && c.heartbeat_ticks == 0 {
        actions.push(Action::Heartbeat);
    }
    if cfg.policy.rebalance.is_some() && c.rebalance_ticks == 0 {
        actions.push(Action::Rebalance);
    }
}

pub fn tick(cfg: &WorldConfig, s: &mut WorldState) {
    let c = &mut s.coord;
    for o in &mut c.ops {
        o.deadline_ticks -= 1;
    }
    if !c.queue.is_empty() {
        c.queue_ticks -= 1;
    }
    if independent(cfg) {
        c.heartbeat_ticks -= 1;
        // Saturate at `dead_after`: longer silence says nothing more.
        let cap = cfg.policy.dead_after_ticks as u8;
        for t in &mut c.silence_ticks {
            *t = (*t + 1).min(cap);
        }
    }
    if cfg.policy.rebalance.is_some() {
        c.rebalance_ticks -= 1;
    }
    // Capacities are per tick.
    c.partition_load.iter_mut().for_each(|l| *l = 0);
    c.backend_load.iter_mut().for_each(|l| *l = 0);
    for v in &mut c.shards {
        v.cooldown_ticks = v.cooldown_ticks.saturating_sub(1);
    }
    // Ghost: changes older than the churn window no longer count.
    if let Some((_, window)) = cfg.coordinator.churn_budget {
        for age in &mut s.ghost.change_ages {
            *age += 1;
        }
        s.ghost.change_ages.retain(|a| u32::from(*a) < window);
    }
}

/// Disk use (outside data plus the shards a node holds or is receiving), compaction debt and
/// slowness of every node, as the coordinator knows them.
pub fn node_loads(cfg: &WorldConfig, s: &WorldState) -> Vec<NodeLoad> {
    let holds = |s: &WorldState, shard: usize, n: NodeId| {
        let v = &s.coord.shards[shard];
        v.members.contains(&n) || v.join.as_ref().is_some_and(|j| j.replacement == n)
    };
    (0..cfg.nodes.len() as NodeId)
        .map(|n| {
            let spec = &cfg.nodes[usize::from(n)];
            let held = (0..cfg.shards.len()).filter(|&k| holds(s, k, n));
            let disk_pct = u16::from(spec.disk_used_pct)
                + held.clone().map(|k| u16::from(cfg.shards[k].size_pct)).sum::<u16>();
            let hosts_hot = held.clone().any(|k| cfg.shards[k].hot);
            NodeLoad {
                node: n,
                disk_pct,
                compaction_debt_pct: spec.compaction_debt_pct,
                slow: rebalancer::is_slow(hosts_hot, spec.compaction_debt_pct, cfg.slow_compaction_debt_pct),
            }
        })
        .collect()
}

/// The rebalancer: sees disk use, compaction debt and latency per node as the coordinator
/// knows them, asks the policy for a move, and queues it as a membership change.
pub fn on_rebalance(cfg: &WorldConfig, s: &mut WorldState) {
    let r = cfg.policy.rebalance.as_ref().expect("the rebalancer runs only when enabled");
    s.coord.rebalance_ticks = r.interval_ticks as u8;
    let nodes = node_loads(cfg, s);
    let shards: Vec<ShardLoad> = (0..cfg.shards.len())
        .map(|k| {
            let v = &s.coord.shards[k];
            ShardLoad {
                shard: k as u8,
                holders: v.members.iter().copied().chain(v.join.as_ref().map(|j| j.replacement)).collect(),
                size_pct: cfg.shards[k].size_pct,
                hot: cfg.shards[k].hot,
                resting: v.cooldown_ticks > 0
                    || v.join.is_some()
                    || s.coord.queue.iter().any(|u| usize::from(u.shard) == k),
            }
        })
        .collect();
    let Some(m) = rebalancer::choose_move(&nodes, &shards, &r.policy) else { return };
    let v = &mut s.coord.shards[usize::from(m.shard)];
    let len = rebalancer::next_cooldown_ticks(
        u32::from(v.cooldown_len_ticks),
        r.move_cooldown_ticks,
        r.cooldown_backoff,
        r.cooldown_max_ticks,
    );
    v.cooldown_len_ticks = len as u8;
    v.cooldown_ticks = len as u8;
    enqueue(cfg, s, MembershipUpdate { shard: m.shard, evicted: m.from, replacement: m.to, is_move: true });
}

pub fn on_msg(cfg: &WorldConfig, s: &mut WorldState, e: &Envelope) {
    if let Endpoint::Node(n) = e.src {
        heard_from(cfg, s, n, e.sender_epoch);
    }
    match e.msg {
        Msg::Request { op, attempt, kind, shard, value } => {
            on_request(cfg, s, op, attempt, kind, shard, value)
        }
        Msg::ReplicateAck { op, attempt, .. } => {
            let Endpoint::Node(n) = e.src else { unreachable!() };
            on_answer(cfg, s, op, attempt, n, None);
        }
        Msg::ReadReply { op, attempt, version, value, .. } => {
            let Endpoint::Node(n) = e.src else { unreachable!() };
            on_answer(cfg, s, op, attempt, n, Some(Stored { version, value }));
        }
        Msg::CopyAck { shard, from, version } => on_copy_ack(cfg, s, shard, from, version),
        Msg::Pong => {}
        Msg::Response { .. }
        | Msg::Replicate { .. }
        | Msg::ReadReq { .. }
        | Msg::CopyRequest { .. }
        | Msg::CopyData { .. }
        | Msg::Ping => unreachable!("the coordinator is never sent {:?}", e.msg),
    }
}

/// Any message is proof of life.
fn heard_from(cfg: &WorldConfig, s: &mut WorldState, n: NodeId, sender_epoch: u8) {
    let i = usize::from(n);
    s.coord.health[i] = detector::health_after_hearing_from();
    if independent(cfg) {
        s.coord.silence_ticks[i] = 0;
    }
    if sender_epoch == s.ghost.fault_epoch[i] {
        s.ghost.faulted_since_heard[i] = false;
    }
}

/// A breach by background load alone (a burst above a partition's capacity, a backend already
/// over its capacity): it holds in every tick, the first included.
pub fn background_breach(cfg: &WorldConfig) -> Option<CapacityBreach> {
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

/// The backends as the load balancer sees them now, in preference order (the scenario's).
pub fn backend_loads(cfg: &WorldConfig, s: &WorldState) -> Vec<BackendLoad> {
    cfg.nodes
        .iter()
        .enumerate()
        .map(|(n, spec)| BackendLoad {
            node: n as NodeId,
            up: s.coord.health[n] != Health::Dead,
            capacity_per_tick: spec.write_capacity_per_tick,
            load_per_tick: spec.base_load_per_tick + u16::from(s.coord.backend_load[n]),
        })
        .collect()
}

/// Count one write offered to a partition or backend, and note a breach.
fn offer(s: &mut WorldState, unit: CapacityUnit, offered_before: u16, capacity: Option<u16>) {
    let offered = offered_before + 1;
    match unit {
        CapacityUnit::Partition(p) => {
            let l = &mut s.coord.partition_load[usize::from(p)];
            *l = l.saturating_add(1);
        }
        CapacityUnit::Backend(n) => {
            let l = &mut s.coord.backend_load[usize::from(n)];
            *l = l.saturating_add(1);
        }
    }
    if let Some(cap) = capacity.filter(|&cap| offered > cap) {
        s.ghost.capacity_breach.get_or_insert(CapacityBreach { unit, offered, capacity: cap });
    }
}

/// Route a write (`routing::route_write`) and count the load it offered. `false`: throttled
/// or shed, the client gets an error.
fn admit_write(cfg: &WorldConfig, s: &mut WorldState, partition: u8) -> bool {
    let p = usize::from(partition);
    let before = cfg.partition_background[p] + u16::from(s.coord.partition_load[p]);
    let loads = cfg.backends_modelled.then(|| backend_loads(cfg, s));
    let route =
        routing::route_write(&cfg.policy.routing, before, cfg.partition_capacity_per_tick, loads.as_deref());
    if cfg.partition_capacity_per_tick.is_some() {
        offer(s, CapacityUnit::Partition(partition), before, cfg.partition_capacity_per_tick);
    }
    if let (Some(b), Some(loads)) = (route.backend_offered(), &loads) {
        let l = loads[usize::from(b)];
        offer(s, CapacityUnit::Backend(b), l.load_per_tick, l.capacity_per_tick);
    }
    route.admitted()
}

fn on_request(
    cfg: &WorldConfig,
    s: &mut WorldState,
    op: OpId,
    attempt: u8,
    kind: OpKind,
    shard: u8,
    value: u8,
) {
    if kind == OpKind::Write && !admit_write(cfg, s, shard) {
        let msg = Msg::Response { op, attempt, ok: false, value: 0 };
        send(cfg, s, Endpoint::Coordinator, Endpoint::Client(op.client), msg);
        return;
    }
    let p = &cfg.policy;
    let view = &s.coord.shards[usize::from(shard)];
    let asked = view.members.iter().fold(0u8, |m, &n| m | bit(n));
    let learner = view.join.as_ref().map(|j| j.replacement);
    let mut version = 0;
    if kind == OpKind::Write {
        let known = s.coord.tokens.iter().find(|(o, _)| *o == op).map(|(_, v)| *v);
        let next = view.next_version;
        version = retry::version_for_attempt(p.retry.idempotency_tokens, known, next);
        if version == next {
            s.coord.shards[usize::from(shard)].next_version += 1;
            if p.retry.idempotency_tokens {
                s.coord.tokens.push((op, version));
                s.coord.tokens.sort();
            }
        }
    }
    let members = s.coord.shards[usize::from(shard)].members.clone();
    for n in members.into_iter().chain(learner) {
        let msg = match kind {
            OpKind::Write => Msg::Replicate { op, attempt, shard, version, value },
            OpKind::Read => Msg::ReadReq { op, attempt, shard },
        };
        // Reads go to members only; writes also reach a joining replica so it misses nothing.
        if kind == OpKind::Read && Some(n) == learner {
            continue;
        }
        send(cfg, s, Endpoint::Coordinator, Endpoint::Node(n), msg);
    }
    s.coord.ops.push(CoordOp {
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
        deadline_ticks: p.replica_ack_timeout_ticks as u8,
    });
}

fn on_answer(cfg: &WorldConfig, s: &mut WorldState, op: OpId, attempt: u8, n: NodeId, read: Option<Stored>) {
    // An answer after the deadline finds no request: it only proved the node alive.
    let Some(i) = s.coord.ops.iter().position(|o| o.op == op && o.attempt == attempt) else {
        return;
    };
    let o = &mut s.coord.ops[i];
    if o.asked & bit(n) == 0 {
        return;
    }
    o.answered |= bit(n);
    if let Some(r) = read {
        if r.version > o.best.version || o.answered.count_ones() == 1 {
            o.best = r;
        }
    }
    let needed = match o.kind {
        OpKind::Write => cfg.policy.write_quorum,
        OpKind::Read => cfg.policy.read_quorum,
    };
    if !o.responded && quorum::quorum_reached(o.answered.count_ones() as usize, needed) {
        o.responded = true;
        let (kind, shard, version, value, best) = (o.kind, o.shard, o.version, o.value, o.best);
        let response_value = match kind {
            OpKind::Write => value,
            OpKind::Read => best.value,
        };
        if kind == OpKind::Write {
            let view = &mut s.coord.shards[usize::from(shard)];
            view.acked_version = view.acked_version.max(version);
            let acked = &mut s.ghost.acked_version[usize::from(shard)];
            *acked = (*acked).max(version);
        }
        let client = Endpoint::Client(op.client);
        send(
            cfg,
            s,
            Endpoint::Coordinator,
            client,
            Msg::Response { op, attempt, ok: true, value: response_value },
        );
    }
    let o = &s.coord.ops[i];
    if o.responded && o.answered == o.asked {
        // Nothing more to learn from this request.
        s.coord.ops.remove(i);
    }
}

pub fn on_deadline(cfg: &WorldConfig, s: &mut WorldState, op: OpId, attempt: u8) {
    let i = s
        .coord
        .ops
        .iter()
        .position(|o| o.op == op && o.attempt == attempt)
        .expect("deadline of a live request");
    let o = s.coord.ops.remove(i);
    if !o.responded {
        let client = Endpoint::Client(op.client);
        send(cfg, s, Endpoint::Coordinator, client, Msg::Response { op, attempt, ok: false, value: 0 });
    }
    let missing = o.asked & !o.answered;
    if let Some(h) = detector::health_after_deadline_miss(cfg.policy.failure_detection) {
        for n in 0..cfg.nodes.len() as NodeId {
            if missing & bit(n) != 0 {
                s.coord.health[usize::from(n)] = h;
            }
        }
        consider_evictions(cfg, s);
    }
}

pub fn on_heartbeat(cfg: &WorldConfig, s: &mut WorldState) {
    let p = &cfg.policy;
    s.coord.heartbeat_ticks = p.heartbeat_interval_ticks as u8;
    for n in 0..cfg.nodes.len() {
        let silence = u32::from(s.coord.silence_ticks[n]);
        s.coord.health[n] = detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks);
        send(cfg, s, Endpoint::Coordinator, Endpoint::Node(n as NodeId), Msg::Ping);
    }
    consider_evictions(cfg, s);
}

/// Ask the eviction policy about every member the detector declared dead; queue the
/// membership updates it decides on. One membership change per shard at a time.
fn consider_evictions(cfg: &WorldConfig, s: &mut WorldState) {
    for shard in 0..s.coord.shards.len() as u8 {
        let view = &s.coord.shards[usize::from(shard)];
        if view.join.is_some() || s.coord.queue.iter().any(|u| u.shard == shard) {
            continue;
        }
        let dead: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|&m| s.coord.health[usize::from(m)] == Health::Dead)
            .collect();
        for m in dead {
            let cluster = ClusterView {
                dead_nodes: s.coord.health.iter().filter(|h| **h == Health::Dead).count(),
                total_nodes: cfg.nodes.len(),
                evictions_in_progress: s.coord.queue.len()
                    + s.coord.shards.iter().filter(|v| v.join.is_some()).count(),
            };
            let candidates = candidates(cfg, s, shard);
            match eviction::decide_eviction(cfg.policy.eviction, cluster, cfg.node_zone(m), &candidates) {
                EvictionDecision::Suppressed(_) => continue,
                EvictionDecision::Evict { replacement } => {
                    enqueue(cfg, s, MembershipUpdate { shard, evicted: m, replacement, is_move: false });
                    break;
                }
            }
        }
    }
}

fn candidates(cfg: &WorldConfig, s: &WorldState, shard: u8) -> Vec<Candidate> {
    let view = &s.coord.shards[usize::from(shard)];
    (0..cfg.nodes.len() as NodeId)
        .map(|n| Candidate {
            node: n,
            zone: cfg.node_zone(n),
            health: s.coord.health[usize::from(n)],
            is_member: view.members.contains(&n)
                || view.join.as_ref().is_some_and(|j| j.replacement == n)
                || s.coord.queue.iter().any(|u| u.shard == shard && u.replacement == n),
        })
        .collect()
}

fn enqueue(cfg: &WorldConfig, s: &mut WorldState, update: MembershipUpdate) {
    // Ghost: slow is not failed. Evicting a node that is up, reachable and has had no fault
    // since the coordinator last heard from it is evicting a healthy replica. (A rebalancing
    // move takes a healthy replica out on purpose: it is no eviction.)
    let n = usize::from(update.evicted);
    let healthy = s.nodes[n].up
        && connected(s, cfg.nodes[n].zone, cfg.coordinator.zone)
        && !s.ghost.faulted_since_heard[n];
    if !update.is_move && healthy && s.ghost.healthy_evicted.is_none() {
        s.ghost.healthy_evicted = Some(update.evicted);
    }
    // Ghost: the churn budget counts every change the coordinator takes on.
    if let Some((max, _)) = cfg.coordinator.churn_budget {
        s.ghost.change_ages.push(0);
        if s.ghost.change_ages.len() > usize::from(max) {
            s.ghost.churn_exceeded = true;
        }
    }
    if s.coord.queue.len() >= usize::from(cfg.coordinator.membership_queue_capacity) {
        // The coordinator is saturated: the update is lost and the replica stays dead to it.
        s.ghost.churn_exceeded = true;
        return;
    }
    if s.coord.queue.is_empty() {
        s.coord.queue_ticks = cfg.coordinator.membership_update_ticks as u8;
    }
    s.coord.queue.push(update);
}

pub fn on_apply_membership(cfg: &WorldConfig, s: &mut WorldState) {
    let u = s.coord.queue.remove(0);
    if !s.coord.queue.is_empty() {
        s.coord.queue_ticks = cfg.coordinator.membership_update_ticks as u8;
    }
    let view = &mut s.coord.shards[usize::from(u.shard)];
    assert!(view.join.is_none());
    view.join = Some(Join {
        evicted: u.evicted,
        replacement: u.replacement,
        copied_from: 0,
        replacement_version: 0,
        is_move: u.is_move,
    });
    request_copies(cfg, s, u.shard);
}

/// Catch-up copy: every remaining member sends its data to the replacement; a read quorum of
/// them is enough. A moving replica is healthy and sends its copy too.
fn request_copies(cfg: &WorldConfig, s: &mut WorldState, shard: u8) {
    let view = &s.coord.shards[usize::from(shard)];
    let join = view.join.as_ref().expect("a join is in progress");
    let to = join.replacement;
    let sources: Vec<NodeId> =
        view.members.iter().copied().filter(|&m| join.is_move || m != join.evicted).collect();
    for src in sources {
        send(cfg, s, Endpoint::Coordinator, Endpoint::Node(src), Msg::CopyRequest { shard, to });
    }
}

/// The replacement takes the evicted replica's place once a read quorum of copies reached it
/// and it holds every acknowledged write. A write acknowledged while the copies were on their
/// way may be missing from them: then copy again.
fn on_copy_ack(cfg: &WorldConfig, s: &mut WorldState, shard: u8, from: NodeId, version: u8) {
    let view = &mut s.coord.shards[usize::from(shard)];
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
        request_copies(cfg, s, shard);
        return;
    }
    let (evicted, replacement) = (join.evicted, join.replacement);
    view.members.retain(|m| *m != evicted);
    view.members.push(replacement);
    view.members.sort();
    view.join = None;
}
