//! The shard rebalancer: which shard to move, from where, to where, and how long a moved
//! shard rests before it may move again.
//!
//! The compaction-oscillation incident came from `Scoring::Disk`: the target was the node
//! with the least raw disk use, blind to its compaction debt, so a hot shard landed on a node
//! that compaction made slow, and was moved away again, forever.

use super::{NodeId, Ticks};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scoring {
    /// Least raw disk use wins.
    Disk,
    /// Nodes with compaction debt above `compaction_debt_max` are no targets, a target must
    /// stay under the watermark after the move, and debt counts as load.
    DiskAndCompaction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RebalancePolicy {
    pub disk_high_watermark_pct: u8,
    pub scoring: Scoring,
    pub compaction_debt_max_pct: u8,
}

/// What the rebalancer sees of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: NodeId,
    pub disk_pct: u16,
    pub compaction_debt_pct: u8,
    /// Its latency is high (the rebalancer reads that as overload).
    pub slow: bool,
    /// It can take one more replica now: a replica slot free, under the recovery limit. A
    /// node without room is no target.
    pub room: bool,
}

/// What the rebalancer sees of one shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardLoad {
    pub shard: u8,
    pub holders: Vec<NodeId>,
    pub size_pct: u8,
    pub hot: bool,
    /// Cooling down after a move, or a membership change is already under way.
    pub resting: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Move {
    pub shard: u8,
    pub from: NodeId,
    pub to: NodeId,
}

/// A node as the rebalancer sees it: its disk holds `disk_used_pct` outside the shards plus
/// the size of each shard it holds (`held`: size and whether it is hot); it is slow when it
/// hosts a hot shard with compaction debt above `slow_debt_pct`.
pub fn node_load(
    node: NodeId,
    disk_used_pct: u8,
    held: &[(u8, bool)],
    compaction_debt_pct: u8,
    slow_debt_pct: u8,
    room: bool,
) -> NodeLoad {
    let disk_pct = u16::from(disk_used_pct) + held.iter().map(|&(size, _)| u16::from(size)).sum::<u16>();
    let hosts_hot = held.iter().any(|&(_, hot)| hot);
    NodeLoad {
        node,
        disk_pct,
        compaction_debt_pct,
        slow: is_slow(hosts_hot, compaction_debt_pct, slow_debt_pct),
        room,
    }
}

/// Whether a node hosting a hot shard with this much compaction debt falls behind on
/// compaction and becomes slow (`slow_debt_pct` is the environment's threshold).
pub fn is_slow(hosts_hot_shard: bool, compaction_debt_pct: u8, slow_debt_pct: u8) -> bool {
    hosts_hot_shard && compaction_debt_pct > slow_debt_pct
}

fn overloaded(n: &NodeLoad, p: &RebalancePolicy) -> bool {
    n.slow || n.disk_pct > u16::from(p.disk_high_watermark_pct)
}

/// Choose at most one move: from the most pressed overloaded node (slow first, then fullest),
/// its hottest, then largest, shard that is not resting, to the best target under `scoring`.
/// Ties break on the lowest id, so model and store choose alike.
pub fn choose_move(nodes: &[NodeLoad], shards: &[ShardLoad], p: &RebalancePolicy) -> Option<Move> {
    assert!(nodes.windows(2).all(|w| w[0].node < w[1].node), "nodes sorted by id");
    let mut sources: Vec<&NodeLoad> = nodes.iter().filter(|n| overloaded(n, p)).collect();
    sources.sort_by_key(|n| (!n.slow, std::cmp::Reverse(n.disk_pct), n.node));
    for source in sources {
        let mut candidates: Vec<&ShardLoad> =
            shards.iter().filter(|s| !s.resting && s.holders.contains(&source.node)).collect();
        candidates.sort_by_key(|s| (!s.hot, std::cmp::Reverse(s.size_pct), s.shard));
        for shard in candidates {
            if let Some(to) = choose_target(nodes, shard, source.node, p) {
                let chosen = Move { shard: shard.shard, from: source.node, to };
                assert!(chosen.from != chosen.to);
                assert!(!shard.holders.contains(&chosen.to));
                return Some(chosen);
            }
        }
    }
    None
}

fn choose_target(nodes: &[NodeLoad], shard: &ShardLoad, from: NodeId, p: &RebalancePolicy) -> Option<NodeId> {
    let eligible = nodes.iter().filter(|n| n.node != from && n.room && !shard.holders.contains(&n.node));
    match p.scoring {
        Scoring::Disk => eligible.min_by_key(|n| (n.disk_pct, n.node)).map(|n| n.node),
        Scoring::DiskAndCompaction => eligible
            .filter(|n| n.compaction_debt_pct <= p.compaction_debt_max_pct)
            .filter(|n| n.disk_pct + u16::from(shard.size_pct) <= u16::from(p.disk_high_watermark_pct))
            .min_by_key(|n| (n.disk_pct + u16::from(n.compaction_debt_pct), n.node))
            .map(|n| n.node),
    }
}

