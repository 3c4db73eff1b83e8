//! Verification certificates: `replicheck prove` writes one per model variant, saying what was
//! checked (the model file and its hash, the effective policy and its hash, the hash of the
//! policy code, the scope), and with what result (each property's verdict, the state space,
//! whether exploration was complete, each counterexample's timed steps).
//! `replicheck prove --verify` re-runs every certificate and names each that no longer
//! matches, and why.
//!
//! A certificate is a TOML file written by hand-rolled, stable formatting (`render`): the same
//! model, policy and tool give the same bytes, so certificates are committed and read in review
//! as diffs. It holds nothing that varies between runs (no timings, no thread count, no
//! explorer address). Verification renders a fresh certificate for each variant and compares
//! the text; when they differ it compares the two parsed documents key by key to say why.
//!
//! Hashes are SHA-256 over text with line endings normalised to `\n`, so a checkout with
//! Windows line endings verifies too.

use super::{model_files, plan, Found, Job, PolicyChoice, RunOptions, RunResult};
use crate::config::{ConfigError, LatencyTicks, OpKind, PropertyName, Verdict};
use crate::model::WorldConfig;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

/// The certificate format. Bump it when the layout changes; verification then asks for
/// regeneration instead of reporting every key as changed.
pub const FORMAT: i64 = 1;

/// The checked code, embedded at build time: every file of `src/policy/` and `src/protocol/`.
/// The pure policy functions and the protocol machines that call them decide what the model
/// (and the store) does, so a change to any of them invalidates every certificate even when
/// the state count happens to stay the same. tests/proofs.rs fails when a file of either
/// folder is missing from this list.
const POLICY_SOURCES: &[(&str, &str)] = &[
    ("src/policy/detector.rs", include_str!("../policy/detector.rs")),
    ("src/policy/eviction.rs", include_str!("../policy/eviction.rs")),
    ("src/policy/mod.rs", include_str!("../policy/mod.rs")),
    ("src/policy/rebalancer.rs", include_str!("../policy/rebalancer.rs")),
    ("src/policy/quorum.rs", include_str!("../policy/quorum.rs")),
    ("src/policy/retry.rs", include_str!("../policy/retry.rs")),
    ("src/policy/routing.rs", include_str!("../policy/routing.rs")),
    ("src/protocol/coordinator.rs", include_str!("../protocol/coordinator.rs")),
    ("src/protocol/mod.rs", include_str!("../protocol/mod.rs")),
    ("src/protocol/msg.rs", include_str!("../protocol/msg.rs")),
    ("src/protocol/node.rs", include_str!("../protocol/node.rs")),
];

/// The files that make up the policy code, as listed in `POLICY_SOURCES`.
pub fn policy_source_files() -> Vec<&'static str> {
    POLICY_SOURCES.iter().map(|(path, _)| *path).collect()
}

fn sha256_hex(text: &str) -> String {
    let normalised = text.replace("\r\n", "\n");
    let digest = Sha256::digest(normalised.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The hash of every policy source file, in `POLICY_SOURCES` order.
pub fn policy_code_file_hashes() -> Vec<(&'static str, String)> {
    POLICY_SOURCES.iter().map(|(path, text)| (*path, sha256_hex(text))).collect()
}

/// One hash for the whole policy code: over each file's path and hash.
pub fn policy_code_hash() -> String {
    let mut listing = String::new();
    for (path, hash) in policy_code_file_hashes() {
        let _ = writeln!(listing, "{path} {hash}");
    }
    sha256_hex(&listing)
}

/// A model path as certificates record it: `./` dropped, `/` as the separator.
fn display_path(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let joined = parts.join("/");
    // An absolute path's root component is "/" itself: do not double it.
    joined.replacen("//", "/", 1)
}

/// A model path as certificates record it: relative to the current directory when it is
/// under it (so `prove /repo/models` and `prove models` from `/repo` write the same text).
fn recorded_path(path: &Path) -> String {
    if path.is_absolute() {
        if let Ok(cwd) = std::env::current_dir() {
            if let Ok(rel) = path.strip_prefix(&cwd) {
                return display_path(rel);
            }
        }
    }
    display_path(path)
}

/// The same file however it was named (`models/x.toml`, `./models/x.toml`, an absolute path).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => display_path(a) == display_path(b),
    }
}

/// Where `prove` writes the certificate of one model variant.
pub fn certificate_path(out: &Path, model: &str, variant: &str) -> PathBuf {
    out.join(model).join(format!("{variant}.toml"))
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be, quoted otherwise.
fn key(k: &str) -> String {
    let bare = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        quote(k)
    }
}

fn array(items: &[String]) -> String {
    if items.is_empty() {
        "[]".into()
    } else {
        format!("[{}]", items.join(", "))
    }
}

fn strings<S: AsRef<str>>(items: &[S]) -> String {
    array(&items.iter().map(|s| quote(s.as_ref())).collect::<Vec<_>>())
}

fn inline(pairs: &[(&str, String)]) -> String {
    if pairs.is_empty() {
        return "{}".into();
    }
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{} = {v}", key(k))).collect();
    format!("{{ {} }}", body.join(", "))
}

/// A duration in milliseconds as a scenario would write it: "2s", "1500ms".
fn duration_text(ms: u64) -> String {
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

fn found_text(f: Found) -> &'static str {
    match f {
        Found::Holds => "holds",
        Found::Violated => "violated",
        Found::Unknown => "unknown",
    }
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::Violated => "violated",
    }
}

