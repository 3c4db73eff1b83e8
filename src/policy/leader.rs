//! The leader family's decisions: when a primary acknowledges a write, which followers count
//! as in sync, which replica a failover promotes, which epochs a replica refuses, and which
//! replica serves a read.
//!
//! Sets of replicas are bit sets over node ids ([`NodeSet`]). Positions in a shard's log are
//! (epoch, version) pairs compared epoch first ([`Position`]): a write of a newer epoch is
//! after every write of an older one, whatever their versions.
//!
//! The acknowledgement rules, exactly (the primary counts as a replica everywhere, as in
//! Kafka's `min.insync.replicas`):
//! - `acks = "leader"`: the primary acknowledges a write as soon as it has stored it
//!   (asynchronous replication). `min_in_sync` plays no part.
//! - `acks = "all"`: once every replica of the shard holds it (fully synchronous).
//!   `min_in_sync` plays no part: every replica is more than any minimum.
//! - `acks = "in_sync"`: a write is refused when the in-sync set is smaller than
//!   `min_in_sync`, and acknowledged once every member of the in-sync set holds it and the set
//!   still has at least `min_in_sync` members. The in-sync set the acks wait for is the one the
//!   failover manager confirmed together with any change the primary proposed and the manager
//!   has not confirmed yet (Kafka's "maximal ISR"): every write acknowledged is then on every
//!   replica the manager may promote cleanly. MySQL's semi-synchronous replication with one
//!   follower is `in_sync` with `min_in_sync = 1` (wait for the follower, fall back to
//!   asynchronous once it lags for `replica_lag_timeout`); without the fallback it is
//!   `min_in_sync = 2`. (With several followers MySQL waits for any one of them, this waits
//!   for every in-sync one.)

use super::{NodeId, Ticks};
use serde::{Deserialize, Serialize};

/// Replicas as a bit set: bit n is node n.
pub type NodeSet = u8;

/// The set holding node `n` alone.
pub fn bit(n: NodeId) -> NodeSet {
    assert!(usize::from(n) < super::NODE_COUNT_MAX);
    1 << n
}

/// Which replication protocol a model or store runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replication {
    /// Leaderless: a coordinator fans each write out to the replicas and waits for a quorum.
    Quorum,
    /// A primary per shard orders the writes and replicates them to followers.
    Leader,
}

impl Replication {
    pub fn as_str(self) -> &'static str {
        match self {
            Replication::Quorum => "quorum",
            Replication::Leader => "leader",
        }
    }
}

/// When the primary acknowledges a write (see the module docs for the exact rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Acks {
    /// Every replica of the shard holds it.
    All,
    /// Every member of the in-sync set holds it, and the set has `min_in_sync` members.
    InSync,
    /// The primary holds it: asynchronous replication.
    Leader,
}

/// Which replicas serve reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFrom {
    /// The primary only.
    Primary,
    /// Any replica, the nearest one first: a follower may answer with a stale value.
    Any,
}

/// The leader family's knobs, validated and in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaderPolicy {
    pub acks: Acks,
    /// With `acks = "in_sync"`: the in-sync replicas (the primary included) a write needs.
    pub min_in_sync: u8,
    /// A follower that has not caught up with the primary for this long leaves the in-sync set.
    pub replica_lag_timeout_ticks: Ticks,
    /// May a replica outside the last confirmed in-sync set be promoted?
    pub unclean_election: bool,
    /// May a failover promote a replica in another zone than the old primary's?
    pub failover_cross_zone: bool,
    /// How long the primary must stay judged dead before the failover promotes a replica.
    pub failover_delay_ticks: Ticks,
    /// Replicas refuse writes and replication from an epoch older than theirs, and the
    /// manager refuses results from an epoch older than its view.
    pub fencing: bool,
    pub read_from: ReadFrom,
}

/// A place in a shard's log: the epoch of the primary that wrote the entry, and its version.
/// Ordered epoch first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Position<E, V> {
    pub epoch: E,
    pub version: V,
}

/// The set a write's acks wait for: the in-sync set the manager confirmed and the one the
/// primary proposed, if a change is pending (a replica leaving still counts until the manager
/// agrees; a replica joining counts at once, since the manager may promote it once it agrees).
pub fn ack_set(confirmed: NodeSet, proposed: Option<NodeSet>) -> NodeSet {
    confirmed | proposed.unwrap_or(0)
}

/// Whether a primary takes a new write, given the set its acks would wait for.
pub fn admits_write(acks: Acks, min_in_sync: u8, ack_set: NodeSet) -> bool {
    assert!(min_in_sync >= 1, "config validation refuses min_in_sync = 0");
    match acks {
        Acks::InSync => ack_set.count_ones() >= u32::from(min_in_sync),
        Acks::All | Acks::Leader => true,
    }
}

