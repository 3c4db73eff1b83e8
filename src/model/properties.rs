//! The safety properties, as named predicates over a world state. Each reads the ghost
//! variables the actors maintain or the actors' own state; none changes anything.

use super::{World, WorldConfig, WorldState};
use crate::config::PropertyName;
use crate::policy::quorum;
use stateright::Property;

/// The smallest read quorum a coordinator reads with now (during a rollout, the coordinators'
/// policies differ).
pub fn read_quorum_now(cfg: &WorldConfig, s: &WorldState) -> u8 {
    (0..cfg.coordinators.len() as u8)
        .map(|c| cfg.for_stage(s.stage(c)).policy.read_quorum)
        .min()
        .expect("a coordinator")
}

/// `acked_writes_persist`: the newest acknowledged version of every shard (and so every older
/// one) is held, at that version or newer, by enough members of the current replica set that
/// every read quorum sees it (of every policy the coordinators run now).
pub fn acked_writes_persist(cfg: &WorldConfig, s: &WorldState) -> bool {
    if s.leader.is_some() {
        return super::leader::acked_writes_persist(s);
    }
    s.ghost.acked_version.iter().enumerate().all(|(shard, &acked)| {
        if acked == 0 {
            return true;
        }
        let members = &s.coord.shards[shard].members;
        let holders =
            members.iter().filter(|&&m| s.nodes[usize::from(m)].shards[shard].version >= acked).count();
        holders >= quorum::holders_needed_for_reads(members.len(), read_quorum_now(cfg, s))
    })
}

/// `linearizable`: every shard's history of strong reads and writes has a linearization.
/// (Evaluated by the clients when an operation returns; see `Ghost::linearizable`.)
pub fn linearizable(s: &WorldState) -> bool {
    s.ghost.linearizable
}

/// `no_duplicate_effects`: no write operation was stored at two different versions.
pub fn no_duplicate_effects(s: &WorldState) -> bool {
    !s.ghost.duplicate_effect
}

/// `no_healthy_eviction`: no replica was evicted while up, reachable and fault-free since the
/// coordinator last heard from it. Slow is not failed.
pub fn no_healthy_eviction(s: &WorldState) -> bool {
    s.ghost.healthy_evicted.is_none()
}

/// `churn_bounded`: membership changes never overflowed the coordinator's update queue.
pub fn churn_bounded(s: &WorldState) -> bool {
    !s.ghost.churn_exceeded
}

/// `capacity_respected`: no partition or backend was offered more writes in one tick than its
/// capacity (background load included), whether or not it then throttled them.
pub fn capacity_respected(s: &WorldState) -> bool {
    s.ghost.capacity_breach.is_none()
}

pub fn holds(name: PropertyName, cfg: &WorldConfig, s: &WorldState) -> bool {
    match name {
        PropertyName::AckedWritesPersist => acked_writes_persist(cfg, s),
        PropertyName::Linearizable => linearizable(s),
        PropertyName::NoDuplicateEffects => no_duplicate_effects(s),
        PropertyName::NoHealthyEviction => no_healthy_eviction(s),
        PropertyName::ChurnBounded => churn_bounded(s),
        PropertyName::CapacityRespected => capacity_respected(s),
        PropertyName::Converges
        | PropertyName::OpsComplete
        | PropertyName::DeadReplaced
        | PropertyName::HotShardLeavesSlowNode => {
            unreachable!("liveness is a property of cycles, not of a state")
        }
        PropertyName::SinglePrimary => super::leader::single_primary(s),
    }
}