/// The scope section: the cluster, environment and workload the variant was checked on,
/// resolved (initial replica sets, latencies per zone pair) and in the scenario's units.
fn render_scope(out: &mut String, job: &Job, cfg: &WorldConfig) {
    let s = &job.scenario;
    let tick = s.tick_ms;
    let zone = |z: u8| s.zones[usize::from(z)].as_str();
    let node = |n: u8| s.nodes[usize::from(n)].name.as_str();
    let _ = writeln!(out, "[scope]");
    let _ = writeln!(out, "tick = {}", quote(&duration_text(tick)));
    let _ = writeln!(out, "zones = {}", strings(&s.zones));
    let nodes: Vec<(&str, String)> = s.nodes.iter().map(|n| (n.name.as_str(), quote(zone(n.zone)))).collect();
    let _ = writeln!(out, "nodes = {}", inline(&nodes));
    let shards: Vec<(&str, String)> = s
        .shards
        .iter()
        .zip(&cfg.initial_members)
        .map(|(shard, members)| {
            let names: Vec<&str> = members.iter().map(|&n| node(n)).collect();
            (shard.name.as_str(), strings(&names))
        })
        .collect();
    let _ = writeln!(out, "shards = {}", inline(&shards));
    let c = &s.coordinator;
    let mut coordinator = vec![
        ("zone", quote(zone(c.zone))),
        ("membership_queue_capacity", c.membership_queue_capacity.to_string()),
        ("membership_update_time", quote(&duration_text(u64::from(c.membership_update_ticks) * tick))),
    ];
    // The churn budget churn_bounded counts against, in the model file's keys.
    if let Some((changes, window_ticks)) = c.churn_budget {
        coordinator.push(("max_changes_per_window", changes.to_string()));
        coordinator.push(("change_window", quote(&duration_text(u64::from(window_ticks) * tick))));
    }
    let _ = writeln!(out, "coordinator = {}", inline(&coordinator));
    if let Some(max) = s.max_states {
        let _ = writeln!(out, "max_states = {max}");
    }

    let _ = writeln!(out, "\n[scope.network]");
    let mut latency = Vec::new();
    let mut lossy = Vec::new();
    for a in 0..s.zones.len() {
        for b in a..s.zones.len() {
            let pair = format!("{}-{}", s.zones[a], s.zones[b]);
            latency.push((pair.clone(), quote(&latency_text(&s.latency[a][b], tick))));
            if s.lossy[a][b] {
                lossy.push(pair);
            }
        }
    }
    let latency: Vec<(&str, String)> = latency.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let _ = writeln!(out, "latency = {}", inline(&latency));
    let _ = writeln!(out, "lossy = {}", strings(&lossy));

    let _ = writeln!(out, "\n[scope.clients]");
    let partitions = partitions_in_play(cfg);
    for (i, client) in s.clients.iter().enumerate() {
        let ops: Vec<&str> = client
            .ops
            .iter()
            .map(|op| match op {
                OpKind::Write => "write",
                OpKind::Read => "read",
            })
            .collect();
        let mut entry = vec![
            ("zone", quote(zone(client.zone))),
            ("shard", quote(&s.shards[usize::from(client.shard)].name)),
        ];
        if partitions {
            // Where key sharding sends this client's key: its operations go to that partition.
            let partition = cfg.client_partitions[i];
            entry.push(("key_hash", client.key_hash.to_string()));
            entry.push(("partition", quote(&cfg.shard_names[usize::from(partition)])));
        }
        entry.extend([
            ("ops", strings(&ops)),
            ("request_timeout", quote(&duration_text(u64::from(client.request_timeout_ticks) * tick))),
            ("think_time", quote(&latency_text(&client.think_ticks, tick))),
        ]);
        let _ = writeln!(out, "{} = {}", key(&client.name), inline(&entry));
    }
    if partitions {
        render_partitions(out, cfg);
    }
    if cfg.backends_modelled {
        render_backends(out, cfg);
    }
    if cfg.policy.rebalance.is_some() {
        render_rebalancer_inputs(out, cfg);
    }

    let f = &s.faults;
    let _ = writeln!(out, "\n[scope.faults]");
    let _ = writeln!(out, "budget = {}", f.budget);
    let mut crash: Vec<&str> = f.crash.iter().map(|&n| node(n)).collect();
    if f.crash_coordinator {
        crash.push(crate::config::COORDINATOR_NAME);
    }
    let _ = writeln!(out, "crash = {}", strings(&crash));
    let partition: Vec<&str> = f.partition.iter().map(|&z| zone(z)).collect();
    let _ = writeln!(out, "partition = {}", strings(&partition));
    let degrade: Vec<String> = f
        .degrade
        .iter()
        .map(|d| {
            inline(&[
                ("zones", strings(&[zone(d.zones.0), zone(d.zones.1)])),
                ("latency", quote(&latency_text(&d.latency, tick))),
            ])
        })
        .collect();
    let _ = writeln!(out, "degrade = {}", array(&degrade));
    let _ = writeln!(out, "drop = {}", f.drop);
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

/// A capacity in writes per tick; `None` is unlimited.
fn capacity_text(capacity_per_tick: Option<u16>) -> String {
    capacity_per_tick.map_or_else(|| quote("unlimited"), |c| c.to_string())
}

/// One value per shard (which is also a partition), keyed by the shard's name.
fn per_shard(cfg: &WorldConfig, value: impl Fn(usize) -> String) -> String {
    let pairs: Vec<(&str, String)> =
        cfg.shard_names.iter().enumerate().map(|(p, name)| (name.as_str(), value(p))).collect();
    inline(&pairs)
}

/// One value per node, keyed by the node's name.
fn per_node(cfg: &WorldConfig, value: impl Fn(&crate::config::NodeSpec) -> String) -> String {
    let pairs: Vec<(&str, String)> = cfg.nodes.iter().map(|n| (n.name.as_str(), value(n))).collect();
    inline(&pairs)
}

/// The partition facts the model admits writes by, in writes per tick: every partition's
/// capacity (its own cap and its share of the table's, resolved), each shard's burst on its
/// key prefix as the model file gives it, and the background that burst puts on each
/// partition once spread over the suffixes.
fn render_partitions(out: &mut String, cfg: &WorldConfig) {
    assert_eq!(cfg.partition_background.len(), cfg.shard_names.len(), "one background per partition");
    let _ = writeln!(out, "\n[scope.partitions]");
    let _ = writeln!(out, "write_capacity_per_tick = {}", capacity_text(cfg.partition_capacity_per_tick));
    let burst = per_shard(cfg, |p| cfg.shards[p].burst_writes_per_tick.to_string());
    let _ = writeln!(out, "burst_writes_per_tick = {burst}");
    let background = per_shard(cfg, |p| cfg.partition_background[p].to_string());
    let _ = writeln!(out, "background_writes_per_tick = {background}");
}

/// The ingest backends placement chooses among, present only when they are modelled (a node
/// has a write capacity): the load balancer's preference order, and each backend's capacity
/// and the load it carries from traffic outside the model, in writes per tick.
fn render_backends(out: &mut String, cfg: &WorldConfig) {
    assert!(cfg.backends_modelled);
    let _ = writeln!(out, "\n[scope.backends]");
    // The model offers the backends in the scenario's node order (`coordinator::backend_loads`).
    let order: Vec<&str> = cfg.nodes.iter().map(|n| n.name.as_str()).collect();
    let _ = writeln!(out, "preference_order = {}", strings(&order));
    let capacity = per_node(cfg, |n| capacity_text(n.write_capacity_per_tick));
    let _ = writeln!(out, "write_capacity_per_tick = {capacity}");
    let _ = writeln!(out, "base_load_per_tick = {}", per_node(cfg, |n| n.base_load_per_tick.to_string()));
}

/// What the rebalancer decides by, present only when it runs: each node's disk use from data
/// outside the model and its compaction debt, each shard's size and which shards are hot, in
/// percent of a node's disk, and the debt at which a node hosting a hot shard is slow.
fn render_rebalancer_inputs(out: &mut String, cfg: &WorldConfig) {
    assert!(cfg.policy.rebalance.is_some());
    let _ = writeln!(out, "\n[scope.rebalancer]");
    let _ = writeln!(out, "disk_used_pct = {}", per_node(cfg, |n| n.disk_used_pct.to_string()));
    let _ = writeln!(out, "compaction_debt_pct = {}", per_node(cfg, |n| n.compaction_debt_pct.to_string()));
    let _ = writeln!(out, "shard_size_pct = {}", per_shard(cfg, |k| cfg.shards[k].size_pct.to_string()));
    let hot: Vec<&str> = cfg.shards.iter().filter(|k| k.hot).map(|k| k.name.as_str()).collect();
    let _ = writeln!(out, "hot_shards = {}", strings(&hot));
    let _ = writeln!(out, "slow_compaction_debt_pct = {}", cfg.slow_compaction_debt_pct);
}

/// The certificate of one run, as TOML text. Deterministic: the same job and result give the
/// same bytes. `model_text` is the model file's content, for its hash.
pub fn render(job: &Job, result: &RunResult, model_text: &str) -> Result<String, ConfigError> {
    let s = &job.scenario;
    let cfg = WorldConfig::new(s, &job.policy).map_err(|m| ConfigError::new(&s.path, m))?;
    let mut out = String::new();
    out.push_str(
        "# replicheck verification certificate: what was checked, at which scope, with what result.\n\
         # Written by `replicheck prove`; CI re-checks it with `replicheck prove --verify`.\n\
         # Do not edit: regenerate with `replicheck prove`. proofs/README.md says what a\n\
         # certificate establishes and what it does not.\n\n",
    );
    let _ = writeln!(out, "format = {FORMAT}");
    let _ = writeln!(out, "model = {}", quote(&s.name));
    let _ = writeln!(out, "variant = {}", quote(&job.variant));
    let _ = writeln!(out, "description = {}", quote(&job.description));
    let _ = writeln!(out, "tool_version = {}", quote(env!("CARGO_PKG_VERSION")));

    let _ = writeln!(out, "\n[model_file]");
    let model_path = recorded_path(&s.path);
    let _ = writeln!(out, "path = {}", quote(&model_path));
    let _ = writeln!(out, "sha256 = {}", quote(&sha256_hex(model_text)));

    // The effective policy: the defaults, the model's [policy] and the variant's overrides.
    let values = job.policy.effective();
    let mut listing = String::new();
    for (k, v) in &values {
        let _ = writeln!(listing, "{k} = {v}");
    }
    let _ = writeln!(out, "\n[policy]");
    let _ = writeln!(out, "sha256 = {}", quote(&sha256_hex(&listing)));
    let _ = writeln!(out, "\n[policy.values]");
    out.push_str(&listing);

    let _ = writeln!(out, "\n[policy_code]");
    let _ = writeln!(out, "sha256 = {}", quote(&policy_code_hash()));
    let _ = writeln!(out, "\n[policy_code.files]");
    for (path, hash) in policy_code_file_hashes() {
        let _ = writeln!(out, "{} = {}", key(path), quote(&hash));
    }

    out.push('\n');
    render_scope(&mut out, job, &cfg);

    let _ = writeln!(out, "\n[exploration]");
    let _ = writeln!(out, "complete = {}", result.complete);
    if let Some(why) = &result.stopped {
        let _ = writeln!(out, "stopped = {}", quote(why));
    }
    let _ = writeln!(out, "unique_states = {}", result.unique_states);
    let _ = writeln!(out, "transitions = {}", result.transitions);
    let _ = writeln!(out, "max_depth = {}", result.max_depth);

    let _ = writeln!(out, "\n[verdicts]");
    for p in &result.properties {
        let _ = writeln!(
            out,
            "{} = {}",
            key(p.name.as_str()),
            inline(&[("expected", quote(verdict_text(p.expected))), ("found", quote(found_text(p.found))),])
        );
    }

    for p in &result.properties {
        let Some(cx) = &p.counterexample else {
            continue;
        };
        let _ = writeln!(out, "\n[counterexamples.{}]", key(p.name.as_str()));
        let _ = writeln!(
            out,
            "explore = {}",
            quote(&format!("replicheck explore {model_path} --variant {}", job.variant))
        );
        // The link's path without the address, which is the reader's choice.
        let path = cx
            .explorer_path
            .split_once("/#/")
            .map(|(_, steps)| format!("#/{steps}"))
            .unwrap_or_else(|| cx.explorer_path.clone());
        let _ = writeln!(out, "explorer_path = {}", quote(&path));
        let _ = writeln!(out, "steps = [");
        for step in &cx.steps {
            let _ = writeln!(
                out,
                "  {},",
                inline(&[
                    ("step", step.step.to_string()),
                    ("time_ms", step.time_ms.to_string()),
                    ("action", quote(&step.action)),
                ])
            );
        }
        let _ = writeln!(out, "]");
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Planning: which certificates a set of models has.

/// One certificate to write or check: a variant of a model, and where its certificate lives.
struct Planned {
    job: Job,
    path: PathBuf,
}

fn planned(files: &[PathBuf], out: &Path) -> Result<Vec<Planned>, ConfigError> {
    let jobs = plan(files, &PolicyChoice::Variants(None))?;
    let mut seen: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut result = Vec::new();
    for job in jobs {
        let path = certificate_path(out, &job.scenario.name, &job.variant);
        if let Some(other) = seen.get(&path) {
            if !same_file(other, &job.scenario.path) {
                return Err(ConfigError::new(
                    &job.scenario.path,
                    format!(
                        "model name \"{}\" is also the name of {}: certificates are written per model name, so names must differ",
                        job.scenario.name,
                        other.display()
                    ),
                ));
            }
            continue;
        }
        seen.insert(path.clone(), job.scenario.path.clone());
        result.push(Planned { job, path });
    }
    Ok(result)
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::new(path, format!("cannot read file: {e}")))
}

/// A certificate file as found on disk.
struct OnDisk {
    path: PathBuf,
    text: String,
    doc: toml::Table,
    model_file: PathBuf,
    variant: String,
}

fn parse_certificate(path: &Path) -> Result<OnDisk, ConfigError> {
    let text = read_text(path)?;
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::new(path, format!("not a readable certificate: {}", e.message().trim()))
    })?;
    let missing =
        |k: &str| ConfigError::new(path, format!("not a replicheck certificate: key `{k}` is missing"));
    let model_file = doc
        .get("model_file")
        .and_then(|t| t.get("path"))
        .and_then(|v| v.as_str())
        .ok_or_else(|| missing("model_file.path"))?;
    let variant = doc.get("variant").and_then(|v| v.as_str()).ok_or_else(|| missing("variant"))?;
    Ok(OnDisk {
        path: path.to_path_buf(),
        model_file: PathBuf::from(model_file),
        variant: variant.to_string(),
        text,
        doc,
    })
}

