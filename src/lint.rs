//! `replicheck lint`: static rules over a resolved policy, run before any exploration.
//!
//! Each rule is a pure function of the resolved [`Policy`] and, for the rules that compare
//! timeouts with the network, the [`Scenario`] (its links, fault menu and coordinator). The
//! rules ask `src/policy` the questions they can (do two quorums intersect? what health does a
//! silence imply? does the breaker ever trip? what does a retry wait?), so lint and the model
//! read the same policy semantics.
//!
//! What lint cannot see: anything that depends on the interleaving of events (that is what
//! `check` is for). Its rules are sufficient conditions for trouble, or cheap bounds: a policy
//! with no finding can still fail a model check, and the round-trip bounds are worst cases
//! over every node, whether or not the workload ever sends it a request.

use crate::config::duration::format_ms;
use crate::config::{self, ConfigError, Policy, Scenario, SourcedPolicy};
use crate::model::WorldConfig;
use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, ClusterView};
use crate::policy::rebalancer::{self, NodeLoad, ShardLoad};
use crate::policy::retry::{self, Backoff, RetryDecision};
use crate::policy::routing::{self, BackendLoad, Placement, UploadPlanner};
use crate::policy::{quorum, Ticks};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// What a rule sees: the policy, the tick its durations are counted in, and the environment
/// when a model was given.
pub struct Input<'a> {
    pub policy: &'a Policy,
    pub tick_ms: u64,
    pub scenario: Option<&'a Scenario>,
    /// The scenario resolved under this policy (partition loads and capacities per tick).
    pub world: Option<&'a WorldConfig>,
}

impl Input<'_> {
    fn dur(&self, ticks: Ticks) -> String {
        format_ms(u64::from(ticks) * self.tick_ms)
    }
}

/// A static rule. `check` returns one message per problem it finds (possibly several).
pub struct Rule {
    pub id: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// What the rule flags, in a few words (the README's table).
    pub what: &'static str,
    /// The properties a violation endangers.
    pub protects: &'static [&'static str],
    /// The incident or well-known failure the rule comes from.
    pub origin: &'static str,
    /// One paragraph: why the configuration is dangerous.
    pub explanation: &'static str,
    /// The rule compares the policy with the environment, so it runs only with a model.
    pub needs_model: bool,
    check: fn(&Input) -> Vec<String>,
}

/// One problem found by one rule.
pub struct Finding {
    pub rule: &'static Rule,
    pub message: String,
}

impl Finding {
    /// `error[RC003] ack-deadline-within-round-trip: message`
    pub fn one_line(&self) -> String {
        format!("{}[{}] {}: {}", self.rule.severity.as_str(), self.rule.id, self.rule.name, self.message)
    }
}

/// Every finding of every rule, and the rules that could not run.
pub struct Report {
    pub findings: Vec<Finding>,
    /// Rules that need a model and were given none.
    pub not_run: Vec<&'static Rule>,
}

impl Report {
    pub fn errors(&self) -> usize {
        self.findings.iter().filter(|f| f.rule.severity == Severity::Error).count()
    }

    pub fn warnings(&self) -> usize {
        self.findings.iter().filter(|f| f.rule.severity == Severity::Warning).count()
    }

    /// 1 if any finding is an error, 0 with warnings only (2, bad input, never gets here).
    pub fn exit_code(&self) -> u8 {
        if self.errors() > 0 {
            1
        } else {
            0
        }
    }
}

/// Run every rule. Rules that need a model are listed in `not_run` when there is none.
pub fn lint(input: &Input) -> Report {
    let mut report = Report { findings: Vec::new(), not_run: Vec::new() };
    for rule in RULES {
        if rule.needs_model && input.scenario.is_none() {
            report.not_run.push(rule);
            continue;
        }
        for message in (rule.check)(input) {
            report.findings.push(Finding { rule, message });
        }
    }
    report
}

pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

// ---------------------------------------------------------------------------------------------
// The environment.