/// Edge labels for cycle analysis.
/// Time passes, once every burst that ends has ended (`burst_ends = true`): a burst that ends
/// does not last for ever, so liveness is asked of the time after it, and a loop of ticks
/// while it lasts is no behaviour (the burst-ended bits never clear, so a cycle stays on one
/// side of the end).
pub const EDGE_TICK: u8 = 1;
/// The replica sets, a join in progress or the membership queue changed; in the leader family,
/// a shard's primary (a promotion).
pub const EDGE_TOPOLOGY: u8 = 2;
/// A replica set holds a node that is down, in the source state.
pub const EDGE_UNREPLACED: u8 = 4;
/// A hot shard has a replica on a slow node, in the source state (computed only when
/// `hot_shard_leaves_slow_node` is checked).
pub const EDGE_HOT_ON_SLOW: u8 = 8;
/// Client `c` has an operation outstanding (waiting or backing off) in the source state:
/// bit `EDGE_PENDING_CLIENT0 << c`, one per client, so that `ops_complete` asks whether one
/// client's operation stays outstanding, not whether some client is always busy (two endless
/// clients always are).
pub const EDGE_PENDING_CLIENT0: u8 = 16;
const _: () = assert!(crate::policy::CLIENT_COUNT_MAX <= 4, "one pending bit per client in a u8");

/// Whether a hot shard has a replica on a node that is slow (compaction debt above the
/// environment's threshold while it hosts a hot shard). The debt is the node's own: with debt
/// as node state, what the coordinator last heard may be stale, and a node is slow or not
/// whatever the coordinator believes.
pub fn hot_on_slow(cfg: &WorldConfig, s: &WorldState) -> bool {
    let loads = s.coord.node_loads(cfg);
    let slow = |m: u8| {
        let m = usize::from(m);
        if cfg.compaction.dynamic() {
            s.nodes[m].debt_pct > cfg.slow_compaction_debt_pct
        } else {
            loads[m].slow
        }
    };
    cfg.shards
        .iter()
        .zip(&s.coord.shards)
        .any(|(spec, view)| spec.hot && view.members.iter().any(|&m| slow(m)))
}

/// Whether a client's phase counts as "an operation outstanding".
pub fn outstanding(phase: super::ClientPhase) -> bool {
    matches!(phase, super::ClientPhase::Waiting { .. } | super::ClientPhase::Backoff { .. })
}

pub fn edge_label(cfg: &WorldConfig, from: &WorldState, action: &super::Action, to: &WorldState) -> u8 {
    let mut label = 0;
    if *action == super::Action::Tick && super::env::bursts_settled(cfg, from) {
        label |= EDGE_TICK;
    }
    if from.leader.is_some() {
        // The leader family's topology is who is primary: a promotion.
        if super::leader::primary_changed(from, to) {
            label |= EDGE_TOPOLOGY;
        }
        return label | pending_clients(from);
    }
    let down_member =
        from.coord.shards.iter().any(|v| v.members.iter().any(|&m| !from.nodes[usize::from(m)].up));
    if down_member {
        label |= EDGE_UNREPLACED;
    }
    if cfg.properties.contains(&PropertyName::HotShardLeavesSlowNode) && hot_on_slow(cfg, from) {
        label |= EDGE_HOT_ON_SLOW;
    }
    let replicas_changed = from
        .coord
        .shards
        .iter()
        .zip(&to.coord.shards)
        .any(|(a, b)| a.members != b.members || a.join != b.join);
    if replicas_changed || from.coord.queue != to.coord.queue {
        label |= EDGE_TOPOLOGY;
    }
    label | pending_clients(from)
}

/// A bit per client with an operation outstanding in `s` (see [`EDGE_PENDING_CLIENT0`]).
fn pending_clients(s: &WorldState) -> u8 {
    s.clients
        .iter()
        .enumerate()
        .filter(|(_, client)| outstanding(client.phase))
        .fold(0, |label, (c, _)| label | (EDGE_PENDING_CLIENT0 << c))
}

