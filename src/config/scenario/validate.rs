//! From the raw scenario to [`Scenario`]: one function per table, called in file order, each
//! returning the first error it finds as the message [`Scenario::load`] reports.

use super::raw::{
    RawClient, RawCoordinator, RawCoordinatorPlace, RawFaults, RawNetwork, RawNode, RawScenario, RawShard,
    RawVariant,
};
use super::{
    ClientSpec, CompactionSpec, CoordinatorPlace, CoordinatorSpec, DegradeSpec, FaultSpec, LatencyTicks,
    NodeSpec, PropertyName, Scenario, ShardSpec, Variant, Verdict, COORDINATOR_COUNT_MAX, COORDINATOR_NAME,
    DEGRADE_MENU_MAX, FAULT_BUDGET_MAX, FAULT_DURATION_TICKS_MAX, ROLLOUT_STAGES_MAX,
};
use crate::config::duration::{Dur, LatencyRange, Rate};
use crate::config::policy::SourcedPolicy;
use crate::policy::coordinator_load::{WorkCapacity, CHANGE_WORK_MAX, WORK_PER_TICK_MAX};
use crate::policy::leader::Replication;
use crate::policy::{
    NodeId, Ticks, CLIENT_COUNT_MAX, CLIENT_OPS_MAX, NODE_COUNT_MAX, SHARD_COUNT_MAX, ZONE_COUNT_MAX,
};
use indexmap::IndexMap;
use std::path::Path;

#[path = "validate_claims.rs"]
mod claims;
use claims::{property, variants};

pub(super) fn validate(path: &Path, raw: RawScenario) -> Result<Scenario, String> {
    let tick_ms = raw.tick.ms;
    if tick_ms == 0 {
        return Err(format!("key `tick` = \"{}\": must be positive", raw.tick.text));
    }
    zones(&raw.zones)?;
    let cx = Cx { tick_ms, zones: &raw.zones, nodes: &raw.nodes };
    let nodes = nodes(&cx, &raw.nodes)?;
    let shards = shards(&cx, &raw.shards)?;
    let (latency, lossy) = network(&cx, &raw.network)?;
    let (coordinator, coordinators) = coordinator(&cx, &raw.coordinator, &raw.coordinators)?;
    let clients = clients(&cx, &raw.clients, &raw.shards, &coordinators)?;
    let faults = faults(&cx, &raw.faults, &lossy)?;
    if faults.crash_coordinator && coordinators.len() > 1 {
        return Err(format!(
            "key `faults.crash` lists \"{COORDINATOR_NAME}\": with several `[[coordinators]]` a coordinator's crash is not modelled yet (the membership leader's recovery would need its followers' views)"
        ));
    }
    if family(&raw) == Replication::Leader {
        leader_world(&raw, &nodes, &clients, &coordinators)?;
    }
    if raw.slow_compaction_debt_pct > 100 {
        return Err(format!(
            "key `slow_compaction_debt_pct` = {}: a percentage, 0 to 100",
            raw.slow_compaction_debt_pct
        ));
    }
    let properties = properties(&raw, &nodes, &clients)?;
    let file = path.display().to_string();
    let base_policy = SourcedPolicy::new(raw.policy.clone(), &format!("{file} [policy]"));
    let variants = variants(&file, &base_policy, &raw.expect, &raw.variants, &properties)?;

    if let Some(name) = &raw.name {
        check_file_name("name", name)?;
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
        latency,
        lossy,
        coordinator,
        coordinators,
        clients,
        faults,
        properties,
        base_policy,
        variants,
        max_states: match raw.limits.max_states {
            Some(0) => return Err("key `limits.max_states` = 0: must be at least 1".into()),
            n => n,
        },
        slow_compaction_debt_pct: raw.slow_compaction_debt_pct,
        compaction: compaction(&cx, &raw)?,
    };
    // Every variant's policy must resolve against this scenario; report the first that does not.
    for v in &scenario.variants {
        crate::config::Resolved::new(&scenario, &v.policy)?;
    }
    Ok(scenario)
}

