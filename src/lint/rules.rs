//! The rules' checks: pure functions of the policy and, for some, the environment.

use super::Input;
use crate::config::{OpKind, Policy, Scenario};
use crate::policy::detector::{self, FailureDetection, Health, HealthCheck};
use crate::policy::eviction::{self, ClusterView};
use crate::policy::rebalancer::{self, NodeLoad, ShardLoad};
use crate::policy::retry::{self, Backoff, RetryDecision};
use crate::policy::routing::{self, BackendLoad, Placement, UploadPlanner};
use crate::policy::{coordinator_load, quorum, NodeId, Ticks};
use std::fmt::Write as _;

mod leader;
mod load;
pub(super) use leader::*;
pub(super) use load::*;

// ---------------------------------------------------------------------------------------------
// The environment.

/// The worst round trip between a coordinator and a storage node: a request and its reply
/// may each take the worst one-way latency of their link, degradations in the fault menu
/// included. Every coordinator and every node count, not only the initial replicas: a spare
/// becomes a replica when it replaces an evicted one.
struct RoundTrip {
    ticks: Ticks,
    /// "n2 (zone b)", the node of the worst round trip (the first, on ties).
    node: String,
    /// "the coordinator (zone a)", or "coordinator cb (zone b)" among several.
    coordinator: String,
    /// The fault-menu degradation that makes it the worst, as "a<->b 300ms..700ms".
    degradation: Option<String>,
}

/// "the coordinator (zone a)", or "coordinator cb (zone b)" when there are several.
fn coordinator_text(s: &Scenario, c: usize) -> String {
    let place = &s.coordinators[c];
    let zone = &s.zones[usize::from(place.zone)];
    if s.coordinators.len() == 1 {
        format!("the coordinator (zone {zone})")
    } else {
        format!("coordinator {} (zone {zone})", place.name)
    }
}

fn node_text(s: &Scenario, n: usize) -> String {
    let node = &s.nodes[n];
    format!("{} (zone {})", node.name, s.zones[usize::from(node.zone)])
}

/// Messages the fault budget lets the environment lose between zones `a` and `b`.
fn losses(s: &Scenario, a: u8, b: u8) -> u8 {
    if s.faults.drop && s.lossy[usize::from(a)][usize::from(b)] {
        s.faults.budget
    } else {
        0
    }
}

fn round_trip(s: &Scenario, c: usize, n: usize) -> RoundTrip {
    let (coordinator, zone) = (s.coordinators[c].zone, s.nodes[n].zone);
    let one_way = s.worst_latency_ticks(zone, coordinator);
    let normal = s.latency[usize::from(zone)][usize::from(coordinator)].hi;
    let degradation = (one_way > normal)
        .then(|| {
            s.faults.degrade.iter().find(|d| {
                (d.zones == (zone, coordinator) || d.zones == (coordinator, zone)) && d.latency.hi == one_way
            })
        })
        .flatten()
        .map(|d| {
            let zone = |z: u8| s.zones[usize::from(z)].as_str();
            format!("{}<->{} {}", zone(d.zones.0), zone(d.zones.1), d.text)
        });
    RoundTrip { ticks: 2 * one_way, node: node_text(s, n), coordinator: coordinator_text(s, c), degradation }
}

/// Every (coordinator, node) pair, coordinators first.
fn pairs(s: &Scenario) -> impl Iterator<Item = (usize, usize)> + '_ {
    (0..s.coordinators.len()).flat_map(move |c| (0..s.nodes.len()).map(move |n| (c, n)))
}

fn worst_round_trip(s: &Scenario) -> RoundTrip {
    let mut worst: Option<RoundTrip> = None;
    for (c, n) in pairs(s) {
        let rtt = round_trip(s, c, n);
        if worst.as_ref().is_none_or(|w| rtt.ticks > w.ticks) {
            worst = Some(rtt);
        }
    }
    worst.expect("a validated scenario has a coordinator and a node")
}

