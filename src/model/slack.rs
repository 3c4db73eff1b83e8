//! Arrival slack: a heartbeat's arrival tick is seen only through its answer.
//!
//! A `Ping` to a storage node of the quorum family changes nothing at the node, and the node
//! answers it at once with a `Pong` that says the same whenever it is sent. So of the tick
//! `d` in `[0, l]` (what is left of the ping's window) at which the ping arrives, the rest of
//! the world can see only: whether the node is up and the link whole at `d` (else the ping is
//! lost), the node's fault epoch at `d` (the pong carries it), and the pong's arrival tick, in
//! `[d + lo, d + hi]` for the link's latency `[lo, hi]` at `d`. Where during the window no
//! crash of the node and no cut of the link is possible (no fault budget left, or neither in
//! the fault menu), only the arrival tick remains, and the union over `d` of its windows is
//! the interval `[lo, hi + l]`. So at a `Tick` such a ping is answered at once, and its pong
//! travels in `[lo, hi + l]`. The `l + 1` ticks at which the ping could arrive, and every
//! state in between, are one. Loss needs no condition: a lossy link is lossy both ways, and
//! losing the pong leaves what losing the ping would (no pong, the budget spent, unseen when).
//!
//! One change of the link's latency during the window is allowed: the end of the one
//! degradation in force on it, when no degradation can start (no budget). The pong then keeps
//! as its slack the moments the ping could still arrive in (`l + 1`, counting down with the
//! ticks: at the window's last tick the ping may still come after a change in that tick).
//! At the change the ping arrived before it (the pong arrives in `[lo1 - k, hi1]` from then)
//! or after it (in `[lo2, hi2 + later]`, `later` the ticks left after this one); when the two
//! meet, their union is again an interval, exact, and nothing can observe `d` afterwards, so
//! the pong keeps the union and no slack ([`on_latency_change`]). Where they would not meet,
//! the ping is not answered early. On a link whose latency cannot change the pong keeps none.
//!
//! Counterexamples are read off the reduced graph; an early answer shows as a pong sent at a
//! `Tick` with its slack (docs/reductions.md).

use super::env::{self, zone_of};
use super::{apply, node_step, reduction, Endpoint, Envelope, Msg, WorldConfig, WorldState};
use crate::config::LatencyTicks;
use crate::protocol::Outbox;

/// Whether pings may be answered early in this world: only a link with a latency range
/// (degraded or not) gives a ping a window to be early in, and only where the partial-order
/// rules apply (which also leaves out the leader family, whose replicas keep state on a
/// ping): it was argued and tested beside them.
pub fn applies(cfg: &WorldConfig) -> bool {
    let ranged = cfg.latency.iter().flatten().any(|l| l.lo < l.hi)
        || cfg.faults.degrade.iter().any(|d| d.latency.lo < d.latency.hi);
    ranged && super::reduction::applies(cfg)
}

/// At a `Tick`: answer every ping that may arrive now, may still wait, and whose arrival tick
/// nothing but its pong can observe.
pub fn answer_early(cfg: &WorldConfig, s: &mut WorldState) {
    let mut i = 0;
    while i < s.net.len() {
        let e = s.net[i];
        let Some(change) = may_answer_early(cfg, s, &e) else {
            i += 1;
            continue;
        };
        let Endpoint::Node(n) = e.dst else { unreachable!("only a node is pinged") };
        s.net.remove(i);
        let mut out = Outbox::default();
        let mut node = s.nodes[usize::from(n)].clone();
        node_step(cfg, n, &mut node, e.src, e.msg, &mut out);
        assert!(node == s.nodes[usize::from(n)], "a ping changes nothing at a node");
        assert!(out.events.is_empty(), "a ping is answered and nothing else");
        let before = s.net.len();
        apply(cfg, s, Endpoint::Node(n), out);
        for pong in &mut s.net[before..] {
            pong.latest_ticks += e.latest_ticks;
            // The ping could arrive in this tick or one of the `latest_ticks` after it: a
            // latency change in any of those moments is seen (`on_latency_change`).
            pong.slack_ticks = if change { e.latest_ticks + 1 } else { 0 };
        }
        // The pongs were pushed at the end; what is left to look at moved by one.
    }
}