/// Every `OUT/MODEL/VARIANT.toml`, sorted. A missing `out` has no certificates.
fn certificates_in(out: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    if !out.exists() {
        return Ok(Vec::new());
    }
    let list = |dir: &Path| -> Result<Vec<PathBuf>, ConfigError> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| ConfigError::new(dir, format!("cannot read directory: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        Ok(entries)
    };
    let mut found = Vec::new();
    for dir in list(out)?.into_iter().filter(|p| p.is_dir()) {
        found.extend(
            list(&dir)?.into_iter().filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "toml")),
        );
    }
    Ok(found)
}

// ---------------------------------------------------------------------------------------------
// prove

/// What `prove` did with one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    Created,
    Updated,
    Unchanged,
}

#[derive(Debug)]
pub struct ProveReport {
    pub out: PathBuf,
    pub results: Vec<RunResult>,
    pub certificates: Vec<(PathBuf, Written)>,
    /// Certificates of the proved models for variants they no longer have.
    pub removed: Vec<PathBuf>,
}

impl ProveReport {
    /// As `check`: 1 if a verdict differs from the model's declaration, 3 if a run was cut
    /// short by a limit, else 0. The certificates are written in every case, recording what
    /// was found.
    pub fn exit_code(&self) -> u8 {
        super::exit_code(&self.results)
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for (path, w) in &self.certificates {
            let what = match w {
                Written::Created => "created",
                Written::Updated => "updated",
                Written::Unchanged => "unchanged",
            };
            let _ = writeln!(out, "{what:<9} {}", path.display());
        }
        for path in &self.removed {
            let _ = writeln!(out, "{:<9} {} (its variant is gone)", "removed", path.display());
        }
        let count = |w: Written| self.certificates.iter().filter(|(_, x)| *x == w).count();
        let _ = writeln!(
            out,
            "{} certificates in {}: {} created, {} updated, {} unchanged, {} removed",
            self.certificates.len(),
            self.out.display(),
            count(Written::Created),
            count(Written::Updated),
            count(Written::Unchanged),
            self.removed.len()
        );
        match self.exit_code() {
            1 => out.push_str(
                "FAIL: a verdict differs from the model's declared expectation (see the certificates' [verdicts]; `replicheck check` shows the counterexamples)\n",
            ),
            3 => out.push_str(
                "INCOMPLETE: a run was cut short by a state limit; its certificates record verdicts as unknown\n",
            ),
            _ => {}
        }
        out
    }
}