/// The first coordinator-node link on which the fault menu may lose a message, described.
fn lossy_link(s: &Scenario) -> Option<String> {
    pairs(s).find(|&(c, n)| losses(s, s.coordinators[c].zone, s.nodes[n].zone) > 0).map(|(c, n)| {
        format!(
            "the link between {} and {} may lose a message (faults.drop)",
            coordinator_text(s, c),
            node_text(s, n)
        )
    })
}

impl RoundTrip {
    fn describe(&self, input: &Input) -> String {
        let mut out = format!(
            "the worst round trip, {}, between {} and {}",
            input.dur(self.ticks),
            self.coordinator,
            self.node
        );
        if let Some(d) = &self.degradation {
            let _ = write!(out, " under the fault menu's degradation {d}");
        }
        out
    }
}

/// Evictions can happen at all: the switch is on. (A breaker at 0 also stops every eviction,
/// but a policy written that way is a disabled eviction in disguise; the rules take it at its
/// word.)
fn evicts(p: &Policy) -> bool {
    p.eviction.enabled
}

/// A node declared dead costs something: the quorum family evicts it (when eviction is on),
/// the leader family fails it over when it is a primary (the leader family evicts nobody).
fn acts_on_death(p: &Policy) -> bool {
    p.leader.is_some() || evicts(p)
}

/// What follows a healthy node's wrongful death, in the family's terms.
fn death_consequence(p: &Policy) -> &'static str {
    match p.leader {
        Some(_) => "declared dead, and a primary declared dead is failed over while it is alive",
        None => "declared dead and evicted",
    }
}

/// A failed attempt is retried at all: `max_attempts` above 1 and a budget above 0.
fn retries(p: &Policy) -> bool {
    matches!(retry::after_failure(&p.retry, 1, 0), RetryDecision::RetryAfter { .. })
}

fn max_attempts_text(p: &Policy) -> String {
    p.retry.max_attempts.map_or_else(|| "\"unlimited\"".to_string(), |n| n.to_string())
}

// ---------------------------------------------------------------------------------------------
// The rules.

pub(super) fn write_quorum_minority(i: &Input) -> Vec<String> {
    let p = i.policy;
    // Two write quorums intersect exactly when W + W > RF.
    if quorum::quorums_intersect(p.replication_factor, p.write_quorum, p.write_quorum) {
        return vec![];
    }
    vec![format!(
        "write_quorum = {} is at most half of replication_factor = {}: two write quorums need not share a replica, and {} replica(s) failing can take every copy of an acknowledged write",
        p.write_quorum, p.replication_factor, p.write_quorum
    )]
}

pub(super) fn read_write_quorums_disjoint(i: &Input) -> Vec<String> {
    let p = i.policy;
    if quorum::quorums_intersect(p.replication_factor, p.write_quorum, p.read_quorum) {
        return vec![];
    }
    vec![format!(
        "write_quorum + read_quorum = {} + {} is not above replication_factor = {}: a read quorum can miss every replica that acknowledged the latest write",
        p.write_quorum, p.read_quorum, p.replication_factor
    )]
}

pub(super) fn ack_deadline_within_round_trip(i: &Input) -> Vec<String> {
    let (p, Some(s)) = (i.policy, i.scenario) else { return vec![] };
    // Only a detector that takes a missed deadline as death turns slowness into eviction (or,
    // for a primary, into a failover).
    if detector::health_after_deadline_miss(p.failure_detection) != Some(Health::Dead) || !acts_on_death(p) {
        return vec![];
    }
    let rtt = worst_round_trip(s);
    // A reply arriving on the tick the deadline fires may be handled after it: equal is too short.
    if p.replica_ack_timeout_ticks <= rtt.ticks {
        return vec![format!(
            "replica_ack_timeout = {} is not above {}, and failure detection is coupled: a replica that is slow but up misses the deadline and is {}",
            i.dur(p.replica_ack_timeout_ticks),
            rtt.describe(i),
            death_consequence(p)
        )];
    }
    // A lost request or ack misses every deadline, however long.
    match lossy_link(s) {
        Some(link) => vec![format!(
            "failure detection is coupled and {link}: a lost request or ack misses the deadline whatever replica_ack_timeout is ({}), and the replica, up and reachable, is {}",
            i.dur(p.replica_ack_timeout_ticks),
            death_consequence(p)
        )],
        None => vec![],
    }
}

