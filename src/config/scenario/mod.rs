//! The scenario: cluster, environment, workload, fault budget, variants and expectations.

mod raw;
mod validate;

use super::policy::SourcedPolicy;
use super::{parse_toml, read_file, ConfigError};
use crate::policy::{NodeId, Ticks};
use indexmap::IndexMap;
use raw::RawScenario;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// Every table of a model file and the keys it accepts, as the parser declares them: the
/// top level (""), each array-of-tables entry (`nodes`, ...), `variants.NAME` and `policy`
/// (the same keys in a scenario's `[policy]`, a variant's and a `--policy` file).
pub fn model_tables() -> Vec<(&'static str, &'static [&'static str])> {
    use super::keys::fields_of;
    vec![
        ("", fields_of::<RawScenario>()),
        ("nodes", fields_of::<raw::RawNode>()),
        ("shards", fields_of::<raw::RawShard>()),
        ("network", fields_of::<raw::RawNetwork>()),
        ("network.links", fields_of::<raw::RawLink>()),
        ("coordinator", fields_of::<raw::RawCoordinator>()),
        ("coordinators", fields_of::<raw::RawCoordinatorPlace>()),
        ("clients", fields_of::<raw::RawClient>()),
        ("faults", fields_of::<raw::RawFaults>()),
        ("faults.crash", fields_of::<raw::RawTimedCrash>()),
        ("faults.partition", fields_of::<raw::RawTimedPartition>()),
        ("faults.degrade", fields_of::<raw::RawDegrade>()),
        ("variants.NAME", fields_of::<raw::RawVariant>()),
        ("limits", fields_of::<raw::RawLimits>()),
        ("policy", fields_of::<super::PolicyPatch>()),
    ]
}

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
    /// Liveness: no cycle in which time passes while a replica that is down stays in a
    /// replica set: a dead replica is replaced (or comes back) eventually.
    DeadReplaced,
    /// Liveness: no cycle in which time passes while a hot shard keeps a replica on a slow
    /// node: the rebalancer moves it off eventually.
    HotShardLeavesSlowNode,
    /// The leader family: no two replicas accept writes for one shard in the same epoch, and
    /// no write is acknowledged by a deposed primary after a newer epoch acknowledged one.
    SinglePrimary,
}

impl PropertyName {
    pub const ALL: [PropertyName; 11] = [
        PropertyName::AckedWritesPersist,
        PropertyName::Linearizable,
        PropertyName::NoDuplicateEffects,
        PropertyName::NoHealthyEviction,
        PropertyName::ChurnBounded,
        PropertyName::CapacityRespected,
        PropertyName::Converges,
        PropertyName::OpsComplete,
        PropertyName::DeadReplaced,
        PropertyName::HotShardLeavesSlowNode,
        PropertyName::SinglePrimary,
    ];

    /// Checked on cycles of the state graph rather than on single states.
    pub fn is_liveness(self) -> bool {
        matches!(
            self,
            PropertyName::Converges
                | PropertyName::OpsComplete
                | PropertyName::DeadReplaced
                | PropertyName::HotShardLeavesSlowNode
        )
    }

    /// Checked only when a model names it: a model without spares cannot replace a replica,
    /// and one without a node to move a hot shard to cannot relieve a slow one, so asking
    /// every model would make them fail by construction.
    pub fn opt_in(self) -> bool {
        matches!(self, PropertyName::DeadReplaced | PropertyName::HotShardLeavesSlowNode)
    }

