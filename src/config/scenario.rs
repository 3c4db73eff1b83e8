//! The scenario: cluster, environment, workload, fault budget, variants and expectations.

use super::duration::{Dur, LatencyRange, Rate};
use super::policy::{PolicyPatch, SourcedPolicy};
use super::{parse_toml, read_file, ConfigError};
use crate::policy::{
    NodeId, Ticks, CLIENT_COUNT_MAX, CLIENT_OPS_MAX, NODE_COUNT_MAX, SHARD_COUNT_MAX, ZONE_COUNT_MAX,
};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// The properties replicheck checks, by the names reports and expectations use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropertyName {
    AckedWritesPersist,
    Linearizable,
    NoDuplicateEffects,
    NoHealthyEviction,
    ChurnBounded,
    /// No partition or backend is offered more writes in a tick than its capacity.
    CapacityRespected,
    /// Liveness: no cycle in which time passes and the topology keeps changing.
    Converges,
    /// Liveness: no cycle in which time passes while a client operation stays pending.
    OpsComplete,
}

impl PropertyName {
    pub const ALL: [PropertyName; 8] = [
        PropertyName::AckedWritesPersist,
        PropertyName::Linearizable,
        PropertyName::NoDuplicateEffects,
        PropertyName::NoHealthyEviction,
        PropertyName::ChurnBounded,
        PropertyName::CapacityRespected,
        PropertyName::Converges,
        PropertyName::OpsComplete,
    ];

    /// Checked on cycles of the state graph rather than on single states.
    pub fn is_liveness(self) -> bool {
        matches!(self, PropertyName::Converges | PropertyName::OpsComplete)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PropertyName::AckedWritesPersist => "acked_writes_persist",
            PropertyName::Linearizable => "linearizable",
            PropertyName::NoDuplicateEffects => "no_duplicate_effects",
            PropertyName::NoHealthyEviction => "no_healthy_eviction",
            PropertyName::ChurnBounded => "churn_bounded",
            PropertyName::CapacityRespected => "capacity_respected",
            PropertyName::Converges => "converges",
            PropertyName::OpsComplete => "ops_complete",
        }
    }

    pub fn parse(name: &str) -> Option<PropertyName> {
        PropertyName::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl fmt::Display for PropertyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A property's verdict, as declared in a model file and as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Holds,
    Violated,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Holds => "holds",
            Verdict::Violated => "violated",
        })
    }
}

/// What a check found for one property.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    Holds,
    Violated,
    /// Exploration stopped at a limit before a violation was found: no verdict.
    Unknown,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Found::Holds => "holds",
            Found::Violated => "violated",
            Found::Unknown => "unknown (incomplete)",
        })
    }
}

/// A client operation in the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Write,
    Read,
}