/// How compaction debt grows and drains (`compaction_debt_per_write_pct`,
/// `compaction_debt_drain`).
fn compaction(cx: &Cx, raw: &RawScenario) -> Result<CompactionSpec, String> {
    let per_write = raw.compaction_debt_per_write_pct;
    if per_write > 100 {
        return Err(format!("key `compaction_debt_per_write_pct` = {per_write}: a percentage, 0 to 100"));
    }
    let drain = match &raw.compaction_debt_drain {
        None => 0,
        Some(r) => {
            let points = r.per_tick(cx.tick_ms).map_err(|_| {
                format!(
                    "key `compaction_debt_drain` = \"{}\": must come to a whole number of percentage points per tick, at most 64 (tick = {} ms)",
                    r.text, cx.tick_ms
                )
            })?;
            u8::try_from(points).ok().filter(|p| (1..=100).contains(p)).ok_or_else(|| {
                format!(
                    "key `compaction_debt_drain` = \"{}\": {points} percentage points per tick; must be at least 1",
                    r.text
                )
            })?
        }
    };
    // Debt that only grows saturates for ever; debt that only drains is a backlog that ends.
    // Neither is what the keys model: ask for both.
    if per_write > 0 && drain == 0 {
        return Err(format!(
            "key `compaction_debt_per_write_pct` = {per_write} without `compaction_debt_drain`: set both (debt that grows and drains)"
        ));
    }
    if let (0, Some(r)) = (per_write, &raw.compaction_debt_drain) {
        return Err(format!(
            "key `compaction_debt_drain` = \"{}\" without `compaction_debt_per_write_pct`: set both (debt that grows and drains)",
            r.text
        ));
    }
    Ok(CompactionSpec { debt_per_write_pct: per_write, debt_drain_pct_per_tick: drain })
}

/// What every table's check needs: the tick, to turn durations and rates into ticks, and the
/// zone and node names, to turn names into indices.
struct Cx<'a> {
    tick_ms: u64,
    zones: &'a [String],
    nodes: &'a [RawNode],
}

impl Cx<'_> {
    fn ticks(&self, key: &str, d: &Dur) -> Result<Ticks, String> {
        d.ticks(self.tick_ms).map_err(|why| format!("key `{key}` = \"{}\": {why}", d.text))
    }

    fn per_tick(&self, key: &str, r: &Option<Rate>) -> Result<Option<u16>, String> {
        r.as_ref()
            .map(|r| r.per_tick(self.tick_ms).map_err(|why| format!("key `{key}` = \"{}\": {why}", r.text)))
            .transpose()
    }

    fn latency_ticks(&self, key: &str, r: &LatencyRange) -> Result<LatencyTicks, String> {
        Ok(LatencyTicks { lo: self.ticks(key, &r.lo)?, hi: self.ticks(key, &r.hi)? })
    }

    /// A fault's duration window in ticks: whole ticks, and short enough to count in the
    /// state's `u8` remaining-ticks counters.
    fn fault_duration(&self, key: &str, r: Option<&LatencyRange>) -> Result<Option<LatencyTicks>, String> {
        let Some(r) = r else { return Ok(None) };
        let t = self.latency_ticks(key, r)?;
        if t.hi > FAULT_DURATION_TICKS_MAX {
            return Err(format!(
                "key `{key}` = \"{}\": {} ticks; a fault lasts at most {FAULT_DURATION_TICKS_MAX} ticks",
                r.text(),
                t.hi
            ));
        }
        Ok(Some(t))
    }

    fn zone(&self, key: &str, name: &str) -> Result<u8, String> {
        self.zones.iter().position(|z| z == name).map(|i| i as u8).ok_or_else(|| {
            format!("key `{key}` = \"{name}\": no such zone (zones: {})", self.zones.join(", "))
        })
    }

    fn node(&self, key: &str, name: &str) -> Result<NodeId, String> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| i as NodeId)
            .ok_or_else(|| format!("key `{key}` = \"{name}\": no such node"))
    }
}