pub(super) fn detection_within_request_deadline(i: &Input) -> Vec<String> {
    let p = i.policy;
    if p.failure_detection != FailureDetection::Independent || !acts_on_death(p) {
        return vec![];
    }
    // What the detector concludes about a node silent for one request deadline; each
    // threshold that deadline reaches is a finding.
    let deadline = p.replica_ack_timeout_ticks;
    let health = detector::health_from_silence(deadline, p.suspect_after_ticks, p.dead_after_ticks);
    let mut out = Vec::new();
    if health == Health::Dead {
        out.push(format!(
            "dead_after = {} is not above replica_ack_timeout = {}: a replica silent for one request deadline is already dead, so detection is as aggressive as the deadline it was meant to be separate from",
            i.dur(p.dead_after_ticks),
            i.dur(deadline)
        ));
    }
    if health >= Health::Suspect {
        out.push(format!(
            "suspect_after = {} is not above replica_ack_timeout = {}: a replica silent for one request deadline is already suspect",
            i.dur(p.suspect_after_ticks),
            i.dur(deadline)
        ));
    }
    out
}

/// A bound on how long a healthy, reachable node can stay silent under independent detection:
/// the next ping goes out up to one heartbeat interval after the node was last heard from (the
/// coordinator's start counts as hearing from everyone, and its first round is one interval
/// later), and its pong may take a worst round trip; each message the fault menu may lose on
/// the way (a ping or a pong) costs one more interval. How much of it the detector sees is
/// `detector::longest_silence_seen`.
struct Silence {
    /// The longest silence the detector sees.
    ticks: Ticks,
    /// The longest silence there is (`ticks` when judged continuously).
    gap_ticks: Ticks,
    rtt: RoundTrip,
    lost: u8,
}

fn worst_silence(i: &Input) -> Option<Silence> {
    let (p, Some(s)) = (i.policy, i.scenario) else { return None };
    if p.failure_detection != FailureDetection::Independent || !acts_on_death(p) {
        return None;
    }
    let mut worst: Option<Silence> = None;
    for (c, n) in pairs(s) {
        let rtt = round_trip(s, c, n);
        let lost = losses(s, s.coordinators[c].zone, s.nodes[n].zone);
        // A degradation uses a fault of the budget too: the slow link with one loss fewer, or
        // the normal link with every loss, whichever is longer.
        let normal = s.latency[usize::from(s.nodes[n].zone)][usize::from(s.coordinators[c].zone)].hi;
        let options = [
            (rtt.ticks, if rtt.degradation.is_some() { lost.saturating_sub(1) } else { lost }),
            (2 * normal, lost),
        ];
        for (rtt_ticks, lost) in options {
            let gap_ticks = p.heartbeat_interval_ticks * (1 + Ticks::from(lost)) + rtt_ticks;
            let ticks = detector::longest_silence_seen(p.health_check, gap_ticks, p.heartbeat_interval_ticks);
            if worst.as_ref().is_none_or(|w| ticks > w.ticks) {
                let rtt = if rtt_ticks == rtt.ticks {
                    round_trip(s, c, n)
                } else {
                    RoundTrip { ticks: rtt_ticks, degradation: None, ..round_trip(s, c, n) }
                };
                worst = Some(Silence { ticks, gap_ticks, rtt, lost });
            }
        }
    }
    worst
}

