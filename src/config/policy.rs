//! The policy: the knobs an operator changes. Written as a patch (every key optional) in a
//! scenario's `[policy]`, in each variant, and in a `--policy` file; patches apply key by key
//! over the defaults, and the result is resolved into ticks for one scenario.

use super::duration::{Dur, MaxAttempts, Rate};
use crate::policy::coordinator_load::BACKLOG_WORK_MAX;
use crate::policy::detector::{FailureDetection, HealthCheck};
use crate::policy::eviction::EvictionPolicy;
use crate::policy::leader::{Acks, LeaderPolicy, ReadFrom, Replication};
use crate::policy::rebalancer::{RebalancePolicy, Scoring};
use crate::policy::recovery::{CopyRetry, RecoveryBackoff, RecoveryPolicy};
use crate::policy::retry::{Backoff, RetryPolicy};
use crate::policy::routing::{Placement, RoutingPolicy, UploadPlanner, WRITE_SHARD_SUFFIXES_MAX};
use crate::policy::{Ticks, MAX_ATTEMPTS_MAX, NODE_COUNT_MAX, REPLICATION_FACTOR_MAX, TICKS_MAX};
use serde::Deserialize;
use std::collections::BTreeMap;

#[path = "policy_resolve.rs"]
mod resolve;
use resolve::Resolver;

/// Declares the policy patch once: its fields, their TOML keys and how patches merge.
macro_rules! policy_patch {
    ($($field:ident : $ty:ty),* $(,)?) => {
        /// Policy knobs as written in one place; absent keys leave the value below unchanged.
        #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        pub struct PolicyPatch {
            $(pub $field: Option<$ty>,)*
        }

        impl PolicyPatch {
            /// Every key this patch sets, in declaration order.
            pub fn keys(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(if self.$field.is_some() { keys.push(stringify!($field)); })*
                keys
            }

            /// `self` with every key that `over` sets replaced by `over`'s value.
            pub fn merged(&self, over: &PolicyPatch) -> PolicyPatch {
                PolicyPatch { $($field: over.$field.clone().or_else(|| self.$field.clone()),)* }
            }

            /// `self` with every duration multiplied by `num / den`, in whole milliseconds
            /// (`store run` at another time scale than the model's tick).
            pub fn time_scaled(&self, num: u64, den: u64) -> PolicyPatch {
                PolicyPatch { $($field: self.$field.as_ref().map(|v| DescribeValue::time_scaled(v, num, den)),)* }
            }

            /// The patch as a policy file: one `key = value` line per key it sets.
            pub fn to_toml(&self) -> String {
                self.describe().into_iter().map(|(key, value)| format!("{key} = {value}\n")).collect()
            }

            /// The value of every set key, as TOML text, for reports and certificates.
            pub fn describe(&self) -> Vec<(&'static str, String)> {
                let mut out = Vec::new();
                $(if let Some(v) = &self.$field { out.push((stringify!($field), DescribeValue::describe(v))); })*
                out
            }
        }
    };
}

policy_patch! {
    replication_factor: u8,
    write_quorum: u8,
    read_quorum: u8,
    read_repair: bool,
    durable_membership: bool,
    replica_ack_timeout: Dur,
    failure_detection: FailureDetection,
    health_check: HealthCheck,
    heartbeat_interval: Dur,
    suspect_after: Dur,
    dead_after: Dur,
    eviction_enabled: bool,
    max_dead_fraction: f64,
    max_concurrent_evictions: u8,
    coordinator_load_ceiling: u16,
    max_attempts: MaxAttempts,
    backoff: Backoff,
    backoff_base: Dur,
    backoff_max: Dur,
    retry_budget: u8,
    idempotency_tokens: bool,
    rebalance_enabled: bool,
    rebalance_interval: Dur,
    disk_high_watermark: u8,
    scoring: Scoring,
    compaction_debt_max: u8,
    move_cooldown: Dur,
    cooldown_backoff: u8,
    cooldown_max: Dur,
    placement: Placement,
    spill_threshold: f64,
    upload_planner: UploadPlanner,
    partition_write_capacity: Rate,
    table_write_capacity: Rate,
    write_shard_suffixes: u8,
    down_out_interval: Dur,
    max_recoveries_per_node: u8,
    recovery_backoff: RecoveryBackoff,
    recovery_backoff_base: Dur,
    recovery_backoff_max: Dur,
    join_timeout: Dur,
    replication: Replication,
    acks: Acks,
    min_in_sync: u8,
    replica_lag_timeout: Dur,
    unclean_election: bool,
    failover_cross_zone: bool,
    failover_delay: Dur,
    fencing: bool,
    read_from: ReadFrom,
}