/// A name that also names a file: `prove` writes `OUT/MODEL/VARIANT.toml`, so a model's or a
/// variant's name may not climb out of OUT or start at the root.
fn check_file_name(key: &str, name: &str) -> Result<(), String> {
    check_name(key, name)?;
    if name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(format!(
            "key `{key}` = {name:?}: this name names a certificate's file (`prove`), so it may not hold `/` or `\\`, nor be `.` or `..`"
        ));
    }
    Ok(())
}

/// A name shows in every report, trace and timeline: it must be there to read.
fn check_name(key: &str, name: &str) -> Result<(), String> {
    if name.trim().is_empty() || name.trim() != name || name.chars().any(char::is_control) {
        return Err(format!(
            "key `{key}` = {name:?}: a name must be non-empty, without leading or trailing spaces or control characters"
        ));
    }
    Ok(())
}

fn zones(zones: &[String]) -> Result<(), String> {
    if zones.is_empty() || zones.len() > ZONE_COUNT_MAX {
        return Err(format!("key `zones` lists {} zones: must be 1 to {ZONE_COUNT_MAX}", zones.len()));
    }
    for (i, z) in zones.iter().enumerate() {
        check_name(&format!("zones[{i}]"), z)?;
        if zones[..i].contains(z) {
            return Err(format!("key `zones`: zone \"{z}\" is listed twice"));
        }
    }
    Ok(())
}

fn nodes(cx: &Cx, raw: &[RawNode]) -> Result<Vec<NodeSpec>, String> {
    if raw.is_empty() || raw.len() > NODE_COUNT_MAX {
        return Err(format!("key `nodes` has {} entries: must be 1 to {NODE_COUNT_MAX}", raw.len()));
    }
    let mut nodes = Vec::new();
    for (i, n) in raw.iter().enumerate() {
        check_name(&format!("nodes[{i}].name"), &n.name)?;
        if raw[..i].iter().any(|m| m.name == n.name) {
            return Err(format!("key `nodes[{i}].name` = \"{}\": node listed twice", n.name));
        }
        for (key, v) in [("disk_used_pct", n.disk_used_pct), ("compaction_debt_pct", n.compaction_debt_pct)] {
            if v > 100 {
                return Err(format!("key `nodes[{i}].{key}` = {v}: a percentage, 0 to 100"));
            }
        }
        nodes.push(NodeSpec {
            name: n.name.clone(),
            zone: cx.zone(&format!("nodes[{i}].zone"), &n.zone)?,
            disk_used_pct: n.disk_used_pct,
            compaction_debt_pct: n.compaction_debt_pct,
            write_capacity_per_tick: cx.per_tick(&format!("nodes[{i}].write_capacity"), &n.write_capacity)?,
            base_load_per_tick: cx.per_tick(&format!("nodes[{i}].base_load"), &n.base_load)?.unwrap_or(0),
            replica_slots: n.replica_slots,
        });
    }
    Ok(nodes)
}

