//! Where data lives and how much a partition or backend may be written: the store's
//! partitions (shards), each with its own replica set, and the capacity facts the coordinator
//! routes writes by. The routing itself (key to partition, admission, placement on an ingest
//! backend) is decided by `policy::routing`, called by the coordinator (`shell.rs` and the
//! protocol's state machine).
//!
//! A key's partition: its prefix (the bytes before the first `:`) names a partition directly
//! when it is a partition's name (`p1:customer-7` is on `p1`), and otherwise hashes to one;
//! then `write_shard_suffixes` moves it by the key's suffix, as in the models
//! (`routing::key_partition`). Changing the partition count or the suffix count moves keys, so
//! a data directory keeps the layout it was first written with (see `store up`).
//!
//! Capacities count writes per window of `window_ms` (a model tick in `store run`), as the
//! models count them per tick.

use crate::config::{Scenario, SourcedPolicy};
use crate::policy::routing::{self, WRITE_SHARD_SUFFIXES_MAX};
use crate::policy::NodeId;
use crate::protocol::{CapacityBreach, CapacityUnit};

/// Partitions at most in the store. A model keeps `SHARD_COUNT_MAX` shards (its states stay
/// small and clone without allocating); the store's machines keep theirs in a `Vec`
/// (`Data::Shards`). A partition index is a `u8`, as in the models.
pub const PARTITIONS_MAX: usize = 64;
const _: () = assert!(PARTITIONS_MAX >= crate::policy::SHARD_COUNT_MAX && PARTITIONS_MAX <= 256);
/// Default capacity window of `store up`: capacities given per second are counted per 100 ms.
pub const WINDOW_MS_DEFAULT: u64 = 100;

/// One partition: its name, initial replica set, and what the rebalancer and the router know
/// of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    pub name: String,
    /// The initial replica set (`replication_factor` distinct nodes).
    pub replicas: Vec<NodeId>,
    /// Disk share the partition adds to each node holding it, in percent (rebalancer input).
    pub size_pct: u8,
    /// Whether it is hot: a node holding it with compaction debt is slow (rebalancer input).
    pub hot: bool,
    /// Writes per window on this prefix from traffic outside the store's clients (a burst);
    /// spread over the suffixes like the models spread it.
    pub burst_writes_per_window: u16,
}

/// The store's partitions and capacity facts, fixed for a cluster's life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shards: Vec<ShardSpec>,
    pub window_ms: u64,
    /// A partition's own write capacity per window (`None`: unlimited).
    pub partition_write_capacity_per_window: Option<u16>,
    /// The table's write capacity per window, shared evenly by the partitions.
    pub table_write_capacity_per_window: Option<u16>,
    /// Each node's ingest capacity per window, or empty: no backend has a capacity, and
    /// placement is not decided (as in the models).
    pub node_write_capacity_per_window: Vec<Option<u16>>,
    /// Each node's ingest load per window from traffic outside the store, or empty for 0.
    pub node_base_load_per_window: Vec<u16>,
    /// Replicas each node can hold at most, or empty: unlimited (`replica_slots`).
    pub node_replica_slots: Vec<Option<u8>>,
    /// Each node's name in the model the store plays (`n2`), or empty: a node is its number.
    pub node_names: Vec<String>,
}

impl Layout {
    /// A breach as INFO shows it; `at_ms: None` for one by background load alone (in every
    /// window from the start).
    /// How the store's messages name node `n`: `node 1`, or with the model's name beside the
    /// store's 0-based number, `node 1 (n2)`.
    pub fn node(&self, n: NodeId) -> String {
        match self.node_names.get(usize::from(n)) {
            Some(name) => format!("node {n} ({name})"),
            None => format!("node {n}"),
        }
    }

    pub fn describe_breach(&self, b: CapacityBreach, at_ms: Option<u128>) -> String {
        let unit = match (b.unit, at_ms) {
            (CapacityUnit::Partition(p), None) => {
                format!("partition {} by background load", self.shards[usize::from(p)].name)
            }
            (CapacityUnit::Partition(p), Some(_)) => {
                format!("partition {}", self.shards[usize::from(p)].name)
            }
            (CapacityUnit::Backend(n), None) => format!("backend node {n} by base load"),
            (CapacityUnit::Backend(n), Some(_)) => format!("backend node {n}"),
        };
        let at = at_ms.map_or("from the start".to_string(), |ms| format!("at {ms} ms"));
        format!("{unit} offered {} > capacity {} {at}", b.offered, b.capacity)
    }

