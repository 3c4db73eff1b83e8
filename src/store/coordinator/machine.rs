//! The store's instantiation of the protocol: its data (byte-string keys and values, 64-bit
//! versions) and its scenario (nodes, partitions and capacities resolved like a model's, with
//! a 1 ms tick). The shell (`shell`) drives the machine these configure.

use super::layout::Layout;
use super::layout::LoadFacts;
use crate::config::{ClientSpec, CoordinatorSpec, FaultSpec, NodeSpec, Policy, Resolved, ShardSpec};
use crate::policy::routing;
use crate::policy::NodeId;
use crate::protocol::coordinator::TimerTicks;
use crate::protocol::Data;
use crate::store::node::wire::StoredValue;

/// Versions reserved per write of the version floor: one fsync covers this many writes, and a
/// restart skips at most this many versions.
pub const VERSION_BLOCK: u64 = 100_000;
/// Idempotency tokens remembered at most; the oldest is forgotten first.
pub const TOKENS_MAX: usize = 100_000;

/// The store's data: keys and values of any length, 64-bit versions, request numbers as ops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreData;

impl Data for StoreData {
    type Op = u64;
    type Key = Vec<u8>;
    type Value = StoredValue;
    type Version = u64;
    type Epoch = u64;
    /// A client's idempotency token (`SET key value TOKEN t`).
    type Token = Option<Vec<u8>>;
    /// A token is remembered with its key: the same token on another key is another write.
    type TokenId = (Vec<u8>, Vec<u8>);
    /// The store copies by scanning the source; no copy travels as one message.
    type Snapshot = ();
    /// As many as the store's partitions (`layout::PARTITIONS_MAX`).
    type Shards<T: Clone + std::fmt::Debug + Eq + std::hash::Hash> = Vec<T>;

    fn client(_op: u64) -> u8 {
        0
    }

    fn token_id(_op: u64, key: &Vec<u8>, token: &Option<Vec<u8>>) -> Option<(Vec<u8>, Vec<u8>)> {
        token.as_ref().map(|t| (t.clone(), key.clone()))
    }
}

/// The scenario a store runs: its nodes, partitions and capacities, resolved like a model's
/// with a 1 ms tick (policy durations are milliseconds, capacities per window).
pub fn resolved(
    policy: &Policy,
    node_zones: &[u8],
    layout: &Layout,
    load: &LoadFacts,
    membership: &CoordinatorSpec,
    coordinator_zones: &[u8],
) -> Result<Resolved, String> {
    check_timers(policy, membership)?;
    if coordinator_zones.is_empty() || coordinator_zones.len() > crate::config::COORDINATOR_COUNT_MAX {
        return Err(format!(
            "{} coordinators: must be 1 to {}",
            coordinator_zones.len(),
            crate::config::COORDINATOR_COUNT_MAX
        ));
    }
    let window_ticks = u16::try_from(layout.window_ms.max(1))
        .map_err(|_| format!("capacity window {} ms: at most {} ms", layout.window_ms, u16::MAX))?;
    let node_count = node_zones.len();
    let nodes = (0..node_count as NodeId)
        .map(|n| NodeSpec {
            name: format!("node{n}"),
            zone: node_zones[usize::from(n)],
            disk_used_pct: LoadFacts::of(&load.node_disk_used_pct, n),
            compaction_debt_pct: LoadFacts::of(&load.node_compaction_debt_pct, n),
            write_capacity_per_tick: layout.node_capacity(n),
            base_load_per_tick: layout.node_base_load(n),
            replica_slots: layout.node_replica_slots(n),
        })
        .collect();
    let shards = layout
        .shards
        .iter()
        .map(|s| ShardSpec {
            name: s.name.clone(),
            replicas: Some(s.replicas.clone()),
            size_pct: s.size_pct,
            hot: s.hot,
            burst_writes_per_tick: s.burst_writes_per_window,
            // The store has no way to end a burst: its background stays constant.
            burst_ends: false,
        })
        .collect();
    let initial_members = layout
        .shards
        .iter()
        .map(|s| {
            let mut m = s.replicas.clone();
            m.sort();
            m
        })
        .collect();
    let zone_count = node_zones.iter().copied().max().map_or(1, |z| usize::from(z) + 1);
    Ok(Resolved {
        model_name: "store".into(),
        tick_ms: 1,
        zones: (0..zone_count).map(|z| z.to_string()).collect(),
        nodes,
        shard_names: layout.shards.iter().map(|s| s.name.clone()).collect(),
        shards,
        slow_compaction_debt_pct: load.slow_compaction_debt_pct,
        // The store keeps each node's configured compaction debt: its nodes report none.
        compaction: crate::config::CompactionSpec::default(),
        initial_members,
        latency: Vec::new(),
        lossy: Vec::new(),
        // The model's work queue where `store run` plays one (its work per model tick done
        // every `work_round_ticks` ms); `store up`'s has none: requests never wait.
        coordinator: membership.clone(),
        coordinators: coordinator_zones
            .iter()
            .enumerate()
            .map(|(c, &zone)| crate::config::CoordinatorPlace { name: format!("coordinator{c}"), zone })
            .collect(),
        clients: Vec::<ClientSpec>::new(),
        faults: FaultSpec::default(),
        properties: Vec::new(),
        policy: policy.clone(),
        client_partitions: Vec::new(),
        partition_capacity_per_tick: routing::partition_capacity(
            layout.partition_write_capacity_per_window,
            layout.table_write_capacity_per_window,
            layout.partition_count(),
        ),
        partition_background: layout.partition_background(policy.routing.write_shard_suffixes),
        backends_modelled: layout.backends_modelled(),
        capacity_window_ticks: window_ticks,
        version_block: VERSION_BLOCK,
        tokens_max: TOKENS_MAX,
        rollout: None,
    })
}