fn silence_message(i: &Input, key: &str, threshold: Ticks, silence: &Silence, then: &str) -> String {
    let heartbeat = i.dur(i.policy.heartbeat_interval_ticks);
    let gap = match silence.lost {
        0 => format!("heartbeat_interval + worst round trip = {heartbeat} + {}", i.dur(silence.rtt.ticks)),
        lost => format!(
            "heartbeat_interval x (1 + {lost} lost message(s)) + worst round trip = {heartbeat} x {} + {}",
            1 + u16::from(lost),
            i.dur(silence.rtt.ticks)
        ),
    };
    let seen = match i.policy.health_check {
        HealthCheck::Continuous => String::new(),
        HealthCheck::Rounds => format!(
            "; judged at heartbeat rounds (health_check = \"rounds\"), the longest silence a round sees is {}",
            i.dur(silence.ticks)
        ),
    };
    format!(
        "{key} = {} is not above {gap} = {} ({}){seen}: a healthy replica may be silent that long, and would then be {then}",
        i.dur(threshold),
        i.dur(silence.gap_ticks),
        silence.rtt.describe(i)
    )
}

pub(super) fn dead_after_within_heartbeat_round_trip(i: &Input) -> Vec<String> {
    let Some(silence) = worst_silence(i) else { return vec![] };
    let p = i.policy;
    if detector::health_from_silence(silence.ticks, p.suspect_after_ticks, p.dead_after_ticks) != Health::Dead
    {
        return vec![];
    }
    vec![silence_message(i, "dead_after", p.dead_after_ticks, &silence, death_consequence(p))]
}

pub(super) fn suspect_after_within_heartbeat_round_trip(i: &Input) -> Vec<String> {
    let Some(silence) = worst_silence(i) else { return vec![] };
    let p = i.policy;
    if detector::health_from_silence(silence.ticks, p.suspect_after_ticks, p.dead_after_ticks)
        < Health::Suspect
    {
        return vec![];
    }
    vec![silence_message(i, "suspect_after", p.suspect_after_ticks, &silence, "suspect")]
}

pub(super) fn eviction_without_circuit_breaker(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !evicts(p) {
        return vec![];
    }
    // Does the breaker let an eviction through even when every node looks dead?
    let nodes = i.scenario.map_or(1, |s| s.nodes.len());
    let everyone_dead = ClusterView {
        dead_nodes: nodes,
        total_nodes: nodes,
        evictions_in_progress: 0,
        coordinator_load_work: 0,
        busiest_source_recoveries: 0,
    };
    if !eviction::breaker_allows(everyone_dead, p.eviction.max_dead_fraction_permille) {
        return vec![];
    }
    vec![format!(
        "eviction_enabled = true with max_dead_fraction = {:?}: the correlated-eviction circuit breaker never trips, so a network event that makes many replicas look dead evicts them all",
        f64::from(p.eviction.max_dead_fraction_permille) / 1000.0
    )]
}

pub(super) fn retries_without_jitter(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !retries(p) {
        return vec![];
    }
    // Every retry window the policy can produce, one per attempt that may be retried.
    let windows: Vec<(Ticks, Ticks)> = (1..retry::attempts_tracked(&p.retry).max(2))
        .filter_map(|attempt| match retry::after_failure(&p.retry, attempt, 0) {
            RetryDecision::RetryAfter { earliest_ticks, latest_ticks } => {
                Some((earliest_ticks, latest_ticks))
            }
            RetryDecision::GiveUp => None,
        })
        .collect();
    if windows.iter().any(|(earliest, latest)| earliest < latest) {
        return vec![];
    }
    let base = i.dur(p.retry.backoff_base_ticks);
    let why = match p.retry.backoff {
        Backoff::Fixed => format!("backoff = \"fixed\": every retry waits exactly {base}"),
        Backoff::ExponentialJitter if p.retry.backoff_base_ticks == p.retry.backoff_max_ticks => format!(
            "backoff = \"exponential_jitter\" with backoff_base = backoff_max = {base}: every retry waits exactly {base}"
        ),
        // A zero base doubles to zero: every window is [0, 0].
        Backoff::ExponentialJitter => {
            format!("backoff = \"exponential_jitter\" with backoff_base = {base}: every retry waits exactly {base}")
        }
    };
    vec![format!("{why}; clients that failed together retry together")]
}