    /// `shard_count` partitions named `s0`, `s1`, ...; partition `i`'s replicas are nodes
    /// `i, i+1, ...` (mod `node_count`), so partitions spread over the nodes. No capacities.
    pub fn round_robin(shard_count: usize, node_count: usize, replication_factor: u8) -> Layout {
        let rf = usize::from(replication_factor);
        let shards = (0..shard_count)
            .map(|i| ShardSpec {
                name: format!("s{i}"),
                replicas: (0..rf).map(|j| ((i + j) % node_count.max(1)) as NodeId).collect(),
                size_pct: 0,
                hot: false,
                burst_writes_per_window: 0,
            })
            .collect();
        Layout {
            shards,
            window_ms: WINDOW_MS_DEFAULT,
            partition_write_capacity_per_window: None,
            table_write_capacity_per_window: None,
            node_write_capacity_per_window: Vec::new(),
            node_base_load_per_window: Vec::new(),
            node_replica_slots: Vec::new(),
            node_names: Vec::new(),
        }
    }

    /// A model's partitions and capacities: its shards (replicas, size, heat, burst), its
    /// nodes' ingest capacities and base loads, and the policy's partition and table
    /// capacities, all per model tick; a window is one tick of `ms_per_tick` real ms.
    pub fn of_model(
        scenario: &Scenario,
        sourced: &SourcedPolicy,
        replication_factor: u8,
        ms_per_tick: u64,
    ) -> Result<Layout, String> {
        let rf = usize::from(replication_factor);
        let shards = scenario
            .shards
            .iter()
            .map(|s| ShardSpec {
                name: s.name.clone(),
                replicas: s.replicas.clone().unwrap_or_else(|| (0..rf as NodeId).collect()),
                size_pct: s.size_pct,
                hot: s.hot,
                burst_writes_per_window: s.burst_writes_per_tick,
            })
            .collect();
        let policy = sourced.resolve_for_model(scenario.tick_ms, scenario.nodes.len())?;
        let any_capacity = scenario.nodes.iter().any(|n| n.write_capacity_per_tick.is_some());
        Ok(Layout {
            shards,
            window_ms: ms_per_tick,
            partition_write_capacity_per_window: sourced.rate_per_tick(
                "partition_write_capacity",
                &policy.partition_write_capacity,
                scenario.tick_ms,
            )?,
            table_write_capacity_per_window: sourced.rate_per_tick(
                "table_write_capacity",
                &policy.table_write_capacity,
                scenario.tick_ms,
            )?,
            node_write_capacity_per_window: if any_capacity {
                scenario.nodes.iter().map(|n| n.write_capacity_per_tick).collect()
            } else {
                Vec::new()
            },
            node_base_load_per_window: scenario.nodes.iter().map(|n| n.base_load_per_tick).collect(),
            node_replica_slots: scenario.nodes.iter().map(|n| n.replica_slots).collect(),
            node_names: scenario.nodes.iter().map(|n| n.name.clone()).collect(),
        })
    }

    /// Whether the layout fits a cluster of `node_count` nodes and replication factor `rf`.
    pub fn check(&self, node_count: usize, replication_factor: u8) -> Result<(), String> {
        if self.shards.is_empty() || self.shards.len() > PARTITIONS_MAX {
            return Err(format!("{} partitions: must be 1 to {PARTITIONS_MAX}", self.shards.len()));
        }
        if self.window_ms == 0 {
            return Err("the capacity window must be at least 1 ms".into());
        }
        for s in &self.shards {
            if s.replicas.len() != usize::from(replication_factor) {
                return Err(format!(
                    "partition \"{}\" has {} replicas but replication_factor = {replication_factor}",
                    s.name,
                    s.replicas.len()
                ));
            }
            if let Some(n) = s.replicas.iter().find(|&&n| usize::from(n) >= node_count) {
                return Err(format!("partition \"{}\": replica node {n} of {node_count} nodes", s.name));
            }
            let mut sorted = s.replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != s.replicas.len() {
                return Err(format!("partition \"{}\" lists a replica twice", s.name));
            }
        }
        for (name, len) in [
            ("node_write_capacity_per_window", self.node_write_capacity_per_window.len()),
            ("node_base_load_per_window", self.node_base_load_per_window.len()),
            ("node_replica_slots", self.node_replica_slots.len()),
        ] {
            if len != 0 && len != node_count {
                return Err(format!("{name} has {len} entries for {node_count} nodes"));
            }
        }
        for node in 0..node_count as NodeId {
            let held = self.shards.iter().filter(|s| s.replicas.contains(&node)).count();
            if let Some(slots) = self.node_replica_slots(node).filter(|&slots| held > usize::from(slots)) {
                return Err(format!(
                    "node {node} holds {held} partitions' replicas at the start but has {slots} replica slots"
                ));
            }
        }
        Ok(())
    }

    pub fn partition_count(&self) -> u8 {
        u8::try_from(self.shards.len()).expect("checked: at most PARTITIONS_MAX")
    }

