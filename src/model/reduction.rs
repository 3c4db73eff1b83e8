//! Partial-order reduction of the timed world: ample sets of one actor's actions within a tick.
//!
//! Between two ticks the world interleaves every enabled delivery and local step in every
//! order. Steps of different actors mostly commute: four `Replicate` deliveries due at the
//! same instant reach the same state in all 24 orders. [`ample`] picks, where it can prove it
//! safe, the enabled actions of one actor `X` (a storage node, or a client) as the only ones
//! to expand; the engine's `Ample` hook expands every action of a state whose
//! ample successors are already known (the cycle proviso).
//!
//! # What makes `A_X(s)`, the enabled actions of actor `X` in state `s`, ample
//!
//! * **L (no same-tick messages).** Every link's latency window starts at 1 tick or more,
//!   degraded windows included (checked once per model; otherwise nothing is reduced). A
//!   message sent now is deliverable only after a `Tick`, so no other actor can enable,
//!   disable or change an action of `X` before the next `Tick` by sending to it.
//! * **U (urgency).** `A_X(s)` holds an urgent action: a delivery at the end of its window
//!   (`latest_ticks == 0`) or a due timer of `X`. `Tick` stays disabled until `X` takes it, so
//!   every path from `s` that avoids `A_X(s)` has no `Tick` (a node's or client's state and its
//!   due messages change only by its own steps; losing an urgent message is excluded below).
//! * **I (independence).** Every action another actor or the environment can take from `s`
//!   before `X` acts touches state disjoint from what `A_X(s)` reads and writes, apart from the
//!   network (a sorted multiset: removals and additions of distinct envelopes commute) and
//!   ghost variables whose updates commute. Per actor:
//!   - node `n`: `n` is up and cannot crash (not in the crash menu, or the budget is spent);
//!     none of its messages can be lost (no `drop`, lossless link, or no budget); no partition
//!     or heal can change whether `n` reaches a peer it talks to in these steps (message
//!     sources, reply destinations, the coordinator whose reachability sets fault epochs); no
//!     degradation can start or end on a link it sends on; no client retry past the attempts
//!     the policy tells apart can renumber its messages (`retire_attempt`). Its `Replicate`s
//!     for a write not yet in `ghost.effects` meet no `Replicate` of the same write at another
//!     version due elsewhere in this tick (the first stored version is recorded, so such
//!     applications would not commute). Nodes touch no coordinator, client or history state.
//!   - client `c`: its messages cannot be lost, no partition, heal, degradation or restore can
//!     touch the link between its zone and the coordinator's, and no other client of the same
//!     partition can act before the next tick (invocations and returns on one history are
//!     ordered in real time: the `linearizable` check depends on their order); no retry of its
//!     own renumbers messages in flight (`retire_attempt` touches the coordinator).
//! * **V (visibility).** For safety (`always P`) the reduced graph reaches a violation whenever
//!   the full one does if no ample action can turn a violating state into a satisfying one:
//!   the full path to a violation either contains an action of `A_X(s)` (moved to the front,
//!   the path gets shorter) or does not (then `α` can be appended to every state of it, and the
//!   violation survives `α`). Five properties are sticky (once violated, always violated).
//!   `acked_writes_persist` is not: a node storing a version can repair it. A node's step that
//!   changes its stored data is ample only if the coordinator cannot act before it (nothing
//!   due at the coordinator and no coordinator crash possible: then the acked versions and the
//!   replica sets stay as in `s`) and it changes no replica's holder status in `s`. Clients
//!   never touch what `acked_writes_persist` reads.
//!
//!   For liveness, cycles are read off the reduced graph with the edge labels of
//!   [`super::properties::edge_label`]: `Tick` (never ample), topology changes (only the
//!   coordinator, never ample here), "client c has an operation outstanding" in the source
//!   state (one bit per client), "a replica set holds a node that is down" and "a hot shard has
//!   a replica on a slow node" (only faults and the coordinator change those, and neither is
//!   ever ample). When `ops_complete` is checked, a client step is ample only if it keeps that
//!   client's outstanding-or-not status. Then a full infinite path maps to a reduced one that
//!   permutes actions only within each tick (by U, some action of `A_X` comes before the next
//!   `Tick`, so it can always be moved to the front) with the same labels on every `Tick` and
//!   topology edge and the same "outstanding" status in every state: a violating lasso exists
//!   in the reduced graph iff one exists in the full graph. Every reduced edge is a real edge,
//!   so a counterexample found is a behaviour of the full world.
//! * **Cycle proviso.** Enforced by the engine (its `Ample` hook); with it, the
//!   safety argument's second case (which keeps the path length) strictly deepens the BFS, so
//!   the induction ends.
//!
//! The coordinator is never an ample actor: its steps read fault state through ghost variables
//! (`healthy_evicted` reads which nodes are up and reachable) and change replica sets, so it
//! commutes with too little to be worth the proof.

use super::{env, properties, Action, ClientPhase, Endpoint, Envelope, Msg, World, WorldConfig, WorldState};
use crate::config::{OpKind, PropertyName};
use crate::protocol::{node, Outbox};
use stateright::Model;

