//! Request routing: which partition a key's writes land on (key sharding), whether a
//! partition or backend admits one more write, and which backend ingests a write (placement).
//!
//! Capacities and loads are counts of writes per tick. A write is *offered* to a partition or
//! backend when it is routed there; capacity is respected when the offered load never exceeds
//! the capacity, whatever is then rejected.

use super::NodeId;
use serde::{Deserialize, Serialize};

/// Most suffixes a hot key prefix may be split over.
pub const WRITE_SHARD_SUFFIXES_MAX: u8 = 16;

/// How the load balancer picks the backend that ingests a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Walk the backends in preference order and take the first that stays under the spill
    /// threshold after this write; if none does, the one with the most headroom that still
    /// has room; if none has room, reject the write (shed load) rather than overload anyone.
    CapacityAware,
    /// The traffic-sorting optimisation: always the first backend that is up in preference
    /// order, with no capacity check, so traffic piles onto the backends that sort first.
    Sorted,
}

/// The upload planner: a second routing layer that can override placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadPlanner {
    /// The planner defers to `placement`.
    CapacityAware,
    /// The planner feature that packs uploads onto the smallest backends first, bypassing
    /// capacity checks (its incomplete rollback caused the recurrence).
    SmallestFirst,
}

/// The routing knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RoutingPolicy {
    pub placement: Placement,
    /// Capacity-aware placement spills to another backend once a backend would be above this
    /// fraction of its capacity, in permille.
    pub spill_threshold_permille: u16,
    pub upload_planner: UploadPlanner,
    /// Suffixes a key prefix is split over (`hash(key) % N` appended to the partition key);
    /// 1 means no key sharding.
    pub write_shard_suffixes: u8,
}

/// A key's hash as the models see it (0..=255): the input of [`write_suffix`]. A type of its
/// own so that it cannot be passed where a partition or a count is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyHash(pub u8);

/// How a table's keys are spread: over `partition_count` partitions, each key prefix split
/// over `write_shard_suffixes` suffixes. Named fields, so the two counts are not swapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySharding {
    pub partition_count: u8,
    pub write_shard_suffixes: u8,
}

/// The suffix a key gets: the key's hash modulo the suffix count. The read path computes the
/// same suffix, so a key is always read from the partition it was written to.
pub fn write_suffix(key_hash: KeyHash, write_shard_suffixes: u8) -> u8 {
    assert!((1..=WRITE_SHARD_SUFFIXES_MAX).contains(&write_shard_suffixes));
    key_hash.0 % write_shard_suffixes
}

/// The partition a key of prefix `prefix_partition` lands on once suffix `suffix` is appended.
/// Consecutive suffixes land on consecutive partitions: the hash of the partition key spreads
/// them, and a model with few partitions should not depend on hash collisions.
pub fn partition_for(prefix_partition: u8, suffix: u8, partition_count: u8) -> u8 {
    assert!(prefix_partition < partition_count);
    ((u16::from(prefix_partition) + u16::from(suffix)) % u16::from(partition_count)) as u8
}

/// The separator between a concrete key's prefix and the rest (`cart:42` has prefix `cart`).
pub const KEY_PREFIX_SEPARATOR: u8 = b':';

