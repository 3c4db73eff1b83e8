//! Continuous load keeps a world finite by keeping two counters relative.
//!
//! A client that repeats its workload forever issues ever new operations, and every write gets
//! the next version of its shard: as numbers, both grow without bound, and an endless storm
//! would never revisit a state. But nothing in the world does arithmetic on them: the
//! protocol compares versions (newer wins, a quorum holds at least the acknowledged one) and
//! hands out the one after the newest; an operation's number is only matched for equality.
//! So after every step, in a world with a repeating client, both are renamed, preserving
//! order, to the smallest numbers that do (data independence, as in Wolper's "Expressing
//! interesting properties of programs in propositional temporal logic", 1986):
//!
//! - **versions**, per shard: every version anywhere in the state (replicas, messages, the
//!   coordinator's counter, requests and tokens, the ghost's acknowledged version and
//!   effects) becomes its rank among them; 0, the initial value, stays 0;
//! - **operations** of a repeating client: its `k`-th operation has position `k % n` in its
//!   workload of `n` and round `k / n`. The rounds that still occur in the state (in
//!   messages, requests, tokens, ghost effects, the client's own next operation) become their
//!   rank, and the position is kept, so an operation's kind stays `ops[seq % n]`.
//!
//! Before renaming, what is remembered of a repeating client's operation that nothing else
//! refers to is forgotten: no message or request names it and the client has moved on, so it
//! is never retried or applied again. That is its idempotency token at the coordinator (no
//! request can look it up again; the models' token store is unbounded, so no eviction order
//! depends on it, as with a token that expires once its operation cannot be retried) and the
//! ghost's record of its effect (`no_duplicate_effects` cannot change because of it).
//!
//! Two states that differ only by such a renaming have the same future up to the renaming,
//! and every property reads versions and operations only through comparisons, so the
//! renamed graph has the same verdicts. Worlds without a repeating client are left as they
//! are (their counts stay those of their certificates).

use super::shared::Shared;
use super::{ClientPhase, Msg, OpId, WorldConfig, WorldState};

/// A field that holds an operation or a version (of a shard).
enum Slot<'a> {
    Op(&'a mut OpId),
    Version { shard: u8, version: &'a mut u8 },
}

/// Whether this world needs renaming: some client repeats.
pub fn applies(cfg: &WorldConfig) -> bool {
    cfg.clients.iter().any(|c| c.repeat)
}

/// Rename `s` to its canonical form (see the module doc). A no-op without a repeating client.
pub fn canonicalize(cfg: &WorldConfig, s: &mut WorldState) {
    if cfg.coordinators.len() > 1 && renumber_epochs(s) {
        s.net.sort();
    }
    if s.leader.is_some() && super::leader::canonicalize(s) {
        s.net.sort();
    }
    if !applies(cfg) {
        return;
    }
    forget_unreachable_effects(cfg, s);
    let (versions, rounds) = numbers_in(cfg, s);
    let dense = |v: &Vec<u8>| v.iter().enumerate().all(|(i, &x)| usize::from(x) == i);
    // Versions are renamed to the smallest numbers in the same order and, with several
    // coordinators, in the same class modulo their count (a coordinator's own class keeps
    // its versions apart from the others').
    let classes = cfg.coordinators.len() as u8;
    let renamed: Vec<Vec<u8>> = versions.iter().map(|v| smallest_in_classes(v, classes)).collect();
    let versions_same = versions.iter().zip(&renamed).all(|(a, b)| a == b);
    let rounds_dense = rounds.iter().all(dense);
    if versions_same && rounds_dense {
        return;
    }
    let rank = |sorted: &[u8], x: u8| sorted.binary_search(&x).expect("collected above") as u8;
    let rename = |shard: u8, x: u8| {
        let i = usize::from(shard);
        renamed[i][usize::from(rank(&versions[i], x))]
    };
    visit(s, true, &mut |slot| match slot {
        Slot::Op(op) => {
            let spec = &cfg.clients[usize::from(op.client)];
            if spec.repeat {
                let n = spec.ops.len() as u8;
                op.seq = rank(&rounds[usize::from(op.client)], op.seq / n) * n + op.seq % n;
            }
        }
        Slot::Version { shard, version } => *version = rename(shard, *version),
    });
    // The tokens and the network are kept sorted; renaming preserves order within a client
    // and within a shard, but not across them.
    for c in 0..cfg.coordinators.len() as u8 {
        if s.coordinator(c).tokens.windows(2).any(|w| w[0] > w[1]) {
            s.coordinator_mut(c).tokens.sort();
        }
    }
    if !s.ghost.effects.is_sorted() {
        s.ghost_mut().effects.sort();
    }
    s.net.sort();
}

/// The smallest numbers, in order, each in the class of its original modulo `classes`: 0
/// stays 0 (the initial value).
fn smallest_in_classes(sorted: &[u8], classes: u8) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(sorted.len());
    for &x in sorted {
        let next = out.last().map_or(0, |&m| m + 1);
        let up = (x % classes + classes - next % classes) % classes;
        out.push(next + up);
    }
    debug_assert!(out.iter().zip(sorted).all(|(m, x)| m <= x && m % classes == x % classes));
    out
}