    /// The protocol family a property speaks about (`None`: both). A model is checked only for
    /// the properties of its family: the quorum family has no primaries to count, and the
    /// leader family evicts no replica, changes no replica set, keeps no idempotency tokens and
    /// routes by no write capacity.
    pub fn family(self) -> Option<crate::policy::leader::Replication> {
        use crate::policy::leader::Replication;
        match self {
            PropertyName::SinglePrimary => Some(Replication::Leader),
            PropertyName::NoDuplicateEffects
            | PropertyName::NoHealthyEviction
            | PropertyName::ChurnBounded
            | PropertyName::CapacityRespected
            | PropertyName::DeadReplaced
            | PropertyName::HotShardLeavesSlowNode => Some(Replication::Quorum),
            PropertyName::AckedWritesPersist
            | PropertyName::Linearizable
            | PropertyName::Converges
            | PropertyName::OpsComplete => None,
        }
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
            PropertyName::DeadReplaced => "dead_replaced",
            PropertyName::HotShardLeavesSlowNode => "hot_shard_leaves_slow_node",
            PropertyName::SinglePrimary => "single_primary",
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
    /// Replicas it can hold at most (members, a join's replacement, a queued replacement);
    /// `None`: unlimited.
    pub replica_slots: Option<u8>,
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
    /// The burst ends, at a moment the checker chooses (`burst_ends = true`); otherwise it
    /// lasts for ever.
    pub burst_ends: bool,
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
    /// The coordinator's capacity for control-plane and foreground work; `None`: its load is
    /// not modelled (requests never wait behind membership work).
    pub work: Option<crate::policy::coordinator_load::WorkCapacity>,
    /// Ticks of one round of work: `work.work_per_tick` units are done per round (1 in a
    /// model; the store, at 1 ms ticks, does a model tick's work every `ms_per_tick` ticks).
    pub work_round_ticks: u16,
}

/// One coordinator of several (`[[coordinators]]`); the first is the membership leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorPlace {
    pub name: String,
    pub zone: u8,
}

/// Coordinators a model has at most (a bit each in the membership leader's ack set).
pub const COORDINATOR_COUNT_MAX: usize = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    pub name: String,
    pub zone: u8,
    pub shard: u8,
    pub ops: Vec<OpKind>,
    pub request_timeout_ticks: Ticks,
    pub think_ticks: LatencyTicks,
    /// `None`: any hash, chosen by the checker (each is an initial state).
    pub key_hash: Option<crate::policy::routing::KeyHash>,
    /// Continuous load: after the last operation the client starts over, forever.
    pub repeat: bool,
    /// The coordinator the client sends its requests to.
    pub coordinator: u8,
}

impl ClientSpec {
    /// The kind of the client's operation `seq`. A repeating client's operations cycle through
    /// `ops`, and the model keeps `seq` congruent to the position modulo `ops.len()`.
    pub fn op_kind(&self, seq: u8) -> OpKind {
        assert!(self.repeat || usize::from(seq) < self.ops.len(), "op {seq} past a finite workload");
        self.ops[usize::from(seq) % self.ops.len()]
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DegradeSpec {
    pub zones: (u8, u8),
    pub latency: LatencyTicks,
    pub text: String,
    /// The link restores itself within this many ticks of degrading (`None`: when the checker
    /// chooses, or never).
    pub duration: Option<LatencyTicks>,
}

impl DegradeSpec {
    /// Whether it slows the link between zones `a` and `b` (either way).
    pub fn joins(&self, a: u8, b: u8) -> bool {
        self.zones == (a, b) || self.zones == (b, a)
    }
}

/// A fault of the menu that can be in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MenuFault {
    Crash(NodeId),
    Partition(u8),
    /// Index into `FaultSpec::degrade`.
    Degrade(u8),
}

/// The name that stands for the coordinator in the crash menu.
pub const COORDINATOR_NAME: &str = "coordinator";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultSpec {
    pub budget: u8,
    pub crash: Vec<NodeId>,
    /// `"coordinator"` in the crash menu: the coordinator may crash and restart, losing all
    /// it did not persist.
    pub crash_coordinator: bool,
    pub partition: Vec<u8>,
    pub degrade: Vec<DegradeSpec>,
    pub drop: bool,
    /// How long a crash of `crash[i]` lasts before the node restarts by itself: a window of
    /// ticks from the crash (`None`: it restarts when the checker chooses, or never).
    pub crash_duration: Vec<Option<LatencyTicks>>,
    /// How long a cut of `partition[i]` lasts before it heals by itself.
    pub partition_duration: Vec<Option<LatencyTicks>>,
}

impl FaultSpec {
    /// How long `fault` lasts once it happens: it ends by itself within this window of ticks
    /// from its start, and time cannot pass its end; `None`: it ends at a moment the checker
    /// chooses, or never.
    pub fn duration(&self, fault: MenuFault) -> Option<LatencyTicks> {
        match fault {
            MenuFault::Crash(n) => {
                let i = self.crash.iter().position(|&c| c == n).expect("a crash on the menu");
                self.crash_duration[i]
            }
            MenuFault::Partition(z) => {
                let i = self.partition.iter().position(|&p| p == z).expect("a cut on the menu");
                self.partition_duration[i]
            }
            MenuFault::Degrade(i) => self.degrade[usize::from(i)].duration,
        }
    }

