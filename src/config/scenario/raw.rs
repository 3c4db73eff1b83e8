//! The scenario file as serde reads it: names and texts, nothing checked but the keys.

use super::{OpKind, Verdict};
use crate::config::duration::{Dur, LatencyRange, Rate};
use crate::config::policy::PolicyPatch;
use indexmap::IndexMap;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) tick: Dur,
    pub(super) zones: Vec<String>,
    pub(super) nodes: Vec<RawNode>,
    pub(super) shards: Vec<RawShard>,
    pub(super) network: RawNetwork,
    pub(super) coordinator: RawCoordinator,
    /// Several coordinators, each in a zone; the first is the membership leader. Without
    /// it, one coordinator in `coordinator.zone`.
    #[serde(default)]
    pub(super) coordinators: Vec<RawCoordinatorPlace>,
    #[serde(default)]
    pub(super) clients: Vec<RawClient>,
    /// Above this compaction debt, a node hosting a hot shard falls behind and is slow.
    #[serde(default = "default_slow_debt")]
    pub(super) slow_compaction_debt_pct: u8,
    /// Compaction debt a node gains with each write it applies (percentage points); with
    /// `compaction_debt_drain`, debt is node state that grows and drains.
    #[serde(default)]
    pub(super) compaction_debt_per_write_pct: u8,
    /// Percentage points of debt each node compacts away per unit of time (e.g. "50/s").
    pub(super) compaction_debt_drain: Option<Rate>,
    #[serde(default)]
    pub(super) faults: RawFaults,
    pub(super) properties: Option<Vec<String>>,
    #[serde(default)]
    pub(super) policy: PolicyPatch,
    #[serde(default)]
    pub(super) expect: IndexMap<String, Verdict>,
    #[serde(default)]
    pub(super) variants: IndexMap<String, RawVariant>,
    #[serde(default)]
    pub(super) limits: RawLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub(super) name: String,
    pub(super) zone: String,
    /// Disk used by data outside the modelled shards, in percent.
    #[serde(default)]
    pub(super) disk_used_pct: u8,
    /// Compaction backlog, in percent: invisible in raw disk use, it makes the node slow
    /// once a hot shard's write amplification lands on it.
    #[serde(default)]
    pub(super) compaction_debt_pct: u8,
    /// Writes the node can ingest as a backend (e.g. "20/s"); unset is unlimited.
    pub(super) write_capacity: Option<Rate>,
    /// Writes it already ingests from traffic outside the model (a nearly full backend).
    pub(super) base_load: Option<Rate>,
    /// Replicas the node can hold at most (its disk); unset is unlimited.
    pub(super) replica_slots: Option<u8>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShard {
    pub(super) name: String,
    pub(super) replicas: Option<Vec<String>>,
    /// Disk the shard takes on each replica, in percent of a node's disk.
    #[serde(default)]
    pub(super) size_pct: u8,
    /// A hot shard takes most of the writes.
    #[serde(default)]
    pub(super) hot: bool,
    /// Writes on this shard's key prefix from the clients outside the model (a promotion's
    /// cohort): spread over the prefix's suffixes when keys are sharded.
    pub(super) burst_writes: Option<Rate>,
    /// The burst ends at a moment the checker chooses; liveness is asked of the time after.
    #[serde(default)]
    pub(super) burst_ends: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    pub(super) latency: Option<LatencyRange>,
    #[serde(default)]
    pub(super) lossy: bool,
    #[serde(default)]
    pub(super) links: Vec<RawLink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) zones: [String; 2],
    pub(super) latency: Option<LatencyRange>,
    pub(super) lossy: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCoordinator {
    pub(super) zone: Option<String>,
    pub(super) membership_queue_capacity: u8,
    pub(super) membership_update_time: Dur,
    /// Churn budget: at most this many membership changes (evictions and moves) in any
    /// `change_window`.
    pub(super) max_changes_per_window: Option<u8>,
    pub(super) change_window: Option<Dur>,
    /// The coordinator's capacity (units of work per tick) and what a membership update and a
    /// catch-up copy cost it; set all three or none.
    pub(super) work_per_tick: Option<u16>,
    pub(super) membership_update_work: Option<u16>,
    pub(super) copy_work: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCoordinatorPlace {
    pub(super) name: String,
    pub(super) zone: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) name: String,
    pub(super) zone: String,
    pub(super) shard: Option<String>,
    pub(super) ops: Vec<OpKind>,
    pub(super) request_timeout: Dur,
    /// When the client starts each operation after the previous one: "0ms" (at once) or a
    /// window such as "0ms..1s".
    pub(super) think_time: Option<LatencyRange>,
    /// The hash of the key the client writes (which customer it writes for): with
    /// `write_shard_suffixes = N` its key gets suffix `key_hash % N`. Default: its index.
    /// `"any"`: every hash, each a behaviour the checker explores.
    pub(super) key_hash: Option<RawKeyHash>,
    /// Continuous load: after its last operation the client starts over, forever.
    #[serde(default)]
    pub(super) repeat: bool,
    /// The coordinator it sends its requests to (a `[[coordinators]]` name). Default: the
    /// coordinators in turn, client i to coordinator i mod their count.
    pub(super) coordinator: Option<String>,
}

