//! Eviction of dead replicas and the choice of their replacement.

use super::detector::Health;
use super::NodeId;
use super::{coordinator_load, recovery};
use serde::{Deserialize, Serialize};

/// The eviction knobs, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EvictionPolicy {
    pub enabled: bool,
    /// Circuit breaker: no eviction while more than this share of all nodes (in thousandths)
    /// looks dead. Many nodes "dying" at once is more likely a network event than failures.
    pub max_dead_fraction_permille: u16,
    pub max_concurrent_evictions: u8,
    /// Evictions pause while the coordinator's work backlog is above this many units
    /// (`coordinator_load_ceiling`; `None`: never).
    pub coordinator_load_ceiling_work: Option<u16>,
    /// Joins a node may take part in at once, receiving (the replacement) or sending (a source
    /// of the copies); `None`: unlimited (`recovery::may_recover`).
    pub max_recoveries_per_node: Option<u8>,
}

/// What the coordinator knows about one node when it looks for a replacement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub node: NodeId,
    pub zone: u8,
    pub health: Health,
    /// Already in the shard's replica set (or joining it).
    pub is_member: bool,
    /// It has a replica slot left (`replica_slots`): it may take one more replica.
    pub slot_free: bool,
    /// Joins it takes part in now, receiving or sending.
    pub recoveries: u8,
}

/// Why an eviction did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Suppressed {
    Disabled,
    CircuitBreaker,
    ConcurrencyLimit,
    /// The coordinator's backlog is above `coordinator_load_ceiling`.
    CoordinatorOverloaded,
    /// A remaining member, which would send the copies, is in `max_recoveries_per_node` joins.
    RecoveryLimit,
    NoReplacement,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictionDecision {
    Evict { replacement: NodeId },
    Suppressed(Suppressed),
}

/// The cluster-wide counts the circuit breaker and the concurrency limit look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    pub dead_nodes: usize,
    pub total_nodes: usize,
    pub evictions_in_progress: usize,
    /// The coordinator's load behind the decision, in units of queued work (0 where its load
    /// is not modelled): its backlog now, or the backlog that delayed the request whose
    /// deadline miss is the evidence, whichever is more.
    pub coordinator_load_work: u16,
    /// The most joins any remaining member of the shard (a source of the copies) is in now.
    pub busiest_source_recoveries: u8,
}

/// Whether the correlated-eviction circuit breaker lets evictions through.
pub fn breaker_allows(view: ClusterView, max_dead_fraction_permille: u16) -> bool {
    assert!(view.total_nodes > 0);
    assert!(view.dead_nodes <= view.total_nodes);
    view.dead_nodes * 1000 <= view.total_nodes * usize::from(max_dead_fraction_permille)
}

/// The replacement for a replica evicted from `evicted_zone`: a node outside the replica set
/// that looks alive, has a replica slot free, is under the recovery limit and is not in
/// `excluded` (a bit per node: targets of abandoned joins), preferring the evicted replica's
/// zone (to keep the zone spread), then the lowest node id (an explicit tie-break, so model
/// and store choose alike).
pub fn choose_replacement(
    evicted_zone: u8,
    candidates: &[Candidate],
    max_recoveries_per_node: Option<u8>,
    excluded: u8,
) -> Option<NodeId> {
    candidates
        .iter()
        .filter(|c| !c.is_member && c.health == Health::Alive && c.slot_free)
        .filter(|c| recovery::may_recover(c.recoveries, max_recoveries_per_node))
        .filter(|c| excluded & (1 << c.node) == 0)
        .min_by_key(|c| (c.zone != evicted_zone, c.node))
        .map(|c| c.node)
}

