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
//!   - node `n`, up: `Crash(n)`, if enabled, is part of `A_n(s)` (see "Crashes and restarts"
//!     below); none of its messages can be lost (no `drop`, lossless link, or no budget); no partition
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
//!   [`super::properties::edge_label`]: `Tick` (never in a one-actor ample set), topology
//!   changes (only the coordinator, never in one of its ample sets), "client c has an
//!   operation outstanding" in the source state (one bit per client), "a replica set holds a
//!   node that is down" and "a hot shard has a replica on a slow node" (only the coordinator
//!   and faults change those two; the crash and coordinator-answer rules below are off when
//!   a property that reads them is checked). When `ops_complete` is checked, a client step is ample only if it keeps that
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
//! # Crashes and restarts
//!
//! `Crash(n)` sets `n`'s `up`, bumps its fault epoch, sets `faulted_since_heard[n]` and spends
//! one fault. It commutes with every step of another actor: nodes and clients never read `up`
//! (a send to a down node is dropped when delivered, not when sent); the coordinator's
//! `ghost_heard_from` clears the flag only for a message of the current epoch, which was sent
//! before the crash in either order, so both orders leave the flag set; partitions bump epochs
//! too (increments commute). Budgets: if a path spends faults `f` and then crashes `n`, the
//! budget in `s` is at least `f + 1`, so with the crash moved to the front every fault of the
//! path is still enabled. The one step that reads `up` is the coordinator's eviction request
//! for `n` (is it a healthy replica?), so the crash is moved only when that cannot differ: the
//! coordinator has nothing to do before the next tick ([`coordinator_quiet`]), or
//! `no_healthy_eviction` is not checked or already violated, or `n` stays faulted whatever
//! happens before the tick ([`stays_faulted`]). No property or edge label reads `up`, so a
//! crash is invisible. `Restart(n)` (of a down node) reads and writes only `n`'s `up`; while `n`
//! is down its flag is set (its crash set it, and it sends nothing of a newer epoch), so no
//! eviction of `n` counts as healthy either way: it commutes with every other step.
//!
//! These rules (and the coordinator's below) are used only while every checked property is
//! one of those argued for here ([`fault_rules_apply`]): a property whose states or edge
//! labels read whether a node is up (a crash would be visible) or the coordinator's view of
//! node load turns them off, and the node rules fall back to "up and cannot crash".
//!
//! Three ample sets follow:
//!
//! * **A node with its fault.** `A_n(s)` = the deliveries to `n` plus `Crash(n)` (up) or
//!   `Restart(n)` (down). For a down node its deliveries only drop the messages (no property
//!   or edge label reads the network), so only loss and renumbering can interfere.
//! * **Deferred faults.** In a state with no node or client ample set, let `D` be the crashes
//!   (with the conditions above) and restarts of *idle* nodes: nodes with no deliverable
//!   message (by L none becomes deliverable before a `Tick`). The ample set is every other
//!   enabled action, `Tick` included. A path from `s` that avoids the ample set takes only
//!   actions of `D` and the restarts and re-crashes they enable, all invisible; the first
//!   ample action `a` on a path commutes with that prefix (the crash rules above; `Tick` reads
//!   no `up`) and was enabled in `s` (the prefix enables no other action), so it moves to the
//!   front. A path with no ample action at all ends in a state whose properties are those of
//!   `s`. For cycles, faults are finitely many (the budget), so an infinite path has
//!   infinitely many ample actions; the reduced path takes them in order and each deferred
//!   fault either comes back into an ample set (its node gets a message: then it is not idle
//!   and its crash or restart is in every ample set that does not move it) or is dropped,
//!   which changes no label (it changes no client, no replica set, no time) and no later step
//!   (nothing reads `up` but the deliveries to `n` and the eviction checks excluded above).
//! * **The coordinator's answers.** A delivery `d` to the coordinator of a node's answer
//!   (`ReplicateAck`, `ReadReply`, or a heartbeat's `Pong`, which answers no request and only
//!   marks its node heard) due now is ample on its own when every other coordinator
//!   step possible before the next tick commutes with it: the coordinator has no timer due,
//!   cannot crash and has no join under way, and its other deliverable messages are `Pong`s
//!   or answers about another request (or about the same request when the answers only count:
//!   a write's acks, a read's write-back acks, or a request already gone). An answer to request
//!   `X` from `n` writes `X`'s entry (answered, heard, best, holders, responded; removed once
//!   everyone answered) and ORs `n` into the `heard` bits of other requests that asked `n` and
//!   have no answer from it; the answer from `n` clears that bit only if it answers that
//!   request, and then the `heard` update of the other order skips it too. Client requests
//!   (which create requests and take versions in order) are not among the other steps. Its
//!   sends must not cross a cut or a latency change that may come first (as for nodes), `d`
//!   must not be losable or renumbered, its link must stay up, and it must request no
//!   membership change and change no replica set, join or queue (so it has no topology label
//!   and leaves `acked_writes_persist`'s replica sets alone; it only raises acked versions,
//!   which cannot repair a violation). It touches no client state.
//!
//! # Faults that end
//!
//! A fault with a duration (`env.ending`) starts a window, counted in ticks from its start, in
//! which it ends by itself; `Tick` is disabled while one must end now. Nothing above moves a
//! fault across a `Tick`, except the deferred-faults rule: so a node whose crash has a
//! duration is never in `D` (its crash at a later tick would end later, and its restart,
//! once due, disables `Tick`, which `D`'s paths must not do). Within a tick the arguments
//! stand: a crash, restart, cut, heal, degradation or restore in another order of the same
//! tick starts or ends the same window; an urgent end only keeps `Tick` disabled longer (U);
//! a cut or degradation in force counts as possibly ending (`link_cut_fixed`,
//! `link_latency_fixed`), as it did when it could end at any moment.
//!
//! # Arrival slack
//!
//! With pings answered early (`super::slack`), a `Tick` also reads the budget, the nodes' `up`
//! and the links to choose which pings to answer, so a deferred crash taken before the `Tick`
//! instead of after it can leave a ping answered early in one order and waiting in the other.
//! The two states differ only there, and the slack argument makes them equivalent (the same
//! futures of every property and label: the ping's arrival tick is seen only through its
//! pong). The coordinator-answer rule never takes a pong with slack; the end of a degradation
//! that widens the window of a pong with slack touches only that message, not the ample answer.