// ---------------------------------------------------------------------------------------------
// Raw TOML.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    tick: Dur,
    zones: Vec<String>,
    nodes: Vec<RawNode>,
    shards: Vec<RawShard>,
    network: RawNetwork,
    coordinator: RawCoordinator,
    #[serde(default)]
    clients: Vec<RawClient>,
    /// Above this compaction debt, a node hosting a hot shard falls behind and is slow.
    #[serde(default = "default_slow_debt")]
    slow_compaction_debt_pct: u8,
    #[serde(default)]
    faults: RawFaults,
    properties: Option<Vec<String>>,
    #[serde(default)]
    policy: PolicyPatch,
    #[serde(default)]
    expect: IndexMap<String, Verdict>,
    #[serde(default)]
    variants: IndexMap<String, RawVariant>,
    #[serde(default)]
    limits: RawLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    zone: String,
    /// Disk used by data outside the modelled shards, in percent.
    #[serde(default)]
    disk_used_pct: u8,
    /// Compaction backlog, in percent: invisible in raw disk use, it makes the node slow
    /// once a hot shard's write amplification lands on it.
    #[serde(default)]
    compaction_debt_pct: u8,
    /// Writes the node can ingest as a backend (e.g. "20/s"); unset is unlimited.
    write_capacity: Option<Rate>,
    /// Writes it already ingests from traffic outside the model (a nearly full backend).
    base_load: Option<Rate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShard {
    name: String,
    replicas: Option<Vec<String>>,
    /// Disk the shard takes on each replica, in percent of a node's disk.
    #[serde(default)]
    size_pct: u8,
    /// A hot shard takes most of the writes.
    #[serde(default)]
    hot: bool,
    /// Writes on this shard's key prefix from the clients outside the model (a promotion's
    /// cohort): spread over the prefix's suffixes when keys are sharded.
    burst_writes: Option<Rate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    latency: Option<LatencyRange>,
    #[serde(default)]
    lossy: bool,
    #[serde(default)]
    links: Vec<RawLink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    zones: [String; 2],
    latency: Option<LatencyRange>,
    lossy: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCoordinator {
    zone: String,
    membership_queue_capacity: u8,
    membership_update_time: Dur,
    /// Churn budget: at most this many membership changes (evictions and moves) in any
    /// `change_window`.
    max_changes_per_window: Option<u8>,
    change_window: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: String,
    zone: String,
    shard: Option<String>,
    ops: Vec<OpKind>,
    request_timeout: Dur,
    /// When the client starts each operation after the previous one: "0ms" (at once) or a
    /// window such as "0ms..1s".
    think_time: Option<LatencyRange>,
    /// The hash of the key the client writes (which customer it writes for): with
    /// `write_shard_suffixes = N` its key gets suffix `key_hash % N`. Default: its index.
    key_hash: Option<u8>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    #[serde(default)]
    budget: u8,
    #[serde(default)]
    crash: Vec<String>,
    #[serde(default)]
    partition: Vec<String>,
    #[serde(default)]
    degrade: Vec<RawDegrade>,
    #[serde(default)]
    drop: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDegrade {
    zones: [String; 2],
    latency: LatencyRange,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    description: Option<String>,
    #[serde(default)]
    policy: PolicyPatch,
    #[serde(default)]
    expect: IndexMap<String, Verdict>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_states: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Validated scenario.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub zone: u8,
    pub disk_used_pct: u8,
    pub compaction_debt_pct: u8,
    /// Backend ingest capacity in writes per tick (`None`: unlimited).
    pub write_capacity_per_tick: Option<u16>,
    pub base_load_per_tick: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    pub name: String,
    /// The initial replica set, if the scenario names it; otherwise the first
    /// `replication_factor` nodes.
    pub replicas: Option<Vec<NodeId>>,
    pub size_pct: u8,
    pub hot: bool,
    /// Background writes per tick on this shard's key prefix.
    pub burst_writes_per_tick: u16,
}

/// One-way latency between two zones, in ticks, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LatencyTicks {
    pub lo: Ticks,
    pub hi: Ticks,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorSpec {
    pub zone: u8,
    pub membership_queue_capacity: u8,
    pub membership_update_ticks: Ticks,
    /// (changes, window ticks): the churn budget, if the scenario sets one.
    pub churn_budget: Option<(u8, Ticks)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    pub name: String,
    pub zone: u8,
    pub shard: u8,
    pub ops: Vec<OpKind>,
    pub request_timeout_ticks: Ticks,
    pub think_ticks: LatencyTicks,
    pub key_hash: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DegradeSpec {
    pub zones: (u8, u8),
    pub latency: LatencyTicks,
    pub text: String,
}

/// The name that stands for the coordinator in the crash menu.
pub const COORDINATOR_NAME: &str = "coordinator";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    pub budget: u8,
    pub crash: Vec<NodeId>,
    /// `"coordinator"` in the crash menu: the coordinator may crash and restart, losing all
    /// it did not persist.
    pub crash_coordinator: bool,
    pub partition: Vec<u8>,
    pub degrade: Vec<DegradeSpec>,
    pub drop: bool,
}

#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub description: String,
    /// The scenario's `[policy]` with this variant's overrides on top.
    pub policy: SourcedPolicy,
    pub expect: IndexMap<PropertyName, Verdict>,
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub path: PathBuf,
    pub name: String,
    pub description: String,
    pub tick_ms: u64,
    pub zones: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    pub shards: Vec<ShardSpec>,
    /// `latency[a][b]`: one-way latency from zone a to zone b (symmetric).
    pub latency: Vec<Vec<LatencyTicks>>,
    pub lossy: Vec<Vec<bool>>,
    pub coordinator: CoordinatorSpec,
    pub clients: Vec<ClientSpec>,
    pub faults: FaultSpec,
    pub properties: Vec<PropertyName>,
    /// The scenario's own `[policy]`, the base every variant and `--policy` file patches.
    pub base_policy: SourcedPolicy,
    pub variants: Vec<Variant>,
    pub max_states: Option<u64>,
    pub slow_compaction_debt_pct: u8,
}

fn default_slow_debt() -> u8 {
    50
}

pub const FAULT_BUDGET_MAX: u8 = 4;
/// Active degradations are a bit set in a `u8`.
pub const DEGRADE_MENU_MAX: usize = 8;

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ConfigError> {
        let text = read_file(path)?;
        let raw: RawScenario = parse_toml(path, &text)?;
        validate(path, raw).map_err(|message| ConfigError::new(path, message))
    }

    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The worst one-way latency between two zones, degradations in the fault menu included.
    pub fn worst_latency_ticks(&self, a: u8, b: u8) -> Ticks {
        let mut worst = self.latency[usize::from(a)][usize::from(b)].hi;
        for d in &self.faults.degrade {
            if d.zones == (a, b) || d.zones == (b, a) {
                worst = worst.max(d.latency.hi);
            }
        }
        worst
    }
}

