//! The timed world: storage nodes, a coordinator and clients, on links with latency ranges,
//! under a fault budget, as a `stateright::Model`.
//!
//! Time is discrete. A message sent on a link with one-way latency `[lo, hi]` ticks may be
//! delivered at any tick in that window and no later. Timers fire exactly when they expire.
//! `Tick` (time passes by one tick) is enabled only when nothing is overdue: no message at the
//! end of its window, no timer at zero. Between ticks every enabled delivery, firing and
//! environment action interleaves in every order.

mod client;
pub(crate) mod coordinator;
pub mod display;
mod env;
pub mod history;
mod node;
pub mod properties;
pub mod state;

pub use state::*;

use crate::config::{
    ClientSpec, CoordinatorSpec, FaultSpec, LatencyTicks, NodeSpec, Policy, PropertyName, Scenario,
    SourcedPolicy,
};
use crate::policy::detector::{FailureDetection, Health};
use crate::policy::{routing, NodeId, Ticks};
use stateright::{Model, Property};

/// Everything the world needs, resolved from a scenario and one policy.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    pub model_name: String,
    pub tick_ms: u64,
    pub zones: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    pub shard_names: Vec<String>,
    pub shards: Vec<crate::config::ShardSpec>,
    pub slow_compaction_debt_pct: u8,
    pub initial_members: Vec<Vec<NodeId>>,
    pub latency: Vec<Vec<LatencyTicks>>,
    pub lossy: Vec<Vec<bool>>,
    pub coordinator: CoordinatorSpec,
    pub clients: Vec<ClientSpec>,
    pub faults: FaultSpec,
    pub properties: Vec<PropertyName>,
    pub policy: Policy,
    /// The partition each client's key lands on (its prefix shard, plus its suffix).
    pub client_partitions: Vec<u8>,
    /// Every partition's write capacity per tick (`None`: unlimited).
    pub partition_capacity_per_tick: Option<u16>,
    /// Background writes per tick on each partition: the bursts, spread over the suffixes.
    pub partition_background: Vec<u16>,
    /// Whether any backend has an ingest capacity: only then is placement modelled.
    pub backends_modelled: bool,
}

/// Remaining-tick counters are stored as `u8`.
const STATE_TICKS_MAX: Ticks = u8::MAX as Ticks;

