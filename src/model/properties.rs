//! The safety properties, as named predicates over a world state. Each reads the ghost
//! variables the actors maintain or the actors' own state; none changes anything.

use super::{World, WorldConfig, WorldState};
use crate::config::PropertyName;
use crate::policy::quorum;
use stateright::Property;

/// `acked_writes_persist`: the newest acknowledged version of every shard (and so every older
/// one) is held, at that version or newer, by enough members of the current replica set that
/// every read quorum sees it.
pub fn acked_writes_persist(cfg: &WorldConfig, s: &WorldState) -> bool {
    s.ghost.acked_version.iter().enumerate().all(|(shard, &acked)| {
        if acked == 0 {
            return true;
        }
        let members = &s.coord.shards[shard].members;
        let holders =
            members.iter().filter(|&&m| s.nodes[usize::from(m)].shards[shard].version >= acked).count();
        holders >= quorum::holders_needed_for_reads(members.len(), cfg.policy.read_quorum)
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
        PropertyName::Converges | PropertyName::OpsComplete => {
            unreachable!("liveness is a property of cycles, not of a state")
        }
    }
}

/// Edge labels for cycle analysis.
pub const EDGE_TICK: u8 = 1;
/// The replica sets, a join in progress or the membership queue changed.
pub const EDGE_TOPOLOGY: u8 = 2;
/// Some client has an operation outstanding (waiting or backing off) in the source state.
pub const EDGE_PENDING: u8 = 4;

pub fn edge_label(from: &WorldState, action: &super::Action, to: &WorldState) -> u8 {
    let mut label = 0;
    if *action == super::Action::Tick {
        label |= EDGE_TICK;
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
    if from
        .clients
        .iter()
        .any(|c| matches!(c.phase, super::ClientPhase::Waiting { .. } | super::ClientPhase::Backoff { .. }))
    {
        label |= EDGE_PENDING;
    }
    label
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
            PropertyName::Converges | PropertyName::OpsComplete => unreachable!("filtered above"),
        })
        .collect()
}