trait DescribeValue: Clone {
    fn describe(&self) -> String;

    /// The value with its duration, if it is one, multiplied by `num / den`.
    fn time_scaled(&self, _num: u64, _den: u64) -> Self {
        self.clone()
    }
}
impl DescribeValue for u8 {
    fn describe(&self) -> String {
        self.to_string()
    }
}
impl DescribeValue for u16 {
    fn describe(&self) -> String {
        self.to_string()
    }
}
impl DescribeValue for bool {
    fn describe(&self) -> String {
        self.to_string()
    }
}
impl DescribeValue for f64 {
    fn describe(&self) -> String {
        format!("{self}")
    }
}
impl DescribeValue for Dur {
    fn describe(&self) -> String {
        format!("\"{}\"", self.text)
    }

    fn time_scaled(&self, num: u64, den: u64) -> Dur {
        let ms = self.ms.saturating_mul(num) / den.max(1);
        Dur { ms, text: format!("{ms}ms") }
    }
}
impl DescribeValue for Rate {
    fn describe(&self) -> String {
        format!("\"{}\"", self.text)
    }
}
impl DescribeValue for MaxAttempts {
    fn describe(&self) -> String {
        match self {
            MaxAttempts::Limit(n) => n.to_string(),
            MaxAttempts::Unlimited => "\"unlimited\"".into(),
        }
    }
}
impl DescribeValue for Placement {
    fn describe(&self) -> String {
        match self {
            Placement::CapacityAware => "\"capacity_aware\"".into(),
            Placement::Sorted => "\"sorted\"".into(),
        }
    }
}
impl DescribeValue for UploadPlanner {
    fn describe(&self) -> String {
        match self {
            UploadPlanner::CapacityAware => "\"capacity_aware\"".into(),
            UploadPlanner::SmallestFirst => "\"smallest_first\"".into(),
        }
    }
}
impl DescribeValue for FailureDetection {
    fn describe(&self) -> String {
        match self {
            FailureDetection::Coupled => "\"coupled\"".into(),
            FailureDetection::Independent => "\"independent\"".into(),
        }
    }
}
impl DescribeValue for HealthCheck {
    fn describe(&self) -> String {
        match self {
            HealthCheck::Rounds => "\"rounds\"".into(),
            HealthCheck::Continuous => "\"continuous\"".into(),
        }
    }
}
impl DescribeValue for RecoveryBackoff {
    fn describe(&self) -> String {
        match self {
            RecoveryBackoff::OnContact => "\"on_contact\"".into(),
            RecoveryBackoff::Fixed => "\"fixed\"".into(),
            RecoveryBackoff::ExponentialJitter => "\"exponential_jitter\"".into(),
        }
    }
}
impl DescribeValue for Scoring {
    fn describe(&self) -> String {
        match self {
            Scoring::Disk => "\"disk\"".into(),
            Scoring::DiskAndCompaction => "\"disk_and_compaction\"".into(),
        }
    }
}
impl DescribeValue for Backoff {
    fn describe(&self) -> String {
        match self {
            Backoff::Fixed => "\"fixed\"".into(),
            Backoff::ExponentialJitter => "\"exponential_jitter\"".into(),
        }
    }
}

impl DescribeValue for Replication {
    fn describe(&self) -> String {
        format!("\"{}\"", self.as_str())
    }
}
impl DescribeValue for Acks {
    fn describe(&self) -> String {
        match self {
            Acks::All => "\"all\"".into(),
            Acks::InSync => "\"in_sync\"".into(),
            Acks::Leader => "\"leader\"".into(),
        }
    }
}
impl DescribeValue for ReadFrom {
    fn describe(&self) -> String {
        match self {
            ReadFrom::Primary => "\"primary\"".into(),
            ReadFrom::Any => "\"any\"".into(),
        }
    }
}

/// Where each key of a merged patch was set, for error messages ("prod.toml", or
/// "models/x.toml [variants.incident.policy]").
pub type Origins = BTreeMap<&'static str, String>;