/// Every policy duration within what the store's timers count.
pub(crate) fn check_timers(policy: &Policy, membership: &CoordinatorSpec) -> Result<(), String> {
    let too_long = |key: &str, ms: u32| {
        format!("`{key}` = {ms} ms: the store's timers count at most {} ms", TimerTicks::MAX)
    };
    policy_timers_fit(policy).map_err(|(key, ms)| too_long(key, ms))?;
    if membership.membership_update_ticks > u32::from(TimerTicks::MAX) {
        return Err(too_long("membership_update_time", membership.membership_update_ticks));
    }
    Ok(())
}

/// A policy duration the store's timers cannot count, with the file that set it.
pub fn timer_too_long(sourced: &crate::config::SourcedPolicy, key: &str, ms: u32) -> String {
    format!(
        "{}: key `{key}` = {ms} ms: the store's timers count at most {} ms",
        sourced.origin(key),
        TimerTicks::MAX
    )
}

/// Every duration of `policy` (in milliseconds, as the store runs it) fits the store's timers,
/// or the first key that does not and its value: errors name the policy file with it.
pub fn policy_timers_fit(policy: &Policy) -> Result<(), (&'static str, u32)> {
    let timer_max = u32::from(TimerTicks::MAX);
    let p = policy;
    for (key, ms) in [
        ("replica_ack_timeout", p.replica_ack_timeout_ticks),
        ("heartbeat_interval", p.heartbeat_interval_ticks),
        ("dead_after", p.dead_after_ticks),
        ("rebalance_interval", p.rebalance.as_ref().map_or(0, |r| r.interval_ticks)),
        ("move_cooldown", p.rebalance.as_ref().map_or(0, |r| r.move_cooldown_ticks)),
        ("cooldown_max", p.rebalance.as_ref().map_or(0, |r| r.cooldown_max_ticks)),
        ("down_out_interval", p.recovery.down_out_interval_ticks),
        ("join_timeout", p.recovery.join_timeout_ticks.unwrap_or(0)),
        ("replica_lag_timeout", p.leader.as_ref().map_or(0, |l| l.replica_lag_timeout_ticks)),
        ("failover_delay", p.leader.as_ref().map_or(0, |l| l.failover_delay_ticks)),
        (
            "recovery_backoff_max",
            match p.recovery.copy_retry {
                crate::policy::recovery::CopyRetry::Backoff { max_ticks, .. } => max_ticks,
                crate::policy::recovery::CopyRetry::OnContact => 0,
            },
        ),
    ] {
        if ms > timer_max {
            return Err((key, ms));
        }
    }
    Ok(())
}

/// `cfg` running `policy` instead (a live reload). What the clients and the replica sets are
/// stays: a policy that changes `replication_factor` or `write_shard_suffixes` is refused,
/// as a model's rollout stage is.
pub fn with_policy(cfg: &Resolved, policy: Policy) -> Result<Resolved, String> {
    check_timers(&policy, &cfg.coordinator)?;
    if let Some((key, from, to)) = crate::config::reload_changes(&cfg.policy, &policy) {
        return Err(format!(
            "`{key}` = {to}: the running policy has {from}; a reload changes what the coordinators run, not the replica sets or where keys live"
        ));
    }
    Ok(Resolved { policy, ..cfg.clone() })
}