fn shards(cx: &Cx, raw: &[RawShard]) -> Result<Vec<ShardSpec>, String> {
    if raw.is_empty() || raw.len() > SHARD_COUNT_MAX {
        return Err(format!("key `shards` has {} entries: must be 1 to {SHARD_COUNT_MAX}", raw.len()));
    }
    let mut shards = Vec::new();
    for (i, s) in raw.iter().enumerate() {
        check_name(&format!("shards[{i}].name"), &s.name)?;
        if raw[..i].iter().any(|t| t.name == s.name) {
            return Err(format!("key `shards[{i}].name` = \"{}\": shard listed twice", s.name));
        }
        let replicas = match &s.replicas {
            None => None,
            Some(names) => {
                let mut ids = Vec::new();
                for (j, name) in names.iter().enumerate() {
                    let id = cx.node(&format!("shards[{i}].replicas[{j}]"), name)?;
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
        let burst_writes_per_tick =
            cx.per_tick(&format!("shards[{i}].burst_writes"), &s.burst_writes)?.unwrap_or(0);
        if s.burst_ends && burst_writes_per_tick == 0 {
            return Err(format!(
                "key `shards[{i}].burst_ends` = true: shard \"{}\" has no burst to end (set `burst_writes`)",
                s.name
            ));
        }
        shards.push(ShardSpec {
            name: s.name.clone(),
            replicas,
            size_pct: s.size_pct,
            hot: s.hot,
            burst_writes_per_tick,
            burst_ends: s.burst_ends,
        });
    }
    Ok(shards)
}

/// The latency and lossiness matrices, zone by zone: the default, then each link's override.
#[allow(clippy::type_complexity)]
fn network(cx: &Cx, raw: &RawNetwork) -> Result<(Vec<Vec<LatencyTicks>>, Vec<Vec<bool>>), String> {
    let zone_count = cx.zones.len();
    let mut latency = vec![vec![None; zone_count]; zone_count];
    let mut lossy = vec![vec![raw.lossy; zone_count]; zone_count];
    if let Some(r) = &raw.latency {
        let l = cx.latency_ticks("network.latency", r)?;
        latency = vec![vec![Some(l); zone_count]; zone_count];
    }
    let mut seen: Vec<(u8, u8)> = Vec::new();
    for (i, link) in raw.links.iter().enumerate() {
        let a = cx.zone(&format!("network.links[{i}].zones"), &link.zones[0])?;
        let b = cx.zone(&format!("network.links[{i}].zones"), &link.zones[1])?;
        // A second entry for the same pair (either way round) silently overrode the first.
        if let Some(j) = seen.iter().position(|&pair| pair == (a, b) || pair == (b, a)) {
            return Err(format!(
                "key `network.links[{i}].zones` = [\"{}\", \"{}\"]: the link is already `network.links[{j}]`",
                link.zones[0], link.zones[1]
            ));
        }
        seen.push((a, b));
        let (a, b) = (usize::from(a), usize::from(b));
        if let Some(r) = &link.latency {
            let l = cx.latency_ticks(&format!("network.links[{i}].latency"), r)?;
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
                    cx.zones[a], cx.zones[b]
                )
            })?);
        }
        latency_full.push(out);
    }
    Ok((latency_full, lossy))
}