/// Which reductions a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// Every enabled action of every state is expanded.
    None,
    /// Partial-order reduction (ample sets; see the module docs).
    #[default]
    Por,
}

impl Reduction {
    pub fn as_str(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Por => "por",
        }
    }
}

impl std::str::FromStr for Reduction {
    type Err = String;
    fn from_str(s: &str) -> Result<Reduction, String> {
        match s {
            "none" => Ok(Reduction::None),
            "por" => Ok(Reduction::Por),
            other => Err(format!("unknown reduction \"{other}\" (expected none or por)")),
        }
    }
}

/// Whether the world's links let a message be delivered in the tick it was sent (L above).
pub fn same_tick_messages(cfg: &WorldConfig) -> bool {
    cfg.latency.iter().flatten().any(|l| l.lo == 0) || cfg.faults.degrade.iter().any(|d| d.latency.lo == 0)
}

/// The ample subset of `actions` (indices) in `s`, or nothing (expand all). See module docs.
pub fn ample(world: &World, s: &WorldState, actions: &[Action], out: &mut Vec<usize>) {
    let cfg = &world.cfg;
    if same_tick_messages(cfg) {
        return;
    }
    for n in 0..cfg.nodes.len() as u8 {
        if node_ample(cfg, s, actions, n, out) {
            return;
        }
        out.clear();
    }
    for c in 0..cfg.clients.len() as u8 {
        if client_ample(world, s, actions, c, out) {
            return;
        }
        out.clear();
    }
}

fn budget_left(s: &WorldState) -> bool {
    s.env.faults_left > 0
}

/// No `Lose` of this message can happen: it is on a lossless link or nothing may be dropped.
fn never_lost(cfg: &WorldConfig, s: &WorldState, e: &Envelope) -> bool {
    let lossy = cfg.lossy[usize::from(env::zone_of(cfg, e.src))][usize::from(env::zone_of(cfg, e.dst))];
    !(cfg.faults.drop && lossy && budget_left(s))
}

/// No partition or heal can change whether zones `a` and `b` are connected from `s` on.
fn link_cut_fixed(cfg: &WorldConfig, s: &WorldState, a: u8, b: u8) -> bool {
    if a == b {
        return true;
    }
    [a, b].iter().all(|&z| {
        let cut_now = s.env.partitioned & (1 << z) != 0;
        let may_cut = cfg.faults.partition.contains(&z) && budget_left(s);
        !cut_now && !may_cut
    })
}

/// No degradation can start or end on the link between zones `a` and `b` from `s` on.
fn link_latency_fixed(cfg: &WorldConfig, s: &WorldState, a: u8, b: u8) -> bool {
    cfg.faults.degrade.iter().enumerate().all(|(i, d)| {
        let on_link = d.zones == (a, b) || d.zones == (b, a);
        let on = s.env.degraded & (1 << i) != 0;
        !on_link || (!on && !budget_left(s))
    })
}

/// Whether a client retry could renumber attempt `attempt` of an operation in flight.
fn may_be_renumbered(cfg: &WorldConfig, attempt: u8) -> bool {
    let policy = &cfg.policy.retry;
    policy.max_attempts.is_none() && attempt >= crate::policy::retry::attempts_tracked(policy)
}

/// The operation and attempt a message carries, if any.
fn op_attempt(msg: &Msg) -> Option<(crate::protocol::OpId, u8)> {
    match *msg {
        Msg::Request { op, attempt, .. }
        | Msg::Response { op, attempt, .. }
        | Msg::Replicate { op, attempt, .. }
        | Msg::ReplicateAck { op, attempt, .. }
        | Msg::ReadReq { op, attempt, .. }
        | Msg::ReadReply { op, attempt, .. } => Some((op, attempt)),
        _ => None,
    }
}

/// Whether the coordinator can take no step before the next tick: nothing due at it, and it
/// cannot crash. (Messages sent to it now arrive after a tick, by L.)
fn coordinator_quiet(cfg: &WorldConfig, s: &WorldState, actions: &[Action]) -> bool {
    let busy = actions.iter().any(|a| match a {
        Action::Deliver(e) => e.dst == Endpoint::Coordinator,
        Action::AckDeadline { .. }
        | Action::ApplyMembershipUpdate
        | Action::Heartbeat
        | Action::Rebalance
        | Action::CopyRetry(_) => true,
        _ => false,
    });
    let may_crash = cfg.faults.crash_coordinator && budget_left(s);
    !busy && !may_crash
}