/// A patch together with the origin of each key it sets.
#[derive(Clone, Debug, Default)]
pub struct SourcedPolicy {
    pub patch: PolicyPatch,
    pub origins: Origins,
    /// A rollout: the coordinators start on this policy (the first stage) and move through
    /// the stages at moments the checker chooses.
    pub rollout: Option<Box<RolloutPlan>>,
}

/// The policies a rollout moves the coordinators through, and how.
#[derive(Clone, Debug)]
pub struct RolloutPlan {
    /// (name, policy) per stage, the starting policy first.
    pub stages: Vec<(String, SourcedPolicy)>,
    /// Each coordinator may also go back towards the first stage, once it starts to.
    pub rollback: bool,
    pub order: RolloutOrder,
}

/// Which coordinator may change stage when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RolloutOrder {
    /// Each coordinator on its own: any mix of stages.
    Any,
    /// Waves: a coordinator enters stage k+1 only once none is below stage k (and goes back
    /// to stage k-1 only once none is above stage k).
    StageByStage,
}

impl RolloutOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutOrder::Any => "any",
            RolloutOrder::StageByStage => "stage_by_stage",
        }
    }
}

impl SourcedPolicy {
    pub fn new(patch: PolicyPatch, origin: &str) -> SourcedPolicy {
        let origins = patch.keys().into_iter().map(|k| (k, origin.to_string())).collect();
        SourcedPolicy { patch, origins, rollout: None }
    }

    pub fn then(&self, over: &SourcedPolicy) -> SourcedPolicy {
        let mut origins = self.origins.clone();
        origins.extend(over.origins.iter().map(|(k, v)| (*k, v.clone())));
        let rollout = over.rollout.clone().or_else(|| self.rollout.clone());
        SourcedPolicy { patch: self.patch.merged(&over.patch), origins, rollout }
    }
}

/// A complete policy resolved against a scenario's tick: every value checked and in ticks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    pub replication_factor: u8,
    pub write_quorum: u8,
    pub read_quorum: u8,
    /// A read whose newest value is on fewer than `write_quorum` of the members that answered
    /// writes it back to a write quorum before it answers.
    pub read_repair: bool,
    /// The coordinator persists every replica-set change before it takes effect, so a restart
    /// resumes with the replica sets it had. `false`: they live in memory only, and a restarted
    /// coordinator starts from the configured ones.
    pub durable_membership: bool,
    pub replica_ack_timeout_ticks: Ticks,
    pub failure_detection: FailureDetection,
    /// Independent detection: whether silence is judged at heartbeat rounds or at every tick.
    pub health_check: HealthCheck,
    pub heartbeat_interval_ticks: Ticks,
    pub suspect_after_ticks: Ticks,
    pub dead_after_ticks: Ticks,
    pub eviction: EvictionPolicy,
    /// Re-replication throttles: down/out interval, copy retries, join timeout.
    pub recovery: RecoveryPolicy,
    pub retry: RetryPolicy,
    /// `None` when `rebalance_enabled = false`.
    pub rebalance: Option<Rebalance>,
    pub routing: RoutingPolicy,
    /// Per-partition and per-table write capacity as written (`None`: unlimited); a model
    /// converts them to writes per tick (`SourcedPolicy::rate_per_tick`).
    pub partition_write_capacity: Option<Rate>,
    pub table_write_capacity: Option<Rate>,
    /// The leader family's knobs: `Some` exactly when `replication = "leader"`.
    pub leader: Option<LeaderPolicy>,
}

impl Policy {
    /// Which protocol family runs: leader-based when the leader family's knobs are set.
    pub fn replication(&self) -> Replication {
        match self.leader {
            Some(_) => Replication::Leader,
            None => Replication::Quorum,
        }
    }
}