/// The membership settings and every coordinator's place: one in `coordinator.zone`, or the
/// `[[coordinators]]` (the first leads membership).
fn coordinator(
    cx: &Cx,
    raw: &RawCoordinator,
    places: &[RawCoordinatorPlace],
) -> Result<(CoordinatorSpec, Vec<CoordinatorPlace>), String> {
    let coordinators = match (&raw.zone, places.is_empty()) {
        (Some(zone), true) => {
            vec![CoordinatorPlace { name: "coordinator".into(), zone: cx.zone("coordinator.zone", zone)? }]
        }
        (None, true) => {
            return Err("key `coordinator.zone` is missing: set it, or list `[[coordinators]]`".into())
        }
        (Some(zone), false) => {
            return Err(format!(
                "key `coordinator.zone` = \"{zone}\": the model lists `[[coordinators]]`, which give each coordinator's zone; remove `coordinator.zone`"
            ))
        }
        (None, false) => {
            if places.len() > COORDINATOR_COUNT_MAX {
                return Err(format!(
                    "key `coordinators` has {} entries: at most {COORDINATOR_COUNT_MAX}",
                    places.len()
                ));
            }
            let mut out: Vec<CoordinatorPlace> = Vec::new();
            for (i, p) in places.iter().enumerate() {
                check_name(&format!("coordinators[{i}].name"), &p.name)?;
                if out.iter().any(|c| c.name == p.name) || cx.nodes.iter().any(|n| n.name == p.name) {
                    return Err(format!(
                        "key `coordinators[{i}].name` = \"{}\": the name is taken (by another coordinator or a node)",
                        p.name
                    ));
                }
                out.push(CoordinatorPlace {
                    name: p.name.clone(),
                    zone: cx.zone(&format!("coordinators[{i}].zone"), &p.zone)?,
                });
            }
            out
        }
    };
    let coordinator = CoordinatorSpec {
        zone: coordinators[0].zone,
        membership_queue_capacity: raw.membership_queue_capacity,
        membership_update_ticks: cx.ticks("coordinator.membership_update_time", &raw.membership_update_time)?,
        churn_budget: match (raw.max_changes_per_window, &raw.change_window) {
            (None, None) => None,
            (Some(n), Some(w)) => {
                let window = cx.ticks("coordinator.change_window", w)?;
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
        work: work_capacity(raw)?,
        work_round_ticks: 1,
    };
    if coordinator.membership_queue_capacity == 0 {
        return Err("key `coordinator.membership_queue_capacity` = 0: must be at least 1".into());
    }
    if coordinator.membership_update_ticks == 0 {
        return Err(format!(
            "key `coordinator.membership_update_time` = \"{}\": must be at least one tick",
            raw.membership_update_time.text
        ));
    }
    Ok((coordinator, coordinators))
}

/// `work_per_tick`, `membership_update_work` and `copy_work`: all three, or none (the
/// coordinator's load is then not modelled).
fn work_capacity(raw: &RawCoordinator) -> Result<Option<WorkCapacity>, String> {
    let (per_tick, update, copy) = match (raw.work_per_tick, raw.membership_update_work, raw.copy_work) {
        (None, None, None) => return Ok(None),
        (Some(p), Some(u), Some(c)) => (p, u, c),
        _ => {
            return Err(
                "keys `coordinator.work_per_tick`, `coordinator.membership_update_work` and `coordinator.copy_work` go together: set all three or none"
                    .into(),
            )
        }
    };
    for (key, value, max) in [
        ("work_per_tick", per_tick, WORK_PER_TICK_MAX),
        ("membership_update_work", update, CHANGE_WORK_MAX),
        ("copy_work", copy, CHANGE_WORK_MAX),
    ] {
        if value == 0 || value > max {
            return Err(format!("key `coordinator.{key}` = {value}: must be 1 to {max} units of work"));
        }
    }
    Ok(Some(WorkCapacity { work_per_tick: per_tick, membership_update_work: update, copy_work: copy }))
}

fn clients(
    cx: &Cx,
    raw: &[RawClient],
    raw_shards: &[RawShard],
    coordinators: &[CoordinatorPlace],
) -> Result<Vec<ClientSpec>, String> {
    if raw.len() > CLIENT_COUNT_MAX {
        return Err(format!("key `clients` has {} entries: at most {CLIENT_COUNT_MAX}", raw.len()));
    }
    let mut clients = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        check_name(&format!("clients[{i}].name"), &c.name)?;
        if let Some(j) = raw[..i].iter().position(|o| o.name == c.name) {
            return Err(format!(
                "key `clients[{i}].name` = \"{}\": client listed twice (also clients[{j}])",
                c.name
            ));
        }
        if c.ops.is_empty() || c.ops.len() > CLIENT_OPS_MAX {
            return Err(format!(
                "key `clients[{i}].ops` has {} operations: must be 1 to {CLIENT_OPS_MAX}",
                c.ops.len()
            ));
        }
        let shard = match &c.shard {
            None => 0,
            Some(name) => raw_shards
                .iter()
                .position(|s| &s.name == name)
                .ok_or_else(|| format!("key `clients[{i}].shard` = \"{name}\": no such shard"))?
                as u8,
        };
        let request_timeout_ticks = cx.ticks(&format!("clients[{i}].request_timeout"), &c.request_timeout)?;
        if request_timeout_ticks == 0 {
            return Err(format!(
                "key `clients[{i}].request_timeout` = \"{}\": must be positive",
                c.request_timeout.text
            ));
        }
        clients.push(ClientSpec {
            name: c.name.clone(),
            zone: cx.zone(&format!("clients[{i}].zone"), &c.zone)?,
            shard,
            ops: c.ops.clone(),
            request_timeout_ticks,
            think_ticks: match &c.think_time {
                Some(r) => cx.latency_ticks(&format!("clients[{i}].think_time"), r)?,
                None => LatencyTicks { lo: 0, hi: 0 },
            },
            key_hash: match &c.key_hash {
                None => Some(crate::policy::routing::KeyHash(i as u8)),
                Some(super::raw::RawKeyHash::Hash(h)) => match u8::try_from(*h) {
                    Ok(h) => Some(crate::policy::routing::KeyHash(h)),
                    Err(_) => {
                        return Err(format!(
                            "key `clients[{i}].key_hash` = {h}: must be an integer 0 to 255 or \"any\""
                        ))
                    }
                },
                Some(super::raw::RawKeyHash::Named(name)) if name == "any" => None,
                Some(super::raw::RawKeyHash::Named(name)) => {
                    return Err(format!(
                        "key `clients[{i}].key_hash` = \"{name}\": must be an integer 0 to 255 or \"any\""
                    ))
                }
                Some(super::raw::RawKeyHash::Other(value)) => {
                    return Err(format!(
                        "key `clients[{i}].key_hash` = {value}: must be an integer 0 to 255 or \"any\""
                    ))
                }
            },
            repeat: c.repeat,
            coordinator: match &c.coordinator {
                None => (i % coordinators.len()) as u8,
                Some(name) => coordinators.iter().position(|k| &k.name == name).ok_or_else(|| {
                    let names: Vec<&str> = coordinators.iter().map(|k| k.name.as_str()).collect();
                    format!(
                        "key `clients[{i}].coordinator` = \"{name}\": no such coordinator (coordinators: {})",
                        names.join(", ")
                    )
                })? as u8,
            },
        });
    }
    Ok(clients)
}

fn faults(cx: &Cx, raw: &RawFaults, lossy: &[Vec<bool>]) -> Result<FaultSpec, String> {
    if raw.budget > FAULT_BUDGET_MAX {
        return Err(format!("key `faults.budget` = {}: must be 0 to {FAULT_BUDGET_MAX}", raw.budget));
    }
    let mut faults = FaultSpec {
        budget: raw.budget,
        crash: Vec::new(),
        crash_coordinator: false,
        partition: Vec::new(),
        degrade: Vec::new(),
        drop: raw.drop,
        crash_duration: Vec::new(),
        partition_duration: Vec::new(),
    };
    for (i, entry) in raw.crash.iter().enumerate() {
        let key = format!("faults.crash[{i}]");
        let n = entry.name();
        if n == COORDINATOR_NAME {
            if cx.nodes.iter().any(|node| node.name == COORDINATOR_NAME) {
                return Err(format!(
                    "key `{key}` = \"{n}\": ambiguous, a node is named \"{COORDINATOR_NAME}\" too; rename the node"
                ));
            }
            if let Some(d) = entry.duration() {
                return Err(format!(
                    "key `{key}.duration` = \"{}\": the coordinator restarts at once, from what it persisted; a duration applies to a node's crash",
                    d.text()
                ));
            }
            faults.crash_coordinator = true;
            continue;
        }
        let node = cx.node(&key, n)?;
        if faults.crash.contains(&node) {
            return Err(format!("key `{key}` = \"{n}\": the node is on the crash menu twice"));
        }
        faults.crash.push(node);
        faults.crash_duration.push(cx.fault_duration(&format!("{key}.duration"), entry.duration())?);
    }
    for (i, entry) in raw.partition.iter().enumerate() {
        let key = format!("faults.partition[{i}]");
        let zone = cx.zone(&key, entry.name())?;
        if faults.partition.contains(&zone) {
            return Err(format!(
                "key `{key}` = \"{}\": the zone is on the partition menu twice",
                entry.name()
            ));
        }
        faults.partition.push(zone);
        faults.partition_duration.push(cx.fault_duration(&format!("{key}.duration"), entry.duration())?);
    }
    if raw.degrade.len() > DEGRADE_MENU_MAX {
        return Err(format!(
            "key `faults.degrade` has {} entries: at most {DEGRADE_MENU_MAX}",
            raw.degrade.len()
        ));
    }
    for (i, d) in raw.degrade.iter().enumerate() {
        let key = format!("faults.degrade[{i}]");
        faults.degrade.push(DegradeSpec {
            zones: (
                cx.zone(&format!("{key}.zones"), &d.zones[0])?,
                cx.zone(&format!("{key}.zones"), &d.zones[1])?,
            ),
            latency: cx.latency_ticks(&format!("{key}.latency"), &d.latency)?,
            text: d.latency.text(),
            duration: cx.fault_duration(&format!("{key}.duration"), d.duration.as_ref())?,
        });
    }
    if faults.drop && !lossy.iter().flatten().any(|l| *l) {
        return Err(
            "key `faults.drop` = true: no link is lossy (set `network.lossy` or a link's `lossy`)".into()
        );
    }
    Ok(faults)
}

/// The model's `properties`. Without a `properties` list, every property that applies:
/// capacity_respected only when something in the model has a capacity (so model files written
/// before it still load).
fn properties(
    raw: &RawScenario,
    nodes: &[NodeSpec],
    clients: &[ClientSpec],
) -> Result<Vec<PropertyName>, String> {
    let repeating = clients.iter().position(|c| c.repeat);
    let has_capacity = nodes.iter().any(|n| n.write_capacity_per_tick.is_some())
        || std::iter::once(&raw.policy)
            .chain(raw.variants.values().map(|v| &v.policy))
            .any(|p| p.partition_write_capacity.is_some() || p.table_write_capacity.is_some());
    let family = family(raw);
    Ok(match &raw.properties {
        None => PropertyName::ALL
            .into_iter()
            .filter(|&p| p != PropertyName::CapacityRespected || has_capacity)
            .filter(|&p| p != PropertyName::Linearizable || repeating.is_none())
            .filter(|&p| !p.opt_in())
            .filter(|&p| p.family().is_none_or(|f| f == family))
            .collect(),
        Some(names) => {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let p = property(&format!("properties[{i}]"), n)?;
                if out.contains(&p) {
                    return Err(format!("key `properties[{i}]` = \"{n}\": listed twice"));
                }
                if let Some(f) = p.family().filter(|&f| f != family) {
                    return Err(format!(
                        "key `properties[{i}]` = \"{n}\": a property of `replication = \"{}\"`; this model's [policy] runs `replication = \"{}\"`",
                        f.as_str(),
                        family.as_str()
                    ));
                }
                if let (PropertyName::Linearizable, Some(c)) = (p, repeating) {
                    // An endless history has no finite linearization to search, and the
                    // model keeps no history of a repeating client.
                    return Err(format!(
                        "key `properties[{i}]` = \"linearizable\": clients[{c}] has `repeat = true`; linearizability is checked on finite workloads only"
                    ));
                }
                out.push(p);
            }
            out
        }
    })
}

