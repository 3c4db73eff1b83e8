//! Resolving a policy patch into the ticks of one scenario: each key checked on its own and
//! against the others it must agree with, every error naming where the key was set.

use super::*;

/// Resolves a merged patch (defaults included) one concern at a time; every error names
/// where the key was set, the key and its value.
pub(super) struct Resolver<'a> {
    pub(super) p: PolicyPatch,
    pub(super) origins: &'a Origins,
    pub(super) tick_ms: u64,
    pub(super) ticks_max: u64,
}

impl Resolver<'_> {
    pub(super) fn err(&self, key: &str, value: String, why: String) -> String {
        match self.origins.get(key) {
            Some(origin) => format!("{origin}: key `{key}` = {value}: {why}"),
            None => format!("key `{key}` = {value} (its default: set it in [policy]): {why}"),
        }
    }

    /// A fraction in 0..=1 as thousandths, the unit the policy functions compare in. A value
    /// finer than that is refused: rounding it would check a policy other than the one given.
    pub(super) fn permille(&self, key: &str, fraction: f64) -> Result<u16, String> {
        let scaled = fraction * 1000.0;
        if (scaled - scaled.round()).abs() > 1e-6 {
            return Err(self.err(
                key,
                format!("{fraction}"),
                "at most three decimals (fractions are compared in thousandths, e.g. 0.25 or 0.249)".into(),
            ));
        }
        Ok(scaled.round() as u16)
    }

    /// A duration key, quoted as written.
    pub(super) fn text(d: &Option<Dur>) -> String {
        format!("\"{}\"", d.as_ref().expect("defaults set every duration").text)
    }

    pub(super) fn ticks(&self, key: &str, d: &Option<Dur>) -> Result<Ticks, String> {
        let d = d.as_ref().expect("defaults set every duration");
        d.ticks_at_most(self.tick_ms, self.ticks_max)
            .map_err(|why| self.err(key, format!("\"{}\"", d.text), why))
    }

    pub(super) fn quorums(&self, node_count: usize) -> Result<(u8, u8, u8), String> {
        let p = &self.p;
        let rf = p.replication_factor.expect("default");
        let w = p.write_quorum.expect("default");
        let r = p.read_quorum.expect("default");
        if rf == 0 || rf > REPLICATION_FACTOR_MAX {
            return Err(self.err(
                "replication_factor",
                rf.to_string(),
                format!("must be 1 to {REPLICATION_FACTOR_MAX}"),
            ));
        }
        if usize::from(rf) > node_count {
            return Err(self.err(
                "replication_factor",
                rf.to_string(),
                format!("exceeds the scenario's {node_count} nodes"),
            ));
        }
        for (key, q) in [("write_quorum", w), ("read_quorum", r)] {
            if q == 0 {
                return Err(self.err(key, q.to_string(), "must be at least 1".into()));
            }
            if q > rf {
                return Err(self.err(
                    key,
                    q.to_string(),
                    format!("must not exceed replication_factor = {rf}"),
                ));
            }
        }
        Ok((rf, w, r))
    }

    /// The ack deadline, the detection mode, and heartbeat, suspect and dead thresholds.
    pub(super) fn detection(&self) -> Result<(Ticks, FailureDetection, [Ticks; 3]), String> {
        let p = &self.p;
        let timeout = self.ticks("replica_ack_timeout", &p.replica_ack_timeout)?;
        if timeout == 0 {
            return Err(self.err(
                "replica_ack_timeout",
                Self::text(&p.replica_ack_timeout),
                "must be positive".into(),
            ));
        }
        let detection = p.failure_detection.expect("default");
        // Heartbeats and silence are independent detection's: coupled never reads them. There
        // what the user set is checked as written, and a default that does not fit this
        // model's tick (3s at a 10ms tick) or the user's other key is no error: it is kept
        // within the tick limit and in order.
        let read = detection == FailureDetection::Independent;
        let set = |key: &str| read || self.origins.contains_key(key);
        let ticks = |key: &str, d: &Option<Dur>| -> Result<Ticks, String> {
            if set(key) {
                return self.ticks(key, d);
            }
            let d = d.as_ref().expect("defaults set every duration");
            Ok(d.ticks_at_most(self.tick_ms, self.ticks_max).unwrap_or(self.ticks_max as Ticks))
        };
        let heartbeat = ticks("heartbeat_interval", &p.heartbeat_interval)?;
        let suspect = ticks("suspect_after", &p.suspect_after)?;
        let dead = ticks("dead_after", &p.dead_after)?;
        if read && heartbeat == 0 {
            return Err(self.err(
                "heartbeat_interval",
                Self::text(&p.heartbeat_interval),
                "must be positive with independent failure detection".into(),
            ));
        }
        if suspect > dead && set("suspect_after") && set("dead_after") {
            return Err(self.err(
                "suspect_after",
                Self::text(&p.suspect_after),
                format!("must not exceed dead_after = {}", Self::text(&p.dead_after)),
            ));
        }
        let suspect = suspect.min(dead);
        Ok((timeout, detection, [heartbeat, suspect, dead]))
    }

    pub(super) fn eviction(&self) -> Result<EvictionPolicy, String> {
        let fraction = self.p.max_dead_fraction.expect("default");
        if !(0.0..=1.0).contains(&fraction) {
            return Err(self.err(
                "max_dead_fraction",
                format!("{fraction}"),
                "must be between 0 and 1".into(),
            ));
        }
        let ceiling = self.p.coordinator_load_ceiling;
        // Above the largest backlog a coordinator can have, the ceiling would pause nothing.
        if let Some(c) = ceiling.filter(|&c| c >= BACKLOG_WORK_MAX) {
            return Err(self.err(
                "coordinator_load_ceiling",
                c.to_string(),
                format!("units of queued coordinator work: 0 to {}", BACKLOG_WORK_MAX - 1),
            ));
        }
        Ok(EvictionPolicy {
            enabled: self.p.eviction_enabled.expect("default"),
            max_dead_fraction_permille: self.permille("max_dead_fraction", fraction)?,
            max_concurrent_evictions: self.p.max_concurrent_evictions.expect("default"),
            coordinator_load_ceiling_work: ceiling,
            max_recoveries_per_node: self.p.max_recoveries_per_node,
        })
    }

    /// The re-replication throttles. The backoff's durations are checked whatever
    /// `recovery_backoff` is (a file that turns it on later must not start to fail for a key
    /// nobody touched) and counted in ticks only when it backs off.
    pub(super) fn recovery(&self) -> Result<RecoveryPolicy, String> {
        let p = &self.p;
        let base = self.ticks("recovery_backoff_base", &p.recovery_backoff_base)?;
        let max = self.ticks("recovery_backoff_max", &p.recovery_backoff_max)?;
        if base > max {
            return Err(self.err(
                "recovery_backoff_base",
                Self::text(&p.recovery_backoff_base),
                format!("must not exceed recovery_backoff_max = {}", Self::text(&p.recovery_backoff_max)),
            ));
        }
        let copy_retry = match p.recovery_backoff.expect("default") {
            RecoveryBackoff::OnContact => CopyRetry::OnContact,
            kind => {
                if base == 0 {
                    return Err(self.err(
                        "recovery_backoff_base",
                        Self::text(&p.recovery_backoff_base),
                        "must be positive when recovery_backoff backs off (\"on_contact\" retries at the next sign of life)".into(),
                    ));
                }
                let backoff = match kind {
                    RecoveryBackoff::Fixed => Backoff::Fixed,
                    _ => Backoff::ExponentialJitter,
                };
                CopyRetry::Backoff { backoff, base_ticks: base, max_ticks: max }
            }
        };
        let join_timeout_ticks = match &p.join_timeout {
            None => None,
            Some(d) => {
                let t = self.ticks("join_timeout", &p.join_timeout)?;
                if t == 0 {
                    return Err(self.err(
                        "join_timeout",
                        format!("\"{}\"", d.text),
                        "must be positive (leave it unset: a join runs until it completes)".into(),
                    ));
                }
                Some(t)
            }
        };
        Ok(RecoveryPolicy {
            down_out_interval_ticks: self.ticks("down_out_interval", &p.down_out_interval)?,
            copy_retry,
            join_timeout_ticks,
        })
    }

    pub(super) fn retry(&self) -> Result<RetryPolicy, String> {
        let p = &self.p;
        let max_attempts = match p.max_attempts.expect("default") {
            MaxAttempts::Unlimited => None,
            MaxAttempts::Limit(n) if n == 0 || n > MAX_ATTEMPTS_MAX => {
                return Err(self.err(
                    "max_attempts",
                    n.to_string(),
                    format!("must be 1 to {MAX_ATTEMPTS_MAX}, or \"unlimited\""),
                ));
            }
            MaxAttempts::Limit(n) => Some(n),
        };
        let backoff_base_ticks = self.ticks("backoff_base", &p.backoff_base)?;
        let backoff_max_ticks = self.ticks("backoff_max", &p.backoff_max)?;
        if backoff_base_ticks > backoff_max_ticks {
            return Err(self.err(
                "backoff_base",
                Self::text(&p.backoff_base),
                format!("must not exceed backoff_max = {}", Self::text(&p.backoff_max)),
            ));
        }
        Ok(RetryPolicy {
            max_attempts,
            backoff: p.backoff.expect("default"),
            backoff_base_ticks,
            backoff_max_ticks,
            retry_budget: p.retry_budget,
            idempotency_tokens: p.idempotency_tokens.expect("default"),
        })
    }

    /// The rebalancer's knobs. Values no rebalancer could run are refused whether it is on or
    /// not (a file that turns it on later must not start to fail for a key nobody touched);
    /// the durations are counted in ticks only when it is enabled.
    pub(super) fn rebalance(&self) -> Result<Option<Rebalance>, String> {
        let p = &self.p;
        for (key, v) in
            [("disk_high_watermark", p.disk_high_watermark), ("compaction_debt_max", p.compaction_debt_max)]
        {
            let v = v.expect("default");
            if v > 100 {
                return Err(self.err(key, v.to_string(), "a percentage: 0 to 100".into()));
            }
        }
        let cooldown_backoff = p.cooldown_backoff.expect("default");
        if cooldown_backoff == 0 {
            return Err(self.err("cooldown_backoff", "0".into(), "a multiplier: at least 1".into()));
        }
        if !p.rebalance_enabled.expect("default") {
            return Ok(None);
        }
        let interval_ticks = self.ticks("rebalance_interval", &p.rebalance_interval)?;
        if interval_ticks == 0 {
            return Err(self.err(
                "rebalance_interval",
                Self::text(&p.rebalance_interval),
                "must be positive when rebalance_enabled = true".into(),
            ));
        }
        Ok(Some(Rebalance {
            interval_ticks,
            policy: RebalancePolicy {
                disk_high_watermark_pct: p.disk_high_watermark.expect("default"),
                scoring: p.scoring.expect("default"),
                compaction_debt_max_pct: p.compaction_debt_max.expect("default"),
            },
            move_cooldown_ticks: self.ticks("move_cooldown", &p.move_cooldown)?,
            cooldown_backoff,
            cooldown_max_ticks: self.ticks("cooldown_max", &p.cooldown_max)?,
        }))
    }

    /// The leader family's knobs. Values no leader family could run are refused whichever
    /// family runs (as the rebalancer's are); the durations are counted in ticks only for the
    /// leader family.
    pub(super) fn leader(&self, replication_factor: u8) -> Result<Option<LeaderPolicy>, String> {
        let p = &self.p;
        let min_in_sync = p.min_in_sync.expect("default");
        if min_in_sync == 0 || min_in_sync > replication_factor {
            return Err(self.err(
                "min_in_sync",
                min_in_sync.to_string(),
                format!(
                    "must be 1 (the primary alone) to replication_factor = {replication_factor} (the primary counts)"
                ),
            ));
        }
        if p.replication.expect("default") != Replication::Leader {
            return Ok(None);
        }
        let replica_lag_timeout_ticks = self.ticks("replica_lag_timeout", &p.replica_lag_timeout)?;
        if replica_lag_timeout_ticks == 0 {
            return Err(self.err(
                "replica_lag_timeout",
                Self::text(&p.replica_lag_timeout),
                "must be positive with replication = \"leader\"".into(),
            ));
        }
        // A retried write would need the primary to remember its token; the leader family's
        // primary keeps no token table.
        if p.idempotency_tokens.expect("default") {
            return Err(self.err(
                "idempotency_tokens",
                "true".into(),
                "not supported with replication = \"leader\" (the primary keeps no token table)".into(),
            ));
        }
        Ok(Some(LeaderPolicy {
            acks: p.acks.expect("default"),
            min_in_sync,
            replica_lag_timeout_ticks,
            unclean_election: p.unclean_election.expect("default"),
            failover_cross_zone: p.failover_cross_zone.expect("default"),
            failover_delay_ticks: self.ticks("failover_delay", &p.failover_delay)?,
            fencing: p.fencing.expect("default"),
            read_from: p.read_from.expect("default"),
        }))
    }

    pub(super) fn routing(&self) -> Result<RoutingPolicy, String> {
        let spill = self.p.spill_threshold.expect("default");
        if !(spill > 0.0 && spill <= 1.0) {
            return Err(self.err(
                "spill_threshold",
                format!("{spill}"),
                "a fraction of capacity: above 0, at most 1".into(),
            ));
        }
        let suffixes = self.p.write_shard_suffixes.expect("default");
        if suffixes == 0 || suffixes > WRITE_SHARD_SUFFIXES_MAX {
            return Err(self.err(
                "write_shard_suffixes",
                suffixes.to_string(),
                format!("must be 1 (no key sharding) to {WRITE_SHARD_SUFFIXES_MAX}"),
            ));
        }
        Ok(RoutingPolicy {
            placement: self.p.placement.expect("default"),
            spill_threshold_permille: self.permille("spill_threshold", spill)?,
            upload_planner: self.p.upload_planner.expect("default"),
            write_shard_suffixes: suffixes,
        })
    }
}