impl Policy {
    /// The same policy with every duration `factor` times as many ticks (the store runs a
    /// model's policy at 1 ms ticks: `factor` is the milliseconds per model tick). Every
    /// duration a policy holds is here, so a new key cannot be forgotten by one caller.
    pub fn with_ticks_scaled(&self, factor: u32) -> Policy {
        let t = |ticks: Ticks| ticks.saturating_mul(factor);
        let mut p = self.clone();
        p.replica_ack_timeout_ticks = t(p.replica_ack_timeout_ticks);
        p.heartbeat_interval_ticks = t(p.heartbeat_interval_ticks);
        p.suspect_after_ticks = t(p.suspect_after_ticks);
        p.dead_after_ticks = t(p.dead_after_ticks);
        p.retry.backoff_base_ticks = t(p.retry.backoff_base_ticks);
        p.retry.backoff_max_ticks = t(p.retry.backoff_max_ticks);
        if let Some(r) = &mut p.rebalance {
            r.interval_ticks = t(r.interval_ticks);
            r.move_cooldown_ticks = t(r.move_cooldown_ticks);
            r.cooldown_max_ticks = t(r.cooldown_max_ticks);
        }
        let rec = &mut p.recovery;
        rec.down_out_interval_ticks = t(rec.down_out_interval_ticks);
        rec.join_timeout_ticks = rec.join_timeout_ticks.map(t);
        if let CopyRetry::Backoff { base_ticks, max_ticks, .. } = &mut rec.copy_retry {
            *base_ticks = t(*base_ticks);
            *max_ticks = t(*max_ticks);
        }
        if let Some(l) = &mut p.leader {
            l.replica_lag_timeout_ticks = t(l.replica_lag_timeout_ticks);
            l.failover_delay_ticks = t(l.failover_delay_ticks);
        }
        p
    }
}

/// The rebalancer's knobs, in ticks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rebalance {
    pub interval_ticks: Ticks,
    pub policy: RebalancePolicy,
    pub move_cooldown_ticks: Ticks,
    pub cooldown_backoff: u8,
    pub cooldown_max_ticks: Ticks,
}

impl PolicyPatch {
    /// Every key: this patch's value, or the default where it sets none (a policy file that
    /// means the same whatever the defaults' durations are scaled to).
    pub fn with_defaults(&self) -> PolicyPatch {
        defaults().merged(self)
    }
}

/// Defaults for keys no patch sets: the plain behaviour of a store nobody has tuned yet (lint
/// warns about its retries and its eviction breaker); docs/reference.md lists them.
fn defaults() -> PolicyPatch {
    let d = |s: &str| Some(Dur::parse(s).expect("default durations parse"));
    PolicyPatch {
        replication_factor: Some(3),
        write_quorum: Some(2),
        read_quorum: Some(2),
        read_repair: Some(true),
        durable_membership: Some(true),
        replica_ack_timeout: d("2s"),
        failure_detection: Some(FailureDetection::Coupled),
        health_check: Some(HealthCheck::Rounds),
        heartbeat_interval: d("1s"),
        suspect_after: d("3s"),
        dead_after: d("5s"),
        eviction_enabled: Some(true),
        max_dead_fraction: Some(1.0),
        max_concurrent_evictions: Some(1),
        coordinator_load_ceiling: None,
        max_attempts: Some(MaxAttempts::Limit(3)),
        backoff: Some(Backoff::Fixed),
        backoff_base: d("1s"),
        backoff_max: d("1s"),
        retry_budget: None,
        idempotency_tokens: Some(false),
        rebalance_enabled: Some(false),
        rebalance_interval: d("1s"),
        disk_high_watermark: Some(80),
        scoring: Some(Scoring::DiskAndCompaction),
        compaction_debt_max: Some(50),
        move_cooldown: d("0ms"),
        cooldown_backoff: Some(1),
        cooldown_max: d("0ms"),
        placement: Some(Placement::CapacityAware),
        spill_threshold: Some(0.8),
        upload_planner: Some(UploadPlanner::CapacityAware),
        partition_write_capacity: None,
        table_write_capacity: None,
        write_shard_suffixes: Some(1),
        down_out_interval: d("0ms"),
        max_recoveries_per_node: None,
        recovery_backoff: Some(RecoveryBackoff::OnContact),
        recovery_backoff_base: d("1s"),
        recovery_backoff_max: d("1s"),
        join_timeout: None,
        replication: Some(Replication::Quorum),
        acks: Some(Acks::InSync),
        min_in_sync: Some(1),
        replica_lag_timeout: d("10s"),
        unclean_election: Some(false),
        failover_cross_zone: Some(true),
        failover_delay: d("0ms"),
        fencing: Some(true),
        read_from: Some(ReadFrom::Primary),
    }
}

impl SourcedPolicy {
    /// Resolve against a scenario with `tick_ms` and `node_count` nodes, for the store: errors
    /// name the key, its value and the file (and table) that set it, and the leader family,
    /// which the store does not run yet, is refused.
    pub fn resolve(&self, tick_ms: u64, node_count: usize) -> Result<Policy, String> {
        self.refuse_unrun_family(self.resolve_within(tick_ms, node_count, u64::from(TICKS_MAX))?)
    }