fn node_ample(cfg: &WorldConfig, s: &WorldState, actions: &[Action], n: u8, out: &mut Vec<usize>) -> bool {
    let me = Endpoint::Node(n);
    for (i, a) in actions.iter().enumerate() {
        if matches!(a, Action::Deliver(e) if e.dst == me) {
            out.push(i);
        }
    }
    if out.is_empty() || out.len() == actions.len() {
        return false;
    }
    let state = &s.nodes[usize::from(n)];
    if !state.up || (cfg.faults.crash.contains(&n) && budget_left(s)) {
        return false;
    }
    let zone = cfg.node_zone(n);
    let acked_checked = cfg.properties.contains(&PropertyName::AckedWritesPersist);
    let mut urgent = false;
    for &i in out.iter() {
        let Action::Deliver(e) = &actions[i] else { unreachable!("only deliveries were chosen") };
        urgent |= e.latest_ticks == 0;
        if !never_lost(cfg, s, e) {
            return false;
        }
        if op_attempt(&e.msg).is_some_and(|(_, attempt)| may_be_renumbered(cfg, attempt)) {
            return false;
        }
        // What the node would do (it reads only its own data and the message).
        let mut data = state.shards.clone();
        let mut outbox = Outbox::default();
        node::on_msg(n, &mut data, e.src, e.msg, &mut outbox);
        let mut peers = vec![env::zone_of(cfg, e.src), cfg.coordinator.zone];
        peers.extend(outbox.sends.iter().map(|(dst, _)| env::zone_of(cfg, *dst)));
        if !peers.iter().all(|&p| link_cut_fixed(cfg, s, zone, p)) {
            return false;
        }
        let send_zones = outbox.sends.iter().map(|(dst, _)| env::zone_of(cfg, *dst));
        if !send_zones.into_iter().all(|p| link_latency_fixed(cfg, s, zone, p)) {
            return false;
        }
        if let Msg::Replicate { op, version, .. } = e.msg {
            let is_write = cfg.clients[usize::from(op.client)].op_kind(op.seq) == OpKind::Write;
            let recorded = s.ghost.effects.iter().any(|(o, _)| *o == op);
            let clash = s.net.iter().any(|f| {
                f.earliest_ticks == 0
                    && f.dst != me
                    && matches!(f.msg, Msg::Replicate { op: o, version: v, .. } if o == op && v != version)
            });
            if is_write && !recorded && clash {
                return false;
            }
        }
        if acked_checked && data != state.shards {
            if !coordinator_quiet(cfg, s, actions) {
                return false;
            }
            for (shard, &acked) in s.ghost.acked_version.iter().enumerate() {
                let member = s.coord.shards[shard].members.contains(&n);
                let holds_before = state.shards[shard].version >= acked;
                let holds_after = data[shard].version >= acked;
                if acked > 0 && member && holds_before != holds_after {
                    return false;
                }
            }
        }
    }
    urgent
}

/// Whether client `c` has a timer due: it must act before time passes.
fn client_due(phase: ClientPhase) -> bool {
    match phase {
        ClientPhase::Waiting { timeout_ticks, .. } => timeout_ticks == 0,
        ClientPhase::Backoff { latest_ticks, .. } | ClientPhase::Idle { latest_ticks, .. } => {
            latest_ticks == 0
        }
        ClientPhase::Done => false,
    }
}

fn client_action(a: &Action, c: u8) -> bool {
    match a {
        Action::Deliver(e) => e.dst == Endpoint::Client(c),
        Action::ClientInvoke(x) | Action::ClientTimeout(x) | Action::ClientRetry(x) => *x == c,
        _ => false,
    }
}

fn client_ample(world: &World, s: &WorldState, actions: &[Action], c: u8, out: &mut Vec<usize>) -> bool {
    let cfg = &world.cfg;
    for (i, a) in actions.iter().enumerate() {
        if client_action(a, c) {
            out.push(i);
        }
    }
    if out.is_empty() || out.len() == actions.len() {
        return false;
    }
    let spec = &cfg.clients[usize::from(c)];
    let (zone, coord_zone) = (spec.zone, cfg.coordinator.zone);
    if !link_cut_fixed(cfg, s, zone, coord_zone) || !link_latency_fixed(cfg, s, zone, coord_zone) {
        return false;
    }
    // Another client of the same history that can act before the next tick: its steps and
    // ours are ordered in real time.
    let partition = s.clients[usize::from(c)].partition;
    let shares_history = |a: &Action| {
        (0..cfg.clients.len() as u8)
            .any(|d| d != c && s.clients[usize::from(d)].partition == partition && client_action(a, d))
    };
    if actions.iter().any(shares_history) {
        return false;
    }
    let me = &s.clients[usize::from(c)];
    let ops_complete_checked = cfg.properties.contains(&PropertyName::OpsComplete);
    let mut urgent = client_due(me.phase);
    for &i in out.iter() {
        let a = &actions[i];
        if let Action::Deliver(e) = a {
            urgent |= e.latest_ticks == 0;
            if !never_lost(cfg, s, e) {
                return false;
            }
        }
        if let Action::ClientRetry(_) = a {
            let ClientPhase::Backoff { attempt, .. } = me.phase else { return false };
            // A retry past the attempts the policy tells apart renumbers messages in flight
            // and the coordinator's requests.
            if attempt >= crate::policy::retry::attempts_tracked(&cfg.policy.retry) {
                return false;
            }
        }
        if ops_complete_checked {
            let Some(next) = world.next_state(s, a.clone()) else { return false };
            if properties::outstanding(me.phase)
                != properties::outstanding(next.clients[usize::from(c)].phase)
            {
                return false;
            }
        }
    }
    urgent
}