/// The safety properties as stateright sees them (the explorer shows these); liveness is
/// checked by `engine::cycles` on the explored graph, with the edge labels above (see
/// `check::cycle_query`).
pub fn for_world(names: &[PropertyName]) -> Vec<Property<World>> {
    names
        .iter()
        .filter(|name| !name.is_liveness())
        .map(|name| match name {
            PropertyName::AckedWritesPersist => {
                Property::always("acked_writes_persist", |w: &World, s| acked_writes_persist(&w.cfg, s))
            }
            PropertyName::Linearizable => Property::always("linearizable", |_, s| linearizable(s)),
            PropertyName::NoDuplicateEffects => {
                Property::always("no_duplicate_effects", |_, s| no_duplicate_effects(s))
            }
            PropertyName::NoHealthyEviction => {
                Property::always("no_healthy_eviction", |_, s| no_healthy_eviction(s))
            }
            PropertyName::ChurnBounded => Property::always("churn_bounded", |_, s| churn_bounded(s)),
            PropertyName::CapacityRespected => {
                Property::always("capacity_respected", |_, s| capacity_respected(s))
            }
            PropertyName::Converges
            | PropertyName::OpsComplete
            | PropertyName::DeadReplaced
            | PropertyName::HotShardLeavesSlowNode => {
                unreachable!("filtered above")
            }
            PropertyName::SinglePrimary => {
                Property::always("single_primary", |_, s| super::leader::single_primary(s))
            }
        })
        .collect()
}

/// A safety property's status at one state, and why, in the terms the state display uses
/// (shard, node and client names). The status is [`holds`]'s; the reason names what it read.
pub fn explain(name: PropertyName, cfg: &WorldConfig, s: &WorldState) -> (bool, String) {
    let node = |n: u8| cfg.nodes[usize::from(n)].name.clone();
    let holds = holds(name, cfg, s);
    let reason = match name {
        PropertyName::AckedWritesPersist if s.leader.is_some() => super::leader_display::explain_acked(cfg, s),
        PropertyName::AckedWritesPersist => explain_acked(cfg, s),
        PropertyName::Linearizable => explain_linearizable(cfg, s),
        PropertyName::NoDuplicateEffects if holds => {
            format!("{} write operation(s) stored, each at one version", s.ghost.effects.len())
        }
        PropertyName::NoDuplicateEffects => {
            let first: Vec<String> = s
                .ghost
                .effects
                .iter()
                .map(|(op, v)| format!("{}#{} first stored at v{v}", client_name(cfg, op.client), op.seq + 1))
                .collect();
            format!("a write operation was stored at a second, different version (first versions: {})", first.join(", "))
        }
        PropertyName::NoHealthyEviction => match s.ghost.healthy_evicted {
            None => "no replica was evicted while up, reachable and fault-free".into(),
            Some(n) => format!(
                "{} was evicted while up, reachable from the coordinator and fault-free since the coordinator last heard from it",
                node(n)
            ),
        },
        PropertyName::ChurnBounded if holds => format!(
            "membership queue {}/{}{}",
            s.coord.queue.len(),
            cfg.coordinator.membership_queue_capacity,
            match cfg.coordinator.churn_budget {
                Some((max, window)) => format!(", {} change(s) in the last {window} ticks (budget {max})", s.ghost.change_ages.len()),
                None => String::new(),
            }
        ),
        PropertyName::ChurnBounded => format!(
            "the coordinator took on more membership changes than it can (queue capacity {}{}): an update was rejected or the budget exceeded",
            cfg.coordinator.membership_queue_capacity,
            match cfg.coordinator.churn_budget {
                Some((max, window)) => format!(", churn budget {max} per {window} ticks"),
                None => String::new(),
            }
        ),
        PropertyName::CapacityRespected => match s.ghost.capacity_breach {
            None => "no partition or backend was offered more writes in one tick than its capacity".into(),
            Some(b) => {
                let unit = match b.unit {
                    super::CapacityUnit::Partition(p) => format!("partition {}", cfg.shard_names[usize::from(p)]),
                    super::CapacityUnit::Backend(n) => format!("backend {}", node(n)),
                };
                format!("{unit} was offered {} writes in one tick (background included), capacity {}", b.offered, b.capacity)
            }
        },
        PropertyName::Converges
        | PropertyName::OpsComplete
        | PropertyName::DeadReplaced
        | PropertyName::HotShardLeavesSlowNode => {
            unreachable!("liveness is a property of cycles, not of a state")
        }
        PropertyName::SinglePrimary => super::leader_display::explain_single_primary(cfg, s),
    };
    (holds, reason)
}

