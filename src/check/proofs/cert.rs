//! A certificate as typed data: what `prove` writes (with the `toml` crate's serializer, laid out
//! by `layout` as reviewers read it) and what `prove --verify` reads back and compares field by
//! field.

use super::{policy_code_file_hashes, policy_code_hash, recorded_path, sha256_hex, FORMAT};
use crate::check::{Found, Job, RunResult};
use crate::config::{ConfigError, LatencyTicks, OpKind, Verdict};
use crate::model::WorldConfig;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// The comment every certificate starts with.
const HEADER: &str = "\
# replicheck verification certificate: what was checked, at which scope, with what result.
# Written by `replicheck prove`; CI re-checks it with `replicheck prove --verify`.
# Do not edit: regenerate with `replicheck prove`. proofs/README.md says what a
# certificate establishes and what it does not.
";

/// One certificate file: `proofs/MODEL/VARIANT.toml`. Field order is the file's key order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    pub format: i64,
    pub model: String,
    pub variant: String,
    pub description: String,
    pub tool_version: String,
    pub model_file: ModelFile,
    pub policy: PolicySection,
    pub policy_code: PolicyCode,
    pub scope: Scope,
    pub exploration: Exploration,
    /// Per property, in the properties' order.
    pub verdicts: IndexMap<String, Verdicts>,
    /// Per violated property.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub counterexamples: IndexMap<String, CounterexampleSummary>,
}

/// The few keys every certificate format has: enough to tell which model variant a file is
/// for, and whether it is of this format, before reading the rest.
#[derive(Debug, Deserialize)]
pub struct Header {
    pub format: i64,
    pub variant: String,
    pub model_file: HeaderModelFile,
}

#[derive(Debug, Deserialize)]
pub struct HeaderModelFile {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    pub path: String,
    pub sha256: String,
}

/// The effective policy: its hash, and every knob's value as TOML.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    pub sha256: String,
    pub values: IndexMap<String, toml::Value>,
}

/// The hash of the policy code, and of each of its files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyCode {
    pub sha256: String,
    pub files: IndexMap<String, String>,
}

/// The cluster, environment and workload the variant was checked on, resolved (initial replica
/// sets, latencies per zone pair) and in the scenario's units.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    pub tick: String,
    pub zones: Vec<String>,
    /// Each node's zone.
    pub nodes: IndexMap<String, String>,
    /// Each shard's initial replica set.
    pub shards: IndexMap<String, Vec<String>>,
    pub coordinator: Coordinator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_states: Option<u64>,
    pub network: Network,
    pub clients: IndexMap<String, Client>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Partitions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Backends>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalancer: Option<Rebalancer>,
    pub faults: Faults,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coordinator {
    pub zone: String,
    pub membership_queue_capacity: u64,
    pub membership_update_time: String,
    /// The churn budget `churn_bounded` counts against, in the model file's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_changes_per_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_window: Option<String>,
    /// The coordinator's capacity and what changes cost it, when its load is modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_per_tick: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership_update_work: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_work: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Per zone pair (`a-b`), as a duration or a range.
    pub latency: IndexMap<String, String>,
    pub lossy: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    pub zone: String,
    pub shard: String,
    /// Where key sharding sends this client's key, when partitions are in play.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hash: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    pub ops: Vec<String>,
    /// Continuous load: the client starts over after its last operation, forever.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
    pub request_timeout: String,
    pub think_time: String,
}

/// A capacity in writes per tick, or `"unlimited"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Capacity {
    PerTick(u64),
    Unlimited(Unlimited),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unlimited {
    Unlimited,
}