/// FNV-1a over a key's bytes: stable across runs, machines and versions, because it decides
/// where data lives.
pub fn key_hash64(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A concrete key's hash as the models see it (`key_hash`, 0..=255), the input of
/// `write_suffix`. The low byte of FNV-1a: every suffix count up to 16 divides nothing away
/// from it that a model depends on.
pub fn key_hash(key: &[u8]) -> KeyHash {
    KeyHash((key_hash64(key) & 0xff) as u8)
}

/// A concrete key's prefix: its bytes up to the first `:`, or the whole key.
pub fn key_prefix(key: &[u8]) -> &[u8] {
    key.iter().position(|&b| b == KEY_PREFIX_SEPARATOR).map_or(key, |i| &key[..i])
}

/// The partition a prefix hashes to (before any suffix).
pub fn prefix_partition(prefix: &[u8], partition_count: u8) -> u8 {
    assert!(partition_count > 0);
    (key_hash64(prefix) % u64::from(partition_count)) as u8
}

/// The partition a key is written to and read from: its prefix's partition, moved by the
/// key's suffix (`write_suffix` of its hash). The models and the store both route by this.
pub fn key_partition(prefix_partition: u8, key_hash: KeyHash, sharding: KeySharding) -> u8 {
    let suffix = write_suffix(key_hash, sharding.write_shard_suffixes);
    partition_for(prefix_partition, suffix, sharding.partition_count)
}

/// Background writes per tick on each partition, from each prefix's burst (`bursts_per_tick`,
/// indexed by prefix partition) spread evenly over its suffixes.
pub fn partition_background(bursts_per_tick: &[u16], write_shard_suffixes: u8) -> Vec<u16> {
    let partition_count = u8::try_from(bursts_per_tick.len()).expect("at most 255 partitions");
    let mut background = vec![0u16; bursts_per_tick.len()];
    for (prefix, &burst) in bursts_per_tick.iter().enumerate() {
        for suffix in 0..write_shard_suffixes {
            let p = partition_for(prefix as u8, suffix, partition_count);
            background[usize::from(p)] += suffix_share(burst, write_shard_suffixes, suffix);
        }
    }
    background
}

/// How many of a prefix's `writes_per_tick` land on each of its `suffixes` suffixes: the many
/// keys of a cohort hash evenly, so suffix `i` gets the even share, one more for the first
/// `writes_per_tick % suffixes`.
pub fn suffix_share(writes_per_tick: u16, write_shard_suffixes: u8, suffix: u8) -> u16 {
    assert!(suffix < write_shard_suffixes);
    let n = u16::from(write_shard_suffixes);
    writes_per_tick / n + u16::from(u16::from(suffix) < writes_per_tick % n)
}

/// A partition's write capacity per tick: its own cap (the hard per-partition limit), and no
/// more than its even share of the table's capacity. Raising the table's capacity never lifts
/// a partition past its own cap. `None` (either) is unlimited.
pub fn partition_capacity(
    partition_cap_per_tick: Option<u16>,
    table_cap_per_tick: Option<u16>,
    partition_count: u8,
) -> Option<u16> {
    assert!(partition_count > 0);
    let share = table_cap_per_tick.map(|t| t / u16::from(partition_count));
    match (partition_cap_per_tick, share) {
        (Some(p), Some(s)) => Some(p.min(s)),
        (p, s) => p.or(s),
    }
}

/// Whether a partition or backend serves one more write this tick, given the load already
/// offered to it this tick (this write excluded). Above capacity it throttles (rejects).
pub fn admits(offered_before: u16, capacity_per_tick: Option<u16>) -> bool {
    capacity_per_tick.is_none_or(|cap| offered_before < cap)
}

/// A backend as the load balancer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BackendLoad {
    pub node: NodeId,
    pub up: bool,
    /// Writes per tick the backend can ingest; `None` is unlimited.
    pub capacity_per_tick: Option<u16>,
    /// Writes already offered to it this tick, background load included.
    pub load_per_tick: u16,
}

/// A backend's load after one more write, as the exact fraction `writes / capacity` (no
/// rounding: at capacities above 1000 per tick a permille rounded down would call a full
/// backend 100% and let it win over an idle one). An unlimited backend is 0; a capacity of 0
/// is infinitely full.
#[derive(Clone, Copy, Debug)]
struct Fill {
    writes: u64,
    /// 0: capacity 0 (infinitely full).
    capacity: u64,
}

fn fill_after_write(b: &BackendLoad) -> Fill {
    match b.capacity_per_tick {
        None => Fill { writes: 0, capacity: 1 },
        Some(cap) => Fill { writes: u64::from(b.load_per_tick) + 1, capacity: u64::from(cap) },
    }
}

impl Fill {
    fn at_most_permille(self, permille: u64) -> bool {
        self.capacity > 0 && self.writes * 1000 <= permille * self.capacity
    }

    fn cmp(&self, other: &Fill) -> std::cmp::Ordering {
        match (self.capacity, other.capacity) {
            (0, 0) => std::cmp::Ordering::Equal,
            (0, _) => std::cmp::Ordering::Greater,
            (_, 0) => std::cmp::Ordering::Less,
            (a, b) => (self.writes * b).cmp(&(other.writes * a)),
        }
    }
}