/// Whether a write held by `holders` (the primary among them) is acknowledged. `replicas`:
/// the shard's replicas; `ack_set`: see [`ack_set`].
pub fn write_acked(
    acks: Acks,
    min_in_sync: u8,
    replicas: NodeSet,
    ack_set: NodeSet,
    holders: NodeSet,
) -> bool {
    assert!(min_in_sync >= 1, "config validation refuses min_in_sync = 0");
    assert_eq!(holders & !replicas, 0, "only replicas hold a shard's writes");
    assert_eq!(ack_set & !replicas, 0, "the in-sync set is a set of replicas");
    assert_ne!(holders, 0, "the primary holds every write it took");
    match acks {
        Acks::Leader => true,
        Acks::All => holders == replicas,
        Acks::InSync => ack_set & !holders == 0 && ack_set.count_ones() >= u32::from(min_in_sync),
    }
}

/// Whether a follower that holds the primary's log up to `acked` has caught up with a primary
/// whose newest entry is `log_end`.
pub fn caught_up<E: Ord, V: Ord>(acked: Position<E, V>, log_end: Position<E, V>) -> bool {
    acked >= log_end
}

/// The in-sync set the primary wants: itself, and every follower not lagging (a follower lags
/// from the moment it has been behind for `replica_lag_timeout` until it has caught up).
pub fn desired_in_sync(primary: NodeId, replicas: NodeSet, lagging: NodeSet) -> NodeSet {
    assert_ne!(replicas & bit(primary), 0, "the primary is a replica");
    let set = (replicas & !lagging) | bit(primary);
    assert_eq!(set & !replicas, 0);
    set
}

/// The in-sync set a promoted replica starts with. A clean promotion keeps the members of the
/// old set but the old primary (each holds every acknowledged write); an unclean one starts
/// with the new primary alone: nobody else is known to hold what it holds.
pub fn in_sync_after_promotion(confirmed: NodeSet, old: NodeId, new: NodeId, clean: bool) -> NodeSet {
    assert_ne!(old, new, "a failover promotes another replica");
    if clean {
        assert_ne!(confirmed & bit(new), 0, "a clean promotion is of an in-sync replica");
        (confirmed & !bit(old)) | bit(new)
    } else {
        bit(new)
    }
}

/// What the failover manager knows of a replica it may promote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate<E, V> {
    pub node: NodeId,
    pub zone: u8,
    /// It answered the manager's position query in this failover (alive and reachable).
    pub answered: bool,
    /// The newest entry it holds (meaningful only when it answered).
    pub position: Position<E, V>,
    /// A member of the in-sync set the manager last confirmed.
    pub in_sync: bool,
}

/// The promotion knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromotionRules {
    pub unclean_election: bool,
    pub failover_cross_zone: bool,
}

/// Why a failover promoted nobody: the shard stays without a primary that takes writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocked {
    /// No replica answered the position query.
    NoAnswer,
    /// Only replicas in other zones answered, and `failover_cross_zone = false`.
    CrossZone,
    /// Only replicas outside the in-sync set answered, and `unclean_election = false`.
    Unclean,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Promotion {
    Promote { node: NodeId, clean: bool },
    Blocked(Blocked),
}

/// The replica a failover promotes when the primary in `old_zone` is judged dead. Among those
/// that answered (in the old primary's zone only, without `failover_cross_zone`): an in-sync
/// replica before any other (others only with `unclean_election`), then the most caught-up,
/// then one in the old primary's zone, then the lowest node id (an explicit tie-break, so the
/// model and the store choose alike).
pub fn choose_promotion<E: Ord + Copy, V: Ord + Copy>(
    rules: PromotionRules,
    old_zone: u8,
    candidates: &[Candidate<E, V>],
) -> Promotion {
    assert!(candidates.windows(2).all(|w| w[0].node < w[1].node), "one candidate per node, sorted");
    let answered = || candidates.iter().filter(|c| c.answered);
    if answered().next().is_none() {
        return Promotion::Blocked(Blocked::NoAnswer);
    }
    let in_zone = || answered().filter(|c| rules.failover_cross_zone || c.zone == old_zone);
    if in_zone().next().is_none() {
        return Promotion::Blocked(Blocked::CrossZone);
    }
    let best = in_zone()
        .filter(|c| rules.unclean_election || c.in_sync)
        .max_by_key(|c| (c.in_sync, c.position, c.zone == old_zone, std::cmp::Reverse(c.node)));
    let Some(best) = best else { return Promotion::Blocked(Blocked::Unclean) };
    assert!(best.answered);
    assert!(rules.failover_cross_zone || best.zone == old_zone);
    assert!(rules.unclean_election || best.in_sync);
    Promotion::Promote { node: best.node, clean: best.in_sync }
}