impl From<Option<u16>> for Capacity {
    fn from(per_tick: Option<u16>) -> Capacity {
        per_tick.map_or(Capacity::Unlimited(Unlimited::Unlimited), |c| Capacity::PerTick(u64::from(c)))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partitions {
    pub write_capacity_per_tick: Capacity,
    pub burst_writes_per_tick: IndexMap<String, u64>,
    pub background_writes_per_tick: IndexMap<String, u64>,
    /// The shards whose burst ends at a moment the checker chooses (absent: every burst lasts
    /// for ever).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursts_end: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backends {
    pub preference_order: Vec<String>,
    pub write_capacity_per_tick: IndexMap<String, Capacity>,
    pub base_load_per_tick: IndexMap<String, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rebalancer {
    pub disk_used_pct: IndexMap<String, u64>,
    pub compaction_debt_pct: IndexMap<String, u64>,
    pub shard_size_pct: IndexMap<String, u64>,
    pub hot_shards: Vec<String>,
    pub slow_compaction_debt_pct: u64,
    /// With debt as node state: points of debt per write applied (absent: debt is static).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_debt_per_write_pct: Option<u64>,
    /// With debt as node state: points of debt compacted per tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_debt_drain_pct_per_tick: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    pub budget: u64,
    pub crash: Vec<String>,
    pub partition: Vec<String>,
    pub degrade: Vec<Degrade>,
    pub drop: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Degrade {
    pub zones: Vec<String>,
    pub latency: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exploration {
    pub complete: bool,
    /// Why exploration ended early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    pub unique_states: u64,
    pub transitions: u64,
    pub max_depth: u64,
    /// An upper bound on the chance that a fingerprint collision hid a state (see
    /// `engine::collision`), as the report prints it.
    pub fingerprint_collision_probability: String,
}

impl Exploration {
    /// A fresh run cut by its memory bound (`fresh_cut_by_memory`) matches a recorded one cut
    /// at the same bound (the same `stopped`) whatever its counts at the cut: they vary from
    /// run to run with what was resident.
    pub fn counts_at_the_same_memory_cut(&mut self, fresh_cut_by_memory: bool, recorded: &Exploration) {
        if fresh_cut_by_memory && self.stopped == recorded.stopped {
            self.unique_states = recorded.unique_states;
            self.transitions = recorded.transitions;
            self.max_depth = recorded.max_depth;
            self.fingerprint_collision_probability = recorded.fingerprint_collision_probability.clone();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdicts {
    pub expected: Verdict,
    pub found: Found,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterexampleSummary {
    /// The command that opens the model in the explorer.
    pub explore: String,
    /// The explorer's path of the trace, without the address.
    pub explorer_path: String,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub step: u64,
    pub time_ms: u64,
    pub action: String,
}

// ---------------------------------------------------------------------------------------------
// Building a certificate from a run.

/// A duration in milliseconds as a scenario would write it: "2s", "1500ms".
pub fn duration_text(ms: u64) -> String {
    if ms > 0 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn latency_text(l: &LatencyTicks, tick_ms: u64) -> String {
    let lo = duration_text(u64::from(l.lo) * tick_ms);
    if l.lo == l.hi {
        lo
    } else {
        format!("{lo}..{}", duration_text(u64::from(l.hi) * tick_ms))
    }
}

/// A policy value as `describe` writes it (TOML text), as a TOML value.
fn policy_value(text: &str) -> toml::Value {
    let doc: toml::Table = format!("v = {text}").parse().expect("policy values are TOML values");
    doc["v"].clone()
}

impl Certificate {
    /// The certificate of one run. `model_text` is the model file's content, for its hash.
    pub fn new(job: &Job, result: &RunResult, model_text: &str) -> Result<Certificate, ConfigError> {
        let s = &job.scenario;
        let cfg = WorldConfig::new(s, &job.policy).map_err(|m| ConfigError::new(&s.path, m))?;
        let model_path = recorded_path(&s.path);
        Ok(Certificate {
            format: FORMAT,
            model: s.name.clone(),
            variant: job.variant.clone(),
            description: job.description.clone(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            model_file: ModelFile { path: model_path.clone(), sha256: sha256_hex(model_text) },
            policy: policy_section(job),
            policy_code: PolicyCode {
                sha256: policy_code_hash(),
                files: policy_code_file_hashes().into_iter().map(|(p, h)| (p.to_string(), h)).collect(),
            },
            scope: Scope::new(job, &cfg),
            exploration: Exploration {
                complete: result.complete,
                stopped: match &result.cut {
                    // How far a run gets before its memory bound is the machine's (what was
                    // resident when), not the model's: only the bound is recorded.
                    Some(crate::engine::Cut::MemoryLimit { limit_bytes, .. }) => {
                        Some(crate::check::memory_bound_reached(*limit_bytes))
                    }
                    _ => result.stopped.clone(),
                },
                unique_states: result.unique_states,
                transitions: result.transitions,
                max_depth: u64::from(result.max_depth),
                fingerprint_collision_probability: crate::engine::collision::describe(
                    result.fingerprint_collision_probability,
                ),
            },
            verdicts: result
                .properties
                .iter()
                .map(|p| (p.name.as_str().to_string(), Verdicts { expected: p.expected, found: p.found }))
                .collect(),
            counterexamples: counterexamples(job, result, &model_path),
        })
    }
}

/// The effective policy: the defaults, the model's [policy] and the variant's overrides. Its
/// hash is over the `key = value` listing, one line each.
fn policy_section(job: &Job) -> PolicySection {
    let values = job.policy.effective();
    let mut listing = String::new();
    for (k, v) in &values {
        let _ = writeln!(listing, "{k} = {v}");
    }
    PolicySection {
        sha256: sha256_hex(&listing),
        values: values.iter().map(|(k, v)| (k.to_string(), policy_value(v))).collect(),
    }
}

fn counterexamples(
    job: &Job,
    result: &RunResult,
    model_path: &str,
) -> IndexMap<String, CounterexampleSummary> {
    let mut out = IndexMap::new();
    for p in &result.properties {
        let Some(cx) = &p.counterexample else {
            continue;
        };
        // The link's path without the address, which is the reader's choice.
        let explorer_path = cx
            .explorer_url
            .split_once("/#/")
            .map(|(_, steps)| format!("#/{steps}"))
            .unwrap_or_else(|| cx.explorer_url.clone());
        let steps = cx
            .steps
            .iter()
            .map(|s| Step { step: s.step as u64, time_ms: s.time_ms, action: s.action.clone() })
            .collect();
        let summary = CounterexampleSummary {
            explore: format!("replicheck explore {model_path} --variant {}", job.variant),
            explorer_path,
            steps,
        };
        out.insert(p.name.as_str().to_string(), summary);
    }
    out
}

/// Whether the variant routes keys to partitions in a way the scope must record: a partition
/// has a write capacity, keys are split over suffixes, or a shard has background writes.
/// Otherwise every client's partition is its shard and no partition has a limit, and the
/// certificate leaves the partition facts out rather than list zeros.
fn partitions_in_play(cfg: &WorldConfig) -> bool {
    cfg.partition_capacity_per_tick.is_some()
        || cfg.policy.routing.write_shard_suffixes > 1
        || cfg.shards.iter().any(|shard| shard.burst_writes_per_tick > 0)
}

/// One value per shard (which is also a partition), keyed by the shard's name.
fn per_shard<T>(cfg: &WorldConfig, value: impl Fn(usize) -> T) -> IndexMap<String, T> {
    cfg.shard_names.iter().enumerate().map(|(p, name)| (name.clone(), value(p))).collect()
}

/// One value per node, keyed by the node's name.
fn per_node<T>(cfg: &WorldConfig, value: impl Fn(&crate::config::NodeSpec) -> T) -> IndexMap<String, T> {
    cfg.nodes.iter().map(|n| (n.name.clone(), value(n))).collect()
}

impl Scope {
    fn new(job: &Job, cfg: &WorldConfig) -> Scope {
        let s = &job.scenario;
        let tick = s.tick_ms;
        let zone = |z: u8| s.zones[usize::from(z)].clone();
        let node = |n: u8| s.nodes[usize::from(n)].name.clone();
        let shards = s
            .shards
            .iter()
            .zip(&cfg.initial_members)
            .map(|(shard, members)| (shard.name.clone(), members.iter().map(|&n| node(n)).collect()))
            .collect();
        let c = &s.coordinator;
        let coordinator = Coordinator {
            zone: zone(c.zone),
            membership_queue_capacity: u64::from(c.membership_queue_capacity),
            membership_update_time: duration_text(u64::from(c.membership_update_ticks) * tick),
            max_changes_per_window: c.churn_budget.map(|(changes, _)| u64::from(changes)),
            change_window: c.churn_budget.map(|(_, window)| duration_text(u64::from(window) * tick)),
            work_per_tick: c.work.map(|w| u64::from(w.work_per_tick)),
            membership_update_work: c.work.map(|w| u64::from(w.membership_update_work)),
            copy_work: c.work.map(|w| u64::from(w.copy_work)),
        };
        Scope {
            tick: duration_text(tick),
            zones: s.zones.clone(),
            nodes: s.nodes.iter().map(|n| (n.name.clone(), zone(n.zone))).collect(),
            shards,
            coordinator,
            max_states: s.max_states,
            network: Network::new(job),
            clients: clients(job, cfg),
            partitions: partitions_in_play(cfg).then(|| Partitions::new(cfg)),
            backends: cfg.backends_modelled.then(|| Backends::new(cfg)),
            rebalancer: cfg.policy.rebalance.is_some().then(|| Rebalancer::new(cfg)),
            faults: Faults::new(job),
        }
    }
}

impl Network {
    fn new(job: &Job) -> Network {
        let s = &job.scenario;
        let mut latency = IndexMap::new();
        let mut lossy = Vec::new();
        for a in 0..s.zones.len() {
            for b in a..s.zones.len() {
                let pair = format!("{}-{}", s.zones[a], s.zones[b]);
                latency.insert(pair.clone(), latency_text(&s.latency[a][b], s.tick_ms));
                if s.lossy[a][b] {
                    lossy.push(pair);
                }
            }
        }
        Network { latency, lossy }
    }
}

fn clients(job: &Job, cfg: &WorldConfig) -> IndexMap<String, Client> {
    let s = &job.scenario;
    let tick = s.tick_ms;
    let partitions = partitions_in_play(cfg);
    let mut out = IndexMap::new();
    for (i, client) in s.clients.iter().enumerate() {
        let ops = client
            .ops
            .iter()
            .map(|op| match op {
                OpKind::Write => "write".to_string(),
                OpKind::Read => "read".to_string(),
            })
            .collect();
        // Where key sharding sends this client's key: its operations go to that partition.
        let partition = partitions.then(|| {
            let names: Vec<&str> =
                cfg.client_partitions[i].iter().map(|&p| cfg.shard_names[usize::from(p)].as_str()).collect();
            match names.as_slice() {
                [one] => one.to_string(),
                many => format!("any of {}", many.join(", ")),
            }
        });
        let entry = Client {
            zone: s.zones[usize::from(client.zone)].clone(),
            shard: s.shards[usize::from(client.shard)].name.clone(),
            key_hash: client.key_hash.filter(|_| partitions).map(|h| u64::from(h.0)),
            partition,
            ops,
            repeat: client.repeat,
            request_timeout: duration_text(u64::from(client.request_timeout_ticks) * tick),
            think_time: latency_text(&client.think_ticks, tick),
        };
        out.insert(client.name.clone(), entry);
    }
    out
}

impl Partitions {
    /// The partition facts the model admits writes by, in writes per tick: every partition's
    /// capacity (its own cap and its share of the table's, resolved), each shard's burst on its
    /// key prefix as the model file gives it, and the background that burst puts on each
    /// partition once spread over the suffixes.
    fn new(cfg: &WorldConfig) -> Partitions {
        assert_eq!(cfg.partition_background.len(), cfg.shard_names.len(), "one background per partition");
        Partitions {
            write_capacity_per_tick: cfg.partition_capacity_per_tick.into(),
            burst_writes_per_tick: per_shard(cfg, |p| u64::from(cfg.shards[p].burst_writes_per_tick)),
            background_writes_per_tick: per_shard(cfg, |p| u64::from(cfg.partition_background[p])),
            bursts_end: cfg
                .shards
                .iter()
                .filter(|shard| shard.burst_ends)
                .map(|shard| shard.name.clone())
                .collect(),
        }
    }
}

impl Backends {
    /// The ingest backends placement chooses among, present only when they are modelled (a
    /// node has a write capacity): the load balancer's preference order (the scenario's node
    /// order, as `coordinator::backend_loads` offers them), and each backend's capacity and the
    /// load it carries from traffic outside the model, in writes per tick.
    fn new(cfg: &WorldConfig) -> Backends {
        Backends {
            preference_order: cfg.nodes.iter().map(|n| n.name.clone()).collect(),
            write_capacity_per_tick: per_node(cfg, |n| n.write_capacity_per_tick.into()),
            base_load_per_tick: per_node(cfg, |n| u64::from(n.base_load_per_tick)),
        }
    }
}

impl Rebalancer {
    /// What the rebalancer decides by, present only when it runs: each node's disk use from
    /// data outside the model and its compaction debt, each shard's size and which shards are
    /// hot, in percent of a node's disk, and the debt at which a node hosting a hot shard is
    /// slow.
    fn new(cfg: &WorldConfig) -> Rebalancer {
        Rebalancer {
            disk_used_pct: per_node(cfg, |n| u64::from(n.disk_used_pct)),
            compaction_debt_pct: per_node(cfg, |n| u64::from(n.compaction_debt_pct)),
            shard_size_pct: per_shard(cfg, |k| u64::from(cfg.shards[k].size_pct)),
            hot_shards: cfg.shards.iter().filter(|k| k.hot).map(|k| k.name.clone()).collect(),
            slow_compaction_debt_pct: u64::from(cfg.slow_compaction_debt_pct),
            compaction_debt_per_write_pct: cfg
                .compaction
                .dynamic()
                .then_some(u64::from(cfg.compaction.debt_per_write_pct)),
            compaction_debt_drain_pct_per_tick: cfg
                .compaction
                .dynamic()
                .then_some(u64::from(cfg.compaction.debt_drain_pct_per_tick)),
        }
    }
}

impl Faults {
    fn new(job: &Job) -> Faults {
        let s = &job.scenario;
        let f = &s.faults;
        let zone = |z: u8| s.zones[usize::from(z)].clone();
        let mut crash: Vec<String> = f.crash.iter().map(|&n| s.nodes[usize::from(n)].name.clone()).collect();
        if f.crash_coordinator {
            crash.push(crate::config::COORDINATOR_NAME.to_string());
        }
        let degrade = f
            .degrade
            .iter()
            .map(|d| Degrade {
                zones: vec![zone(d.zones.0), zone(d.zones.1)],
                latency: latency_text(&d.latency, s.tick_ms),
            })
            .collect();
        Faults {
            budget: u64::from(f.budget),
            crash,
            partition: f.partition.iter().map(|&z| zone(z)).collect(),
            degrade,
            drop: f.drop,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Text.

/// The tables written with a `[header]`; every other table is written inline (`{ k = v }`).
/// `counterexamples` has no header of its own, only one per property.
const SECTIONS: &[&str] = &[
    "model_file",
    "policy",
    "policy.values",
    "policy_code",
    "policy_code.files",
    "scope",
    "scope.network",
    "scope.clients",
    "scope.partitions",
    "scope.backends",
    "scope.rebalancer",
    "scope.faults",
    "exploration",
    "verdicts",
    "counterexamples",
    "counterexamples.*",
];

fn is_section(path: &str) -> bool {
    SECTIONS.iter().any(|s| match s.strip_suffix('*') {
        Some(parent) => path.strip_prefix(parent).is_some_and(|rest| !rest.contains('.')),
        None => *s == path,
    })
}

/// Lay out a document as the serializer made it (every table inline): the sections become
/// `[headed]` tables after a blank line, and a trace's steps one per line.
fn layout(table: &mut toml_edit::Table, prefix: &str) {
    for (key, item) in table.iter_mut() {
        let path = if prefix.is_empty() { key.get().to_string() } else { format!("{prefix}.{}", key.get()) };
        if is_section(&path) {
            let Ok(mut section) = std::mem::take(item).into_table() else {
                unreachable!("a section is a table");
            };
            section.decor_mut().set_prefix("\n");
            section.set_implicit(path == "counterexamples");
            layout(&mut section, &path);
            *item = toml_edit::Item::Table(section);
        } else if key.get() == "steps" && path.starts_with("counterexamples.") {
            if let Some(steps) = item.as_array_mut() {
                for step in steps.iter_mut() {
                    step.decor_mut().set_prefix("\n  ");
                    step.decor_mut().set_suffix("");
                }
                steps.set_trailing_comma(true);
                steps.set_trailing("\n");
            }
        }
    }
}

impl Certificate {
    /// The certificate as TOML text. Deterministic: the same certificate gives the same bytes.
    pub fn to_text(&self) -> String {
        let mut doc = toml_edit::ser::to_document(self).expect("a certificate serializes to TOML");
        layout(doc.as_table_mut(), "");
        format!("{HEADER}\n{doc}")
    }

    /// A certificate of this format from its text.
    pub fn from_text(text: &str) -> Result<Certificate, toml::de::Error> {
        toml::from_str(text)
    }
}