fn validate(path: &Path, raw: RawScenario) -> Result<Scenario, String> {
    let tick_ms = raw.tick.ms;
    if tick_ms == 0 {
        return Err(format!("key `tick` = \"{}\": must be positive", raw.tick.text));
    }
    let ticks =
        |key: &str, d: &Dur| d.ticks(tick_ms).map_err(|why| format!("key `{key}` = \"{}\": {why}", d.text));
    let per_tick = |key: &str, r: &Option<Rate>| -> Result<Option<u16>, String> {
        r.as_ref()
            .map(|r| r.per_tick(tick_ms).map_err(|why| format!("key `{key}` = \"{}\": {why}", r.text)))
            .transpose()
    };
    let latency_ticks = |key: &str, r: &LatencyRange| -> Result<LatencyTicks, String> {
        Ok(LatencyTicks { lo: ticks(key, &r.lo)?, hi: ticks(key, &r.hi)? })
    };

    // Zones.
    if raw.zones.is_empty() || raw.zones.len() > ZONE_COUNT_MAX {
        return Err(format!("key `zones` lists {} zones: must be 1 to {ZONE_COUNT_MAX}", raw.zones.len()));
    }
    for (i, z) in raw.zones.iter().enumerate() {
        if raw.zones[..i].contains(z) {
            return Err(format!("key `zones`: zone \"{z}\" is listed twice"));
        }
    }
    let zone = |key: &str, name: &str| -> Result<u8, String> {
        raw.zones.iter().position(|z| z == name).map(|i| i as u8).ok_or_else(|| {
            format!("key `{key}` = \"{name}\": no such zone (zones: {})", raw.zones.join(", "))
        })
    };

    // Nodes.
    if raw.nodes.is_empty() || raw.nodes.len() > NODE_COUNT_MAX {
        return Err(format!("key `nodes` has {} entries: must be 1 to {NODE_COUNT_MAX}", raw.nodes.len()));
    }
    let mut nodes = Vec::new();
    for (i, n) in raw.nodes.iter().enumerate() {
        if raw.nodes[..i].iter().any(|m| m.name == n.name) {
            return Err(format!("key `nodes[{i}].name` = \"{}\": node listed twice", n.name));
        }
        for (key, v) in [("disk_used_pct", n.disk_used_pct), ("compaction_debt_pct", n.compaction_debt_pct)] {
            if v > 100 {
                return Err(format!("key `nodes[{i}].{key}` = {v}: a percentage, 0 to 100"));
            }
        }
        nodes.push(NodeSpec {
            name: n.name.clone(),
            zone: zone(&format!("nodes[{i}].zone"), &n.zone)?,
            disk_used_pct: n.disk_used_pct,
            compaction_debt_pct: n.compaction_debt_pct,
            write_capacity_per_tick: per_tick(&format!("nodes[{i}].write_capacity"), &n.write_capacity)?,
            base_load_per_tick: per_tick(&format!("nodes[{i}].base_load"), &n.base_load)?.unwrap_or(0),
        });
    }
    let node = |key: &str, name: &str| -> Result<NodeId, String> {
        raw.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| i as NodeId)
            .ok_or_else(|| format!("key `{key}` = \"{name}\": no such node"))
    };

    // Shards.
    if raw.shards.is_empty() || raw.shards.len() > SHARD_COUNT_MAX {
        return Err(format!("key `shards` has {} entries: must be 1 to {SHARD_COUNT_MAX}", raw.shards.len()));
    }
    let mut shards = Vec::new();
    for (i, s) in raw.shards.iter().enumerate() {
        if raw.shards[..i].iter().any(|t| t.name == s.name) {
            return Err(format!("key `shards[{i}].name` = \"{}\": shard listed twice", s.name));
        }
        let replicas = match &s.replicas {
            None => None,
            Some(names) => {
                let mut ids = Vec::new();
                for (j, name) in names.iter().enumerate() {
                    let id = node(&format!("shards[{i}].replicas[{j}]"), name)?;
                    if ids.contains(&id) {
                        return Err(format!("key `shards[{i}].replicas` lists \"{name}\" twice"));
                    }
                    ids.push(id);
                }
                Some(ids)
            }
        };
        if s.size_pct > 100 {
            return Err(format!("key `shards[{i}].size_pct` = {}: a percentage, 0 to 100", s.size_pct));
        }
        shards.push(ShardSpec {
            name: s.name.clone(),
            replicas,
            size_pct: s.size_pct,
            hot: s.hot,
            burst_writes_per_tick: per_tick(&format!("shards[{i}].burst_writes"), &s.burst_writes)?
                .unwrap_or(0),
        });
    }

    // Network.
    let zone_count = raw.zones.len();
    let mut latency = vec![vec![None; zone_count]; zone_count];
    let mut lossy = vec![vec![raw.network.lossy; zone_count]; zone_count];
    if let Some(r) = &raw.network.latency {
        let l = latency_ticks("network.latency", r)?;
        latency = vec![vec![Some(l); zone_count]; zone_count];
    }
    for (i, link) in raw.network.links.iter().enumerate() {
        let a = zone(&format!("network.links[{i}].zones"), &link.zones[0])?;
        let b = zone(&format!("network.links[{i}].zones"), &link.zones[1])?;
        let (a, b) = (usize::from(a), usize::from(b));
        if let Some(r) = &link.latency {
            let l = latency_ticks(&format!("network.links[{i}].latency"), r)?;
            latency[a][b] = Some(l);
            latency[b][a] = Some(l);
        }
        if let Some(x) = link.lossy {
            lossy[a][b] = x;
            lossy[b][a] = x;
        }
    }
    let mut latency_full = Vec::new();
    for (a, row) in latency.iter().enumerate() {
        let mut out = Vec::new();
        for (b, l) in row.iter().enumerate() {
            out.push(l.ok_or_else(|| {
                format!(
                    "no latency between zones \"{}\" and \"{}\": set `network.latency` or add a `[[network.links]]` entry",
                    raw.zones[a], raw.zones[b]
                )
            })?);
        }
        latency_full.push(out);
    }

    // Coordinator.
    let coordinator = CoordinatorSpec {
        zone: zone("coordinator.zone", &raw.coordinator.zone)?,
        membership_queue_capacity: raw.coordinator.membership_queue_capacity,
        membership_update_ticks: ticks(
            "coordinator.membership_update_time",
            &raw.coordinator.membership_update_time,
        )?,
        churn_budget: match (raw.coordinator.max_changes_per_window, &raw.coordinator.change_window) {
            (None, None) => None,
            (Some(n), Some(w)) => {
                let window = ticks("coordinator.change_window", w)?;
                if n == 0 || window == 0 {
                    return Err(format!(
                        "keys `coordinator.max_changes_per_window` = {n}, `coordinator.change_window` = \"{}\": both must be positive",
                        w.text
                    ));
                }
                Some((n, window))
            }
            _ => {
                return Err(
                    "keys `coordinator.max_changes_per_window` and `coordinator.change_window` go together: set both or neither"
                        .into(),
                )
            }
        },
    };
    if coordinator.membership_queue_capacity == 0 {
        return Err("key `coordinator.membership_queue_capacity` = 0: must be at least 1".into());
    }
    if coordinator.membership_update_ticks == 0 {
        return Err(format!(
            "key `coordinator.membership_update_time` = \"{}\": must be at least one tick",
            raw.coordinator.membership_update_time.text
        ));
    }

    // Clients.
    if raw.clients.len() > CLIENT_COUNT_MAX {
        return Err(format!("key `clients` has {} entries: at most {CLIENT_COUNT_MAX}", raw.clients.len()));
    }
    let mut clients = Vec::new();
    for (i, c) in raw.clients.iter().enumerate() {
        if c.ops.is_empty() || c.ops.len() > CLIENT_OPS_MAX {
            return Err(format!(
                "key `clients[{i}].ops` has {} operations: must be 1 to {CLIENT_OPS_MAX}",
                c.ops.len()
            ));
        }
        let shard = match &c.shard {
            None => 0,
            Some(name) => raw
                .shards
                .iter()
                .position(|s| &s.name == name)
                .ok_or_else(|| format!("key `clients[{i}].shard` = \"{name}\": no such shard"))?
                as u8,
        };
        let request_timeout_ticks = ticks(&format!("clients[{i}].request_timeout"), &c.request_timeout)?;
        if request_timeout_ticks == 0 {
            return Err(format!(
                "key `clients[{i}].request_timeout` = \"{}\": must be positive",
                c.request_timeout.text
            ));
        }
        clients.push(ClientSpec {
            name: c.name.clone(),
            zone: zone(&format!("clients[{i}].zone"), &c.zone)?,
            shard,
            ops: c.ops.clone(),
            request_timeout_ticks,
            think_ticks: match &c.think_time {
                Some(r) => latency_ticks(&format!("clients[{i}].think_time"), r)?,
                None => LatencyTicks { lo: 0, hi: 0 },
            },
            key_hash: c.key_hash.unwrap_or(i as u8),
        });
    }

    // Faults.
    if raw.faults.budget > FAULT_BUDGET_MAX {
        return Err(format!("key `faults.budget` = {}: must be 0 to {FAULT_BUDGET_MAX}", raw.faults.budget));
    }
    let mut faults = FaultSpec {
        budget: raw.faults.budget,
        crash: Vec::new(),
        crash_coordinator: false,
        partition: Vec::new(),
        degrade: Vec::new(),
        drop: raw.faults.drop,
    };
    for (i, n) in raw.faults.crash.iter().enumerate() {
        let key = format!("faults.crash[{i}]");
        if n == COORDINATOR_NAME {
            if raw.nodes.iter().any(|node| node.name == COORDINATOR_NAME) {
                return Err(format!(
                    "key `{key}` = \"{n}\": ambiguous, a node is named \"{COORDINATOR_NAME}\" too; rename the node"
                ));
            }
            faults.crash_coordinator = true;
            continue;
        }
        faults.crash.push(node(&key, n)?);
    }
    for (i, z) in raw.faults.partition.iter().enumerate() {
        faults.partition.push(zone(&format!("faults.partition[{i}]"), z)?);
    }
    if raw.faults.degrade.len() > DEGRADE_MENU_MAX {
        return Err(format!(
            "key `faults.degrade` has {} entries: at most {DEGRADE_MENU_MAX}",
            raw.faults.degrade.len()
        ));
    }
    for (i, d) in raw.faults.degrade.iter().enumerate() {
        let key = format!("faults.degrade[{i}]");
        faults.degrade.push(DegradeSpec {
            zones: (zone(&format!("{key}.zones"), &d.zones[0])?, zone(&format!("{key}.zones"), &d.zones[1])?),
            latency: latency_ticks(&format!("{key}.latency"), &d.latency)?,
            text: format!("{}..{}", d.latency.lo.text, d.latency.hi.text),
        });
    }
    if faults.drop && !lossy.iter().flatten().any(|l| *l) {
        return Err(
            "key `faults.drop` = true: no link is lossy (set `network.lossy` or a link's `lossy`)".into()
        );
    }

    // Properties and expectations.
    // Without a `properties` list, every property that applies: capacity_respected only when
    // something in the model has a capacity (so model files written before it still load).
    let has_capacity = nodes.iter().any(|n| n.write_capacity_per_tick.is_some())
        || std::iter::once(&raw.policy)
            .chain(raw.variants.values().map(|v| &v.policy))
            .any(|p| p.partition_write_capacity.is_some() || p.table_write_capacity.is_some());
    let properties = match &raw.properties {
        None => PropertyName::ALL
            .into_iter()
            .filter(|&p| p != PropertyName::CapacityRespected || has_capacity)
            .collect(),
        Some(names) => {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                out.push(property(&format!("properties[{i}]"), n)?);
            }
            out
        }
    };
    let file = path.display().to_string();
    let base_policy = SourcedPolicy::new(raw.policy.clone(), &format!("{file} [policy]"));
    let expectations = |table: &str,
                        raw: &IndexMap<String, Verdict>|
     -> Result<IndexMap<PropertyName, Verdict>, String> {
        let mut out = IndexMap::new();
        for (k, v) in raw {
            let p = PropertyName::parse(k).ok_or_else(|| {
                format!(
                    "key `{table}.{k}` = \"{v}\": no such property `{k}`{}; properties are {}",
                    property_hint(k),
                    property_names().join(", ")
                )
            })?;
            if !properties.contains(&p) {
                return Err(format!("key `{table}.{k}`: property `{k}` is not in this model's `properties`"));
            }
            out.insert(p, *v);
        }
        for p in &properties {
            if !out.contains_key(p) {
                return Err(format!("key `{table}.{p}` is missing: table `[{table}]` declares no verdict for property `{p}` (add `{p} = \"holds\"` or `\"violated\"`)"));
            }
        }
        Ok(out)
    };
    let mut variants = Vec::new();
    if !raw.expect.is_empty() {
        variants.push(Variant {
            name: "default".into(),
            description: "the scenario's own [policy]".into(),
            policy: base_policy.clone(),
            expect: expectations("expect", &raw.expect)?,
        });
    }
    for (name, v) in &raw.variants {
        if name == "default" {
            return Err(
                "key `variants.default`: the name `default` is the scenario's own [policy] and [expect]"
                    .into(),
            );
        }
        let over = SourcedPolicy::new(v.policy.clone(), &format!("{file} [variants.{name}.policy]"));
        variants.push(Variant {
            name: name.clone(),
            description: v.description.clone().unwrap_or_default(),
            policy: base_policy.then(&over),
            expect: expectations(&format!("variants.{name}.expect"), &v.expect)?,
        });
    }
    if variants.is_empty() {
        return Err(
            "the model declares no expectations: add `[expect]` or a `[variants.NAME.expect]` table".into()
        );
    }

    let name = raw
        .name
        .clone()
        .unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
    let scenario = Scenario {
        path: path.to_path_buf(),
        name,
        description: raw.description.clone().unwrap_or_default(),
        tick_ms,
        zones: raw.zones.clone(),
        nodes,
        shards,
        latency: latency_full,
        lossy,
        coordinator,
        clients,
        faults,
        properties,
        base_policy,
        variants,
        max_states: raw.limits.max_states,
        slow_compaction_debt_pct: raw.slow_compaction_debt_pct,
    };
    // Every variant's policy must resolve against this scenario; report the first that does not.
    for v in &scenario.variants {
        super::Resolved::new(&scenario, &v.policy)?;
    }
    Ok(scenario)
}

fn property(key: &str, name: &str) -> Result<PropertyName, String> {
    PropertyName::parse(name).ok_or_else(|| {
        format!(
            "key `{key}` = \"{name}\": no such property{}; properties are {}",
            property_hint(name),
            property_names().join(", ")
        )
    })
}

fn property_names() -> Vec<&'static str> {
    PropertyName::ALL.iter().map(|p| p.as_str()).collect()
}

/// " (did you mean `x`?)" for the property nearest to `name`, if one is near.
fn property_hint(name: &str) -> String {
    super::nearest(name, property_names()).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default()
}