    /// Resolve against a scenario for the timed world, which runs either family (as
    /// [`SourcedPolicy::resolve`] otherwise).
    pub fn resolve_for_model(&self, tick_ms: u64, node_count: usize) -> Result<Policy, String> {
        self.resolve_within(tick_ms, node_count, u64::from(TICKS_MAX))
    }

    /// Resolve without a scenario, for the store: every duration in milliseconds (a 1ms tick)
    /// with no tick limit, and room for the largest replication factor. Every other check of
    /// `resolve` applies.
    pub fn resolve_ms(&self) -> Result<Policy, String> {
        self.refuse_unrun_family(self.resolve_within(1, NODE_COUNT_MAX, u64::from(u32::MAX))?)
    }

    /// [`SourcedPolicy::resolve_ms`] for either family: `replicheck lint` without `--model`
    /// judges a leader-family policy too (it runs nothing).
    pub fn resolve_ms_any_family(&self) -> Result<Policy, String> {
        self.resolve_within(1, NODE_COUNT_MAX, u64::from(u32::MAX))
    }

    /// The leader family's machines (`protocol::leader`) run in the timed world and under
    /// `store up --replication leader`, but not under the store's other commands: a policy
    /// asking them for it is refused rather than run as the quorum family.
    fn refuse_unrun_family(&self, policy: Policy) -> Result<Policy, String> {
        if policy.replication() == Replication::Leader {
            return Err(format!(
                "{}: key `replication` = \"leader\": in the store only `store up`, `store bench` and `store run` (without a rollout) run the leader family (CONFIG SET policy does not yet); the model checker does: `replicheck check` with a model",
                self.origin("replication")
            ));
        }
        Ok(policy)
    }

    /// [`SourcedPolicy::resolve`] for either family: for the unit tests of the leader family's
    /// machines, which run them without a world.
    #[cfg(test)]
    pub(crate) fn resolve_any_family(&self, tick_ms: u64, node_count: usize) -> Result<Policy, String> {
        self.resolve_for_model(tick_ms, node_count)
    }

    fn resolve_within(&self, tick_ms: u64, node_count: usize, ticks_max: u64) -> Result<Policy, String> {
        let r = Resolver { p: defaults().merged(&self.patch), origins: &self.origins, tick_ms, ticks_max };
        let (replication_factor, write_quorum, read_quorum) = r.quorums(node_count)?;
        let (
            replica_ack_timeout_ticks,
            failure_detection,
            [heartbeat_interval_ticks, suspect_after_ticks, dead_after_ticks],
        ) = r.detection()?;
        Ok(Policy {
            replication_factor,
            write_quorum,
            read_quorum,
            read_repair: r.p.read_repair.expect("default"),
            durable_membership: r.p.durable_membership.expect("default"),
            replica_ack_timeout_ticks,
            failure_detection,
            health_check: r.p.health_check.expect("default"),
            heartbeat_interval_ticks,
            suspect_after_ticks,
            dead_after_ticks,
            eviction: r.eviction()?,
            recovery: r.recovery()?,
            retry: r.retry()?,
            rebalance: r.rebalance()?,
            routing: r.routing()?,
            partition_write_capacity: r.p.partition_write_capacity.clone(),
            table_write_capacity: r.p.table_write_capacity.clone(),
            leader: r.leader(replication_factor)?,
        })
    }

    /// Where `key` was set: a file (and table), or "defaults".
    pub fn origin(&self, key: &str) -> String {
        self.origins.get(key).cloned().unwrap_or_else(|| "defaults".to_string())
    }

    /// A capacity knob in writes per tick of `tick_ms` (`None`: unset, unlimited), or an
    /// error naming where it was set, the key and the value.
    pub fn rate_per_tick(&self, key: &str, rate: &Option<Rate>, tick_ms: u64) -> Result<Option<u16>, String> {
        rate.as_ref()
            .map(|r| {
                r.per_tick(tick_ms)
                    .map_err(|why| format!("{}: key `{key}` = \"{}\": {why}", self.origin(key), r.text))
            })
            .transpose()
    }

    /// The full merged policy (defaults included) as key = value lines.
    pub fn effective(&self) -> Vec<(&'static str, String)> {
        defaults().merged(&self.patch).describe()
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