/// What the timed world runs the leader family with: one coordinator (the failover manager,
/// which routes every request), finite workloads (the world renames epochs, not operations or
/// versions, to keep a state space finite), and no write capacities (routing by capacity is the
/// quorum coordinator's).
fn leader_world(
    raw: &RawScenario,
    nodes: &[NodeSpec],
    clients: &[ClientSpec],
    coordinators: &[CoordinatorPlace],
) -> Result<(), String> {
    const LEADER: &str = "with `replication = \"leader\"`";
    if coordinators.len() != 1 {
        return Err(format!(
            "key `coordinators`: {} coordinators {LEADER}; the leader family runs one failover manager, which routes every request",
            coordinators.len()
        ));
    }
    if let Some(c) = clients.iter().position(|c| c.repeat) {
        return Err(format!(
            "key `clients[{c}].repeat` = true {LEADER}: leader-family models have finite workloads"
        ));
    }
    if let Some(n) = nodes.iter().position(|n| n.write_capacity_per_tick.is_some()) {
        return Err(format!(
            "key `nodes[{n}].write_capacity` {LEADER}: write capacities are routed by the quorum family's coordinator"
        ));
    }
    if let Some(s) = raw.shards.iter().position(|s| s.burst_writes.is_some()) {
        return Err(format!(
            "key `shards[{s}].burst_writes` {LEADER}: background load is routed by the quorum family's coordinator"
        ));
    }
    Ok(())
}

/// The protocol family a model runs: its `[policy]`'s `replication` (every variant runs it).
fn family(raw: &RawScenario) -> Replication {
    raw.policy.replication.unwrap_or(Replication::Quorum)
}