pub(super) fn retries_without_budget(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !retries(p) || p.retry.retry_budget.is_some() {
        return vec![];
    }
    vec![format!(
        "max_attempts = {} with no retry_budget: every failed attempt may be retried, however many are failing, so retries multiply the load on whatever is already overloaded",
        max_attempts_text(p)
    )]
}

pub(super) fn retries_without_idempotency(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !retries(p) {
        return vec![];
    }
    // A retry of a write the coordinator already sequenced (as version 1, next is 2): is it
    // the same write, or a new one?
    if retry::version_for_attempt(p.retry.idempotency_tokens, Some(1), 2) == 1 {
        return vec![];
    }
    vec![format!(
        "max_attempts = {} with idempotency_tokens = false: a retried write whose first attempt was applied but whose response was lost is applied again",
        max_attempts_text(p)
    )]
}

pub(super) fn rebalancer_blind_to_compaction(i: &Input) -> Vec<String> {
    let Some(r) = &i.policy.rebalance else { return vec![] };
    // Ask the scoring: a node over the watermark must shed a hot shard, and the two targets
    // differ only in that the emptier disk has a deep compaction backlog. A scoring that
    // picks it cannot see compaction debt.
    let node = |node, disk_pct, compaction_debt_pct| NodeLoad {
        node,
        disk_pct,
        compaction_debt_pct,
        slow: false,
        room: true,
    };
    let nodes =
        [node(0, u16::from(r.policy.disk_high_watermark_pct) + 1, 0), node(1, 10, 100), node(2, 20, 0)];
    let hot = ShardLoad { shard: 0, holders: vec![0], size_pct: 1, hot: true, resting: false };
    match rebalancer::choose_move(&nodes, &[hot], &r.policy) {
        Some(m) if m.to == 1 => vec![format!(
            "rebalance_enabled = true with scoring = \"disk\": a target is chosen by disk use alone, so a node with room on disk and a deep compaction backlog receives the hot shard, falls behind, and sends it back"
        )],
        _ => vec![],
    }
}

pub(super) fn rebalancer_cooldown(i: &Input) -> Vec<String> {
    let Some(r) = &i.policy.rebalance else { return vec![] };
    let next = |previous| {
        rebalancer::next_cooldown_ticks(
            previous,
            r.move_cooldown_ticks,
            r.cooldown_backoff,
            r.cooldown_max_ticks,
        )
    };
    let first = next(0);
    if first == 0 {
        return vec![format!(
            "move_cooldown = {}: a shard that just moved may move again at the next rebalance, every {}",
            i.dur(r.move_cooldown_ticks),
            i.dur(r.interval_ticks)
        )];
    }
    if r.cooldown_backoff > 1 && next(first) == first {
        return vec![format!(
            "cooldown_backoff = {} with cooldown_max = {} not above move_cooldown = {}: the cooldown never grows, a shard may move every {}",
            r.cooldown_backoff,
            i.dur(r.cooldown_max_ticks),
            i.dur(r.move_cooldown_ticks),
            i.dur(first)
        )];
    }
    vec![]
}

/// Two nearly full small backends first in preference order and a large idle one last.
fn probe_backends() -> [BackendLoad; 3] {
    let b =
        |node, cap, load| BackendLoad { node, up: true, capacity_per_tick: Some(cap), load_per_tick: load };
    [b(0, 2, 2), b(1, 1, 1), b(2, 100, 0)]
}