use super::{env, properties, Action, ClientPhase, Endpoint, Envelope, Msg, World, WorldConfig, WorldState};
use crate::config::{MenuFault, OpKind, PropertyName};
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

/// Whether the rules apply to this world at all, so that a report saying `por` means states
/// were reduced. They were argued for one coordinator running one policy, on links that take
/// at least a tick (faults that end by themselves included: see "Faults that end" in the
/// module docs), with neither node debt nor the coordinator's own load as state: debt
/// changes what `hot_shard_leaves_slow_node` and the load reports read at a node's step, and
/// the coordinator's load changes how long a request waits at a tick, an answer that starts a
/// copy, or an applied update. The leader family's machines were not argued for at all (their
/// answers and timers touch other state than the quorum coordinator's). Any other world is
/// explored in full.
pub fn applies(cfg: &WorldConfig) -> bool {
    refusal(cfg).is_none()
}

/// Why the rules do not apply to this world (see [`applies`]), as a report says it; `None`
/// where they do.
pub fn refusal(cfg: &WorldConfig) -> Option<&'static str> {
    Some(if super::leader::runs(cfg) {
        "the leader family's machines"
    } else if cfg.coordinators.len() > 1 {
        "several coordinators"
    } else if cfg.rollout.is_some() {
        "a rollout"
    } else if same_tick_messages(cfg) {
        "a link that can deliver in the tick it sends"
    } else if cfg.compaction.dynamic() {
        "compaction debt as node state"
    } else if cfg.coordinator.work.is_some() {
        "the coordinator's work queue"
    } else {
        return None;
    })
}