/// Whether `e` is a ping to answer now: `Some(change)`, where `change` says whether the
/// link's latency may change before the ping's window closes (its pong then keeps slack).
fn may_answer_early(cfg: &WorldConfig, s: &WorldState, e: &Envelope) -> Option<bool> {
    let Endpoint::Node(n) = e.dst else { return None };
    if e.msg != Msg::Ping || e.earliest_ticks > 0 || e.latest_ticks == 0 || !env::deliverable(cfg, s, e) {
        return None;
    }
    let no_budget = s.env.faults_left == 0;
    let (a, b) = (zone_of(cfg, e.dst), zone_of(cfg, e.src));
    let crash_possible = !no_budget && cfg.faults.crash.contains(&n);
    if crash_possible || !reduction::link_cut_fixed(cfg, s, a, b) {
        return None;
    }
    // The pong's window must fit the state's counters, slack counting one moment more.
    let fits = |l: LatencyTicks| l.hi + u32::from(e.latest_ticks) < u32::from(u8::MAX);
    let now = env::latency(cfg, s, a, b);
    if reduction::link_latency_fixed(cfg, s, a, b) {
        return fits(now).then_some(false);
    }
    // Bit i: degradation i of the menu is in force on this link.
    let in_force = (0..cfg.faults.degrade.len())
        .filter(|&i| cfg.faults.degrade[i].joins(a, b))
        .fold(0u8, |m, i| m | (1 << i))
        & s.env.degraded;
    if in_force.count_ones() == 1 && no_budget {
        // Its end is the one change; the answers before and after it must meet.
        let after = env::latency_under(cfg, s.env.degraded & !in_force, a, b);
        (fits(now) && fits(after) && meet(now, after, e.latest_ticks)).then_some(true)
    } else {
        None
    }
}

/// Whether, for a change at any tick `k` of a ping's window `[0, l]`, the pong's arrival ticks
/// from then if the ping came before the change (`[lo1 - k, hi1]`) and if it came after
/// (`[lo2, hi2 + l - k]`) form one interval (`k` cancels out).
fn meet(before: LatencyTicks, after: LatencyTicks, l: u8) -> bool {
    after.lo <= before.hi + 1 && before.lo <= after.hi + u32::from(l) + 1
}

/// Around an action that may change a link's latency (a fault): pongs with slack on a link
/// whose latency changed take the union of their arrival windows before and after (exact: see
/// the module docs) and keep no slack.
pub fn on_latency_change(cfg: &WorldConfig, s: &mut WorldState, change: impl FnOnce(&mut WorldState)) {
    let latency =
        |s: &WorldState, e: &Envelope| env::latency(cfg, s, zone_of(cfg, e.src), zone_of(cfg, e.dst));
    // Each pong with slack, by its place in the network (a fault moves no message), with its
    // link's latency before the change.
    let before: Vec<(usize, LatencyTicks)> = s
        .net
        .iter()
        .enumerate()
        .filter(|(_, e)| e.slack_ticks > 0)
        .map(|(i, e)| (i, latency(s, e)))
        .collect();
    let in_flight = s.net.len();
    change(s);
    assert_eq!(s.net.len(), in_flight, "a fault changes no message in flight");
    for (i, was) in before {
        let e = s.net[i];
        let Endpoint::Node(n) = e.src else { unreachable!("only a node answers early") };
        assert!(s.nodes[usize::from(n)].up, "no crash comes under a pong with slack");
        assert!(
            env::connected(s, zone_of(cfg, e.src), zone_of(cfg, e.dst)),
            "no cut forms under a pong with slack"
        );
        let now = latency(s, &e);
        if now != was {
            let e = &mut s.net[i];
            (e.earliest_ticks, e.latest_ticks) = merged_window(e, now);
            e.slack_ticks = 0;
        }
    }
}

/// The window of pong `e` (with slack) across a change of its link's latency to `after`: the
/// arrivals if its ping came before the change, or in this tick after it or a later one.
fn merged_window(e: &Envelope, after: LatencyTicks) -> (u8, u8) {
    // The ping may still arrive in this tick (after the change) or `later` ticks on.
    let later = e.slack_ticks - 1;
    let (lo, hi) = (after.lo as u8, after.hi as u8);
    let latest_before = e.latest_ticks - later;
    assert!(
        lo <= latest_before + 1 && e.earliest_ticks <= hi + later + 1,
        "the answers before and after a latency change meet (checked when the ping was answered)"
    );
    (e.earliest_ticks.min(lo), latest_before.max(hi + later))
}

#[cfg(test)]
mod tests {
    use crate::config::{Resolved, Scenario};
    use crate::model::env::{self, zone_of};
    use crate::model::{Action, Envelope, Msg, World, WorldState};
    use stateright::Model;
    use std::collections::{HashSet, VecDeque};

    fn world(model: &str, variant: &str, slack: bool) -> World {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(model);
        world_at(&path, variant, slack)
    }

