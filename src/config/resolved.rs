//! A scenario resolved under one policy: every duration in ticks, every rate per tick, every
//! routing fact computed once. This is what the protocol's machines and the timed world read;
//! nothing here changes while a model is explored.

use super::{
    ClientSpec, CoordinatorPlace, CoordinatorSpec, FaultSpec, LatencyTicks, NodeSpec, Policy, PropertyName,
    Scenario, ShardSpec, SourcedPolicy,
};
use crate::policy::{routing, NodeId, Ticks};

/// Everything the machines and the world need, resolved from a scenario and one policy.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub model_name: String,
    pub tick_ms: u64,
    pub zones: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    pub shard_names: Vec<String>,
    pub shards: Vec<ShardSpec>,
    pub slow_compaction_debt_pct: u8,
    /// How compaction debt grows and drains (static unless the scenario opts in).
    pub compaction: super::CompactionSpec,
    pub initial_members: Vec<Vec<NodeId>>,
    pub latency: Vec<Vec<LatencyTicks>>,
    pub lossy: Vec<Vec<bool>>,
    pub coordinator: CoordinatorSpec,
    /// Every coordinator, the membership leader first.
    pub coordinators: Vec<CoordinatorPlace>,
    pub clients: Vec<ClientSpec>,
    pub faults: FaultSpec,
    pub properties: Vec<PropertyName>,
    pub policy: Policy,
    /// The partitions each client's key may land on (its prefix shard, plus its suffix): one,
    /// or with `key_hash = "any"` one per suffix, each an initial state of the model.
    pub client_partitions: Vec<Vec<u8>>,
    /// Every partition's write capacity per tick (`None`: unlimited).
    pub partition_capacity_per_tick: Option<u16>,
    /// Background writes per tick on each partition: the bursts, spread over the suffixes.
    pub partition_background: Vec<u16>,
    /// Whether any backend has an ingest capacity: only then is placement modelled.
    pub backends_modelled: bool,
    /// Ticks a capacity window lasts (1 in models: capacities are per tick).
    pub capacity_window_ticks: u16,
    /// Versions reserved per durable write of the version floor (1 in models: every version
    /// handed out is persisted first; the store reserves blocks so one fsync covers many).
    pub version_block: u64,
    /// Idempotency tokens the coordinator remembers at most (the oldest is forgotten first).
    pub tokens_max: usize,
    /// A rollout: the coordinators start on stage 0 (this config's `policy`) and move through
    /// the stages.
    pub rollout: Option<Rollout>,
}

/// A rollout resolved: each stage as a whole config (the same scenario under the stage's
/// policy), for the coordinators that run it.
#[derive(Clone, Debug)]
pub struct Rollout {
    pub names: Vec<String>,
    pub stages: Vec<Resolved>,
    pub rollback: bool,
    pub order: super::policy::RolloutOrder,
}

/// What a coordinator's policy reload (a rollout stage, the store's `CONFIG SET policy`) may
/// not change, since it decides which protocol runs, what the replica sets are and where keys
/// live: the key that differs between `from` and `to`, with its value in each.
pub fn reload_changes(from: &Policy, to: &Policy) -> Option<(&'static str, String, String)> {
    let quoted = |p: &Policy| format!("\"{}\"", p.replication().as_str());
    let keys = [
        ("replication", quoted(from), quoted(to)),
        ("replication_factor", from.replication_factor.to_string(), to.replication_factor.to_string()),
        (
            "write_shard_suffixes",
            from.routing.write_shard_suffixes.to_string(),
            to.routing.write_shard_suffixes.to_string(),
        ),
    ];
    keys.into_iter().find(|(_, a, b)| a != b)
}