/// Several coordinators: the views' epochs of each shard, renumbered from the oldest any
/// coordinator or message still holds. Only their order matters (a coordinator takes a newer
/// view, the leader counts acks of its current one).
fn renumber_epochs(s: &mut WorldState) -> bool {
    let mut changed = false;
    let shard_count = s.coord.shards.len();
    for shard in 0..shard_count {
        let mut oldest = s.coordinators().map(|c| c.shards[shard].epoch).min().expect("a coordinator");
        for e in &s.net {
            if let Msg::View { shard: k, epoch, .. } | Msg::ViewAck { shard: k, epoch } = e.msg {
                if usize::from(k) == shard {
                    oldest = oldest.min(epoch);
                }
            }
        }
        if oldest == 0 {
            continue;
        }
        changed = true;
        for c in 0..s.peers.len() as u8 + 1 {
            s.coordinator_mut(c).shards[shard].epoch -= oldest;
        }
        for e in &mut s.net {
            if let Msg::View { shard: k, epoch, .. } | Msg::ViewAck { shard: k, epoch } = &mut e.msg {
                if usize::from(*k) == shard {
                    *epoch -= oldest;
                }
            }
        }
    }
    changed
}

/// Every version in `s` per shard (0 included), and every round of each repeating client's
/// operations, each list sorted and without repeats.
fn numbers_in(cfg: &WorldConfig, s: &WorldState) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut versions: Vec<Vec<u8>> = vec![vec![0]; cfg.shard_names.len()];
    let mut rounds: Vec<Vec<u8>> = vec![Vec::new(); cfg.clients.len()];
    visit(&mut s.clone(), true, &mut |slot| match slot {
        Slot::Op(op) => {
            let spec = &cfg.clients[usize::from(op.client)];
            if spec.repeat {
                rounds[usize::from(op.client)].push(op.seq / spec.ops.len() as u8);
            }
        }
        Slot::Version { shard, version } => versions[usize::from(shard)].push(*version),
    });
    for v in versions.iter_mut().chain(rounds.iter_mut()) {
        v.sort_unstable();
        v.dedup();
    }
    (versions, rounds)
}

/// Forget the tokens and recorded effects of repeating clients' operations that nothing
/// refers to any more.
fn forget_unreachable_effects(cfg: &WorldConfig, s: &mut WorldState) {
    let repeats = |op: &OpId| cfg.clients[usize::from(op.client)].repeat;
    let remembered = s.ghost.effects.iter().any(|(op, _)| repeats(op))
        || s.coordinators().any(|c| c.tokens.iter().any(|(op, _)| repeats(op)));
    if !remembered {
        return;
    }
    let mut live: Vec<OpId> = Vec::new();
    let mut probe = s.clone();
    visit(&mut probe, false, &mut |slot| {
        if let Slot::Op(op) = slot {
            live.push(*op);
        }
    });
    if s.ghost.effects.iter().any(|(op, _)| repeats(op) && !live.contains(op)) {
        s.ghost_mut().effects.retain(|(op, _)| !repeats(op) || live.contains(op));
    }
    for c in 0..cfg.coordinators.len() as u8 {
        if s.coordinator(c).tokens.iter().any(|(op, _)| repeats(op) && !live.contains(op)) {
            assert_eq!(cfg.tokens_max, usize::MAX, "forgetting a token must not change which one is evicted");
            s.coordinator_mut(c).tokens.retain(|(op, _)| !repeats(op) || live.contains(op));
        }
    }
}