/// The cooldown after a shard's move, given the one after its previous move (0: none yet):
/// `move_cooldown` first, then multiplied by `backoff` each move, capped at `cooldown_max`.
pub fn next_cooldown_ticks(
    previous_ticks: Ticks,
    move_cooldown_ticks: Ticks,
    backoff: u8,
    cooldown_max_ticks: Ticks,
) -> Ticks {
    assert!(backoff >= 1);
    let next = if previous_ticks == 0 {
        move_cooldown_ticks
    } else {
        previous_ticks.saturating_mul(u32::from(backoff))
    };
    next.min(cooldown_max_ticks.max(move_cooldown_ticks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DISK: RebalancePolicy =
        RebalancePolicy { disk_high_watermark_pct: 78, scoring: Scoring::Disk, compaction_debt_max_pct: 100 };
    const AWARE: RebalancePolicy = RebalancePolicy {
        disk_high_watermark_pct: 78,
        scoring: Scoring::DiskAndCompaction,
        compaction_debt_max_pct: 30,
    };

    fn node(node: NodeId, disk_pct: u16, debt: u8, slow: bool) -> NodeLoad {
        NodeLoad { node, disk_pct, compaction_debt_pct: debt, slow, room: true }
    }

    fn hot_on(holder: NodeId) -> ShardLoad {
        ShardLoad { shard: 0, holders: vec![holder], size_pct: 10, hot: true, resting: false }
    }

    #[test]
    fn disk_scoring_sends_the_hot_shard_to_the_compaction_heavy_node() {
        let nodes = [node(0, 80, 0, false), node(1, 40, 60, false), node(2, 60, 0, false)];
        assert_eq!(choose_move(&nodes, &[hot_on(0)], &DISK), Some(Move { shard: 0, from: 0, to: 1 }));
        assert_eq!(choose_move(&nodes, &[hot_on(0)], &AWARE), Some(Move { shard: 0, from: 0, to: 2 }));
    }

    #[test]
    fn a_slow_node_sheds_its_hot_shard_and_resting_shards_stay() {
        let nodes = [node(0, 70, 0, false), node(1, 50, 60, true)];
        assert_eq!(choose_move(&nodes, &[hot_on(1)], &DISK), Some(Move { shard: 0, from: 1, to: 0 }));
        let resting = ShardLoad { resting: true, ..hot_on(1) };
        assert_eq!(choose_move(&nodes, &[resting], &DISK), None);
        // Compaction-aware scoring refuses a target the move would push over the watermark.
        assert_eq!(choose_move(&nodes, &[hot_on(1)], &AWARE), None);
    }

    #[test]
    fn a_node_without_room_is_no_target() {
        let full = NodeLoad { room: false, ..node(1, 10, 0, false) };
        let nodes = [node(0, 90, 0, false), full, node(2, 50, 0, false)];
        assert_eq!(choose_move(&nodes, &[hot_on(0)], &DISK), Some(Move { shard: 0, from: 0, to: 2 }));
    }

    #[test]
    fn cooldown_backs_off_to_its_cap() {
        assert_eq!(next_cooldown_ticks(0, 20, 2, 80), 20);
        assert_eq!(next_cooldown_ticks(20, 20, 2, 80), 40);
        assert_eq!(next_cooldown_ticks(40, 20, 2, 80), 80);
        assert_eq!(next_cooldown_ticks(80, 20, 2, 80), 80);
        assert_eq!(next_cooldown_ticks(0, 0, 1, 0), 0);
    }

    proptest! {
        #[test]
        fn moves_go_from_an_overloaded_holder_to_a_non_holder(
            raw in proptest::collection::vec((0u16..100, 0u8..100, any::<bool>()), 2..6),
            holder in 0usize..6, aware in any::<bool>(),
        ) {
            let nodes: Vec<NodeLoad> = raw.iter().enumerate().map(|(i, (d, c, s))| node(i as NodeId, *d, *c, *s)).collect();
            let holder = (holder % nodes.len()) as NodeId;
            let p = if aware { AWARE } else { DISK };
            if let Some(m) = choose_move(&nodes, &[hot_on(holder)], &p) {
                prop_assert_eq!(m.from, holder);
                prop_assert!(m.to != holder);
                prop_assert!(overloaded(&nodes[usize::from(holder)], &p));
                if aware {
                    prop_assert!(nodes[usize::from(m.to)].compaction_debt_pct <= p.compaction_debt_max_pct);
                }
            }
        }

        #[test]
        fn cooldown_never_exceeds_its_cap(prev in 0u32..200, base in 0u32..50, backoff in 1u8..4, cap in 0u32..100) {
            let next = next_cooldown_ticks(prev, base, backoff, cap);
            prop_assert!(next <= cap.max(base));
        }
    }
}