/// One line per finished run, as `check` prints them.
fn run_line(r: &RunResult, cert: &Path) -> String {
    let verdict = if r.as_expected() { "ok" } else { "FAIL" };
    format!(
        "{verdict}: {} / {} ({} states, {:.2}s) -> {}",
        r.model,
        r.variant,
        r.unique_states,
        r.elapsed_ms as f64 / 1000.0,
        cert.display()
    )
}

/// Check every variant of the models in `paths` and write its certificate under `out`.
/// Certificates in `out/MODEL/` of the same model file for variants it no longer has are
/// removed. `on_run` receives one line per finished run.
pub fn prove(
    paths: &[PathBuf],
    out: &Path,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(&str),
) -> Result<ProveReport, ConfigError> {
    let files = model_files(paths)?;
    let planned = planned(&files, out)?;
    let mut report = ProveReport {
        out: out.to_path_buf(),
        results: Vec::new(),
        certificates: Vec::new(),
        removed: Vec::new(),
    };
    for p in &planned {
        let model_text = read_text(&p.job.scenario.path)?;
        let result = super::run(&p.job, opts)?;
        let text = render(&p.job, &result, &model_text)?;
        on_run(&run_line(&result, &p.path));
        let before = std::fs::read_to_string(&p.path).ok();
        let written = match before {
            Some(b) if b == text => Written::Unchanged,
            Some(_) => Written::Updated,
            None => Written::Created,
        };
        if written != Written::Unchanged {
            let dir = p.path.parent().expect("a certificate path has a directory");
            std::fs::create_dir_all(dir)
                .map_err(|e| ConfigError::new(dir, format!("cannot create directory: {e}")))?;
            std::fs::write(&p.path, &text)
                .map_err(|e| ConfigError::new(&p.path, format!("cannot write: {e}")))?;
        }
        report.certificates.push((p.path.clone(), written));
        report.results.push(result);
    }
    // Stale certificates of the models just proved: same model file, a variant it lost.
    let current: BTreeSet<&Path> = planned.iter().map(|p| p.path.as_path()).collect();
    for path in certificates_in(out)? {
        if current.contains(path.as_path()) {
            continue;
        }
        let Ok(cert) = parse_certificate(&path) else {
            continue;
        };
        let ours = files.iter().any(|f| same_file(f, &cert.model_file));
        if ours {
            std::fs::remove_file(&path)
                .map_err(|e| ConfigError::new(&path, format!("cannot remove: {e}")))?;
            report.removed.push(path);
        }
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// prove --verify

/// Why a certificate does not match what the tool finds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A variant of a checked model has no certificate.
    Missing { model_file: PathBuf, variant: String },
    /// A certificate that no current model variant writes.
    Stale { why: String },
    /// A file where a certificate belongs that is not one (corrupt, or edited into invalid
    /// TOML, or a merge conflict).
    Unreadable { why: String },
    /// The certificate differs from a fresh run: one reason per line.
    Differs { reasons: Vec<String> },
}

#[derive(Clone, Debug)]
pub struct Finding {
    pub certificate: PathBuf,
    pub problem: Option<Problem>,
}

#[derive(Debug)]
pub struct VerifyReport {
    pub out: PathBuf,
    pub paths: Vec<PathBuf>,
    pub findings: Vec<Finding>,
}

impl VerifyReport {
    pub fn mismatches(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.problem.is_some())
    }

    /// 0 when every certificate matches, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.mismatches().next().is_some() {
            1
        } else {
            0
        }
    }

    pub fn human(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let path = f.certificate.display();
            match &f.problem {
                None => {
                    let _ = writeln!(out, "ok        {path}");
                }
                Some(Problem::Missing { model_file, variant }) => {
                    let _ = writeln!(
                        out,
                        "MISSING   {path}: no certificate for variant \"{variant}\" of {}",
                        model_file.display()
                    );
                }
                Some(Problem::Stale { why }) => {
                    let _ = writeln!(out, "STALE     {path}: {why}");
                }
                Some(Problem::Unreadable { why }) => {
                    let _ = writeln!(
                        out,
                        "UNREADABLE {path}: {why} (delete it, or regenerate it with `replicheck prove`)"
                    );
                }
                Some(Problem::Differs { reasons }) => {
                    let _ = writeln!(out, "MISMATCH  {path}:");
                    for r in reasons {
                        let _ = writeln!(out, "            - {r}");
                    }
                }
            }
        }
        let bad = self.mismatches().count();
        let total = self.findings.len();
        if bad == 0 {
            let _ = writeln!(out, "all {total} certificates in {} match", self.out.display());
        } else {
            let paths: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
            let _ = writeln!(
                out,
                "{bad} of {total} certificates in {} do not match; if the change is intended, regenerate them with `replicheck prove {} --out {}` and review the diff",
                self.out.display(),
                paths.join(" "),
                self.out.display()
            );
        }
        out
    }
}