/// The ample subset of `actions` (indices) in `s`, or nothing (expand all). See module docs.
pub fn ample(world: &World, s: &WorldState, actions: &[Action], out: &mut Vec<usize>) {
    let cfg = &world.cfg;
    if !applies(cfg) {
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
    if !fault_rules_apply(cfg) {
        return;
    }
    if let Some(i) = (0..actions.len()).find(|&i| coordinator_answer_ample(cfg, s, actions, i)) {
        out.push(i);
        return;
    }
    if !defer_idle_faults(cfg, s, actions, out) {
        out.clear();
    }
}

/// The (operation, attempt) a node's answer to the coordinator is about, if it is one.
fn answer_key(msg: &Msg) -> Option<(crate::protocol::OpId, u8)> {
    match *msg {
        Msg::ReplicateAck { op, attempt, .. } | Msg::ReadReply { op, attempt, .. } => Some((op, attempt)),
        _ => None,
    }
}

/// Whether `actions[i]`, the delivery of a node's answer to the coordinator, is an ample set
/// on its own. See "The coordinator's answers" in the module docs.
fn coordinator_answer_ample(cfg: &WorldConfig, s: &WorldState, actions: &[Action], i: usize) -> bool {
    let Action::Deliver(e) = &actions[i] else { return false };
    let key = answer_key(&e.msg);
    if key.is_none() && e.msg != Msg::Pong {
        return false;
    }
    let Endpoint::Node(n) = e.src else { return false };
    if e.dst != Endpoint::LEADER || e.latest_ticks != 0 || actions.len() < 2 {
        return false;
    }
    // A pong with slack (`super::slack`) keeps its window open past the ticks its ping may yet
    // arrive in (`latest = hi + slack - 1`, `hi >= 1`), so it is never due, never taken alone.
    assert_eq!(e.slack_ticks, 0, "a due answer has no arrival slack");
    // Answers to one request commute with each other when they only count: a write's acks, or
    // a read's write-back acks (its reply value is fixed), or answers to no request at all. A
    // `Pong` answers no request: it only marks its node heard.
    let counting = key.is_none_or(|key| {
        s.coord
            .ops
            .iter()
            .find(|o| (o.op, o.attempt) == key)
            .is_none_or(|o| o.kind == OpKind::Write || o.repairing)
    });
    // Every other step the coordinator can take before the next tick is another answer (to
    // another request, or counting) or a `Pong`; no timer is due, it cannot crash, and no join
    // is under way.
    let others_commute = actions.iter().enumerate().all(|(j, a)| match a {
        _ if j == i => true,
        Action::Deliver(f) if f.dst == Endpoint::LEADER => {
            matches!(f.msg, Msg::Pong) || answer_key(&f.msg).is_some_and(|k| Some(k) != key || counting)
        }
        Action::CoordinatorRestart => false,
        _ => a.coordinator_timer().is_none(),
    });
    if !others_commute || s.coord.shards.iter().any(|v| v.join.is_some()) {
        return false;
    }
    if !never_lost(cfg, s, e) || key.is_some_and(|(_, attempt)| may_be_renumbered(cfg, attempt)) {
        return false;
    }
    let (zone, coord_zone) = (cfg.node_zone(n), cfg.coordinator.zone);
    if !link_cut_fixed(cfg, s, zone, coord_zone) {
        return false;
    }
    // What the coordinator would do: its sends must not meet a cut or a latency change that
    // may come first, and it must change no replica set or membership queue (edge labels).
    let mut coord = (*s.coord).clone();
    let mut out = Outbox::default();
    coord.on_msg(cfg, e.src, e.msg, &mut out);
    let sends_fixed = out.sends.iter().all(|(dst, _)| {
        let z = env::zone_of(cfg, *dst);
        link_cut_fixed(cfg, s, coord_zone, z) && link_latency_fixed(cfg, s, coord_zone, z)
    });
    let quiet_events = out.events.iter().all(|ev| {
        matches!(
            ev,
            crate::protocol::Event::WriteAcked { .. } | crate::protocol::Event::ReadRepairStarted { .. }
        )
    });
    let same_topology = coord.queue == s.coord.queue
        && coord.shards.iter().zip(&s.coord.shards).all(|(a, b)| a.members == b.members && a.join == b.join);
    sends_fixed && quiet_events && same_topology
}

/// Whether the crash, restart, deferred-fault and coordinator-answer rules were argued for
/// every property checked: none of these reads whether a node is up or what the coordinator
/// thinks of a node's load, in a state or an edge label. A property added later is left out
/// (and those rules with it) until its own argument is made.
fn fault_rules_apply(cfg: &WorldConfig) -> bool {
    cfg.properties.iter().all(|p| {
        matches!(
            p,
            PropertyName::AckedWritesPersist
                | PropertyName::Linearizable
                | PropertyName::NoDuplicateEffects
                | PropertyName::NoHealthyEviction
                | PropertyName::ChurnBounded
                | PropertyName::CapacityRespected
                | PropertyName::Converges
                | PropertyName::OpsComplete
        )
    })
}

/// Whether node `n` has nothing to do before the next tick: no message to it is deliverable
/// (and by L none becomes deliverable before a `Tick`).
fn idle(actions: &[Action], n: u8) -> bool {
    !actions.iter().any(|a| matches!(a, Action::Deliver(e) if e.dst == Endpoint::Node(n)))
}

/// The ample set that defers the crash or restart of idle nodes (D below): every enabled
/// action but those. See "Deferred faults" in the module docs.
fn defer_idle_faults(cfg: &WorldConfig, s: &WorldState, actions: &[Action], out: &mut Vec<usize>) -> bool {
    let mut deferred = false;
    for (i, a) in actions.iter().enumerate() {
        let defer = match *a {
            Action::Crash(n) => {
                idle(actions, n) && !crash_timed(cfg, n) && crash_commutes(cfg, s, actions, n)
            }
            Action::Restart(n) => idle(actions, n) && !crash_timed(cfg, n),
            _ => false,
        };
        if defer {
            deferred = true;
        } else {
            out.push(i);
        }
    }
    deferred && !out.is_empty()
}

/// Whether `n`'s crash ends by itself: its restart window is counted in ticks from the crash,
/// so the crash cannot be deferred to a later tick (nor its restart, whose deadline would
/// then hold back `Tick` from a state the deferral left out). See "Faults that end".
fn crash_timed(cfg: &WorldConfig, n: u8) -> bool {
    cfg.faults.duration(MenuFault::Crash(n)).is_some()
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
pub(super) fn link_cut_fixed(cfg: &WorldConfig, s: &WorldState, a: u8, b: u8) -> bool {
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
pub(super) fn link_latency_fixed(cfg: &WorldConfig, s: &WorldState, a: u8, b: u8) -> bool {
    cfg.faults.degrade.iter().enumerate().all(|(i, d)| {
        let on_link = d.joins(a, b);
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
        | Msg::Refused { op, attempt, .. }
        | Msg::ReadReq { op, attempt, .. }
        | Msg::ReadReply { op, attempt, .. } => Some((op, attempt)),
        _ => None,
    }
}

/// Whether the coordinator can take no step before the next tick: nothing due at it, and it
/// cannot crash. (Messages sent to it now arrive after a tick, by L.)
fn coordinator_quiet(cfg: &WorldConfig, s: &WorldState, actions: &[Action]) -> bool {
    let busy = actions.iter().any(|a| match a {
        Action::Deliver(e) => e.dst == Endpoint::LEADER,
        Action::AckDeadline { .. }
        | Action::FanOut { .. }
        | Action::ApplyMembershipUpdate
        | Action::Heartbeat
        | Action::Rebalance
        | Action::CopyRetry(_)
        | Action::PeerTimer { .. } => true,
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
    if out.is_empty() {
        return false;
    }
    let state = &s.nodes[usize::from(n)];
    if !fault_rules_apply(cfg) && (!state.up || (cfg.faults.crash.contains(&n) && budget_left(s))) {
        return false;
    }
    // The node's own fault step (`Crash(n)` while it is up, `Restart(n)` while it is down)
    // joins its ample set: it commutes with every other actor's step of this tick (see the
    // module docs), so it need not be explored in every position among them.
    if let Some(i) =
        actions.iter().position(|a| matches!(a, Action::Crash(m) | Action::Restart(m) if *m == n))
    {
        if state.up && !crash_commutes(cfg, s, actions, n) {
            return false;
        }
        out.push(i);
    }
    if out.len() == actions.len() {
        return false;
    }
    if !state.up {
        return down_node_ample(cfg, s, actions, out);
    }
    let zone = cfg.node_zone(n);
    let acked_checked = cfg.properties.contains(&PropertyName::AckedWritesPersist);
    let mut urgent = false;
    for &i in out.iter() {
        let Action::Deliver(e) = &actions[i] else { continue };
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

/// Whether `Crash(n)` commutes with every step another actor or the environment can take
/// before the next tick. A crash sets `n`'s `up`, its fault epoch and `faulted_since_heard`,
/// and spends one fault: the budget of the other faults on a path it is moved in front of
/// still suffices (the path had spent it with the crash at its end), and the ghost updates
/// commute with the coordinator's (`ghost_heard_from` resets the flag only for messages of the
/// current epoch, sent before the crash either way). The one step that reads `n`'s `up` is the
/// coordinator's request to evict `n` (whether it was a healthy replica): so the coordinator
/// must be unable to act before the next tick, unless no eviction can be recorded as healthy
/// (the property is not checked, or a healthy eviction was recorded already: it is sticky).
fn crash_commutes(cfg: &WorldConfig, s: &WorldState, actions: &[Action], n: u8) -> bool {
    !cfg.properties.contains(&PropertyName::NoHealthyEviction)
        || s.ghost.healthy_evicted.is_some()
        || coordinator_quiet(cfg, s, actions)
        || stays_faulted(s, actions, n)
}

/// Whether `n` counts as faulted for the coordinator whatever happens before the next tick:
/// its flag is set, and no message of its current epoch (the only kind that clears the flag)
/// can reach the coordinator before then. An eviction of `n` is then never healthy, crash or
/// not.
fn stays_faulted(s: &WorldState, actions: &[Action], n: u8) -> bool {
    let i = usize::from(n);
    s.ghost.faulted_since_heard[i] != 0
        && !actions.iter().any(|a| {
            matches!(a, Action::Deliver(e) if e.dst == Endpoint::LEADER
                && e.src == Endpoint::Node(n)
                && e.sender_epoch == s.ghost.fault_epoch[i])
        })
}

/// A node that is down: its deliveries (`out`, with `Restart(n)` if enabled) only drop the
/// messages, which no property or edge label reads, and `Restart(n)` reads and writes only
/// `n`'s `up` (no eviction of `n` counts as healthy while it is down: its fault flag stays set
/// until the coordinator hears from its new epoch, and it sends nothing while down). What can
/// interfere is a `Lose` of the same message or a retry renumbering it.
fn down_node_ample(cfg: &WorldConfig, s: &WorldState, actions: &[Action], out: &[usize]) -> bool {
    let mut urgent = false;
    for &i in out {
        if let Action::Deliver(e) = &actions[i] {
            urgent |= e.latest_ticks == 0;
            if !never_lost(cfg, s, e) {
                return false;
            }
            if op_attempt(&e.msg).is_some_and(|(_, attempt)| may_be_renumbered(cfg, attempt)) {
                return false;
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