impl WorldConfig {
    pub fn new(scenario: &Scenario, sourced: &SourcedPolicy) -> Result<WorldConfig, String> {
        let policy = sourced.resolve(scenario.tick_ms, scenario.nodes.len())?;
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
            .map(|c| routing::key_partition(c.shard, c.key_hash, suffixes, partition_count))
            .collect();
        let bursts: Vec<u16> = scenario.shards.iter().map(|s| s.burst_writes_per_tick).collect();
        let partition_background = routing::partition_background(&bursts, suffixes);
        let rf = usize::from(policy.replication_factor);
        let mut initial_members = Vec::new();
        for s in &scenario.shards {
            let mut members = match &s.replicas {
                Some(r) if r.len() != rf => {
                    return Err(format!(
                        "shard \"{}\" lists {} replicas but replication_factor = {rf}",
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
        let cfg = WorldConfig {
            model_name: scenario.name.clone(),
            tick_ms: scenario.tick_ms,
            zones: scenario.zones.clone(),
            nodes: scenario.nodes.clone(),
            shard_names: scenario.shards.iter().map(|s| s.name.clone()).collect(),
            shards: scenario.shards.clone(),
            slow_compaction_debt_pct: scenario.slow_compaction_debt_pct,
            initial_members,
            latency: scenario.latency.clone(),
            lossy: scenario.lossy.clone(),
            coordinator: scenario.coordinator.clone(),
            clients: scenario.clients.clone(),
            faults: scenario.faults.clone(),
            properties: scenario.properties.clone(),
            policy,
            client_partitions,
            partition_capacity_per_tick,
            partition_background,
            backends_modelled: scenario.nodes.iter().any(|n| n.write_capacity_per_tick.is_some()),
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

    pub fn node_zone(&self, n: NodeId) -> u8 {
        self.nodes[usize::from(n)].zone
    }

    pub fn zone_of(&self, e: Endpoint) -> u8 {
        match e {
            Endpoint::Node(n) => self.node_zone(n),
            Endpoint::Coordinator => self.coordinator.zone,
            Endpoint::Client(c) => self.clients[usize::from(c)].zone,
        }
    }

    /// The write value of a client's op: unique per operation, never 0 (the initial value).
    pub fn value_of(&self, op: OpId) -> u8 {
        1 + op.client * crate::policy::CLIENT_OPS_MAX as u8 + op.seq
    }
}

/// The model checked: one scenario under one policy.
#[derive(Clone, Debug)]
pub struct World {
    pub cfg: WorldConfig,
}

/// What can happen next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Deliver(Envelope),
    /// A request's ack deadline fires at the coordinator.
    AckDeadline {
        op: OpId,
        attempt: u8,
    },
    /// The coordinator finishes applying the membership update at the head of its queue.
    ApplyMembershipUpdate,
    /// The coordinator's heartbeat timer fires (independent failure detection).
    Heartbeat,
    /// The rebalancer's timer fires: it may move one shard.
    Rebalance,
    ClientInvoke(u8),
    ClientTimeout(u8),
    ClientRetry(u8),
    Crash(NodeId),
    Restart(NodeId),
    Partition(u8),
    Heal(u8),
    Degrade(u8),
    Restore(u8),
    /// A lossy link loses a message.
    Lose(Envelope),
    Tick,
}

impl World {
    pub fn new(cfg: WorldConfig) -> World {
        World { cfg }
    }

    pub fn initial_state(&self) -> WorldState {
        let cfg = &self.cfg;
        let node_count = cfg.nodes.len();
        let shard_count = cfg.shard_names.len();
        let independent = cfg.policy.failure_detection == FailureDetection::Independent;
        WorldState {
            nodes: filled(NodeState { up: true, shards: filled(Stored::default(), shard_count) }, node_count),
            coord: CoordState {
                shards: cfg
                    .initial_members
                    .iter()
                    .map(|m| ShardView {
                        members: m.iter().copied().collect(),
                        join: None,
                        next_version: 1,
                        acked_version: 0,
                        cooldown_ticks: 0,
                        cooldown_len_ticks: 0,
                    })
                    .collect(),
                health: filled(Health::Alive, node_count),
                silence_ticks: filled(0, if independent { node_count } else { 0 }),
                heartbeat_ticks: if independent { cfg.policy.heartbeat_interval_ticks as u8 } else { 0 },
                ops: Vec::new(),
                tokens: Vec::new(),
                queue: Vec::new(),
                queue_ticks: 0,
                rebalance_ticks: cfg.policy.rebalance.as_ref().map_or(0, |r| r.interval_ticks as u8),
                partition_load: filled(0, shard_count),
                backend_load: filled(0, node_count),
            },
            clients: cfg
                .clients
                .iter()
                .enumerate()
                .map(|(i, _)| ClientState { next_op: 0, phase: client::idle(cfg, i as u8), retries_used: 0 })
                .collect(),
            net: Vec::new(),
            env: EnvState { faults_left: cfg.faults.budget, partitioned: 0, degraded: 0 },
            ghost: Ghost {
                acked_version: filled(0, shard_count),
                history: std::sync::Arc::new(filled(history::History::default(), shard_count)),
                linearizable: true,
                effects: Vec::new(),
                duplicate_effect: false,
                faulted_since_heard: filled(false, node_count),
                fault_epoch: filled(0, node_count),
                healthy_evicted: None,
                churn_exceeded: false,
                change_ages: Vec::new(),
                capacity_breach: coordinator::background_breach(cfg),
            },
        }
    }

    /// Whether time may pass: nothing is due now.
    pub fn tick_enabled(&self, s: &WorldState) -> bool {
        s.net.iter().all(|e| e.latest_ticks > 0)
            && coordinator::no_timer_due(&self.cfg, s)
            && client::no_timer_due(s)
    }
}

impl Model for World {
    type State = WorldState;
    type Action = Action;

    fn init_states(&self) -> Vec<WorldState> {
        vec![self.initial_state()]
    }

    fn actions(&self, s: &WorldState, actions: &mut Vec<Action>) {
        // Deliveries, in the network's sorted order (duplicates offered once).
        let mut last: Option<&Envelope> = None;
        for e in &s.net {
            if e.earliest_ticks == 0 && last != Some(e) {
                actions.push(Action::Deliver(*e));
            }
            last = Some(e);
        }
        coordinator::timer_actions(&self.cfg, s, actions);
        client::actions(&self.cfg, s, actions);
        env::fault_actions(&self.cfg, s, actions);
        if self.tick_enabled(s) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &WorldState, action: Action) -> Option<WorldState> {
        let cfg = &self.cfg;
        let mut s = last.clone();
        match action {
            Action::Deliver(e) => {
                let i = s.net.iter().position(|x| *x == e)?;
                s.net.remove(i);
                if !env::deliverable(cfg, &s, &e) {
                    // Sent across a cut that formed later, or to a node that is down: lost.
                    return Some(s);
                }
                match e.dst {
                    Endpoint::Node(n) => node::on_msg(cfg, &mut s, n, e.src, e.msg),
                    Endpoint::Coordinator => coordinator::on_msg(cfg, &mut s, &e),
                    Endpoint::Client(c) => client::on_msg(cfg, &mut s, c, e.msg),
                }
            }
            Action::AckDeadline { op, attempt } => coordinator::on_deadline(cfg, &mut s, op, attempt),
            Action::ApplyMembershipUpdate => coordinator::on_apply_membership(cfg, &mut s),
            Action::Heartbeat => coordinator::on_heartbeat(cfg, &mut s),
            Action::Rebalance => coordinator::on_rebalance(cfg, &mut s),
            Action::ClientInvoke(c) => client::on_invoke(cfg, &mut s, c),
            Action::ClientTimeout(c) => client::on_timeout(cfg, &mut s, c),
            Action::ClientRetry(c) => client::on_retry(cfg, &mut s, c),
            Action::Tick => {
                env::tick(&mut s);
                coordinator::tick(cfg, &mut s);
                client::tick(&mut s);
            }
            Action::Lose(e) => {
                let i = s.net.iter().position(|x| *x == e)?;
                s.net.remove(i);
                s.env.faults_left -= 1;
            }
            fault => env::apply_fault(cfg, &mut s, fault),
        }
        s.net.sort();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::for_world(&self.cfg.properties)
    }

    fn format_action(&self, action: &Action) -> String {
        display::action(&self.cfg, action)
    }

    fn format_step(&self, last: &WorldState, action: Action) -> Option<String> {
        self.next_state(last, action).map(|s| display::state(&self.cfg, &s))
    }

    fn as_svg(&self, path: stateright::Path<WorldState, Action>) -> Option<String> {
        Some(display::svg(&self.cfg, path))
    }
}