    /// The partition a key's prefix names or hashes to, before its suffix.
    pub fn prefix_partition(&self, key: &[u8]) -> u8 {
        let prefix = routing::key_prefix(key);
        match self.shards.iter().position(|s| s.name.as_bytes() == prefix) {
            Some(i) => i as u8,
            None => routing::prefix_partition(prefix, self.partition_count()),
        }
    }

    /// The partition `key` is stored on, with `write_shard_suffixes` suffixes per prefix.
    pub fn partition_of(&self, key: &[u8], write_shard_suffixes: u8) -> u8 {
        let sharding = routing::KeySharding { partition_count: self.partition_count(), write_shard_suffixes };
        routing::key_partition(self.prefix_partition(key), routing::key_hash(key), sharding)
    }

    /// Background writes per window on each partition: each prefix's burst over its suffixes.
    pub fn partition_background(&self, write_shard_suffixes: u8) -> Vec<u16> {
        assert!((1..=WRITE_SHARD_SUFFIXES_MAX).contains(&write_shard_suffixes));
        let bursts: Vec<u16> = self.shards.iter().map(|s| s.burst_writes_per_window).collect();
        routing::partition_background(&bursts, write_shard_suffixes)
    }

    pub fn backends_modelled(&self) -> bool {
        !self.node_write_capacity_per_window.is_empty()
    }

    pub fn node_capacity(&self, node: NodeId) -> Option<u16> {
        self.node_write_capacity_per_window.get(usize::from(node)).copied().flatten()
    }

    pub fn node_base_load(&self, node: NodeId) -> u16 {
        self.node_base_load_per_window.get(usize::from(node)).copied().unwrap_or(0)
    }

    pub fn node_replica_slots(&self, node: NodeId) -> Option<u8> {
        self.node_replica_slots.get(usize::from(node)).copied().flatten()
    }
}

/// The load the rebalancer sees, fixed for a run (as in the models): per node the disk use
/// outside the partitions and the compaction debt, and the debt above which a node hosting a
/// hot partition is slow (the partitions' sizes and heat are in the [`Layout`]). `store up`
/// leaves them all 0 (no node is ever overloaded); `store run` copies them from the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadFacts {
    /// One entry per node, or empty for all 0.
    pub node_disk_used_pct: Vec<u8>,
    /// One entry per node, or empty for all 0.
    pub node_compaction_debt_pct: Vec<u8>,
    pub slow_compaction_debt_pct: u8,
}

impl LoadFacts {
    pub(super) fn check(&self, node_count: usize) -> Result<(), String> {
        for (name, values) in [
            ("node_disk_used_pct", &self.node_disk_used_pct),
            ("node_compaction_debt_pct", &self.node_compaction_debt_pct),
        ] {
            if !values.is_empty() && values.len() != node_count {
                return Err(format!("{name} has {} entries for {node_count} nodes", values.len()));
            }
            if let Some(v) = values.iter().find(|v| **v > 100) {
                return Err(format!("{name} = {v}: a percentage, 0 to 100"));
            }
        }
        if self.slow_compaction_debt_pct > 100 {
            return Err(format!(
                "slow_compaction_debt_pct = {}: a percentage, 0 to 100",
                self.slow_compaction_debt_pct
            ));
        }
        Ok(())
    }

    pub(crate) fn of(values: &[u8], node: NodeId) -> u8 {
        values.get(usize::from(node)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_by_its_number_and_the_models_name_if_it_has_one() {
        let mut layout = Layout::round_robin(1, 3, 3);
        assert_eq!(layout.node(1), "node 1");
        layout.node_names = vec!["n1".into(), "n2".into(), "n3".into()];
        assert_eq!(layout.node(1), "node 1 (n2)");
    }

    #[test]
    fn round_robin_spreads_partitions_over_the_nodes() {
        let layout = Layout::round_robin(3, 5, 3);
        let replicas: Vec<Vec<NodeId>> = layout.shards.iter().map(|s| s.replicas.clone()).collect();
        assert_eq!(replicas, vec![vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 4]]);
        assert_eq!(layout.check(5, 3), Ok(()));
        assert!(layout.check(2, 3).unwrap_err().contains("replica node 2 of 2 nodes"));
    }

    #[test]
    fn a_prefix_naming_a_partition_lands_on_it() {
        let layout = Layout::round_robin(4, 3, 1);
        assert_eq!(layout.prefix_partition(b"s2:customer-7"), 2);
        assert_eq!(layout.prefix_partition(b"s3"), 3);
        let hashed = layout.prefix_partition(b"cart:1");
        assert_eq!(hashed, routing::prefix_partition(b"cart", 4));
        assert_eq!(layout.prefix_partition(b"cart:2"), hashed, "one prefix, one partition");
    }
}