/// Re-run every certificate under `out` and every variant of the models in `paths`, and say
/// for each certificate whether it still matches.
pub fn verify(
    paths: &[PathBuf],
    out: &Path,
    opts: &RunOptions,
    on_run: &mut dyn FnMut(&str),
) -> Result<VerifyReport, ConfigError> {
    let mut files = model_files(paths)?;
    let mut findings = Vec::new();
    let mut on_disk: Vec<OnDisk> = Vec::new();
    let mut unreadable: BTreeSet<PathBuf> = BTreeSet::new();
    for path in certificates_in(out)? {
        match parse_certificate(&path) {
            Ok(cert) => on_disk.push(cert),
            Err(e) => {
                unreadable.insert(path.clone());
                findings.push(Finding {
                    certificate: path,
                    problem: Some(Problem::Unreadable { why: e.message }),
                });
            }
        }
    }
    // A certificate of a model outside `paths` is checked too, against its own model file.
    let mut gone: BTreeSet<PathBuf> = BTreeSet::new();
    for cert in &on_disk {
        if files.iter().any(|f| same_file(f, &cert.model_file)) {
            continue;
        }
        if cert.model_file.exists() {
            files.push(cert.model_file.clone());
        } else {
            gone.insert(cert.model_file.clone());
        }
    }
    let planned = planned(&files, out)?;
    let by_path: BTreeMap<&Path, &OnDisk> = on_disk.iter().map(|c| (c.path.as_path(), c)).collect();
    for p in &planned {
        if unreadable.contains(&p.path) {
            continue;
        }
        let Some(cert) = by_path.get(p.path.as_path()) else {
            findings.push(Finding {
                certificate: p.path.clone(),
                problem: Some(Problem::Missing {
                    model_file: p.job.scenario.path.clone(),
                    variant: p.job.variant.clone(),
                }),
            });
            continue;
        };
        let model_text = read_text(&p.job.scenario.path)?;
        let result = super::run(&p.job, opts)?;
        let fresh = render(&p.job, &result, &model_text)?;
        let problem = if fresh == cert.text.replace("\r\n", "\n") {
            None
        } else {
            let doc: toml::Table = fresh.parse().expect("rendered certificates parse");
            Some(Problem::Differs { reasons: explain(&cert.doc, &doc) })
        };
        let mark = if problem.is_none() { "ok" } else { "MISMATCH" };
        on_run(&format!(
            "{mark}: {} / {} ({} states, {:.2}s) {}",
            result.model,
            result.variant,
            result.unique_states,
            result.elapsed_ms as f64 / 1000.0,
            p.path.display()
        ));
        findings.push(Finding { certificate: p.path.clone(), problem });
    }
    let expected: BTreeSet<&Path> = planned.iter().map(|p| p.path.as_path()).collect();
    for cert in &on_disk {
        if expected.contains(cert.path.as_path()) {
            continue;
        }
        let why = if gone.contains(&cert.model_file) {
            format!("its model file {} no longer exists; delete the certificate", cert.model_file.display())
        } else if let Some(p) = planned.iter().find(|p| same_file(&p.job.scenario.path, &cert.model_file)) {
            let model = &p.job.scenario;
            if model.variant(&cert.variant).is_none() {
                format!(
                    "{} has no variant \"{}\" any more (variants: {}); `replicheck prove {}` removes it",
                    model.path.display(),
                    cert.variant,
                    model.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "),
                    model.path.display()
                )
            } else {
                format!(
                    "{} (model \"{}\") writes this variant's certificate to {}; delete this one",
                    model.path.display(),
                    model.name,
                    certificate_path(out, &model.name, &cert.variant).display()
                )
            }
        } else {
            "no model variant writes this certificate".to_string()
        };
        findings.push(Finding { certificate: cert.path.clone(), problem: Some(Problem::Stale { why }) });
    }
    findings.sort_by(|a, b| a.certificate.cmp(&b.certificate));
    Ok(VerifyReport { out: out.to_path_buf(), paths: paths.to_vec(), findings })
}

// ---------------------------------------------------------------------------------------------
// Explaining a difference.

/// Every leaf of a TOML document by dotted key (`scope.faults.budget`, `steps[3].action`),
/// with its value as TOML text.
fn leaves(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(&name, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().any(|v| v.is_table() || v.is_array()) => {
            for (i, v) in items.iter().enumerate() {
                leaves(&format!("{prefix}[{i}]"), v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), quote(s));
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

const ABSENT: &str = "(absent)";

/// `key old -> new` for each differing leaf under `section` (the section prefix dropped).
fn changes(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>, section: &str) -> Vec<String> {
    let prefix = format!("{section}.");
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).filter(|k| k.starts_with(&prefix)).collect();
    keys.into_iter()
        .filter_map(|k| {
            let a = old.get(k).map(String::as_str).unwrap_or(ABSENT);
            let b = new.get(k).map(String::as_str).unwrap_or(ABSENT);
            (a != b).then(|| format!("{} {a} -> {b}", &k[prefix.len()..]))
        })
        .collect()
}

fn get<'a>(doc: &'a toml::Table, dotted: &str) -> Option<&'a toml::Value> {
    let mut parts = dotted.split('.');
    let mut v = doc.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    Some(v)
}