pub(super) fn sorted_placement(i: &Input) -> Vec<String> {
    let r = &i.policy.routing;
    let aware = routing::RoutingPolicy { upload_planner: UploadPlanner::CapacityAware, ..*r };
    let backends = probe_backends();
    match routing::choose_backend(&aware, &backends) {
        Some(n)
            if !routing::admits(
                backends[usize::from(n)].load_per_tick,
                backends[usize::from(n)].capacity_per_tick,
            ) =>
        {
            debug_assert_eq!(r.placement, Placement::Sorted);
            vec!["placement = \"sorted\": writes go to the first backend up in preference order with no capacity check, so a full backend that sorts first takes all the traffic".to_string()]
        }
        _ => vec![],
    }
}

pub(super) fn upload_planner_bypass(i: &Input) -> Vec<String> {
    let r = &i.policy.routing;
    let backends = probe_backends();
    match routing::choose_backend(r, &backends) {
        Some(n)
            if r.upload_planner != UploadPlanner::CapacityAware
                && !routing::admits(
                    backends[usize::from(n)].load_per_tick,
                    backends[usize::from(n)].capacity_per_tick,
                ) =>
        {
            vec![format!(
                "upload_planner = \"smallest_first\": uploads are packed onto the smallest backends whatever placement = \"{}\" says, with no capacity check",
                match r.placement {
                    Placement::CapacityAware => "capacity_aware",
                    Placement::Sorted => "sorted",
                }
            )]
        }
        _ => vec![],
    }
}

pub(super) fn hot_prefix_over_partition_capacity(i: &Input) -> Vec<String> {
    let Some(scenario) = i.scenario else { return vec![] };
    let Some(world) = i.world else { return vec![] };
    let Some(cap) = world.partition_capacity_per_tick else { return vec![] };
    let partition_count = scenario.shards.len() as u8;
    let mut out = Vec::new();
    for (p, &background) in world.partition_background.iter().enumerate() {
        if background < cap {
            // Room for the burst's share; the clients whose keys may land here can still fill
            // it in one tick (each has one write in flight at most): suffixes spread keys, they
            // do not keep two customers' keys apart.
            let writers: Vec<&str> = world
                .clients
                .iter()
                .zip(&world.client_partitions)
                .filter(|(c, parts)| {
                    c.ops.contains(&crate::config::OpKind::Write) && parts.contains(&(p as u8))
                })
                .map(|(c, _)| c.name.as_str())
                .collect();
            let offered = background + writers.len() as u16;
            if writers.len() > 1 && offered > cap {
                out.push(format!(
                    "partition {} gets {background} background write(s) per tick with write_shard_suffixes = {}, and {} may each write to it in the same tick (their keys can land on it): {offered} for a capacity of {cap}",
                    scenario.shards[p].name,
                    i.policy.routing.write_shard_suffixes,
                    writers.join(", ")
                ));
            }
            continue;
        }
        // The fewest suffixes that leave every partition room for one more write.
        let enough = (1..=routing::WRITE_SHARD_SUFFIXES_MAX.min(partition_count)).find(|&n| {
            let mut load = vec![0u16; scenario.shards.len()];
            for (prefix, shard) in scenario.shards.iter().enumerate() {
                for suffix in 0..n {
                    load[usize::from(routing::partition_for(prefix as u8, suffix, partition_count))] +=
                        routing::suffix_share(shard.burst_writes_per_tick, n, suffix);
                }
            }
            load.iter().all(|&l| l < cap)
        });
        let advice = match enough {
            Some(n) => format!("write_shard_suffixes = {n} would spread it"),
            None => format!("no suffix count up to the table's {partition_count} partitions spreads it"),
        };
        out.push(format!(
            "partition {} gets {background} background writes per tick with write_shard_suffixes = {}, and takes at most {cap} (per-partition cap, and its share of the table): every further write on it is over capacity and throttled; {advice}",
            scenario.shards[p].name, i.policy.routing.write_shard_suffixes
        ));
    }
    out
}