    fn world_at(path: &std::path::Path, variant: &str, slack: bool) -> World {
        let scenario = Scenario::load(path).expect("the model loads");
        let v = scenario.variant(variant).expect("the variant exists");
        let cfg = Resolved::new(&scenario, &v.policy).expect("it resolves");
        if slack {
            World::with_arrival_slack(cfg)
        } else {
            World::new(cfg)
        }
    }

    /// Everything but the network, hashed: what the coordinator, the nodes, the clients, the
    /// ghost and the environment hold. A ping's arrival tick within its window shows only in
    /// the network, so each state of the world as written has a state with slack that agrees
    /// with it here, and the other way round.
    fn beyond_the_network(s: &WorldState) -> u64 {
        hash(&(&s.nodes, &s.coord, &s.clients, &s.env, &s.ghost))
    }

    fn hash(x: &impl std::hash::Hash) -> u64 {
        use std::hash::Hasher;
        let mut h = std::hash::DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    /// Every reachable state of `world`, plainly (no other reduction): `visit` sees each with
    /// its enabled actions. Returns how many there are and their hashes beyond the network.
    /// Each pong with slack has, past the ticks its ping may yet arrive in, the latency in
    /// force now: `latest_ticks = hi + slack_ticks - 1`.
    fn explore(world: &World, mut visit: impl FnMut(&WorldState, &[Action])) -> (usize, HashSet<u64>) {
        let mut queue: VecDeque<WorldState> = world.init_states().into();
        let mut seen: HashSet<u64> = queue.iter().map(hash).collect();
        let mut projected: HashSet<u64> = queue.iter().map(beyond_the_network).collect();
        let mut actions = Vec::new();
        while let Some(s) = queue.pop_front() {
            for e in s.net.iter().filter(|e| e.slack_ticks > 0) {
                let link = link_latency(world, &s, e);
                assert_eq!(u32::from(e.latest_ticks) + 1, link.hi + u32::from(e.slack_ticks), "{e:?}");
            }
            actions.clear();
            world.actions(&s, &mut actions);
            visit(&s, &actions);
            for a in actions.drain(..) {
                let next = world.next_state(&s, a).expect("an enabled action has a next state");
                if seen.insert(hash(&next)) {
                    projected.insert(beyond_the_network(&next));
                    queue.push_back(next);
                }
            }
        }
        (seen.len(), projected)
    }

    fn link_latency(world: &World, s: &WorldState, e: &Envelope) -> crate::config::LatencyTicks {
        env::latency(&world.cfg, s, zone_of(&world.cfg, e.src), zone_of(&world.cfg, e.dst))
    }

    /// A ping on a lossy link is answered early while the budget may still lose a message (no
    /// crash or cut is in the menu). Losing the ping then shows as losing its pong: no pong
    /// arrives and the budget is spent either way, and the moment of the loss is seen by
    /// nothing else. Every state of the world as written agrees beyond the network with one
    /// with slack and the other way round, and some pong answered early (its window past the
    /// link's `hi`) is lost.
    #[test]
    fn a_lost_ping_is_a_lost_pong() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("lossy-ranged.toml");
        std::fs::write(&path, LOSSY_RANGED_LINK).expect("written");
        let [(plain, lost_in_plain), (with_slack, lost_early)] = [false, true].map(|slack| {
            let world = world_at(&path, "default", slack);
            assert_eq!(world.arrival_slack, slack);
            let mut early_pongs_lost = 0;
            let (_, projected) = explore(&world, |s, actions| {
                early_pongs_lost += actions
                    .iter()
                    .filter(|a| {
                        matches!(a, Action::Lose(e)
                        if e.msg == Msg::Pong && u32::from(e.latest_ticks) > link_latency(&world, s, e).hi)
                    })
                    .count();
            });
            (projected, early_pongs_lost)
        });
        assert_eq!(lost_in_plain, 0, "the world as written answers no ping early");
        assert!(lost_early > 0, "a pong answered early is lost");
        assert_eq!(plain, with_slack, "the same worlds beyond the network");
    }