fn client_name(cfg: &WorldConfig, c: u8) -> String {
    cfg.clients[usize::from(c)].name.clone()
}

/// Per shard with an acknowledged write: the version, who holds it among the replicas, how
/// many every read quorum needs, and (when too few hold it) a read quorum that misses it.
fn explain_acked(cfg: &WorldConfig, s: &WorldState) -> String {
    let node = |n: u8| cfg.nodes[usize::from(n)].name.clone();
    let read_quorum = read_quorum_now(cfg, s);
    let mut parts = Vec::new();
    for (shard, &acked) in s.ghost.acked_version.iter().enumerate() {
        let name = &cfg.shard_names[shard];
        if acked == 0 {
            parts.push(format!("shard {name}: no write acknowledged yet"));
            continue;
        }
        let members = &s.coord.shards[shard].members;
        let (holders, missing): (Vec<u8>, Vec<u8>) =
            members.iter().partition(|&&m| s.nodes[usize::from(m)].shards[shard].version >= acked);
        let needed = quorum::holders_needed_for_reads(members.len(), read_quorum);
        let names = |v: &[u8]| {
            if v.is_empty() {
                "nobody".to_string()
            } else {
                v.iter().map(|&m| node(m)).collect::<Vec<_>>().join(", ")
            }
        };
        let mut line = format!(
            "shard {name}: acked v{acked}; replicas [{}]; held at v{acked} or newer by {} ({} of {needed} needed so that every read quorum of {read_quorum} sees it)",
            names(members),
            names(&holders),
            holders.len()
        );
        if holders.len() < needed {
            let quorum: Vec<u8> = missing.iter().copied().take(usize::from(read_quorum)).collect();
            if quorum.len() == usize::from(read_quorum) {
                let _ = std::fmt::Write::write_fmt(
                    &mut line,
                    format_args!("; the read quorum [{}] misses it", names(&quorum)),
                );
            } else {
                line.push_str("; no read quorum can form and nothing else holds it");
            }
        }
        parts.push(line);
    }
    parts.join("\n")
}

/// Which shard's history has no linearization, with its operations.
fn explain_linearizable(cfg: &WorldConfig, s: &WorldState) -> String {
    use super::history::RegisterOp;
    let per_op = crate::policy::CLIENT_OPS_MAX as u8;
    let mut parts = Vec::new();
    for (shard, h) in s.ghost.history.iter().enumerate() {
        if h.ops.is_empty() || h.linearizable() {
            continue;
        }
        let label = |slot: u8| {
            let o = h.ops.iter().find(|o| o.slot == slot).expect("slot of this history");
            let seq = slot % per_op;
            let kind = match o.op {
                RegisterOp::Write(_) => "write",
                RegisterOp::Read(_) => "read",
            };
            format!("{}.{kind}#{}", client_name(cfg, o.client), seq + 1)
        };
        let ops: Vec<String> = h
            .ops
            .iter()
            .map(|o| {
                let what = match (o.op, o.returned) {
                    (RegisterOp::Write(v), true) => format!("wrote {v}, returned"),
                    (RegisterOp::Write(v), false) => format!("writing {v}, never returned"),
                    (RegisterOp::Read(v), true) => format!("returned {v}"),
                    (RegisterOp::Read(_), false) => "pending".to_string(),
                };
                let after: Vec<String> =
                    h.ops.iter().filter(|p| o.after & (1 << p.slot) != 0).map(|p| label(p.slot)).collect();
                let after = if after.is_empty() {
                    String::new()
                } else {
                    format!(", invoked after {} returned", after.join(" and "))
                };
                format!("{} {what}{after}", label(o.slot))
            })
            .collect();
        parts.push(format!(
            "shard {}: no order of these operations explains what they returned (register starts at 0): {}",
            cfg.shard_names[shard],
            ops.join("; ")
        ));
    }
    if parts.is_empty() {
        if s.ghost.linearizable {
            "every shard's history so far has a linearization".into()
        } else {
            "a history had no linearization when an operation returned".into()
        }
    } else {
        parts.join("\n")
    }
}