/// The worst round trip between the coordinator and a storage node: a request and its reply
/// may each take the worst one-way latency of their link, degradations in the fault menu
/// included. Every node counts, not only the initial replicas: a spare becomes a replica when
/// it replaces an evicted one.
struct RoundTrip {
    ticks: Ticks,
    /// "n2 (zone b)", the node of the worst round trip (the first, on ties).
    node: String,
    coordinator_zone: String,
    /// The fault-menu degradation that makes it the worst, as "a<->b 300ms..700ms".
    degradation: Option<String>,
}

fn worst_round_trip(s: &Scenario) -> RoundTrip {
    let coordinator = s.coordinator.zone;
    let mut worst: Option<RoundTrip> = None;
    for node in &s.nodes {
        let one_way = s.worst_latency_ticks(node.zone, coordinator);
        if worst.as_ref().is_some_and(|w| w.ticks >= 2 * one_way) {
            continue;
        }
        let normal = s.latency[usize::from(node.zone)][usize::from(coordinator)].hi;
        let degradation = (one_way > normal)
            .then(|| {
                s.faults.degrade.iter().find(|d| {
                    (d.zones == (node.zone, coordinator) || d.zones == (coordinator, node.zone))
                        && d.latency.hi == one_way
                })
            })
            .flatten()
            .map(|d| {
                let zone = |z: u8| s.zones[usize::from(z)].as_str();
                format!("{}<->{} {}", zone(d.zones.0), zone(d.zones.1), d.text)
            });
        worst = Some(RoundTrip {
            ticks: 2 * one_way,
            node: format!("{} (zone {})", node.name, s.zones[usize::from(node.zone)]),
            coordinator_zone: s.zones[usize::from(coordinator)].clone(),
            degradation,
        });
    }
    worst.expect("a validated scenario has at least one node")
}