/// Call `f` on every operation and version field of `s`; the coordinator's tokens and the
/// ghost's effects (what is remembered of past operations) only if `with_remembered`. A client's next operation counts as a field when it is outstanding or about
/// to be invoked (every phase but `Done`).
fn visit(s: &mut WorldState, with_remembered: bool, f: &mut impl FnMut(Slot<'_>)) {
    let partitions: Vec<u8> = s.clients.iter().map(|c| c.partition).collect();
    for (c, client) in s.clients.iter_mut().enumerate() {
        if client.phase != ClientPhase::Done {
            let mut op = OpId { client: c as u8, seq: client.next_op };
            f(Slot::Op(&mut op));
            client.next_op = op.seq;
        }
    }
    for e in &mut s.net {
        visit_msg(&mut e.msg, f);
    }
    for node in Shared::make_mut(&mut s.nodes).iter_mut() {
        for (shard, stored) in node.shards.iter_mut().enumerate() {
            f(Slot::Version { shard: shard as u8, version: &mut stored.version });
        }
    }
    for c in 0..s.peers.len() as u8 + 1 {
        let coord = s.coordinator_mut(c);
        for (shard, view) in coord.shards.iter_mut().enumerate() {
            f(Slot::Version { shard: shard as u8, version: &mut view.next_version });
        }
        for o in &mut coord.ops {
            f(Slot::Op(&mut o.op));
            f(Slot::Version { shard: o.shard, version: &mut o.version });
            f(Slot::Version { shard: o.shard, version: &mut o.best.version });
            if let Some(token) = o.token.as_mut() {
                f(Slot::Op(token));
            }
        }
    }
    for (shard, acked) in s.ghost_mut().acked_version.iter_mut().enumerate() {
        f(Slot::Version { shard: shard as u8, version: acked });
    }
    if with_remembered {
        for c in 0..s.peers.len() as u8 + 1 {
            for (op, version) in s.coordinator_mut(c).tokens.iter_mut() {
                let shard = partitions[usize::from(op.client)];
                f(Slot::Op(op));
                f(Slot::Version { shard, version });
            }
        }
        for (op, version) in s.ghost_mut().effects.iter_mut() {
            let shard = partitions[usize::from(op.client)];
            f(Slot::Op(op));
            f(Slot::Version { shard, version });
        }
    }
}

fn visit_msg(msg: &mut Msg, f: &mut impl FnMut(Slot<'_>)) {
    match msg {
        Msg::Request { op, .. }
        | Msg::Response { op, .. }
        | Msg::ReplicateAck { op, .. }
        | Msg::Refused { op, .. }
        | Msg::ReadReq { op, .. } => f(Slot::Op(op)),
        Msg::Replicate { op, shard, version, .. } | Msg::ReadReply { op, shard, version, .. } => {
            let shard = *shard;
            f(Slot::Op(op));
            f(Slot::Version { shard, version });
        }
        Msg::CopyData { shard, data, .. } => {
            let shard = *shard;
            f(Slot::Version { shard, version: &mut data.version });
        }
        Msg::CopyRequest { .. }
        | Msg::CopyAck { .. }
        | Msg::Ping
        | Msg::Pong
        | Msg::View { .. }
        | Msg::ViewAck { .. }
        | Msg::Propose { .. }
        | Msg::LoadQuery
        | Msg::LoadReport { .. } => {}
        Msg::Leader(_) => {
            unreachable!("leader-family models have no repeating client: the config refuses one")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Resolved, Scenario};
    use crate::model::{Action, World};
    use stateright::Model;

    fn world(model: &str, variant: &str) -> World {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(model);
        let scenario = Scenario::load(&path).expect("the library model loads");
        let v = scenario.variant(variant).expect("the variant exists");
        World::new(Resolved::new(&scenario, &v.policy).expect("it resolves"))
    }

    /// A long deterministic walk through an endless storm: every state is canonical (its
    /// versions and rounds are 0..k), and the numbers stay small although thousands of writes
    /// were issued.
    #[test]
    fn a_walk_through_a_storm_stays_canonical_and_small() {
        let world = world("ack-timeout-eviction-continuous.toml", "incident");
        let cfg = &world.cfg;
        let mut s = world.init_states().remove(0);
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut invoked = 0;
        for _ in 0..20_000 {
            let mut actions = Vec::new();
            world.actions(&s, &mut actions);
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let a = actions[(seed >> 33) as usize % actions.len()].clone();
            invoked += usize::from(matches!(a, Action::ClientInvoke(_)));
            s = world.next_state(&s, a).expect("an enabled action");
            let (versions, rounds) = numbers_in(cfg, &s);
            for v in versions.iter().chain(&rounds) {
                assert!(v.iter().enumerate().all(|(i, &x)| usize::from(x) == i), "dense: {v:?}");
                assert!(v.len() < 16, "few numbers alive at once: {v:?}");
            }
        }
        assert!(invoked > 100, "the walk issued many writes ({invoked})");
    }

    /// Renaming is the identity where it does not apply, and idempotent where it does.
    #[test]
    fn canonical_states_are_fixed_points() {
        let finite = world("ack-timeout-eviction.toml", "incident");
        assert!(!applies(&finite.cfg));
        let endless = world("rebalancer-compaction-continuous.toml", "incident");
        let mut s = endless.init_states().remove(0);
        for _ in 0..500 {
            let mut actions = Vec::new();
            endless.actions(&s, &mut actions);
            s = endless.next_state(&s, actions[actions.len() / 2].clone()).expect("enabled");
            let mut again = s.clone();
            canonicalize(&endless.cfg, &mut again);
            assert_eq!(again, s);
        }
    }
}