/// A key hash, or `"any"`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawKeyHash {
    Hash(i64),
    Named(String),
    /// Anything else (a float, a table), kept to be named in the error.
    Other(toml::Value),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFaults {
    #[serde(default)]
    pub(super) budget: u8,
    #[serde(default)]
    pub(super) crash: Vec<MenuEntry<RawTimedCrash>>,
    #[serde(default)]
    pub(super) partition: Vec<MenuEntry<RawTimedPartition>>,
    #[serde(default)]
    pub(super) degrade: Vec<RawDegrade>,
    #[serde(default)]
    pub(super) drop: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDegrade {
    pub(super) zones: [String; 2],
    pub(super) latency: LatencyRange,
    /// The degradation restores itself within this range of its start.
    pub(super) duration: Option<LatencyRange>,
}

/// A crash that ends: `{ node = "n2", duration = "1s..3s" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimedCrash {
    pub(super) node: String,
    pub(super) duration: Option<LatencyRange>,
}

/// A cut that ends: `{ zone = "c", duration = "500ms..2s" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimedPartition {
    pub(super) zone: String,
    pub(super) duration: Option<LatencyRange>,
}

/// What a fault menu entry names (a node, a zone), and for how long the fault lasts.
pub(super) trait TimedEntry {
    fn name(&self) -> &str;
    fn duration(&self) -> Option<&LatencyRange>;
}

impl TimedEntry for RawTimedCrash {
    fn name(&self) -> &str {
        &self.node
    }
    fn duration(&self) -> Option<&LatencyRange> {
        self.duration.as_ref()
    }
}

impl TimedEntry for RawTimedPartition {
    fn name(&self) -> &str {
        &self.zone
    }
    fn duration(&self) -> Option<&LatencyRange> {
        self.duration.as_ref()
    }
}

/// An entry of the crash or partition menu: a bare name (the fault lasts until it is healed,
/// at a moment the checker chooses, or for ever), or a table with a `duration`.
pub(super) enum MenuEntry<T> {
    Name(String),
    Timed(T),
}

impl<T: TimedEntry> MenuEntry<T> {
    pub(super) fn name(&self) -> &str {
        match self {
            MenuEntry::Name(n) => n,
            MenuEntry::Timed(t) => t.name(),
        }
    }

    pub(super) fn duration(&self) -> Option<&LatencyRange> {
        match self {
            MenuEntry::Name(_) => None,
            MenuEntry::Timed(t) => t.duration(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MenuEntry<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = MenuEntry<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a name, or a table with the name and a `duration`")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MenuEntry<T>, E> {
                Ok(MenuEntry::Name(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<MenuEntry<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(MenuEntry::Timed)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVariant {
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) policy: PolicyPatch,
    #[serde(default)]
    pub(super) expect: IndexMap<String, Verdict>,
    /// A rollout: the coordinators start on the first of these variants' policies and each
    /// moves on to the next at a moment the checker chooses.
    pub(super) rollout: Option<Vec<String>>,
    /// With a rollout: each coordinator may also go back, once, towards the first policy.
    #[serde(default)]
    pub(super) rollback: bool,
    /// With a rollout: `"any"` (each coordinator on its own) or `"stage_by_stage"` (a
    /// coordinator enters stage k+1 only once none is below stage k; a rollback likewise).
    pub(super) rollout_order: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_states: Option<u64>,
}

fn default_slow_debt() -> u8 {
    50
}