/// What a rollout's stage may not change besides what a reload may not ([`reload_changes`]):
/// the clients' retry policy, since a rollout changes what the coordinators run and the
/// clients stay as they are. The key that differs, with its value in each (durations in ms).
pub fn rollout_changes(from: &Policy, to: &Policy, tick_ms: u64) -> Option<(&'static str, String, String)> {
    if let Some(change) = reload_changes(from, to) {
        return Some(change);
    }
    let (a, b) = (&from.retry, &to.retry);
    let attempts = |m: Option<u8>| m.map_or("\"unlimited\"".to_string(), |n| n.to_string());
    let budget = |m: Option<u8>| m.map_or("none".to_string(), |n| n.to_string());
    let backoff = |b: crate::policy::retry::Backoff| match b {
        crate::policy::retry::Backoff::Fixed => "\"fixed\"".to_string(),
        crate::policy::retry::Backoff::ExponentialJitter => "\"exponential_jitter\"".to_string(),
    };
    let ms = |t: Ticks| format!("\"{}ms\"", u64::from(t) * tick_ms);
    let keys = [
        ("max_attempts", attempts(a.max_attempts), attempts(b.max_attempts)),
        ("backoff", backoff(a.backoff), backoff(b.backoff)),
        ("backoff_base", ms(a.backoff_base_ticks), ms(b.backoff_base_ticks)),
        ("backoff_max", ms(a.backoff_max_ticks), ms(b.backoff_max_ticks)),
        ("retry_budget", budget(a.retry_budget), budget(b.retry_budget)),
        ("idempotency_tokens", a.idempotency_tokens.to_string(), b.idempotency_tokens.to_string()),
    ];
    let change = keys.into_iter().find(|(_, x, y)| x != y);
    debug_assert!(change.is_some() || a == b, "every retry key is compared");
    change
}

/// Remaining-tick counters are stored as `u8`.
const STATE_TICKS_MAX: Ticks = u8::MAX as Ticks;

impl Resolved {
    pub fn new(scenario: &Scenario, sourced: &SourcedPolicy) -> Result<Resolved, String> {
        scenario.check_family(sourced)?;
        let Some(plan) = &sourced.rollout else { return Resolved::one(scenario, sourced) };
        if sourced.patch.replication == Some(crate::policy::leader::Replication::Leader) {
            return Err(
                "a rollout of a `replication = \"leader\"` policy: the timed world runs the leader family with one failover manager and one policy, so a mixed fleet is not modelled yet".into(),
            );
        }
        let mut stages = Vec::new();
        for (name, stage) in &plan.stages {
            stages.push(Resolved::one(scenario, stage)?);
            let (first, this) = (&stages[0].policy, &stages[stages.len() - 1].policy);
            // What the clients and the replica sets are: the same on every stage.
            if let Some((key, was, is)) = rollout_changes(first, this, scenario.tick_ms) {
                return Err(format!(
                    "rollout stage \"{name}\" changes key `{key}` from {was} (stage \"{}\") to {is}: a rollout changes what the coordinators run; the clients and the replica sets stay as they are",
                    plan.stages[0].0
                ));
            }
        }
        let mut cfg = stages[0].clone();
        cfg.rollout = Some(Rollout {
            names: plan.stages.iter().map(|(n, _)| n.clone()).collect(),
            stages,
            rollback: plan.rollback,
            order: plan.order,
        });
        Ok(cfg)
    }

    /// The config a coordinator on rollout stage `stage` runs (this one without a rollout).
    pub fn for_stage(&self, stage: u8) -> &Resolved {
        self.rollout.as_ref().map_or(self, |r| &r.stages[usize::from(stage)])
    }