/// Whether the failover of a shard decides now: `failover_delay` has passed since the primary
/// was judged dead, and every replica asked for its position answered or the query's deadline
/// passed. (Before that the primary may still be heard from, which calls the failover off.)
pub fn failover_decides(
    delay_left_ticks: Ticks,
    asked: NodeSet,
    answered: NodeSet,
    query_left_ticks: Ticks,
) -> bool {
    assert_eq!(answered & !asked, 0, "only replicas asked answer");
    delay_left_ticks == 0 && (answered == asked || query_left_ticks == 0)
}

/// Fencing: whether a replica (or the manager) at epoch `own` refuses what was sent, or
/// produced, in epoch `incoming`. Without fencing nothing is refused for its epoch.
pub fn refuses_epoch<E: Ord>(fencing: bool, own: E, incoming: E) -> bool {
    fencing && incoming < own
}

/// Whether a replica serves a read: the primary always, a follower where the policy allows.
pub fn serves_read(read_from: ReadFrom, is_primary: bool) -> bool {
    is_primary || read_from == ReadFrom::Any
}

/// A replica a read may go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCandidate {
    pub node: NodeId,
    pub zone: u8,
    /// Not believed dead by the manager's detector.
    pub up: bool,
}

/// The replica a read of a shard goes to: the primary, or with `read_from = "any"` the nearest
/// replica believed up (in the router's zone first, the primary first among equals, then the
/// lowest node id), the primary when none is.
pub fn read_target(
    read_from: ReadFrom,
    primary: NodeId,
    router_zone: u8,
    replicas: &[ReadCandidate],
) -> NodeId {
    assert!(replicas.iter().any(|r| r.node == primary), "the primary is a replica");
    let target = match read_from {
        ReadFrom::Primary => primary,
        ReadFrom::Any => replicas
            .iter()
            .filter(|r| r.up)
            .min_by_key(|r| (r.zone != router_zone, r.node != primary, r.node))
            .map_or(primary, |r| r.node),
    };
    assert!(replicas.iter().any(|r| r.node == target));
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Pos = Position<u8, u8>;

    fn pos(epoch: u8, version: u8) -> Pos {
        Position { epoch, version }
    }

    fn candidate(node: NodeId, zone: u8, position: Pos, in_sync: bool) -> Candidate<u8, u8> {
        Candidate { node, zone, answered: true, position, in_sync }
    }

    const OPEN: PromotionRules = PromotionRules { unclean_election: true, failover_cross_zone: true };
    const CLEAN: PromotionRules = PromotionRules { unclean_election: false, failover_cross_zone: true };

    #[test]
    fn leader_acks_alone_all_waits_for_every_replica() {
        let replicas = 0b111;
        assert!(write_acked(Acks::Leader, 1, replicas, 0b111, 0b001));
        assert!(!write_acked(Acks::All, 1, replicas, 0b001, 0b011));
        assert!(write_acked(Acks::All, 1, replicas, 0b001, 0b111));
    }

    #[test]
    fn in_sync_waits_for_every_in_sync_member_and_the_minimum() {
        let replicas = 0b111;
        // In sync {n0, n1}: n2 lags and is not waited for.
        assert!(!write_acked(Acks::InSync, 2, replicas, 0b011, 0b001));
        assert!(write_acked(Acks::InSync, 2, replicas, 0b011, 0b011));
        // The set shrank to the primary: min_in_sync = 1 acks alone, 2 never does.
        assert!(write_acked(Acks::InSync, 1, replicas, 0b001, 0b001));
        assert!(!write_acked(Acks::InSync, 2, replicas, 0b001, 0b111));
        assert!(admits_write(Acks::InSync, 1, 0b001));
        assert!(!admits_write(Acks::InSync, 2, 0b001));
        assert!(admits_write(Acks::Leader, 3, 0b001), "min_in_sync applies to in_sync only");
    }

    #[test]
    fn a_pending_change_of_the_in_sync_set_counts_both_ways() {
        // n2 proposed out: still waited for until the manager agrees.
        assert_eq!(ack_set(0b111, Some(0b011)), 0b111);
        // n2 proposed back in: waited for at once.
        assert_eq!(ack_set(0b011, Some(0b111)), 0b111);
        assert_eq!(ack_set(0b011, None), 0b011);
    }

    #[test]
    fn the_in_sync_set_is_the_primary_and_every_follower_not_lagging() {
        assert_eq!(desired_in_sync(1, 0b111, 0b100), 0b011);
        assert_eq!(desired_in_sync(1, 0b111, 0b111), 0b010, "the primary is always in");
        assert!(caught_up(pos(1, 3), pos(1, 3)));
        assert!(!caught_up(pos(1, 2), pos(1, 3)));
        assert!(caught_up(pos(2, 0), pos(1, 3)), "a newer epoch is after every older entry");
    }

    #[test]
    fn promotion_prefers_in_sync_then_most_caught_up_then_the_old_zone() {
        let cs = [candidate(1, 1, pos(1, 5), true), candidate(2, 0, pos(1, 5), true)];
        assert_eq!(choose_promotion(CLEAN, 0, &cs), Promotion::Promote { node: 2, clean: true });
        let cs = [candidate(1, 1, pos(1, 6), true), candidate(2, 0, pos(1, 5), true)];
        assert_eq!(choose_promotion(CLEAN, 0, &cs), Promotion::Promote { node: 1, clean: true });
        // Out of sync but further ahead: an in-sync replica first, even with unclean elections.
        let cs = [candidate(1, 0, pos(1, 9), false), candidate(2, 0, pos(1, 5), true)];
        assert_eq!(choose_promotion(OPEN, 0, &cs), Promotion::Promote { node: 2, clean: true });
    }

    #[test]
    fn no_clean_candidate_blocks_the_failover_unless_unclean_elections_are_allowed() {
        let cs = [candidate(1, 0, pos(1, 2), false), candidate(2, 0, pos(1, 3), false)];
        assert_eq!(choose_promotion(CLEAN, 0, &cs), Promotion::Blocked(Blocked::Unclean));
        assert_eq!(choose_promotion(OPEN, 0, &cs), Promotion::Promote { node: 2, clean: false });
        let silent = [Candidate { answered: false, ..candidate(1, 0, pos(1, 2), true) }];
        assert_eq!(choose_promotion(OPEN, 0, &silent), Promotion::Blocked(Blocked::NoAnswer));
        let same_zone_only = PromotionRules { failover_cross_zone: false, ..OPEN };
        let far = [candidate(1, 1, pos(1, 2), true)];
        assert_eq!(choose_promotion(same_zone_only, 0, &far), Promotion::Blocked(Blocked::CrossZone));
    }

    #[test]
    fn promotion_starts_the_in_sync_set_from_what_is_known() {
        assert_eq!(in_sync_after_promotion(0b111, 0, 1, true), 0b110);
        assert_eq!(in_sync_after_promotion(0b011, 0, 1, true), 0b010);
        assert_eq!(in_sync_after_promotion(0b001, 0, 2, false), 0b100);
    }

    #[test]
    fn failover_waits_for_the_delay_and_the_answers_or_their_deadline() {
        assert!(!failover_decides(1, 0b110, 0b110, 3));
        assert!(!failover_decides(0, 0b110, 0b010, 3));
        assert!(failover_decides(0, 0b110, 0b110, 3));
        assert!(failover_decides(0, 0b110, 0b010, 0));
    }

    #[test]
    fn fencing_refuses_only_older_epochs_and_only_when_on() {
        assert!(refuses_epoch(true, 2u8, 1));
        assert!(!refuses_epoch(true, 2u8, 2));
        assert!(!refuses_epoch(true, 2u8, 3));
        assert!(!refuses_epoch(false, 2u8, 1));
    }

    #[test]
    fn reads_go_to_the_primary_or_the_nearest_replica_up() {
        let rs = [
            ReadCandidate { node: 0, zone: 0, up: true },
            ReadCandidate { node: 1, zone: 1, up: true },
            ReadCandidate { node: 2, zone: 1, up: true },
        ];
        assert_eq!(read_target(ReadFrom::Primary, 0, 1, &rs), 0);
        assert_eq!(read_target(ReadFrom::Any, 0, 1, &rs), 1);
        assert_eq!(read_target(ReadFrom::Any, 0, 0, &rs), 0);
        let down = [ReadCandidate { up: false, ..rs[0] }, ReadCandidate { up: false, ..rs[1] }];
        assert_eq!(read_target(ReadFrom::Any, 1, 0, &down), 1, "nobody up: the primary");
        assert!(serves_read(ReadFrom::Primary, true));
        assert!(!serves_read(ReadFrom::Primary, false));
        assert!(serves_read(ReadFrom::Any, false));
    }

    fn acks_strategy() -> impl Strategy<Value = Acks> {
        prop_oneof![Just(Acks::All), Just(Acks::InSync), Just(Acks::Leader)]
    }

    proptest! {
        /// More holders never un-acknowledge a write.
        #[test]
        fn acks_are_monotone_in_holders(
            acks in acks_strategy(), min in 1u8..4, confirmed in 0u8..8, extra in 0u8..8, holders in 1u8..8,
        ) {
            let replicas = 0b111;
            let more = holders | extra;
            if write_acked(acks, min, replicas, confirmed & replicas, holders) {
                prop_assert!(write_acked(acks, min, replicas, confirmed & replicas, more));
            }
        }

        /// The clean-election guarantee: a write acknowledged with `in_sync` is held by every
        /// replica a clean promotion may choose from the confirmed set, whatever change was
        /// pending when it was acknowledged.
        #[test]
        fn a_clean_promotion_keeps_every_in_sync_ack(
            min in 1u8..4, confirmed in 0u8..8, proposed in proptest::option::of(0u8..8), holders in 1u8..8,
            positions in proptest::collection::vec((0u8..3, 0u8..5), 3),
        ) {
            let replicas = 0b111;
            let primary = 0;
            let confirmed = confirmed | bit(primary);
            let proposed = proposed.map(|p| p | bit(primary));
            let holders = holders | bit(primary);
            prop_assume!(write_acked(Acks::InSync, min, replicas, ack_set(confirmed, proposed), holders));
            // The manager may confirm the pending change afterwards, or not.
            for after in [Some(confirmed), proposed].into_iter().flatten() {
                let cs: Vec<_> = (1..3u8)
                    .map(|n| candidate(n, 0, pos(positions[usize::from(n)].0, positions[usize::from(n)].1), after & bit(n) != 0))
                    .collect();
                if let Promotion::Promote { node, clean: true } = choose_promotion(CLEAN, 0, &cs) {
                    prop_assert_ne!(holders & bit(node), 0, "promoted {} lacks an acked write", node);
                }
            }
        }

        /// A promotion obeys the knobs, and nobody eligible is further ahead.
        #[test]
        fn promotion_obeys_the_rules(
            unclean in any::<bool>(), cross in any::<bool>(), old_zone in 0u8..2,
            cs in proptest::collection::vec((0u8..2, any::<bool>(), 0u8..3, 0u8..4, any::<bool>()), 0..4),
        ) {
            let rules = PromotionRules { unclean_election: unclean, failover_cross_zone: cross };
            let cs: Vec<_> = cs.iter().enumerate()
                .map(|(i, &(zone, answered, e, v, in_sync))| Candidate { node: i as NodeId, zone, answered, position: pos(e, v), in_sync })
                .collect();
            let eligible = |c: &&Candidate<u8, u8>| c.answered && (cross || c.zone == old_zone) && (unclean || c.in_sync);
            match choose_promotion(rules, old_zone, &cs) {
                Promotion::Promote { node, clean } => {
                    let chosen = cs[usize::from(node)];
                    prop_assert!(eligible(&&chosen));
                    prop_assert_eq!(clean, chosen.in_sync);
                    for c in cs.iter().filter(eligible).filter(|c| c.in_sync == chosen.in_sync) {
                        prop_assert!(c.position <= chosen.position);
                    }
                    if !chosen.in_sync {
                        prop_assert!(!cs.iter().filter(eligible).any(|c| c.in_sync));
                    }
                }
                Promotion::Blocked(_) => prop_assert!(!cs.iter().any(|c| eligible(&c))),
            }
        }

        /// The in-sync set is a set of replicas with the primary in it.
        #[test]
        fn desired_in_sync_is_well_formed(primary in 0u8..3, lagging in 0u8..8) {
            let set = desired_in_sync(primary, 0b111, lagging);
            prop_assert_ne!(set & bit(primary), 0);
            prop_assert_eq!(set & !0b111, 0);
            prop_assert_eq!(set & lagging & !bit(primary), 0);
        }

        /// A read goes to a replica, and only `any` sends it elsewhere than the primary.
        #[test]
        fn reads_stay_on_replicas(primary in 0u8..3, zone in 0u8..2, ups in 0u8..8, any_replica in any::<bool>()) {
            let rs: Vec<_> = (0..3u8).map(|n| ReadCandidate { node: n, zone: n % 2, up: ups & bit(n) != 0 }).collect();
            let from = if any_replica { ReadFrom::Any } else { ReadFrom::Primary };
            let t = read_target(from, primary, zone, &rs);
            prop_assert!(t < 3);
            if !any_replica {
                prop_assert_eq!(t, primary);
            }
        }
    }
}