    /// Whether some fault of the menu ends by itself.
    pub fn any_duration(&self) -> bool {
        self.crash_duration.iter().chain(&self.partition_duration).any(Option::is_some)
            || self.degrade.iter().any(|d| d.duration.is_some())
    }
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
    /// Every coordinator, the membership leader first (one, in `coordinator.zone`, unless the
    /// scenario lists `[[coordinators]]`).
    pub coordinators: Vec<CoordinatorPlace>,
    pub clients: Vec<ClientSpec>,
    pub faults: FaultSpec,
    pub properties: Vec<PropertyName>,
    /// The scenario's own `[policy]`, the base every variant and `--policy` file patches.
    pub base_policy: SourcedPolicy,
    pub variants: Vec<Variant>,
    pub max_states: Option<u64>,
    pub slow_compaction_debt_pct: u8,
    pub compaction: CompactionSpec,
}

/// How compaction debt changes. All zero (the default): debt is each node's configured
/// `compaction_debt_pct` for ever. Otherwise it is node state: it grows with every write a node
/// applies and drains with time, between 0 and 100, and the coordinator learns it from the
/// nodes' load reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionSpec {
    /// Percentage points of debt per write applied (a replica write, a write-back, a copy).
    pub debt_per_write_pct: u8,
    /// Percentage points of debt compacted away per tick.
    pub debt_drain_pct_per_tick: u8,
}

impl CompactionSpec {
    /// Whether debt changes at all (a scenario opts in).
    pub fn dynamic(&self) -> bool {
        self.debt_per_write_pct > 0 || self.debt_drain_pct_per_tick > 0
    }
}

pub const FAULT_BUDGET_MAX: u8 = 4;
/// A fault's remaining ticks are a `u8` in the state.
pub const FAULT_DURATION_TICKS_MAX: Ticks = 250;
/// Active degradations are a bit set in a `u8`.
pub const DEGRADE_MENU_MAX: usize = 8;
/// A coordinator's stage is a `u8` in the state; a rollout of more than a few stages is
/// several models' worth of states.
pub const ROLLOUT_STAGES_MAX: usize = 16;

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ConfigError> {
        let text = read_file(path)?;
        let raw: RawScenario = parse_toml(path, &text)?;
        validate::validate(path, raw).map_err(|message| ConfigError::new(path, message))
    }

    /// A policy over this model runs the family the model's [policy] names: the world, the
    /// properties and the store are the family's (a variant is refused the same way when the
    /// model loads).
    pub fn check_family(&self, policy: &SourcedPolicy) -> Result<(), String> {
        use crate::policy::leader::Replication;
        let family = |p: &SourcedPolicy| p.patch.replication.unwrap_or(Replication::Quorum);
        let (model, asked) = (family(&self.base_policy), family(policy));
        if asked != model {
            return Err(format!(
                "{}: key `replication` = \"{}\": a policy may not change the protocol family of {} (its [policy] runs `replication = \"{}\"`)",
                policy.origin("replication"),
                asked.as_str(),
                self.path.display(),
                model.as_str()
            ));
        }
        Ok(())
    }

    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The worst one-way latency between two zones, degradations in the fault menu included.
    pub fn worst_latency_ticks(&self, a: u8, b: u8) -> Ticks {
        let mut worst = self.latency[usize::from(a)][usize::from(b)].hi;
        for d in &self.faults.degrade {
            if d.joins(a, b) {
                worst = worst.max(d.latency.hi);
            }
        }
        worst
    }
}