    /// 3 nodes, the a-c link 100-200ms and lossy, one message may be lost, heartbeats.
    const LOSSY_RANGED_LINK: &str = r#"
name = "lossy-ranged"
description = "pings on a lossy link with a latency range"
tick = "100ms"
properties = ["acked_writes_persist", "no_healthy_eviction", "converges"]
zones = ["a", "b", "c"]
nodes = [{ name = "n1", zone = "a" }, { name = "n2", zone = "b" }, { name = "n3", zone = "c" }]
shards = [{ name = "s1", replicas = ["n1", "n2", "n3"] }]
coordinator = { zone = "a", membership_queue_capacity = 2, membership_update_time = "500ms" }
clients = [{ name = "writer", zone = "a", ops = ["write"], request_timeout = "1500ms" }]

[network]
latency = "100ms"
links = [{ zones = ["a", "c"], latency = "100ms..200ms", lossy = true }]

[faults]
budget = 1
drop = true

[policy]
replication_factor = 3
write_quorum = 2
read_quorum = 2
replica_ack_timeout = "1s"
failure_detection = "independent"
heartbeat_interval = "300ms"
suspect_after = "600ms"
dead_after = "900ms"

[expect]
acked_writes_persist = "holds"
no_healthy_eviction = "holds"
converges = "holds"
"#;

    /// On a link that degrades to 300..700ms and recovers, pings answered early (some while
    /// the recovery may still come) leave fewer states; the properties are compared with the
    /// world as written by tests/reductions.rs.
    #[test]
    fn pings_on_a_degraded_link_are_answered_early() {
        let [(plain, met_in_plain, plain_worlds), (early, met_in_early, early_worlds)] =
            [false, true].map(|slack| {
                // Latency changes (the end of the degradation) met by a pong with slack.
                let mut changes_met = 0;
                let (states, projected) =
                    explore(&world("detector-timing.toml", "rounds", slack), |s, actions| {
                        if s.net.iter().any(|e| e.slack_ticks > 0) {
                            changes_met += actions.iter().filter(|a| matches!(a, Action::Restore(_))).count();
                        }
                    });
                (states, changes_met, projected)
            });
        assert_eq!(met_in_plain, 0, "the world as written answers no ping early");
        assert!(met_in_early > 0, "a link recovered under a pong with slack");
        assert!(early * 2 < plain, "{early} states with arrival slack against {plain} without");
        assert!(plain_worlds == early_worlds, "the same worlds beyond the network");
    }

    /// Every arrival tick of the pong, counted from a latency change `k` ticks into the ping's
    /// window `[0, l]`, that some arrival tick `d` of the ping allows (before the change at
    /// `d <= k`, after it at `d >= k`), against the window the reduction gives it.
    #[test]
    fn a_latency_change_leaves_exactly_the_arrivals_the_ping_allows() {
        use super::{meet, merged_window};
        use crate::config::LatencyTicks;
        use crate::model::{Endpoint, Envelope, Msg};
        let mut checked = 0;
        for l in 0..=5u8 {
            for (lo1, hi1, lo2, hi2) in (1..=6).flat_map(|a| {
                (a..=7).flat_map(move |b| (1..=4).flat_map(move |c| (c..=5).map(move |d| (a, b, c, d))))
            }) {
                let (before, after) = (LatencyTicks { lo: lo1, hi: hi1 }, LatencyTicks { lo: lo2, hi: hi2 });
                if !meet(before, after, l) {
                    continue;
                }
                for k in 0..=l {
                    let mut allowed = std::collections::BTreeSet::new();
                    for d in 0..=l {
                        let (lo, hi) = if d <= k { (lo1, hi1) } else { (lo2, hi2) };
                        // Counted from the change; what had arrived before it is gone.
                        for at in (u32::from(d) + lo)..=(u32::from(d) + hi) {
                            if at >= u32::from(k) {
                                allowed.insert(at - u32::from(k));
                            }
                        }
                        if d == k {
                            allowed.extend((lo2..=hi2).map(|at| at + u32::from(d) - u32::from(k)));
                        }
                    }
                    // The pong as answered at the window's start, then `k` ticks.
                    let pong = Envelope {
                        earliest_ticks: (lo1 as u8).saturating_sub(k),
                        latest_ticks: hi1 as u8 + l - k,
                        src: Endpoint::Node(0),
                        dst: Endpoint::Coordinator(0),
                        msg: Msg::Pong,
                        sender_epoch: 0,
                        slack_ticks: l + 1 - k,
                    };
                    let (lo, hi) = merged_window(&pong, after);
                    let window: std::collections::BTreeSet<u32> = (u32::from(lo)..=u32::from(hi)).collect();
                    assert_eq!(window, allowed, "l {l}, {lo1}..{hi1} -> {lo2}..{hi2} at tick {k}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked} cases");
    }

    /// A world with no latency range has no window to be early in.
    #[test]
    fn applies_only_where_a_window_is() {
        assert!(!world("basic-quorum.toml", "no-read-repair", true).arrival_slack);
        assert!(world("detector-timing.toml", "rounds", true).arrival_slack);
    }
}