    fn one(scenario: &Scenario, sourced: &SourcedPolicy) -> Result<Resolved, String> {
        let policy = sourced.resolve_for_model(scenario.tick_ms, scenario.nodes.len())?;
        let tick_ms = scenario.tick_ms;
        let partition_count = scenario.shards.len() as u8;
        let suffixes = policy.routing.write_shard_suffixes;
        let partition_capacity_per_tick = routing::partition_capacity(
            sourced.rate_per_tick("partition_write_capacity", &policy.partition_write_capacity, tick_ms)?,
            sourced.rate_per_tick("table_write_capacity", &policy.table_write_capacity, tick_ms)?,
            partition_count,
        );
        let client_partitions = scenario
            .clients
            .iter()
            .map(|c| {
                let sharding = routing::KeySharding { partition_count, write_shard_suffixes: suffixes };
                let mut choices: Vec<u8> = match c.key_hash {
                    Some(hash) => vec![routing::key_partition(c.shard, hash, sharding)],
                    None => (0..=u8::MAX)
                        .map(|h| routing::key_partition(c.shard, routing::KeyHash(h), sharding))
                        .collect(),
                };
                choices.sort_unstable();
                choices.dedup();
                choices
            })
            .collect();
        let bursts: Vec<u16> = scenario.shards.iter().map(|s| s.burst_writes_per_tick).collect();
        let partition_background = routing::partition_background(&bursts, suffixes);
        let rf = usize::from(policy.replication_factor);
        let mut initial_members = Vec::new();
        for (i, s) in scenario.shards.iter().enumerate() {
            let mut members = match &s.replicas {
                Some(r) if r.len() != rf => {
                    return Err(format!(
                        "key `shards[{i}].replicas`: shard \"{}\" lists {} replicas but replication_factor = {rf}",
                        s.name,
                        r.len()
                    ))
                }
                Some(r) => r.clone(),
                None => (0..rf as NodeId).collect(),
            };
            members.sort();
            initial_members.push(members);
        }
        for (n, node) in scenario.nodes.iter().enumerate() {
            let held = initial_members.iter().filter(|m| m.contains(&(n as NodeId))).count();
            if let Some(slots) = node.replica_slots.filter(|&slots| held > usize::from(slots)) {
                return Err(format!(
                    "key `nodes[{n}].replica_slots` = {slots}: node \"{}\" holds {held} replicas at the start",
                    node.name
                ));
            }
        }
        let cfg = Resolved {
            model_name: scenario.name.clone(),
            tick_ms: scenario.tick_ms,
            zones: scenario.zones.clone(),
            nodes: scenario.nodes.clone(),
            shard_names: scenario.shards.iter().map(|s| s.name.clone()).collect(),
            shards: scenario.shards.clone(),
            slow_compaction_debt_pct: scenario.slow_compaction_debt_pct,
            compaction: scenario.compaction,
            initial_members,
            latency: scenario.latency.clone(),
            lossy: scenario.lossy.clone(),
            coordinator: scenario.coordinator.clone(),
            coordinators: scenario.coordinators.clone(),
            clients: scenario.clients.clone(),
            faults: scenario.faults.clone(),
            properties: scenario.properties.clone(),
            policy,
            client_partitions,
            partition_capacity_per_tick,
            partition_background,
            backends_modelled: scenario.nodes.iter().any(|n| n.write_capacity_per_tick.is_some()),
            capacity_window_ticks: 1,
            version_block: 1,
            tokens_max: usize::MAX,
            rollout: None,
        };
        // Every counter the state keeps must fit its u8.
        let p = &cfg.policy;
        for (what, t) in [
            ("replica_ack_timeout", p.replica_ack_timeout_ticks),
            ("heartbeat_interval", p.heartbeat_interval_ticks),
            ("dead_after", p.dead_after_ticks),
            ("backoff_max", p.retry.backoff_max_ticks),
            ("rebalance_interval", p.rebalance.as_ref().map_or(0, |r| r.interval_ticks)),
            (
                "cooldown_max",
                p.rebalance.as_ref().map_or(0, |r| r.cooldown_max_ticks.max(r.move_cooldown_ticks)),
            ),
        ] {
            if t > STATE_TICKS_MAX - 1 {
                return Err(format!("`{what}` is {t} ticks: at most {} ticks", STATE_TICKS_MAX - 1));
            }
        }
        Ok(cfg)
    }

    /// Background writes per tick on each partition once the bursts of the shards in `ended`
    /// (bit per shard) are over: the rest spread over the suffixes as at the start.
    pub fn partition_background_after(&self, ended: u8) -> Vec<u16> {
        let bursts: Vec<u16> = self
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| if ended & (1 << i) != 0 { 0 } else { s.burst_writes_per_tick })
            .collect();
        routing::partition_background(&bursts, self.policy.routing.write_shard_suffixes)
    }

    /// The shards whose burst ends (bit per shard), at a moment the checker chooses.
    pub fn bursts_ending(&self) -> u8 {
        self.shards.iter().enumerate().filter(|(_, s)| s.burst_ends).fold(0, |m, (i, _)| m | 1 << i)
    }

    pub fn node_zone(&self, n: NodeId) -> u8 {
        self.nodes[usize::from(n)].zone
    }
}