/// The backend that ingests the next write, or `None` to reject it. `backends` is in
/// preference order (locality, then name: the order the traffic sorting uses).
pub fn choose_backend(policy: &RoutingPolicy, backends: &[BackendLoad]) -> Option<NodeId> {
    assert!(policy.spill_threshold_permille <= 1000);
    let up = || backends.iter().filter(|b| b.up);
    if policy.upload_planner == UploadPlanner::SmallestFirst {
        // Unlimited backends count as the largest.
        return up().min_by_key(|b| (b.capacity_per_tick.unwrap_or(u16::MAX), b.node)).map(|b| b.node);
    }
    match policy.placement {
        Placement::Sorted => up().next().map(|b| b.node),
        Placement::CapacityAware => {
            let threshold = u64::from(policy.spill_threshold_permille);
            if let Some(b) = up().find(|b| fill_after_write(b).at_most_permille(threshold)) {
                return Some(b.node);
            }
            up().filter(|b| admits(b.load_per_tick, b.capacity_per_tick))
                .min_by(|a, b| fill_after_write(a).cmp(&fill_after_write(b)).then(a.node.cmp(&b.node)))
                .map(|b| b.node)
        }
    }
}

/// Where one write went: each partition or backend it was offered to counts it as load,
/// whether or not it was then served (a retry storm is load too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteRoute {
    /// Served; ingested by `backend` when backends are modelled.
    Admitted { backend: Option<NodeId> },
    /// Its partition was at capacity: throttled there, never offered to a backend.
    PartitionThrottled,
    /// No backend had room: shed before any backend was offered it.
    Shed,
    /// Placed on `backend`, which was at capacity: offered to it and throttled.
    BackendThrottled { backend: NodeId },
}

impl WriteRoute {
    pub fn admitted(self) -> bool {
        matches!(self, WriteRoute::Admitted { .. })
    }

    /// The backend the write was offered to, if any.
    pub fn backend_offered(self) -> Option<NodeId> {
        match self {
            WriteRoute::Admitted { backend } => backend,
            WriteRoute::BackendThrottled { backend } => Some(backend),
            WriteRoute::PartitionThrottled | WriteRoute::Shed => None,
        }
    }
}