pub(super) fn reads_without_repair(i: &Input) -> Vec<String> {
    let p = i.policy;
    if p.read_repair || p.read_quorum >= p.replication_factor {
        return vec![];
    }
    vec![format!(
        "read_repair = false with read_quorum = {} of replication_factor = {}: a read can return a value that only some replicas hold, and a later read whose quorum misses them returns the older one",
        p.read_quorum, p.replication_factor
    )]
}

pub(super) fn membership_in_memory(i: &Input) -> Vec<String> {
    let p = i.policy;
    if p.durable_membership {
        return vec![];
    }
    let changes = match (evicts(p), p.rebalance.is_some()) {
        (false, false) => return vec![],
        (true, false) => "eviction",
        (false, true) => "rebalancing",
        (true, true) => "eviction and rebalancing",
    };
    vec![format!(
        "durable_membership = false with {changes} enabled: replica sets changed since the coordinator started live in memory only, so a restarted coordinator reads and writes the configured ones again"
    )]
}

/// The nodes, as the rebalancer sees them at the start: what each holds of the initial replica
/// sets, and its configured compaction debt.
fn initial_node_loads(w: &crate::model::WorldConfig) -> Vec<NodeLoad> {
    (0..w.nodes.len())
        .map(|n| {
            let held: Vec<(u8, bool)> = (0..w.shards.len())
                .filter(|&k| w.initial_members[k].contains(&(n as crate::policy::NodeId)))
                .map(|k| (w.shards[k].size_pct, w.shards[k].hot))
                .collect();
            let spec = &w.nodes[n];
            rebalancer::node_load(
                n as crate::policy::NodeId,
                spec.disk_used_pct,
                &held,
                spec.compaction_debt_pct,
                w.slow_compaction_debt_pct,
                true,
            )
        })
        .collect()
}

pub(super) fn dead_replica_never_replaced(i: &Input) -> Vec<String> {
    let p = i.policy;
    // In a model, only where a replica can die and be replaced at all: a replica in the crash
    // menu and a node outside its replica set to take its place.
    if let Some(w) = i.world {
        let replaceable = w.initial_members.iter().any(|members| {
            members.iter().any(|m| w.faults.crash.contains(m)) && members.len() < w.nodes.len()
        });
        if !replaceable {
            return vec![];
        }
    }
    if !evicts(p) {
        return vec!["eviction_enabled = false: a replica that crashed for good stays in its replica set, which runs one failure short of its replication factor for ever".into()];
    }
    if p.eviction.max_concurrent_evictions == 0 {
        return vec!["max_concurrent_evictions = 0: no eviction is ever allowed, so a replica that crashed for good is never replaced".into()];
    }
    if p.eviction.max_recoveries_per_node == Some(0) {
        return vec!["max_recoveries_per_node = 0: no node may send or receive a catch-up copy, so every eviction waits (recovery_limit) and a replica that crashed for good is never replaced".into()];
    }
    if let Some(w) = i.world {
        if let Some(why) = no_replacement_in_the_model(i, w) {
            return vec![why];
        }
    }
    // Does the breaker let the eviction of one dead node through?
    let nodes = i.scenario.map_or(3, |s| s.nodes.len());
    let one_dead = ClusterView {
        dead_nodes: 1,
        total_nodes: nodes,
        evictions_in_progress: 0,
        coordinator_load_work: 0,
        busiest_source_recoveries: 0,
    };
    if !eviction::breaker_allows(one_dead, p.eviction.max_dead_fraction_permille) {
        return vec![format!(
            "max_dead_fraction = {} is below one dead node in {nodes}: the circuit breaker stops the eviction of a single crashed replica, which is never replaced",
            f64::from(p.eviction.max_dead_fraction_permille) / 1000.0
        )];
    }
    // Coupled detection finds a node dead only when a request to it misses its deadline.
    if detector::health_after_deadline_miss(p.failure_detection) != Some(Health::Dead)
        || p.failure_detection == FailureDetection::Independent
    {
        return vec![];
    }
    let idle = match i.scenario {
        None => Some("a shard whose traffic stops".to_string()),
        Some(s) => (0..s.shards.len())
            .find(|&k| {
                !s.clients.iter().any(|c| {
                    usize::from(c.shard) == k && c.repeat && c.ops.contains(&crate::config::OpKind::Write)
                })
            })
            .map(|k| format!("shard {} (no client writes it for ever)", s.shards[k].name)),
    };
    match idle {
        Some(idle) => vec![format!(
            "failure_detection = \"coupled\": a replica is found dead only when a request to it misses its deadline, so a replica of {idle} that crashes after the last request is never declared dead nor replaced"
        )],
        None => vec![],
    }
}