impl RoundTrip {
    fn describe(&self, input: &Input) -> String {
        let mut out = format!(
            "the worst round trip, {}, between the coordinator (zone {}) and {}",
            input.dur(self.ticks),
            self.coordinator_zone,
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

/// A failed attempt is retried at all: `max_attempts` above 1 and a budget above 0.
fn retries(p: &Policy) -> bool {
    matches!(retry::after_failure(&p.retry, 1, 0), RetryDecision::RetryAfter { .. })
}

fn max_attempts_text(p: &Policy) -> String {
    p.retry.max_attempts.map_or_else(|| "\"unlimited\"".to_string(), |n| n.to_string())
}

// ---------------------------------------------------------------------------------------------
// The rules.

fn write_quorum_minority(i: &Input) -> Vec<String> {
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

fn read_write_quorums_disjoint(i: &Input) -> Vec<String> {
    let p = i.policy;
    if quorum::quorums_intersect(p.replication_factor, p.write_quorum, p.read_quorum) {
        return vec![];
    }
    vec![format!(
        "write_quorum + read_quorum = {} + {} is not above replication_factor = {}: a read quorum can miss every replica that acknowledged the latest write",
        p.write_quorum, p.read_quorum, p.replication_factor
    )]
}

fn ack_deadline_within_round_trip(i: &Input) -> Vec<String> {
    let (p, Some(s)) = (i.policy, i.scenario) else { return vec![] };
    // Only a detector that takes a missed deadline as death turns slowness into eviction.
    if detector::health_after_deadline_miss(p.failure_detection) != Some(Health::Dead) || !evicts(p) {
        return vec![];
    }
    let rtt = worst_round_trip(s);
    // A reply arriving on the tick the deadline fires may be handled after it: equal is too short.
    if p.replica_ack_timeout_ticks > rtt.ticks {
        return vec![];
    }
    vec![format!(
        "replica_ack_timeout = {} is not above {}, and failure detection is coupled: a replica that is slow but up misses the deadline, is declared dead and is evicted",
        i.dur(p.replica_ack_timeout_ticks),
        rtt.describe(i)
    )]
}

fn detection_within_request_deadline(i: &Input) -> Vec<String> {
    let p = i.policy;
    if p.failure_detection != FailureDetection::Independent || !evicts(p) {
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
/// the next ping goes out up to one heartbeat interval after the node was last heard from, and
/// its pong may take a worst round trip.
fn worst_silence(i: &Input) -> Option<(Ticks, RoundTrip)> {
    let (p, Some(s)) = (i.policy, i.scenario) else { return None };
    if p.failure_detection != FailureDetection::Independent || !evicts(p) {
        return None;
    }
    let rtt = worst_round_trip(s);
    Some((p.heartbeat_interval_ticks + rtt.ticks, rtt))
}

fn silence_message(
    i: &Input,
    key: &str,
    threshold: Ticks,
    silence: Ticks,
    rtt: &RoundTrip,
    then: &str,
) -> String {
    format!(
        "{key} = {} is not above heartbeat_interval + worst round trip = {} + {} = {} ({}): a healthy replica's normal silence makes it {then}",
        i.dur(threshold),
        i.dur(i.policy.heartbeat_interval_ticks),
        i.dur(rtt.ticks),
        i.dur(silence),
        rtt.describe(i)
    )
}

fn dead_after_within_heartbeat_round_trip(i: &Input) -> Vec<String> {
    let Some((silence, rtt)) = worst_silence(i) else { return vec![] };
    let p = i.policy;
    if detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks) != Health::Dead {
        return vec![];
    }
    vec![silence_message(i, "dead_after", p.dead_after_ticks, silence, &rtt, "dead, and it is evicted")]
}

fn suspect_after_within_heartbeat_round_trip(i: &Input) -> Vec<String> {
    let Some((silence, rtt)) = worst_silence(i) else { return vec![] };
    let p = i.policy;
    if detector::health_from_silence(silence, p.suspect_after_ticks, p.dead_after_ticks) < Health::Suspect {
        return vec![];
    }
    vec![silence_message(i, "suspect_after", p.suspect_after_ticks, silence, &rtt, "suspect")]
}

fn eviction_without_circuit_breaker(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !evicts(p) {
        return vec![];
    }
    // Does the breaker let an eviction through even when every node looks dead?
    let nodes = i.scenario.map_or(1, |s| s.nodes.len());
    let everyone_dead = ClusterView { dead_nodes: nodes, total_nodes: nodes, evictions_in_progress: 0 };
    if !eviction::breaker_allows(everyone_dead, p.eviction.max_dead_fraction_permille) {
        return vec![];
    }
    vec![format!(
        "eviction_enabled = true with max_dead_fraction = {:?}: the correlated-eviction circuit breaker never trips, so a network event that makes many replicas look dead evicts them all",
        f64::from(p.eviction.max_dead_fraction_permille) / 1000.0
    )]
}

fn retries_without_jitter(i: &Input) -> Vec<String> {
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

fn retries_without_budget(i: &Input) -> Vec<String> {
    let p = i.policy;
    if !retries(p) || p.retry.retry_budget.is_some() {
        return vec![];
    }
    vec![format!(
        "max_attempts = {} with no retry_budget: every failed attempt may be retried, however many are failing, so retries multiply the load on whatever is already overloaded",
        max_attempts_text(p)
    )]
}

fn retries_without_idempotency(i: &Input) -> Vec<String> {
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

fn rebalancer_blind_to_compaction(i: &Input) -> Vec<String> {
    let Some(r) = &i.policy.rebalance else { return vec![] };
    // Ask the scoring: a node over the watermark must shed a hot shard, and the two targets
    // differ only in that the emptier disk has a deep compaction backlog. A scoring that
    // picks it cannot see compaction debt.
    let node =
        |node, disk_pct, compaction_debt_pct| NodeLoad { node, disk_pct, compaction_debt_pct, slow: false };
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

fn rebalancer_cooldown(i: &Input) -> Vec<String> {
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

fn sorted_placement(i: &Input) -> Vec<String> {
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

fn upload_planner_bypass(i: &Input) -> Vec<String> {
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

fn hot_prefix_over_partition_capacity(i: &Input) -> Vec<String> {
    let Some(scenario) = i.scenario else { return vec![] };
    let Some(world) = i.world else { return vec![] };
    let Some(cap) = world.partition_capacity_per_tick else { return vec![] };
    let partition_count = scenario.shards.len() as u8;
    let mut out = Vec::new();
    for (p, &background) in world.partition_background.iter().enumerate() {
        if background < cap {
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

const ACK_TIMEOUT_INCIDENT: &str = "docs/incidents.md#ack-timeout-eviction-storm";
const REBALANCER_INCIDENT: &str = "docs/incidents.md#rebalancer-compaction-oscillation";
const ROUTING_INCIDENT: &str = "docs/incidents.md#capacity-routing-bypass";

pub static RULES: &[Rule] = &[
    Rule {
        id: "RC001",
        name: "write-quorum-minority",
        severity: Severity::Error,
        what: "write_quorum at most half of replication_factor",
        protects: &["acked_writes_persist"],
        origin: "minority write quorums (Dynamo-style W = 1, Cassandra consistency level ONE); models/basic-quorum.toml variant write-quorum-1",
        explanation: "A write is acknowledged once write_quorum replicas stored it. When write_quorum is at most half of replication_factor, two write quorums need not share a replica, so the two sides of a partition can both acknowledge writes, and the replicas holding an acknowledged write can all fail or be replaced while the rest of the replica set never saw it (with an odd replication factor, that is a minority of the replicas, a failure a quorum system is meant to survive). The acknowledged write is then gone from every read quorum: acked_writes_persist. This is the classic hazard of Dynamo-style minority write quorums; models/basic-quorum.toml's write-quorum-1 variant is a counterexample.",
        needs_model: false,
        check: write_quorum_minority,
    },
    Rule {
        id: "RC002",
        name: "read-write-quorums-disjoint",
        severity: Severity::Error,
        what: "write_quorum + read_quorum <= replication_factor",
        protects: &["linearizable", "acked_writes_persist"],
        origin: "Dynamo-style partial quorums (R + W <= N: eventual consistency only; Bailis et al., Probabilistically Bounded Staleness)",
        explanation: "A strong read asks read_quorum replicas and returns the newest version among their answers. Only when write_quorum + read_quorum exceeds replication_factor does every read quorum overlap every write quorum; otherwise a read that starts after a write was acknowledged can be answered entirely by replicas that have not stored it yet and return the older value, so the clients' history is not linearizable, and the acknowledged write is not visible to every read quorum (acked_writes_persist). This is the partial-quorum configuration of Dynamo-style stores (R + W <= N), which only promises eventual consistency.",
        needs_model: false,
        check: read_write_quorums_disjoint,
    },
    Rule {
        id: "RC003",
        name: "ack-deadline-within-round-trip",
        severity: Severity::Error,
        what: "coupled failure detection with replica_ack_timeout not above the worst coordinator-replica round trip (faults included)",
        protects: &["no_healthy_eviction", "churn_bounded"],
        origin: ACK_TIMEOUT_INCIDENT,
        explanation: "With failure_detection = \"coupled\", a replica that misses a request's ack deadline is declared dead and evicted. The deadline runs at the coordinator from sending the request to receiving the ack, so it covers a round trip; if it is not above the worst round trip between the coordinator and any node (twice the worst one-way latency of their link, the fault menu's degradations included), a replica that is merely slow, up and reachable is evicted, and each eviction costs a membership update and a copy. That is the ack-timeout eviction storm (docs/incidents.md#ack-timeout-eviction-storm): a 2s deadline cut to 500ms met 300-700ms cross-zone latency. It protects no_healthy_eviction, and churn_bounded downstream. Needs --model, for the links and the fault menu.",
        needs_model: true,
        check: ack_deadline_within_round_trip,
    },
    Rule {
        id: "RC004",
        name: "detection-within-request-deadline",
        severity: Severity::Warning,
        what: "independent failure detection with dead_after or suspect_after not above replica_ack_timeout",
        protects: &["no_healthy_eviction"],
        origin: ACK_TIMEOUT_INCIDENT,
        explanation: "Independent failure detection exists to separate \"slow\" from \"failed\": the request deadline (replica_ack_timeout) may be aggressive because missing it costs one retry, while the silence after which a node is suspect or dead (suspect_after, dead_after) decides about evictions and must be patient. A threshold that is not above the request deadline declares a node suspect or dead as soon as a single request would have timed out, which re-creates the coupling the postmortem of docs/incidents.md#ack-timeout-eviction-storm removed (its first action item: separate request acknowledgement deadlines from failure-detection thresholds). It protects no_healthy_eviction; RC005 checks the thresholds against the environment itself.",
        needs_model: false,
        check: detection_within_request_deadline,
    },
    Rule {
        id: "RC005",
        name: "dead-after-within-heartbeat-round-trip",
        severity: Severity::Error,
        what: "independent failure detection with dead_after not above heartbeat_interval + worst round trip",
        protects: &["no_healthy_eviction", "churn_bounded"],
        origin: "docs/incidents.md#ack-timeout-eviction-storm; heartbeat detectors with timeouts inside the normal heartbeat gap (why phi-accrual detectors adapt to observed round trips)",
        explanation: "Under independent detection the coordinator pings every node each heartbeat_interval and declares a node dead once it has been silent for dead_after. A healthy, reachable node can be silent for up to heartbeat_interval plus the worst round trip (the next ping goes out one interval later and its pong may take the slowest round trip the links and the fault menu allow), so a dead_after that is not above that bound evicts healthy nodes whenever the network is slow: the ack-timeout incident again (docs/incidents.md#ack-timeout-eviction-storm), by way of heartbeats. It protects no_healthy_eviction, and churn_bounded downstream. Needs --model, for the links and the fault menu.",
        needs_model: true,
        check: dead_after_within_heartbeat_round_trip,
    },
    Rule {
        id: "RC006",
        name: "suspect-after-within-heartbeat-round-trip",
        severity: Severity::Warning,
        what: "independent failure detection with suspect_after not above heartbeat_interval + worst round trip",
        protects: &["no_healthy_eviction"],
        origin: "docs/incidents.md#ack-timeout-eviction-storm",
        explanation: "As RC005, for suspect_after: a healthy node's normal silence (up to heartbeat_interval plus the worst round trip) makes it suspect. Nothing is evicted on suspicion alone, so this is a warning, but a detector whose suspicion fires on ordinary latency carries no information, and anything built on suspicion (routing around suspects, hedged requests, an operator's dashboard) reacts to slowness as to failure, the confusion at the root of docs/incidents.md#ack-timeout-eviction-storm. It protects no_healthy_eviction. Needs --model.",
        needs_model: true,
        check: suspect_after_within_heartbeat_round_trip,
    },
    Rule {
        id: "RC007",
        name: "eviction-without-circuit-breaker",
        severity: Severity::Warning,
        what: "eviction_enabled with max_dead_fraction = 1.0 (no circuit breaker)",
        protects: &["churn_bounded", "no_healthy_eviction"],
        origin: ACK_TIMEOUT_INCIDENT,
        explanation: "Many nodes looking dead at once is more likely a network event (a degraded link, a partition) than independent failures, and evicting them all at once floods the coordinator with membership updates and the network with copies, the feedback loop that turned a link degradation into a multi-region outage in docs/incidents.md#ack-timeout-eviction-storm. max_dead_fraction is the correlated-eviction circuit breaker the postmortem asked for: while more than that share of the nodes looks dead, nothing is evicted. At 1.0 it never trips. It protects churn_bounded (and limits the damage of any false death, no_healthy_eviction).",
        needs_model: false,
        check: eviction_without_circuit_breaker,
    },
    Rule {
        id: "RC008",
        name: "retries-without-jitter",
        severity: Severity::Warning,
        what: "retries whose every wait is fixed (backoff = \"fixed\", or a jitter window that is a single point)",
        protects: &["ops_complete", "capacity_respected"],
        origin: "docs/incidents.md#hot-partition-retry-storm and docs/incidents.md#ack-timeout-eviction-storm (fixed-interval retries); the thundering herd that exponential backoff with jitter prevents",
        explanation: "Clients that fail together (a throttled partition, a timed-out quorum) and wait a fixed time retry together, so every retry wave arrives as synchronised as the failure that caused it and meets the same overload: a retry storm. Jitter spreads the retries over a window; the rule asks the retry policy for every retry's window and fires when none has any width (backoff = \"fixed\", or exponential_jitter with backoff_base = backoff_max, or with a single retry, whose window is [backoff_base, backoff_base]). The hot-partition incident (docs/incidents.md#hot-partition-retry-storm) was four layers of such retries compounding, and in docs/incidents.md#ack-timeout-eviction-storm fixed-interval clients added load during recovery. It protects ops_complete and capacity_respected.",
        needs_model: false,
        check: retries_without_jitter,
    },
    Rule {
        id: "RC009",
        name: "retries-without-budget",
        severity: Severity::Warning,
        what: "retries with no retry_budget",
        protects: &["ops_complete", "capacity_respected"],
        origin: "docs/incidents.md#hot-partition-retry-storm; retry budgets (Google SRE book, Handling Overload)",
        explanation: "Without a retry_budget a client retries every failed attempt up to max_attempts, however many are failing: when the cause is overload (a hot partition at its write capacity, a saturated coordinator), retries multiply the offered load by up to max_attempts exactly when there is no capacity for it, and the work never completes. A budget caps the retries a client spends over all its operations, so a persistent failure degrades into errors instead of a storm. The hot-partition incident (docs/incidents.md#hot-partition-retry-storm) is the example; its fix added a budget. It protects ops_complete and capacity_respected.",
        needs_model: false,
        check: retries_without_budget,
    },
    Rule {
        id: "RC010",
        name: "retries-without-idempotency-tokens",
        severity: Severity::Warning,
        what: "retries (max_attempts > 1) without idempotency_tokens",
        protects: &["no_duplicate_effects"],
        origin: ACK_TIMEOUT_INCIDENT,
        explanation: "A client that times out cannot tell a write that failed from a write that was applied and whose response was lost; if it retries, the coordinator sequences the retry as a new write and the effect is applied twice. Idempotency tokens let the coordinator recognise the retry and reuse the first attempt's version. In docs/incidents.md#ack-timeout-eviction-storm clients without tokens created duplicate application-level transactions. It protects no_duplicate_effects.",
        needs_model: false,
        check: retries_without_idempotency,
    },
    Rule {
        id: "RC011",
        name: "rebalancer-blind-to-compaction",
        severity: Severity::Warning,
        what: "rebalance_enabled with scoring = \"disk\" (targets chosen by disk use alone)",
        protects: &["converges", "churn_bounded"],
        origin: REBALANCER_INCIDENT,
        explanation: "A rebalancer that scores targets by disk use alone cannot see compaction debt: a node with free disk and a deep compaction backlog looks like the best target, receives a hot shard, falls behind under its write amplification, looks overloaded, and sheds the shard back to where it came from. That is the oscillation of docs/incidents.md#rebalancer-compaction-oscillation, where hot shards moved back and forth for hours. The rule asks the scoring to place a hot shard between an empty disk with 100% compaction debt and a fuller one with none. scoring = \"disk_and_compaction\" with a compaction_debt_max excludes such targets. It protects converges, and churn_bounded downstream.",
        needs_model: false,
        check: rebalancer_blind_to_compaction,
    },
    Rule {
        id: "RC012",
        name: "rebalancer-cooldown-ineffective",
        severity: Severity::Warning,
        what: "rebalance_enabled with move_cooldown = 0, or a cooldown_backoff the cap leaves no room to grow",
        protects: &["churn_bounded", "converges"],
        origin: REBALANCER_INCIDENT,
        explanation: "A shard that just moved should rest before it may move again; without a cooldown a mistaken move is undone at the next rebalance and redone at the one after, one membership change per interval for as long as the conditions last (docs/incidents.md#rebalancer-compaction-oscillation). A cooldown_backoff is meant to make repeated moves of the same shard ever rarer, but the cooldown is capped at the larger of cooldown_max and move_cooldown, so with cooldown_max not above move_cooldown the backoff does nothing. The rule asks the cooldown schedule for the first two cooldowns. A cooldown alone only slows an oscillation (the model's cooldown-only variant still violates converges); it bounds churn. It protects churn_bounded and, with compaction-aware scoring, converges.",
        needs_model: false,
        check: rebalancer_cooldown,
    },
    Rule {
        id: "RC013",
        name: "sorted-placement",
        severity: Severity::Error,
        what: "placement = \"sorted\" (traffic sorting that bypasses capacity-aware routing)",
        protects: &["capacity_respected"],
        origin: ROUTING_INCIDENT,
        explanation: "Sorted placement sends each write to the first backend that is up in preference order, without asking whether it has room. When the backends that sort first are nearly full, they receive a very large share of the writes and run out of resources while others idle: the Cloud Storage outage of docs/incidents.md#capacity-routing-bypass, where a traffic-sorting optimisation bypassed capacity-aware routing for 12 hours. The rule asks placement to choose among two full backends that sort first and an idle large one. placement = \"capacity_aware\" spills past spill_threshold and sheds load rather than overload anyone. It protects capacity_respected.",
        needs_model: false,
        check: sorted_placement,
    },
    Rule {
        id: "RC014",
        name: "upload-planner-bypasses-capacity",
        severity: Severity::Error,
        what: "upload_planner = \"smallest_first\" (overrides placement with no capacity check)",
        protects: &["capacity_respected"],
        origin: ROUTING_INCIDENT,
        explanation: "The smallest-first upload planner packs uploads onto the smallest backends whatever placement says, so reverting placement alone does not restore capacity-aware routing: in docs/incidents.md#capacity-routing-bypass an incomplete rollback of an upload-planner feature overloaded a few smaller backends again the next day, for another five hours. The rule asks the router to place a write among two full small backends and an idle large one. A rollback is complete when both placement and upload_planner are \"capacity_aware\". It protects capacity_respected.",
        needs_model: false,
        check: upload_planner_bypass,
    },
    Rule {
        id: "RC015",
        name: "hot-prefix-over-partition-capacity",
        severity: Severity::Error,
        what: "a key prefix's burst fills a partition (too few write_shard_suffixes for the per-partition cap)",
        protects: &["capacity_respected", "ops_complete"],
        origin: "docs/incidents.md#hot-partition-retry-storm",
        explanation: "A partition takes at most partition_write_capacity (and no more than its share of table_write_capacity), however much the table has: raising the table's capacity does not lift it. All keys of one prefix land on one partition unless write_shard_suffixes spreads them, so a burst on one prefix (a promotion's cohort) that reaches the cap leaves no room for any other write there: every write is throttled, and naive retries turn that into a retry storm. This is the 47-minute payments outage of docs/incidents.md#hot-partition-retry-storm; write sharding with 16 suffixes ended it. The rule spreads each shard's burst_writes over the suffixes as the model does and names the fewest suffixes that leave room. It protects capacity_respected and ops_complete. Needs --model, for the bursts and the partitions.",
        needs_model: true,
        check: hot_prefix_over_partition_capacity,
    },
];

// ---------------------------------------------------------------------------------------------
// Loading, for the CLI.

/// What was linted, for the report's header.
pub struct Linted {
    pub policy: PathBuf,
    pub model: Option<PathBuf>,
    pub report: Report,
}

/// Lint a policy file, alone or (with `model`) merged over the model's `[policy]` and against
/// its environment. Bad input is a `ConfigError` (exit 2), as for `check --policy`.
pub fn lint_file(policy_path: &Path, model: Option<&Path>) -> Result<Linted, ConfigError> {
    let sourced = config::load_policy(policy_path)?;
    let report = match model {
        None => {
            let policy = sourced.resolve_ms().map_err(|m| ConfigError::new(policy_path, m))?;
            lint(&Input { policy: &policy, tick_ms: 1, scenario: None, world: None })
        }
        Some(model) => {
            let scenario = Scenario::load(model)?;
            let merged = scenario.base_policy.then(&sourced);
            lint_scenario(&scenario, &merged)
                .map_err(|m| ConfigError::new(policy_path, format!("against {}: {m}", model.display())))?
        }
    };
    Ok(Linted { policy: policy_path.to_path_buf(), model: model.map(Path::to_path_buf), report })
}

/// Lint a policy as `check` resolves it against a scenario (same validation, same ticks).
pub fn lint_scenario(scenario: &Scenario, policy: &SourcedPolicy) -> Result<Report, String> {
    let cfg = WorldConfig::new(scenario, policy)?;
    Ok(lint(&Input {
        policy: &cfg.policy,
        tick_ms: scenario.tick_ms,
        scenario: Some(scenario),
        world: Some(&cfg),
    }))
}

/// For `check`: one line per finding, naming the model and variant, for stderr above the
/// results.
pub fn job_lines(scenario: &Scenario, variant: &str, policy: &SourcedPolicy) -> Vec<String> {
    match lint_scenario(scenario, policy) {
        Ok(report) => report
            .findings
            .iter()
            .map(|f| format!("lint {} / {variant}: {}", scenario.name, f.one_line()))
            .collect(),
        Err(m) => vec![format!("lint {} / {variant}: not run: {m}", scenario.name)],
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

impl Linted {
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Human => self.human(),
            Format::Json => format!("{}\n", self.json()),
        }
    }

    fn subject(&self) -> String {
        match &self.model {
            Some(m) => format!("{} over {} [policy]", self.policy.display(), m.display()),
            None => self.policy.display().to_string(),
        }
    }

    pub fn human(&self) -> String {
        let r = &self.report;
        let mut out = format!("lint {}\n", self.subject());
        let mut explained: Vec<&str> = Vec::new();
        for f in &r.findings {
            let _ = writeln!(out, "\n{}", f.one_line());
            // The paragraph once per rule, under its first finding.
            if !explained.contains(&f.rule.id) {
                explained.push(f.rule.id);
                let _ = writeln!(out, "    protects: {}", f.rule.protects.join(", "));
                let _ = writeln!(out, "    origin: {}", f.rule.origin);
                for line in wrap(f.rule.explanation, 100) {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        if !r.not_run.is_empty() {
            let ids: Vec<&str> = r.not_run.iter().map(|rule| rule.id).collect();
            let _ = writeln!(
                out,
                "\nnot run: {} (they compare timeouts with the network: pass --model)",
                ids.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "\n{} error(s), {} warning(s) ({} rules run)",
            r.errors(),
            r.warnings(),
            RULES.len() - r.not_run.len()
        );
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let r = &self.report;
        let rule_json = |rule: &Rule| {
            serde_json::json!({
                "id": rule.id,
                "name": rule.name,
                "severity": rule.severity.as_str(),
                "protects": rule.protects,
                "origin": rule.origin,
                "explanation": rule.explanation,
            })
        };
        let findings: Vec<serde_json::Value> = r
            .findings
            .iter()
            .map(|f| {
                let mut v = rule_json(f.rule);
                v["message"] = f.message.clone().into();
                v
            })
            .collect();
        let not_run: Vec<serde_json::Value> = r
            .not_run
            .iter()
            .map(|rule| serde_json::json!({ "id": rule.id, "name": rule.name, "reason": "needs --model" }))
            .collect();
        serde_json::json!({
            "exit_code": r.exit_code(),
            "policy": self.policy.display().to_string(),
            "model": self.model.as_ref().map(|m| m.display().to_string()),
            "errors": r.errors(),
            "warnings": r.warnings(),
            "findings": findings,
            "not_run": not_run,
        })
    }
}

/// Greedy word wrap at `width` columns.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_in_order() {
        for (i, rule) in RULES.iter().enumerate() {
            assert_eq!(rule.id, format!("RC{:03}", i + 1));
            assert!(!rule.protects.is_empty(), "{} names what it protects", rule.id);
            assert!(rule.explanation.len() > 200, "{} explains itself", rule.id);
        }
    }

    #[test]
    fn wrap_keeps_words_and_width() {
        let lines = wrap("a bb ccc dddd eeeee", 8);
        assert_eq!(lines, ["a bb ccc", "dddd", "eeeee"]);
    }
}