/// Decide whether a replica the detector declared dead is evicted now, and by whom it is
/// replaced. Without a replacement the replica stays: evicting it would only shrink the set.
pub fn decide_eviction(
    policy: EvictionPolicy,
    view: ClusterView,
    evicted_zone: u8,
    candidates: &[Candidate],
    excluded: u8,
) -> EvictionDecision {
    if !policy.enabled {
        return EvictionDecision::Suppressed(Suppressed::Disabled);
    }
    if !breaker_allows(view, policy.max_dead_fraction_permille) {
        return EvictionDecision::Suppressed(Suppressed::CircuitBreaker);
    }
    if view.evictions_in_progress >= usize::from(policy.max_concurrent_evictions) {
        return EvictionDecision::Suppressed(Suppressed::ConcurrencyLimit);
    }
    if coordinator_load::changes_paused(view.coordinator_load_work, policy.coordinator_load_ceiling_work) {
        return EvictionDecision::Suppressed(Suppressed::CoordinatorOverloaded);
    }
    if !recovery::may_recover(view.busiest_source_recoveries, policy.max_recoveries_per_node) {
        return EvictionDecision::Suppressed(Suppressed::RecoveryLimit);
    }
    match choose_replacement(evicted_zone, candidates, policy.max_recoveries_per_node, excluded) {
        Some(replacement) => {
            assert!(candidates.iter().any(|c| c.node == replacement && !c.is_member));
            EvictionDecision::Evict { replacement }
        }
        None => EvictionDecision::Suppressed(Suppressed::NoReplacement),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn candidate(node: NodeId, zone: u8, health: Health, is_member: bool) -> Candidate {
        Candidate { node, zone, health, is_member, slot_free: true, recoveries: 0 }
    }

    const OPEN: EvictionPolicy = EvictionPolicy {
        enabled: true,
        max_dead_fraction_permille: 1000,
        max_concurrent_evictions: 1,
        coordinator_load_ceiling_work: None,
        max_recoveries_per_node: None,
    };

    fn view(dead_nodes: usize, total_nodes: usize) -> ClusterView {
        ClusterView {
            dead_nodes,
            total_nodes,
            evictions_in_progress: 0,
            coordinator_load_work: 0,
            busiest_source_recoveries: 0,
        }
    }

    #[test]
    fn replacement_prefers_same_zone_then_lowest_id() {
        let c = [
            candidate(4, 0, Health::Alive, false),
            candidate(3, 1, Health::Alive, false),
            candidate(5, 1, Health::Alive, false),
            candidate(1, 1, Health::Alive, true),
        ];
        assert_eq!(choose_replacement(1, &c, None, 0), Some(3));
        assert_eq!(choose_replacement(0, &c, None, 0), Some(4));
        assert_eq!(choose_replacement(2, &c, None, 0), Some(3));
    }

    #[test]
    fn full_nodes_and_busy_nodes_are_no_replacements() {
        let full = Candidate { slot_free: false, ..candidate(3, 0, Health::Alive, false) };
        let busy = Candidate { recoveries: 2, ..candidate(4, 0, Health::Alive, false) };
        let c = [full, busy, candidate(5, 1, Health::Alive, false)];
        assert_eq!(choose_replacement(0, &c, Some(2), 0), Some(5));
        assert_eq!(choose_replacement(0, &c, None, 0), Some(4), "no recovery limit: busy is fine");
        // The target of an abandoned join is not chosen again.
        assert_eq!(choose_replacement(0, &c, None, 1 << 4), Some(5));
        assert_eq!(choose_replacement(0, &c[1..2], None, 1 << 4), None);
    }

    #[test]
    fn a_source_at_its_recovery_limit_holds_the_eviction() {
        let limited = EvictionPolicy { max_recoveries_per_node: Some(1), ..OPEN };
        let spare = [candidate(3, 0, Health::Alive, false)];
        let busy = ClusterView { busiest_source_recoveries: 1, ..view(1, 4) };
        assert_eq!(
            decide_eviction(limited, busy, 0, &spare, 0),
            EvictionDecision::Suppressed(Suppressed::RecoveryLimit)
        );
        assert_eq!(decide_eviction(OPEN, busy, 0, &spare, 0), EvictionDecision::Evict { replacement: 3 });
    }

    #[test]
    fn breaker_stops_correlated_evictions() {
        let policy = EvictionPolicy { max_dead_fraction_permille: 340, ..OPEN };
        let spare = [candidate(3, 0, Health::Alive, false)];
        assert_eq!(
            decide_eviction(policy, view(1, 4), 0, &spare, 0),
            EvictionDecision::Evict { replacement: 3 }
        );
        assert_eq!(
            decide_eviction(policy, view(2, 4), 0, &spare, 0),
            EvictionDecision::Suppressed(Suppressed::CircuitBreaker)
        );
    }

    #[test]
    fn no_replacement_means_no_eviction() {
        let none = [candidate(0, 0, Health::Dead, false)];
        assert_eq!(
            decide_eviction(OPEN, view(1, 3), 0, &none, 0),
            EvictionDecision::Suppressed(Suppressed::NoReplacement)
        );
    }

    #[test]
    fn concurrency_limit_and_switch_are_respected() {
        let spare = [candidate(3, 0, Health::Alive, false)];
        let busy = ClusterView { evictions_in_progress: 1, ..view(1, 4) };
        assert_eq!(
            decide_eviction(OPEN, busy, 0, &spare, 0),
            EvictionDecision::Suppressed(Suppressed::ConcurrencyLimit)
        );
        let off = EvictionPolicy { enabled: false, ..OPEN };
        assert_eq!(
            decide_eviction(off, view(1, 4), 0, &spare, 0),
            EvictionDecision::Suppressed(Suppressed::Disabled)
        );
    }

    #[test]
    fn a_busy_coordinator_pauses_evictions_above_its_ceiling() {
        let spare = [candidate(3, 0, Health::Alive, false)];
        let ceiling = EvictionPolicy { coordinator_load_ceiling_work: Some(4), ..OPEN };
        let busy = ClusterView { coordinator_load_work: 5, ..view(1, 4) };
        assert_eq!(
            decide_eviction(ceiling, busy, 0, &spare, 0),
            EvictionDecision::Suppressed(Suppressed::CoordinatorOverloaded)
        );
        // At the ceiling, or without one, the eviction goes ahead.
        let at = ClusterView { coordinator_load_work: 4, ..view(1, 4) };
        assert_eq!(decide_eviction(ceiling, at, 0, &spare, 0), EvictionDecision::Evict { replacement: 3 });
        assert_eq!(decide_eviction(OPEN, busy, 0, &spare, 0), EvictionDecision::Evict { replacement: 3 });
    }

    fn arb_health() -> impl Strategy<Value = Health> {
        prop_oneof![Just(Health::Alive), Just(Health::Suspect), Just(Health::Dead)]
    }

    proptest! {
        /// A chosen replacement is never a member and never looks unhealthy.
        #[test]
        fn replacement_is_an_alive_non_member(
            zone in 0u8..3,
            raw in proptest::collection::vec((0u8..3, arb_health(), any::<bool>()), 0..8),
        ) {
            let candidates: Vec<Candidate> = raw.iter().enumerate()
                .map(|(i, (z, h, m))| candidate(i as NodeId, *z, *h, *m)).collect();
            match choose_replacement(zone, &candidates, None, 0) {
                Some(node) => {
                    let c = candidates[usize::from(node)];
                    prop_assert!(!c.is_member && c.health == Health::Alive);
                    let same_zone_exists = candidates.iter().any(|c| !c.is_member && c.health == Health::Alive && c.zone == zone);
                    prop_assert_eq!(c.zone == zone, same_zone_exists);
                }
                None => prop_assert!(candidates.iter().all(|c| c.is_member || c.health != Health::Alive)),
            }
        }

        /// The breaker is monotone: more dead nodes never re-open it.
        #[test]
        fn breaker_is_monotone(total in 1usize..9, a in 0usize..9, b in 0usize..9, permille in 0u16..=1000) {
            prop_assume!(a <= total && b <= total);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            if breaker_allows(view(hi, total), permille) {
                prop_assert!(breaker_allows(view(lo, total), permille));
            }
        }
    }
}