fn text_of(doc: &toml::Table, dotted: &str) -> String {
    match get(doc, dotted) {
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => ABSENT.into(),
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// Why `old` (the committed certificate) differs from `new` (what the tool writes now), one
/// reason per item, most fundamental first.
pub fn explain(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let mut reasons = Vec::new();
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves("", &toml::Value::Table(old.clone()), &mut a);
    leaves("", &toml::Value::Table(new.clone()), &mut b);
    let differs = |k: &str| a.get(k) != b.get(k);

    if differs("format") {
        reasons.push(format!(
            "certificate format changed: {} -> {} (regenerate)",
            text_of(old, "format"),
            text_of(new, "format")
        ));
    }
    if differs("tool_version") {
        reasons.push(format!(
            "tool version changed: {} -> {}",
            text_of(old, "tool_version"),
            text_of(new, "tool_version")
        ));
    }
    if differs("model_file.sha256") || differs("model_file.path") {
        let mut details = Vec::new();
        for k in ["model", "description"] {
            if differs(k) {
                details.push(format!(
                    "{k} {} -> {}",
                    a.get(k).map(String::as_str).unwrap_or(ABSENT),
                    b.get(k).map(String::as_str).unwrap_or(ABSENT)
                ));
            }
        }
        details.extend(changes(&a, &b, "scope").into_iter().map(|c| format!("scope.{c}")));
        let expected: Vec<String> = changes(&a, &b, "verdicts")
            .into_iter()
            .filter(|c| c.split(' ').next().is_some_and(|k| k.ends_with(".expected")))
            .map(|c| format!("expect {c}"))
            .collect();
        details.extend(expected);
        let what = if details.is_empty() {
            if differs("policy.sha256") {
                "the scope and expectations recorded here are the same; its policy is not (below)".to_string()
            } else {
                "the scope, policy and expectations recorded here are the same (a comment, or another variant's policy?)"
                    .to_string()
            }
        } else {
            details.join("; ")
        };
        let moved = if differs("model_file.path") {
            format!(", moved {} -> {}", text_of(old, "model_file.path"), text_of(new, "model_file.path"))
        } else {
            String::new()
        };
        reasons.push(format!(
            "model file changed (sha256 {} -> {}{moved}): {what}",
            short(&text_of(old, "model_file.sha256")),
            short(&text_of(new, "model_file.sha256"))
        ));
    }
    let policy = changes(&a, &b, "policy.values");
    if differs("policy.sha256") || !policy.is_empty() {
        let what = if policy.is_empty() {
            format!(
                "sha256 {} -> {}",
                short(&text_of(old, "policy.sha256")),
                short(&text_of(new, "policy.sha256"))
            )
        } else {
            policy.join(", ")
        };
        reasons.push(format!("policy changed: {what}"));
    }
    if differs("policy_code.sha256") {
        let files = changes(&a, &b, "policy_code.files");
        let what: Vec<String> = files
            .iter()
            .map(|c| {
                let file = c.split(' ').next().unwrap_or(c).trim_matches('"');
                if c.contains(&format!(" {ABSENT} -> ")) {
                    format!("{file} added")
                } else if c.ends_with(&format!("-> {ABSENT}")) {
                    format!("{file} removed")
                } else {
                    format!("{file} modified")
                }
            })
            .collect();
        reasons.push(format!(
            "policy code changed (sha256 {} -> {}): {}",
            short(&text_of(old, "policy_code.sha256")),
            short(&text_of(new, "policy_code.sha256")),
            if what.is_empty() { "the policy source hashes differ".to_string() } else { what.join(", ") }
        ));
    }
    // Part of the scope is derived (partition capacities, where keys land), so it can change
    // with the model file unchanged: through a built-in policy default or the code that
    // derives it. Name those changes too; above they are listed with the model file's.
    if !(differs("model_file.sha256") || differs("model_file.path")) {
        let scope = changes(&a, &b, "scope");
        if !scope.is_empty() {
            let what: Vec<String> = scope.into_iter().map(|c| format!("scope.{c}")).collect();
            reasons.push(format!("scope changed with the same model file: {}", what.join("; ")));
        }
    }
    for c in changes(&a, &b, "verdicts") {
        if let Some((k, rest)) = c.split_once(".found ") {
            reasons.push(format!("verdict changed: {k} {}", rest.replace('"', "")));
        } else if !c.contains(".expected ") {
            reasons.push(format!("verdicts: {c}"));
        }
    }
    let mut exploration = changes(&a, &b, "exploration");
    let rank = |c: &String| {
        ["complete ", "stopped ", "unique_states ", "transitions ", "max_depth "]
            .iter()
            .position(|k| c.starts_with(k))
            .unwrap_or(usize::MAX)
    };
    exploration.sort_by_key(rank);
    if !exploration.is_empty() {
        let count = differs("exploration.unique_states") || differs("exploration.transitions");
        let head = if count { "state count changed" } else { "exploration changed" };
        reasons.push(format!("{head}: {}", exploration.join(", ")));
    }
    reasons.extend(counterexample_changes(old, new));
    // Anything else (a key added by hand, a reordered document) still fails, and says where.
    let explained = [
        "format",
        "tool_version",
        "model",
        "description",
        "model_file.",
        "scope.",
        "policy.",
        "policy_code.",
        "verdicts.",
        "exploration.",
        "counterexamples.",
    ];
    let other: Vec<String> = a
        .keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| differs(k))
        .filter(|k| !explained.iter().any(|e| k.as_str() == *e || (e.ends_with('.') && k.starts_with(e))))
        .map(|k| {
            format!(
                "{k} {} -> {}",
                a.get(k).map(String::as_str).unwrap_or(ABSENT),
                b.get(k).map(String::as_str).unwrap_or(ABSENT)
            )
        })
        .collect();
    if !other.is_empty() {
        reasons.push(format!("other keys differ: {}", other.join(", ")));
    }
    if reasons.is_empty() {
        reasons.push(
            "the text differs from what `replicheck prove` writes, with the same content (edited by hand?)"
                .into(),
        );
    }
    reasons
}

/// For each property whose counterexample differs: its length and its first differing step.
fn counterexample_changes(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let table = |doc: &toml::Table| -> toml::Table {
        doc.get("counterexamples").and_then(|v| v.as_table()).cloned().unwrap_or_default()
    };
    let (a, b) = (table(old), table(new));
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    let empty = toml::Value::Table(toml::Table::new());
    // Report in the properties' own order, not alphabetically.
    let mut names: Vec<&String> = names.into_iter().collect();
    names.sort_by_key(|n| PropertyName::parse(n).map(|p| p as usize).unwrap_or(usize::MAX));
    for name in names {
        let steps = |t: &toml::Table| -> Option<Vec<String>> {
            let arr = t.get(name)?.get("steps")?.as_array()?;
            Some(
                arr.iter()
                    .map(|s| {
                        format!(
                            "t={}ms {}",
                            s.get("time_ms").map(|v| v.to_string()).unwrap_or_default(),
                            s.get("action").and_then(|v| v.as_str()).unwrap_or("")
                        )
                    })
                    .collect(),
            )
        };
        let (x, y) = (steps(&a), steps(&b));
        if a.get(name) == b.get(name) {
            continue;
        }
        let line = match (x, y) {
            (None, Some(y)) => format!("counterexample for {name}: none -> {} steps", y.len()),
            (Some(x), None) => format!("counterexample for {name}: {} steps -> none", x.len()),
            (Some(x), Some(y)) if x != y => {
                let i = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
                let at = |v: &[String]| v.get(i).map(|s| quote(s)).unwrap_or_else(|| "(end of trace)".into());
                format!(
                    "counterexample for {name} changed: {} steps -> {} steps; first difference at step {}: {} -> {}",
                    x.len(),
                    y.len(),
                    i + 1,
                    at(&x),
                    at(&y)
                )
            }
            _ => {
                let (mut x, mut y) = (BTreeMap::new(), BTreeMap::new());
                leaves(name, a.get(name).unwrap_or(&empty), &mut x);
                leaves(name, b.get(name).unwrap_or(&empty), &mut y);
                format!("counterexample for {name} changed: {}", changes(&x, &y, name).join(", "))
            }
        };
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_the_standard_one_and_ignores_line_endings() {
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(sha256_hex("a\r\nb\n"), sha256_hex("a\nb\n"));
    }

    #[test]
    fn quoting_round_trips_through_toml() {
        for s in ["plain", "with \"quotes\" and \\", "tab\tnew\nline", "\u{1}ctl", "ünï"] {
            let doc: toml::Table = format!("k = {}\n{} = 1\n", quote(s), key(s)).parse().expect("valid TOML");
            assert_eq!(doc["k"].as_str(), Some(s));
            assert!(doc.contains_key(s));
        }
    }

    #[test]
    fn durations_read_as_a_scenario_writes_them() {
        assert_eq!(duration_text(0), "0ms");
        assert_eq!(duration_text(1500), "1500ms");
        assert_eq!(duration_text(2000), "2s");
        assert_eq!(display_path(Path::new("./models/x.toml")), "models/x.toml");
        assert_eq!(display_path(Path::new("/tmp/x.toml")), "/tmp/x.toml");
    }

    fn doc(text: &str) -> toml::Table {
        text.parse().expect("valid TOML")
    }

    #[test]
    fn explains_each_kind_of_change() {
        let old = doc(r#"
            format = 1
            tool_version = "0.1.0"
            [model_file]
            path = "m.toml"
            sha256 = "aaaaaaaaaaaaaaaa"
            [policy]
            sha256 = "p1"
            [policy.values]
            write_quorum = 2
            [policy_code]
            sha256 = "c1"
            [policy_code.files]
            "src/policy/quorum.rs" = "q1"
            [scope.faults]
            budget = 1
            [exploration]
            complete = true
            unique_states = 100
            transitions = 300
            max_depth = 10
            [verdicts]
            acked_writes_persist = { expected = "holds", found = "holds" }
        "#);
        let new = doc(r##"
            format = 1
            tool_version = "0.1.0"
            [model_file]
            path = "m.toml"
            sha256 = "bbbbbbbbbbbbbbbb"
            [policy]
            sha256 = "p2"
            [policy.values]
            write_quorum = 1
            [policy_code]
            sha256 = "c2"
            [policy_code.files]
            "src/policy/quorum.rs" = "q2"
            "src/policy/routing.rs" = "r1"
            [scope.faults]
            budget = 2
            [exploration]
            complete = true
            unique_states = 250
            transitions = 900
            max_depth = 12
            [verdicts]
            acked_writes_persist = { expected = "holds", found = "violated" }
            [counterexamples.acked_writes_persist]
            explorer_path = "#/steps/0/1"
            steps = [{ step = 1, time_ms = 0, action = "FAULT: n1 crashes" }]
        "##);
        let r = explain(&old, &new);
        let all = r.join("\n");
        assert!(
            all.contains(
                "model file changed (sha256 aaaaaaaaaaaa -> bbbbbbbbbbbb): scope.faults.budget 1 -> 2"
            ),
            "{all}"
        );
        assert!(all.contains("policy changed: write_quorum 2 -> 1"), "{all}");
        assert!(
            all.contains("policy code changed (sha256 c1 -> c2): src/policy/quorum.rs modified, src/policy/routing.rs added"),
            "{all}"
        );
        assert!(all.contains("verdict changed: acked_writes_persist holds -> violated"), "{all}");
        assert!(
            all.contains(
                "state count changed: unique_states 100 -> 250, transitions 300 -> 900, max_depth 10 -> 12"
            ),
            "{all}"
        );
        assert!(all.contains("counterexample for acked_writes_persist: none -> 1 steps"), "{all}");
        assert!(!all.contains("other keys differ"), "{all}");
        assert_eq!(r.len(), 6, "{all}");
    }

    #[test]
    fn explains_a_changed_trace_by_its_first_differing_step() {
        let old = doc(r#"
            [counterexamples.linearizable]
            steps = [{ step = 1, time_ms = 0, action = "a" }, { step = 2, time_ms = 100, action = "b" }]
        "#);
        let new = doc(r#"
            [counterexamples.linearizable]
            steps = [{ step = 1, time_ms = 0, action = "a" }, { step = 2, time_ms = 100, action = "c" }, { step = 3, time_ms = 100, action = "d" }]
        "#);
        let r = explain(&old, &new);
        assert_eq!(
            r,
            vec![
                "counterexample for linearizable changed: 2 steps -> 3 steps; first difference at step 2: \"t=100ms b\" -> \"t=100ms c\""
            ]
        );
    }

    #[test]
    fn an_unexplained_edit_still_fails() {
        let r = explain(&doc("format = 1\n"), &doc("format = 1\nextra = true\n"));
        assert_eq!(r, vec!["other keys differ: extra (absent) -> true"]);
        let r = explain(&doc("format = 1\n"), &doc("format = 1\n"));
        assert!(r[0].contains("edited by hand"), "{r:?}");
    }
}

/// The capacity and routing facts of `[scope]`: rendered from real model files, and a change to
/// any of them explained as a scope change.
#[cfg(test)]
mod scope_tests {
    use super::*;

    /// A model file of the library, as text.
    fn library_model(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name);
        std::fs::read_to_string(&path).expect("the model library has the file")
    }

    /// `text` with `from` (present exactly once) replaced by `to`.
    fn edited(text: &str, from: &str, to: &str) -> String {
        assert_eq!(text.matches(from).count(), 1, "the model has `{from}` once");
        text.replace(from, to)
    }

    /// The certificate of `variant` of the model `text`, saved as `dir/model.toml`. Nothing is
    /// explored: the scope does not depend on the run, so an empty result stands in for it.
    fn certificate(dir: &Path, text: &str, variant: &str) -> String {
        let path = dir.join("model.toml");
        std::fs::write(&path, text).expect("write the model");
        let jobs =
            plan(&[path], &PolicyChoice::Variants(Some(variant.to_string()))).expect("the model loads");
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        let result = RunResult {
            model: job.scenario.name.clone(),
            file: job.scenario.path.clone(),
            variant: job.variant.clone(),
            description: job.description.clone(),
            policy: Vec::new(),
            properties: Vec::new(),
            unique_states: 0,
            transitions: 0,
            max_depth: 0,
            complete: true,
            stopped: None,
            elapsed_ms: 0,
            states_per_second: 0.0,
        };
        render(job, &result, text).expect("the certificate renders")
    }

    /// Why the certificate of `variant` changes when the model's `from` becomes `to`.
    fn explain_edit(model: &str, variant: &str, from: &str, to: &str) -> Vec<String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = library_model(model);
        let old = certificate(dir.path(), &text, variant);
        let new = certificate(dir.path(), &edited(&text, from, to), variant);
        explain(&old.parse().expect("valid TOML"), &new.parse().expect("valid TOML"))
    }

    #[test]
    fn backends_are_recorded_only_when_modelled() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cert = certificate(dir.path(), &library_model("capacity-routing-bypass.toml"), "incident");
        assert!(
            cert.contains(
                "[scope.backends]\n\
                 preference_order = [\"n1\", \"n2\", \"n3\", \"n4\"]\n\
                 write_capacity_per_tick = { n1 = 3, n2 = 4, n3 = 2, n4 = 4 }\n\
                 base_load_per_tick = { n1 = 2, n2 = 0, n3 = 1, n4 = 0 }\n"
            ),
            "{cert}"
        );
        // One suffix, no partition capacity, no burst: a client's partition is its shard.
        assert!(!cert.contains("[scope.partitions]") && !cert.contains("key_hash"), "{cert}");

        // A model with no capacity anywhere gets neither table.
        let plain = certificate(dir.path(), &library_model("basic-quorum.toml"), "default");
        for absent in ["[scope.backends]", "[scope.partitions]", "key_hash", "_per_tick"] {
            assert!(!plain.contains(absent), "{absent} in\n{plain}");
        }
    }

    #[test]
    fn partitions_and_where_each_key_lands_are_recorded() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let text = library_model("hot-partition-retry-storm.toml");
        let incident = certificate(dir.path(), &text, "incident");
        assert!(
            incident.contains(
                "[scope.partitions]\n\
                 write_capacity_per_tick = 2\n\
                 burst_writes_per_tick = { p1 = 2, p2 = 0, p3 = 0, p4 = 0 }\n\
                 background_writes_per_tick = { p1 = 2, p2 = 0, p3 = 0, p4 = 0 }\n"
            ),
            "{incident}"
        );
        // One suffix: both keys land on their prefix's partition.
        assert!(incident
            .contains("checkout-2 = { zone = \"a\", shard = \"p1\", key_hash = 1, partition = \"p1\","));
        // Four suffixes: key hash 1 lands on p2, and the burst is spread over p1 and p2.
        let fixed = certificate(dir.path(), &text, "fixed");
        assert!(
            fixed.contains("checkout-2 = { zone = \"a\", shard = \"p1\", key_hash = 1, partition = \"p2\",")
        );
        assert!(
            fixed.contains("background_writes_per_tick = { p1 = 1, p2 = 1, p3 = 0, p4 = 0 }\n"),
            "{fixed}"
        );
        assert!(!fixed.contains("[scope.backends]"), "no node has a write capacity\n{fixed}");
    }

    #[test]
    fn a_changed_backend_capacity_is_a_scope_change() {
        let r = explain_edit(
            "capacity-routing-bypass.toml",
            "incident",
            "write_capacity = \"30/s\"",
            "write_capacity = \"40/s\"",
        );
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].starts_with("model file changed (sha256 "), "{r:?}");
        assert!(r[0].ends_with("): scope.backends.write_capacity_per_tick.n1 3 -> 4"), "{r:?}");

        let r = explain_edit(
            "capacity-routing-bypass.toml",
            "fixed",
            "base_load = \"10/s\"",
            "base_load = \"0/s\"",
        );
        assert!(r[0].ends_with("): scope.backends.base_load_per_tick.n3 1 -> 0"), "{r:?}");
    }

    #[test]
    fn a_changed_partition_capacity_or_burst_is_a_scope_change() {
        // The partition cap is a policy value; the capacity it resolves to is scope.
        let model = "hot-partition-retry-storm.toml";
        let r = explain_edit(
            model,
            "incident",
            "partition_write_capacity = \"20/s\"",
            "partition_write_capacity = \"10/s\"",
        );
        let all = r.join("\n");
        assert!(all.contains("): scope.partitions.write_capacity_per_tick 2 -> 1"), "{all}");
        assert!(all.contains("policy changed: partition_write_capacity \"20/s\" -> \"10/s\""), "{all}");

        let r = explain_edit(model, "incident", "burst_writes = \"20/s\"", "burst_writes = \"10/s\"");
        assert!(
            r[0].ends_with(
                "): scope.partitions.background_writes_per_tick.p1 2 -> 1; scope.partitions.burst_writes_per_tick.p1 2 -> 1"
            ),
            "{r:?}"
        );

        let r = explain_edit(model, "fixed", "key_hash = 1", "key_hash = 2");
        assert!(
            r[0].ends_with(
                "): scope.clients.checkout-2.key_hash 1 -> 2; scope.clients.checkout-2.partition \"p2\" -> \"p3\""
            ),
            "{r:?}"
        );
    }

    #[test]
    fn the_rebalancers_inputs_and_the_churn_budget_are_recorded_and_diffed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let model = "rebalancer-compaction.toml";
        let cert = certificate(dir.path(), &library_model(model), "incident");
        assert!(
            cert.contains(
                "[scope.rebalancer]\n\
                 disk_used_pct = { n1 = 70, n2 = 40 }\n\
                 compaction_debt_pct = { n1 = 0, n2 = 60 }\n\
                 shard_size_pct = { hot = 10 }\n\
                 hot_shards = [\"hot\"]\n\
                 slow_compaction_debt_pct = 50\n"
            ),
            "{cert}"
        );
        assert!(cert.contains(", max_changes_per_window = 2, change_window = \"5s\" }\n"), "{cert}");
        let plain = certificate(dir.path(), &library_model("basic-quorum.toml"), "default");
        assert!(!plain.contains("[scope.rebalancer]") && !plain.contains("change_window"), "{plain}");

        let r = explain_edit(model, "incident", "compaction_debt_pct = 60", "compaction_debt_pct = 40");
        assert!(r[0].ends_with("): scope.rebalancer.compaction_debt_pct.n2 60 -> 40"), "{r:?}");
        let r = explain_edit(model, "incident", "change_window = \"5s\"", "change_window = \"3s\"");
        assert!(r[0].ends_with("): scope.coordinator.change_window \"5s\" -> \"3s\""), "{r:?}");
    }

    #[test]
    fn a_derived_scope_change_with_the_same_model_file_is_named() {
        let doc = |cap: u16| -> toml::Table {
            format!(
                "format = 1\n[model_file]\npath = \"m.toml\"\nsha256 = \"aa\"\n\
                 [scope.partitions]\nwrite_capacity_per_tick = {cap}\n"
            )
            .parse()
            .expect("valid TOML")
        };
        let r = explain(&doc(2), &doc(4));
        assert_eq!(
            r,
            vec!["scope changed with the same model file: scope.partitions.write_capacity_per_tick 2 -> 4"]
        );
    }
}