/// Route one write: first its partition's capacity (key sharding chose the partition), then,
/// when backends are modelled, placement on an ingest backend and that backend's capacity.
/// `partition_offered_before` counts this window's writes on the partition, background load
/// included; `backends` are in preference order with their load this window.
pub fn route_write(
    policy: &RoutingPolicy,
    partition_offered_before: u16,
    partition_capacity_per_tick: Option<u16>,
    backends: Option<&[BackendLoad]>,
) -> WriteRoute {
    if !admits(partition_offered_before, partition_capacity_per_tick) {
        return WriteRoute::PartitionThrottled;
    }
    let Some(backends) = backends else { return WriteRoute::Admitted { backend: None } };
    let Some(backend) = choose_backend(policy, backends) else { return WriteRoute::Shed };
    let chosen = backends.iter().find(|b| b.node == backend).expect("chosen among them");
    if admits(chosen.load_per_tick, chosen.capacity_per_tick) {
        WriteRoute::Admitted { backend: Some(backend) }
    } else {
        WriteRoute::BackendThrottled { backend }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn routing(placement: Placement, upload_planner: UploadPlanner) -> RoutingPolicy {
        RoutingPolicy { placement, spill_threshold_permille: 800, upload_planner, write_shard_suffixes: 1 }
    }

    fn backend(node: NodeId, cap: u16, load: u16) -> BackendLoad {
        BackendLoad { node, up: true, capacity_per_tick: Some(cap), load_per_tick: load }
    }

    #[test]
    fn a_full_backend_never_wins_over_an_idle_one_at_large_capacities() {
        // 2000 per tick, 2000 offered: one more write is 100.05% (rounded down, 100%).
        let policy = RoutingPolicy {
            spill_threshold_permille: 1000,
            ..routing(Placement::CapacityAware, UploadPlanner::CapacityAware)
        };
        let backends = [backend(0, 2000, 2000), backend(1, 2000, 0)];
        assert_eq!(choose_backend(&policy, &backends), Some(1));
    }

    proptest! {
        /// Capacity-aware placement takes the first backend at or under the spill threshold
        /// after the write, exactly; otherwise the least full one that still admits the write.
        #[test]
        fn capacity_aware_placement_is_exact(
            threshold in 0u16..=1000,
            loads in proptest::collection::vec((1u16..=u16::MAX, 0u16..=u16::MAX), 1..6),
        ) {
            let policy = RoutingPolicy { spill_threshold_permille: threshold, ..routing(Placement::CapacityAware, UploadPlanner::CapacityAware) };
            let backends: Vec<BackendLoad> =
                loads.iter().enumerate().map(|(i, &(cap, load))| backend(i as NodeId, cap, load)).collect();
            let under = |b: &BackendLoad| {
                let cap = u64::from(b.capacity_per_tick.unwrap());
                (u64::from(b.load_per_tick) + 1) * 1000 <= u64::from(threshold) * cap
            };
            let chosen = choose_backend(&policy, &backends);
            match backends.iter().find(|b| under(b)) {
                Some(first) => prop_assert_eq!(chosen, Some(first.node)),
                None => {
                    let admitting: Vec<&BackendLoad> =
                        backends.iter().filter(|b| admits(b.load_per_tick, b.capacity_per_tick)).collect();
                    match chosen {
                        None => prop_assert!(admitting.is_empty()),
                        Some(n) => {
                            let c = backends[usize::from(n)];
                            prop_assert!(admits(c.load_per_tick, c.capacity_per_tick));
                            // No admitting backend is strictly less full after the write.
                            let fill = |b: &BackendLoad| (u64::from(b.load_per_tick) + 1, u64::from(b.capacity_per_tick.unwrap()));
                            let (cw, cc) = fill(&c);
                            for b in admitting {
                                let (bw, bc) = fill(b);
                                prop_assert!(cw * bc <= bw * cc, "{:?} is less full than the chosen {:?}", b, c);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn one_suffix_puts_a_whole_prefix_on_one_partition() {
        for key_hash in 0..10 {
            assert_eq!(partition_for(1, write_suffix(KeyHash(key_hash), 1), 4), 1);
        }
        let spread: Vec<u8> = (0..4).map(|h| partition_for(1, write_suffix(KeyHash(h), 4), 4)).collect();
        assert_eq!(spread, vec![1, 2, 3, 0]);
    }

    #[test]
    fn concrete_keys_split_by_prefix_and_suffix() {
        assert_eq!(key_prefix(b"cart:42"), b"cart");
        assert_eq!(key_prefix(b"plain"), b"plain");
        assert_eq!(key_prefix(b":x"), b"");
        // FNV-1a's published test vectors pin the hash (data placement depends on it).
        assert_eq!(key_hash64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash64(b"a"), 0xaf63_dc4c_8601_ec8c);
        // One suffix: every key of a prefix on the prefix's partition.
        for i in 0..50u32 {
            let key = format!("cart:{i}");
            let one = KeySharding { partition_count: 4, write_shard_suffixes: 1 };
            assert_eq!(key_partition(2, key_hash(key.as_bytes()), one), 2);
        }
        // Four suffixes over four partitions: keys of one prefix reach all of them.
        let four = KeySharding { partition_count: 4, write_shard_suffixes: 4 };
        let reached: std::collections::BTreeSet<u8> =
            (0..50u32).map(|i| key_partition(2, key_hash(format!("cart:{i}").as_bytes()), four)).collect();
        assert_eq!(reached.len(), 4);
    }

    #[test]
    fn background_spreads_each_burst_over_its_suffixes() {
        assert_eq!(partition_background(&[2, 0, 0, 0], 1), vec![2, 0, 0, 0]);
        assert_eq!(partition_background(&[2, 0, 0, 0], 4), vec![1, 1, 0, 0]);
        assert_eq!(partition_background(&[0, 0, 0, 5], 2), vec![2, 0, 0, 3]);
    }

    #[test]
    fn suffix_shares_add_up_to_the_burst() {
        assert_eq!((0..4).map(|s| suffix_share(2, 4, s)).collect::<Vec<_>>(), vec![1, 1, 0, 0]);
        assert_eq!(suffix_share(3, 1, 0), 3);
    }

    #[test]
    fn table_capacity_never_lifts_a_partition_past_its_cap() {
        assert_eq!(partition_capacity(Some(2), Some(8), 4), Some(2));
        assert_eq!(partition_capacity(Some(2), Some(16), 4), Some(2));
        assert_eq!(partition_capacity(Some(2), Some(4), 4), Some(1));
        assert_eq!(partition_capacity(None, None, 4), None);
        assert_eq!(partition_capacity(None, Some(8), 4), Some(2));
    }

    #[test]
    fn sorted_placement_ignores_capacity_and_capacity_aware_spills() {
        let backends = [backend(0, 2, 1), backend(1, 2, 1), backend(2, 4, 0)];
        assert_eq!(
            choose_backend(&routing(Placement::Sorted, UploadPlanner::CapacityAware), &backends),
            Some(0)
        );
        // n0 and n1 would be at 100% > 80%: spill to n2.
        let aware = routing(Placement::CapacityAware, UploadPlanner::CapacityAware);
        assert_eq!(choose_backend(&aware, &backends), Some(2));
        // Nobody under the threshold: the most headroom that still has room.
        let busy = [backend(0, 4, 3), backend(1, 2, 2)];
        assert_eq!(choose_backend(&aware, &busy), Some(0));
        // Nobody with room: reject.
        assert_eq!(choose_backend(&aware, &[backend(0, 1, 1)]), None);
    }

    #[test]
    fn the_upload_planner_packs_the_smallest_backend_whatever_placement_says() {
        let backends = [backend(0, 4, 0), backend(1, 2, 2), backend(2, 4, 0)];
        let planner = routing(Placement::CapacityAware, UploadPlanner::SmallestFirst);
        assert_eq!(choose_backend(&planner, &backends), Some(1));
    }

    #[test]
    fn a_write_is_throttled_at_its_partition_before_any_backend_sees_it() {
        let sorted = routing(Placement::Sorted, UploadPlanner::CapacityAware);
        let aware = routing(Placement::CapacityAware, UploadPlanner::CapacityAware);
        let backends = [backend(0, 2, 2), backend(1, 4, 0)];
        assert_eq!(route_write(&sorted, 2, Some(2), Some(&backends)), WriteRoute::PartitionThrottled);
        assert_eq!(route_write(&sorted, 1, Some(2), None), WriteRoute::Admitted { backend: None });
        assert_eq!(
            route_write(&sorted, 1, None, Some(&backends)),
            WriteRoute::BackendThrottled { backend: 0 }
        );
        assert_eq!(route_write(&aware, 1, None, Some(&backends)), WriteRoute::Admitted { backend: Some(1) });
        assert_eq!(route_write(&aware, 0, None, Some(&[backend(0, 1, 1)])), WriteRoute::Shed);
        assert_eq!(WriteRoute::Shed.backend_offered(), None);
        assert_eq!(WriteRoute::BackendThrottled { backend: 3 }.backend_offered(), Some(3));
    }

    #[test]
    fn down_backends_are_never_chosen() {
        let mut backends = [backend(0, 2, 0), backend(1, 2, 0)];
        backends[0].up = false;
        for p in [Placement::Sorted, Placement::CapacityAware] {
            assert_eq!(choose_backend(&routing(p, UploadPlanner::CapacityAware), &backends), Some(1));
        }
    }

    proptest! {
        /// Capacity-aware placement with the planner off never overloads a backend.
        #[test]
        fn capacity_aware_placement_never_overloads(
            caps in proptest::collection::vec((0u16..6, 0u16..6), 1..6),
            threshold in 0u16..=1000,
        ) {
            let backends: Vec<BackendLoad> = caps
                .iter()
                .enumerate()
                .map(|(i, &(cap, load))| backend(i as NodeId, cap, load))
                .collect();
            let policy = RoutingPolicy {
                placement: Placement::CapacityAware,
                spill_threshold_permille: threshold,
                upload_planner: UploadPlanner::CapacityAware,
                write_shard_suffixes: 1,
            };
            if let Some(n) = choose_backend(&policy, &backends) {
                let b = backends[usize::from(n)];
                prop_assert!(admits(b.load_per_tick, b.capacity_per_tick));
            } else {
                prop_assert!(backends.iter().all(|b| !admits(b.load_per_tick, b.capacity_per_tick)));
            }
        }
    }
}
