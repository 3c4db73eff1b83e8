//! What a run starts: its scratch directory, and the store the model's policy asks for (the
//! quorum family's cluster, or the leader family's with the model's placement and the
//! variant's policy as its policy file).

use super::*;

/// What a run of the store plays for a model and a policy (`store run`, `store sim`): a
/// rollout's stages, starting on the first; that policy in milliseconds;
/// its family; and the model's layout under it.
pub(crate) struct Played {
    pub(crate) rollout: Option<RolloutRun>,
    /// The policy played first (a rollout's first stage).
    pub(crate) sourced: SourcedPolicy,
    /// In milliseconds, as the store runs it.
    pub(crate) policy: Policy,
    pub(crate) leader: bool,
    pub(crate) layout: Layout,
}

impl Played {
    /// `label`'s policy `sourced` at `ms_per_tick` (a rollout's steps in `rollout_order`, if
    /// given). A rollout of a leader-family policy is refused: the store plays rollouts of the
    /// quorum family only.
    pub(crate) fn of(
        scenario: &Scenario,
        label: &str,
        sourced: SourcedPolicy,
        ms_per_tick: u64,
        rollout_order: &[String],
    ) -> Result<Played, String> {
        let rollout = RolloutRun::of(scenario, &sourced, ms_per_tick, rollout_order)?;
        let sourced = match &sourced.rollout {
            Some(plan) => plan.stages[0].1.clone(),
            None => sourced,
        };
        let ticks_policy = sourced.resolve_for_model(scenario.tick_ms, scenario.nodes.len())?;
        let leader = ticks_policy.replication() == Replication::Leader;
        if leader && rollout.is_some() {
            return Err(format!(
                "{} / {label}: a rollout of a leader-family policy: the store plays rollouts of the quorum family only",
                scenario.path.display()
            ));
        }
        let policy = policy_in_ms(&ticks_policy, ms_per_tick);
        let layout = Layout::of_model(scenario, &sourced, policy.replication_factor, ms_per_tick)?;
        Ok(Played { rollout, sourced, policy, leader, layout })
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn start_quorum(
    scenario: &Scenario,
    policy: &Policy,
    layout: Layout,
    ms_per_tick: u64,
    dir: &ScratchDir,
    req: &RunRequest,
    log_path: &std::path::Path,
    trace_path: Option<&std::path::Path>,
    epoch: std::time::Instant,
) -> Result<Cluster, String> {
    Cluster::start(ClusterConfig {
        binary: req.binary.clone(),
        node_count: scenario.nodes.len(),
        node_zones: scenario.nodes.iter().map(|n| n.zone).collect(),
        policy: policy.clone(),
        data_dir: dir.path.join("data"),
        client_addr: "127.0.0.1:0".parse().expect("an address"),
        clients: ClientLimits::default(),
        decision_log: Some(log_path.to_path_buf()),
        proxy_seed: req.seed,
        link_proxies: true,
        load: load_facts(scenario),
        layout,
        // The model's membership queue, its update time in milliseconds as every duration.
        trace: trace_path.map(|path| (path.to_path_buf(), ms_per_tick)),
        rebuild_nodes: Vec::new(),
        coordinator_zones: scenario.coordinators.iter().map(|c| c.zone).collect(),
        epoch,
        membership: Some(membership_in_ms(scenario, ms_per_tick)?),
    })
    .map_err(|e| e.to_string())
}

/// The model's membership queue, its update time in milliseconds as every duration.
pub(crate) fn membership_in_ms(
    scenario: &Scenario,
    ms_per_tick: u64,
) -> Result<config::CoordinatorSpec, String> {
    Ok(config::CoordinatorSpec {
        membership_update_ticks: scenario.coordinator.membership_update_ticks * ms_per_tick as u32,
        // The model's coordinator work: a model tick's worth every `ms_per_tick` ms.
        work_round_ticks: u16::try_from(ms_per_tick).map_err(|_| {
            format!(
                "--time-scale {ms_per_tick}: at most {} ms per tick with a coordinator work queue",
                u16::MAX
            )
        })?,
        ..scenario.coordinator.clone()
    })
}

/// The leader family's cluster for the model: its shards as partitions with their replica sets,
/// the manager in the coordinator's zone, the variant's policy (durations at the run's time
/// scale) as the directory's policy file, and every link between two machines through a proxy.
pub(super) fn start_leader(
    scenario: &Scenario,
    sourced: &SourcedPolicy,
    layout: &Layout,
    ms_per_tick: u64,
    dir: &ScratchDir,
    req: &RunRequest,
) -> Result<LeaderCluster, String> {
    let policy_file = dir.path.join("policy.toml");
    let text = leader_policy_file(sourced, ms_per_tick, scenario.tick_ms);
    std::fs::write(&policy_file, text).map_err(|e| format!("cannot write {}: {e}", policy_file.display()))?;
    let model = crate::store::leader::ModelPlacement::of(layout, scenario.coordinators[0].zone);
    LeaderCluster::start(LeaderConfig {
        binary: req.binary.clone(),
        node_count: scenario.nodes.len(),
        node_zones: scenario.nodes.iter().map(|n| n.zone).collect(),
        partitions: scenario.shards.len(),
        replication_factor: None,
        policy_file: Some(policy_file),
        data_dir: dir.path.join("data"),
        client_addr: "127.0.0.1:0".parse().expect("an address"),
        clients: ClientLimits::default(),
        link_proxy_seed: Some(req.seed),
        model: Some(model),
    })
    .map_err(|e| e.to_string())
}

/// The policy file a leader store runs a variant's policy from: every key, the defaults'
/// included, with its durations at `ms_per_tick` real ms per model tick of `tick_ms`.
pub(crate) fn leader_policy_file(sourced: &SourcedPolicy, ms_per_tick: u64, tick_ms: u64) -> String {
    sourced.patch.with_defaults().time_scaled(ms_per_tick, tick_ms).to_toml()
}

/// The leader family's policy as the store's processes run it, durations in milliseconds.
pub(super) fn leader_policy_text(p: &Policy) -> String {
    let l = p.leader.as_ref().expect("a leader-family policy");
    format!(
        "the leader store runs acks {}, min_in_sync {}, replica_lag_timeout {} ms, dead_after {} ms, heartbeat_interval {} ms, replica_ack_timeout {} ms, failover_delay {} ms, unclean_election {}, failover_cross_zone {}, fencing {}",
        crate::store::coordinator::info::config_name(&l.acks),
        l.min_in_sync,
        l.replica_lag_timeout_ticks,
        p.dead_after_ticks,
        p.heartbeat_interval_ticks,
        p.replica_ack_timeout_ticks,
        l.failover_delay_ticks,
        l.unclean_election,
        l.failover_cross_zone,
        l.fencing
    )
}

/// A directory for one run's node data (and its decision log unless kept elsewhere), removed
/// when the run ends.
pub(crate) struct ScratchDir {
    pub(crate) path: PathBuf,
}

impl ScratchDir {
    pub(super) fn new() -> Result<ScratchDir, String> {
        ScratchDir::under(&std::env::temp_dir(), "store-run")
    }

    /// A fresh directory under `base`, named for `what`.
    pub(crate) fn under(base: &std::path::Path, what: &str) -> Result<ScratchDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = base.join(format!("replicheck-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The rebalancer's view of the scenario's nodes (the shards' sizes and heat are in the
/// layout).
pub(crate) fn load_facts(scenario: &Scenario) -> LoadFacts {
    LoadFacts {
        node_disk_used_pct: scenario.nodes.iter().map(|n| n.disk_used_pct).collect(),
        node_compaction_debt_pct: scenario.nodes.iter().map(|n| n.compaction_debt_pct).collect(),
        slow_compaction_debt_pct: scenario.slow_compaction_debt_pct,
    }
}