/// Why a model never lets a crashed replica be replaced, in its own terms: no node outside a
/// crashable replica's set has a replica slot free, or every join is abandoned
/// (`join_timeout`) before the copies it needs can land.
fn no_replacement_in_the_model(i: &Input, w: &crate::model::WorldConfig) -> Option<String> {
    let held = |n: NodeId| w.initial_members.iter().filter(|m| m.contains(&n)).count();
    let has_room =
        |n: NodeId| w.nodes[usize::from(n)].replica_slots.is_none_or(|slots| held(n) < usize::from(slots));
    let node_count = w.nodes.len() as NodeId;
    // Each (shard, crashable member): the nodes that could take its place.
    let mut fastest_join: Option<(Ticks, String)> = None;
    let mut any_target = false;
    for (k, members) in w.initial_members.iter().enumerate() {
        for &dead in members.iter().filter(|m| w.faults.crash.contains(m)) {
            let targets: Vec<NodeId> =
                (0..node_count).filter(|t| !members.contains(t) && has_room(*t)).collect();
            any_target |= !targets.is_empty();
            let sources: Vec<NodeId> = members.iter().copied().filter(|&m| m != dead).collect();
            if sources.is_empty() {
                continue;
            }
            let needed = usize::from(quorum::copies_needed(i.policy.read_quorum, sources.len()));
            for &t in &targets {
                let mut copies: Vec<(Ticks, NodeId)> =
                    sources.iter().map(|&s| (copy_ticks(w, s, t), s)).collect();
                copies.sort();
                let (ticks, source) = copies[needed - 1];
                if fastest_join.as_ref().is_none_or(|(best, _)| ticks < *best) {
                    let name = |n: NodeId| w.nodes[usize::from(n)].name.clone();
                    let path = format!(
                        "shard {}: the coordinator asks {} to copy to {}, which acks ({needed} of {} copies needed)",
                        w.shard_names[k],
                        name(source),
                        name(t),
                        sources.len()
                    );
                    fastest_join = Some((ticks, path));
                }
            }
        }
    }
    let replaceable = w.initial_members.iter().any(|m| m.iter().any(|n| w.faults.crash.contains(n)));
    if replaceable && !any_target {
        return Some("no node outside a crashable replica's set has a replica slot free (replica_slots): a replica that crashed for good has nowhere to go and is never replaced".into());
    }
    let (timeout, (fastest, path)) = (i.policy.recovery.join_timeout_ticks?, fastest_join?);
    // A copy ack due in the very tick the timeout fires may come second: equal is not enough.
    (timeout <= fastest).then(|| {
        format!(
            "join_timeout = {} is not above the fastest join of the model, {} ({path}, at the lowest latencies): every join is abandoned before its copies land, and a replica that crashed for good is never replaced",
            i.dur(timeout),
            i.dur(fastest)
        )
    })
}

/// The fastest copy from `source` to `target`: the membership leader's request to the source,
/// the data to the target and the target's ack back, each at its link's lowest latency.
fn copy_ticks(w: &crate::model::WorldConfig, source: NodeId, target: NodeId) -> Ticks {
    let c = usize::from(w.coordinators[0].zone);
    let zone = |n: NodeId| usize::from(w.nodes[usize::from(n)].zone);
    w.latency[c][zone(source)].lo + w.latency[zone(source)][zone(target)].lo + w.latency[zone(target)][c].lo
}
