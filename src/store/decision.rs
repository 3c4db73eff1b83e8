//! Every policy decision the store makes, logged so it can be checked afterwards.
//!
//! The store never decides by itself: each decision calls a `crate::policy` function through
//! one of the wrappers below, which calls the function, appends one JSON line with its inputs
//! and output to a [`DecisionLog`], and returns the output. `replicheck conform LOG` reads the
//! lines back and replays each through `crate::policy` ([`Decision::replay`]): a store whose
//! log conforms made exactly the decisions the checked policy code makes on the same inputs.
//!
//! One line:
//!
//! ```text
//! {"seq":7,"elapsed_ms":1203,"actor":"coordinator","decision":"health_from_silence","node":2,
//!  "silence_ticks":5100,"suspect_after_ticks":3000,"dead_after_ticks":5000,"output":"dead"}
//! ```
//!
//! Fields named `_ticks` are in the policy's time unit: real milliseconds in `store up` (the
//! policy is resolved with a 1 ms tick), model ticks in `store run`. Fields such as `node` or
//! `shard` say what a decision was about; they are context, not inputs, and replay ignores them.

use crate::policy::detector::{self, FailureDetection, Health};
use crate::policy::eviction::{self, Candidate, ClusterView, EvictionDecision, EvictionPolicy};
use crate::policy::quorum;
use crate::policy::rebalancer::{self, Move, NodeLoad, RebalancePolicy, ShardLoad};
use crate::policy::retry::{self, RetryDecision, RetryPolicy};
use crate::policy::routing::{self, BackendLoad, RoutingPolicy, WriteRoute, WRITE_SHARD_SUFFIXES_MAX};
use crate::policy::{NodeId, Ticks, NODE_COUNT_MAX};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The store's version of a key: assigned by the coordinator, monotonic per key.
pub type KeyVersion = u64;

/// Which reply a strong read returns: the newest version, and the index of the reply (in the
/// order the caller passed them) that carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadChoice {
    pub version: KeyVersion,
    pub reply: usize,
}

/// One call of a policy function: its inputs and its output. One variant per function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decision {
    /// `quorum::quorum_reached`: may the coordinator answer after `answers` replicas?
    QuorumReached { answers: usize, quorum: u8, output: bool },
    /// `quorum::read_result` over the versions of a read's replies (values are not logged:
    /// the function picks by version, and the first of equal versions).
    ReadResult { versions: Vec<KeyVersion>, output: Option<ReadChoice> },
    /// `detector::health_after_deadline_miss` for `node`, which missed a request's deadline.
    HealthAfterDeadlineMiss { node: NodeId, detection: FailureDetection, output: Option<Health> },
    /// `detector::health_from_silence` for `node`.
    HealthFromSilence {
        node: NodeId,
        silence_ticks: Ticks,
        suspect_after_ticks: Ticks,
        dead_after_ticks: Ticks,
        output: Health,
    },
    /// `eviction::decide_eviction` for the replica on `node` that the detector declared dead.
    DecideEviction {
        node: NodeId,
        policy: EvictionPolicy,
        view: ClusterView,
        evicted_zone: u8,
        candidates: Vec<Candidate>,
        output: EvictionDecision,
    },
    /// `eviction::breaker_allows`.
    BreakerAllows { view: ClusterView, max_dead_fraction_permille: u16, output: bool },
    /// `eviction::choose_replacement`.
    ChooseReplacement { evicted_zone: u8, candidates: Vec<Candidate>, output: Option<NodeId> },
    /// `rebalancer::choose_move`.
    ChooseMove { nodes: Vec<NodeLoad>, shards: Vec<ShardLoad>, policy: RebalancePolicy, output: Option<Move> },
    /// `rebalancer::is_slow` for `node`.
    IsSlow { node: NodeId, hosts_hot_shard: bool, compaction_debt_pct: u8, slow_debt_pct: u8, output: bool },
    /// `rebalancer::next_cooldown_ticks` after a move of `shard`.
    NextCooldownTicks {
        shard: u8,
        previous_ticks: Ticks,
        move_cooldown_ticks: Ticks,
        backoff: u8,
        cooldown_max_ticks: Ticks,
        output: Ticks,
    },
    /// `retry::after_failure`.
    AfterFailure { policy: RetryPolicy, attempts_made: u8, retries_used: u8, output: RetryDecision },
    /// `retry::version_for_attempt`.
    VersionForAttempt {
        idempotency_tokens: bool,
        version_of_token: Option<KeyVersion>,
        next_version: KeyVersion,
        output: KeyVersion,
    },
    /// `quorum::copies_needed`: sources a catch-up must have copied.
    CopiesNeeded { read_quorum: u8, source_count: usize, output: u8 },
    /// `routing::key_partition`: the partition (shard) a key of hash `key_hash` is routed to.
    KeyPartition {
        prefix_partition: u8,
        key_hash: u8,
        write_shard_suffixes: u8,
        partition_count: u8,
        output: u8,
    },
    /// `routing::partition_capacity`: a partition's writes per window.
    PartitionCapacity {
        partition_cap_per_tick: Option<u16>,
        table_cap_per_tick: Option<u16>,
        partition_count: u8,
        output: Option<u16>,
    },
    /// `routing::admits` for `unit` ("partition 2", "backend 1"), offered this window.
    Admits { unit: String, offered_before: u16, capacity_per_tick: Option<u16>, output: bool },
    /// `routing::route_write`: where one write went (the store's admission of every write).
    RouteWrite {
        policy: RoutingPolicy,
        partition_offered_before: u16,
        partition_capacity_per_tick: Option<u16>,
        backends: Option<Vec<BackendLoad>>,
        output: WriteRoute,
    },
    /// `routing::choose_backend`: the backend that ingests a write (`None`: shed).
    ChooseBackend { policy: RoutingPolicy, backends: Vec<BackendLoad>, output: Option<NodeId> },
}

impl Decision {
    /// The policy function's name, as in the log's `decision` field.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::QuorumReached { .. } => "quorum_reached",
            Decision::ReadResult { .. } => "read_result",
            Decision::HealthAfterDeadlineMiss { .. } => "health_after_deadline_miss",
            Decision::HealthFromSilence { .. } => "health_from_silence",
            Decision::DecideEviction { .. } => "decide_eviction",
            Decision::BreakerAllows { .. } => "breaker_allows",
            Decision::ChooseReplacement { .. } => "choose_replacement",
            Decision::ChooseMove { .. } => "choose_move",
            Decision::IsSlow { .. } => "is_slow",
            Decision::NextCooldownTicks { .. } => "next_cooldown_ticks",
            Decision::AfterFailure { .. } => "after_failure",
            Decision::VersionForAttempt { .. } => "version_for_attempt",
            Decision::CopiesNeeded { .. } => "copies_needed",
            Decision::KeyPartition { .. } => "key_partition",
            Decision::PartitionCapacity { .. } => "partition_capacity",
            Decision::Admits { .. } => "admits",
            Decision::ChooseBackend { .. } => "choose_backend",
            Decision::RouteWrite { .. } => "route_write",
        }
    }

    /// This decision with its output recomputed from its inputs by `crate::policy`.
    /// Inputs that break a policy function's precondition (which the store never produces,
    /// but an edited log may hold) are an error, not a panic.
    pub fn replay(&self) -> Result<Decision, String> {
        self.check_preconditions()?;
        let mut replayed = self.clone();
        match &mut replayed {
            Decision::QuorumReached { answers, quorum, output } => {
                *output = quorum::quorum_reached(*answers, *quorum)
            }
            Decision::ReadResult { versions, output } => *output = choose_read(versions),
            Decision::HealthAfterDeadlineMiss { detection, output, .. } => {
                *output = detector::health_after_deadline_miss(*detection)
            }
            Decision::HealthFromSilence {
                silence_ticks,
                suspect_after_ticks,
                dead_after_ticks,
                output,
                ..
            } => {
                *output =
                    detector::health_from_silence(*silence_ticks, *suspect_after_ticks, *dead_after_ticks)
            }
            Decision::DecideEviction { policy, view, evicted_zone, candidates, output, .. } => {
                *output = eviction::decide_eviction(*policy, *view, *evicted_zone, candidates)
            }
            Decision::BreakerAllows { view, max_dead_fraction_permille, output } => {
                *output = eviction::breaker_allows(*view, *max_dead_fraction_permille)
            }
            Decision::ChooseReplacement { evicted_zone, candidates, output } => {
                *output = eviction::choose_replacement(*evicted_zone, candidates)
            }
            Decision::ChooseMove { nodes, shards, policy, output } => {
                *output = rebalancer::choose_move(nodes, shards, policy)
            }
            Decision::IsSlow { hosts_hot_shard, compaction_debt_pct, slow_debt_pct, output, .. } => {
                *output = rebalancer::is_slow(*hosts_hot_shard, *compaction_debt_pct, *slow_debt_pct)
            }
            Decision::NextCooldownTicks {
                previous_ticks,
                move_cooldown_ticks,
                backoff,
                cooldown_max_ticks,
                output,
                ..
            } => {
                *output = rebalancer::next_cooldown_ticks(
                    *previous_ticks,
                    *move_cooldown_ticks,
                    *backoff,
                    *cooldown_max_ticks,
                )
            }
            Decision::AfterFailure { policy, attempts_made, retries_used, output } => {
                *output = retry::after_failure(policy, *attempts_made, *retries_used)
            }
            Decision::VersionForAttempt { idempotency_tokens, version_of_token, next_version, output } => {
                *output = retry::version_for_attempt(*idempotency_tokens, *version_of_token, *next_version)
            }
            Decision::CopiesNeeded { read_quorum, source_count, output } => {
                *output = quorum::copies_needed(*read_quorum, *source_count)
            }
            Decision::KeyPartition {
                prefix_partition,
                key_hash,
                write_shard_suffixes,
                partition_count,
                output,
            } => {
                *output = routing::key_partition(
                    *prefix_partition,
                    *key_hash,
                    *write_shard_suffixes,
                    *partition_count,
                )
            }
            Decision::PartitionCapacity {
                partition_cap_per_tick,
                table_cap_per_tick,
                partition_count,
                output,
            } => {
                *output = routing::partition_capacity(
                    *partition_cap_per_tick,
                    *table_cap_per_tick,
                    *partition_count,
                )
            }
            Decision::Admits { offered_before, capacity_per_tick, output, .. } => {
                *output = routing::admits(*offered_before, *capacity_per_tick)
            }
            Decision::RouteWrite {
                policy,
                partition_offered_before,
                partition_capacity_per_tick,
                backends,
                output,
            } => {
                *output = routing::route_write(
                    policy,
                    *partition_offered_before,
                    *partition_capacity_per_tick,
                    backends.as_deref(),
                )
            }
            Decision::ChooseBackend { policy, backends, output } => {
                *output = routing::choose_backend(policy, backends)
            }
        }
        Ok(replayed)
    }

    /// The inputs the policy functions assert on. The store's own calls always satisfy them;
    /// checking them here lets `conform` reject an edited log instead of panicking.
    fn check_preconditions(&self) -> Result<(), String> {
        let fail = |why: String| Err(format!("inputs break {}'s precondition: {why}", self.name()));
        match self {
            Decision::QuorumReached { quorum: 0, .. } => fail("quorum is 0".into()),
            Decision::HealthFromSilence { suspect_after_ticks, dead_after_ticks, .. }
                if suspect_after_ticks > dead_after_ticks =>
            {
                fail(format!(
                    "suspect_after_ticks {suspect_after_ticks} > dead_after_ticks {dead_after_ticks}"
                ))
            }
            Decision::DecideEviction { view, policy, .. } if policy.enabled => check_view(view).or_else(fail),
            Decision::BreakerAllows { view, .. } => check_view(view).or_else(fail),
            Decision::ChooseMove { nodes, .. } => {
                if nodes.len() > NODE_COUNT_MAX {
                    return fail(format!("{} nodes, more than {NODE_COUNT_MAX}", nodes.len()));
                }
                if !nodes.windows(2).all(|w| w[0].node < w[1].node) {
                    return fail("nodes are not sorted by id without repeats".into());
                }
                Ok(())
            }
            Decision::NextCooldownTicks { backoff: 0, .. } => fail("backoff is 0".into()),
            Decision::AfterFailure { policy, attempts_made, .. } => {
                if *attempts_made == 0 {
                    return fail("attempts_made is 0".into());
                }
                if policy.backoff_base_ticks > policy.backoff_max_ticks {
                    return fail("backoff_base_ticks > backoff_max_ticks".into());
                }
                Ok(())
            }
            Decision::VersionForAttempt {
                idempotency_tokens: true,
                version_of_token: Some(v),
                next_version,
                ..
            } if v >= next_version => {
                fail(format!("version_of_token {v} is not below next_version {next_version}"))
            }
            Decision::KeyPartition { prefix_partition, write_shard_suffixes, partition_count, .. } => {
                if *write_shard_suffixes == 0 || *write_shard_suffixes > WRITE_SHARD_SUFFIXES_MAX {
                    return fail(format!(
                        "write_shard_suffixes {write_shard_suffixes} is not 1 to {WRITE_SHARD_SUFFIXES_MAX}"
                    ));
                }
                if prefix_partition >= partition_count {
                    return fail(format!(
                        "prefix_partition {prefix_partition} >= partition_count {partition_count}"
                    ));
                }
                Ok(())
            }
            Decision::PartitionCapacity { partition_count: 0, .. } => fail("partition_count is 0".into()),
            Decision::CopiesNeeded { read_quorum: 0, .. } => fail("read_quorum is 0".into()),
            Decision::ChooseBackend { policy, .. } | Decision::RouteWrite { policy, .. }
                if policy.spill_threshold_permille > 1000 =>
            {
                fail(format!("spill_threshold_permille {} > 1000", policy.spill_threshold_permille))
            }
            _ => Ok(()),
        }
    }

    /// The logged output, as JSON.
    pub fn output_json(&self) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).expect("a decision serializes");
        doc.get_mut("output").map(serde_json::Value::take).unwrap_or(serde_json::Value::Null)
    }

    /// The inputs (and context) without the output, as JSON.
    pub fn inputs_json(&self) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).expect("a decision serializes");
        if let Some(map) = doc.as_object_mut() {
            map.remove("output");
        }
        doc
    }
}

fn check_view(view: &ClusterView) -> Result<(), String> {
    if view.total_nodes == 0 {
        return Err("view.total_nodes is 0".into());
    }
    if view.dead_nodes > view.total_nodes {
        return Err(format!("view.dead_nodes {} > view.total_nodes {}", view.dead_nodes, view.total_nodes));
    }
    Ok(())
}

/// `quorum::read_result` with each reply's index as its value: the index tells the caller
/// which reply (and so which value) won without logging the value.
fn choose_read(versions: &[KeyVersion]) -> Option<ReadChoice> {
    let indexed: Vec<(KeyVersion, usize)> = versions.iter().copied().zip(0..).collect();
    quorum::read_result(&indexed).map(|(version, reply)| ReadChoice { version, reply })
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// 1, 2, 3, ... in the order the lines were written.
    pub seq: u64,
    /// Since the log was opened.
    pub elapsed_ms: u64,
    /// Who decided: "coordinator", "rebalancer", "client-3", ...
    pub actor: String,
    #[serde(flatten)]
    pub decision: Decision,
}

/// A protocol event line of the log (see [`DecisionLog::event`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLine {
    pub seq: u64,
    pub elapsed_ms: u64,
    pub actor: String,
    /// `change_requested shard=0 evicted=1 replacement=3 move=false`, ...
    pub event: String,
}

/// Whether a log line is a protocol event rather than a decision.
pub fn is_event_line(raw: &str) -> bool {
    serde_json::from_str::<EventLine>(raw).is_ok()
}

struct Sink {
    out: Box<dyn Write + Send>,
    seq: u64,
    /// The first write error; later lines are dropped and `flush` reports it.
    failed: Option<io::Error>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        if self.failed.is_none() {
            // Nothing to report to in a destructor; `DecisionLog::flush` reports errors.
            let _ = self.out.flush();
        }
    }
}

/// A decision log: JSON lines, buffered, shared by every thread of a process (clones write to
/// the same sink under one lock, so `seq` follows the order of the lines). Flushed when the
/// last clone is dropped, and by [`DecisionLog::flush`].
#[derive(Clone)]
pub struct DecisionLog {
    sink: Option<Arc<Mutex<Sink>>>,
    started: Instant,
    actor: Arc<str>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLog").field("on", &self.sink.is_some()).field("actor", &self.actor).finish()
    }
}

impl DecisionLog {
    /// A log that records nothing; the wrappers still call the policy functions.
    pub fn off() -> DecisionLog {
        DecisionLog { sink: None, started: Instant::now(), actor: Arc::from("coordinator") }
    }

    /// A log written to `path` (created or truncated), with lines from `actor`.
    pub fn create(path: &Path, actor: &str) -> io::Result<DecisionLog> {
        let file = File::create(path)?;
        Ok(DecisionLog::to_writer(Box::new(BufWriter::with_capacity(64 * 1024, file)), actor))
    }

    /// A log written to any writer (buffer it yourself if it is slow).
    pub fn to_writer(out: Box<dyn Write + Send>, actor: &str) -> DecisionLog {
        let sink = Sink { out, seq: 0, failed: None };
        DecisionLog {
            sink: Some(Arc::new(Mutex::new(sink))),
            started: Instant::now(),
            actor: Arc::from(actor),
        }
    }

    /// The same log, with lines written as `actor`.
    pub fn with_actor(&self, actor: &str) -> DecisionLog {
        DecisionLog { sink: self.sink.clone(), started: self.started, actor: Arc::from(actor) }
    }

    pub fn is_on(&self) -> bool {
        self.sink.is_some()
    }

    /// Append one decision.
    pub fn log(&self, decision: Decision) {
        let Some(sink) = &self.sink else { return };
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        // A thread that panicked while holding the lock left at most a partial line behind;
        // keep logging rather than poison every other thread.
        let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if sink.failed.is_some() {
            return;
        }
        sink.seq += 1;
        let line = LogLine { seq: sink.seq, elapsed_ms, actor: self.actor.to_string(), decision };
        let mut text = serde_json::to_string(&line).expect("a decision serializes");
        text.push('\n');
        if let Err(e) = sink.out.write_all(text.as_bytes()) {
            sink.failed = Some(e);
        }
    }

    /// Append one protocol event: what the coordinator's state machine did, recorded beside
    /// the decisions (the machine is the code the models check, so there is nothing to replay).
    pub fn event(&self, event: &str) {
        let Some(sink) = &self.sink else { return };
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if sink.failed.is_some() {
            return;
        }
        sink.seq += 1;
        let line =
            EventLine { seq: sink.seq, elapsed_ms, actor: self.actor.to_string(), event: event.to_string() };
        let mut text = serde_json::to_string(&line).expect("an event serializes");
        text.push('\n');
        if let Err(e) = sink.out.write_all(text.as_bytes()) {
            sink.failed = Some(e);
        }
    }

    /// Write out buffered lines; reports the first write error since the log was opened.
    pub fn flush(&self) -> io::Result<()> {
        let Some(sink) = &self.sink else { return Ok(()) };
        let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(e) = &sink.failed {
            return Err(io::Error::new(e.kind(), format!("decision log write failed: {e}")));
        }
        sink.out.flush()
    }
}

/// Append one decision to `log` (the free-function form of [`DecisionLog::log`]).
pub fn log(log: &DecisionLog, decision: Decision) {
    log.log(decision)
}

// The wrappers: call the policy function, log inputs and output, return the output.

pub fn quorum_reached(log: &DecisionLog, answers: usize, quorum: u8) -> bool {
    let output = quorum::quorum_reached(answers, quorum);
    log.log(Decision::QuorumReached { answers, quorum, output });
    output
}

/// The answer of a strong read over `replies` (version, value): the newest, with its value.
pub fn read_result<V: Clone>(log: &DecisionLog, replies: &[(KeyVersion, V)]) -> Option<(KeyVersion, V)> {
    let versions: Vec<KeyVersion> = replies.iter().map(|(version, _)| *version).collect();
    let output = choose_read(&versions);
    log.log(Decision::ReadResult { versions, output });
    output.map(|choice| (choice.version, replies[choice.reply].1.clone()))
}

pub fn health_after_deadline_miss(
    log: &DecisionLog,
    node: NodeId,
    detection: FailureDetection,
) -> Option<Health> {
    let output = detector::health_after_deadline_miss(detection);
    log.log(Decision::HealthAfterDeadlineMiss { node, detection, output });
    output
}

pub fn health_from_silence(
    log: &DecisionLog,
    node: NodeId,
    silence_ticks: Ticks,
    suspect_after_ticks: Ticks,
    dead_after_ticks: Ticks,
) -> Health {
    let output = detector::health_from_silence(silence_ticks, suspect_after_ticks, dead_after_ticks);
    log.log(Decision::HealthFromSilence {
        node,
        silence_ticks,
        suspect_after_ticks,
        dead_after_ticks,
        output,
    });
    output
}

pub fn decide_eviction(
    log: &DecisionLog,
    node: NodeId,
    policy: EvictionPolicy,
    view: ClusterView,
    evicted_zone: u8,
    candidates: &[Candidate],
) -> EvictionDecision {
    let output = eviction::decide_eviction(policy, view, evicted_zone, candidates);
    log.log(Decision::DecideEviction {
        node,
        policy,
        view,
        evicted_zone,
        candidates: candidates.to_vec(),
        output,
    });
    output
}

pub fn breaker_allows(log: &DecisionLog, view: ClusterView, max_dead_fraction_permille: u16) -> bool {
    let output = eviction::breaker_allows(view, max_dead_fraction_permille);
    log.log(Decision::BreakerAllows { view, max_dead_fraction_permille, output });
    output
}

pub fn choose_replacement(log: &DecisionLog, evicted_zone: u8, candidates: &[Candidate]) -> Option<NodeId> {
    let output = eviction::choose_replacement(evicted_zone, candidates);
    log.log(Decision::ChooseReplacement { evicted_zone, candidates: candidates.to_vec(), output });
    output
}

pub fn choose_move(
    log: &DecisionLog,
    nodes: &[NodeLoad],
    shards: &[ShardLoad],
    policy: &RebalancePolicy,
) -> Option<Move> {
    let output = rebalancer::choose_move(nodes, shards, policy);
    log.log(Decision::ChooseMove { nodes: nodes.to_vec(), shards: shards.to_vec(), policy: *policy, output });
    output
}

pub fn is_slow(
    log: &DecisionLog,
    node: NodeId,
    hosts_hot_shard: bool,
    compaction_debt_pct: u8,
    slow_debt_pct: u8,
) -> bool {
    let output = rebalancer::is_slow(hosts_hot_shard, compaction_debt_pct, slow_debt_pct);
    log.log(Decision::IsSlow { node, hosts_hot_shard, compaction_debt_pct, slow_debt_pct, output });
    output
}

pub fn next_cooldown_ticks(
    log: &DecisionLog,
    shard: u8,
    previous_ticks: Ticks,
    move_cooldown_ticks: Ticks,
    backoff: u8,
    cooldown_max_ticks: Ticks,
) -> Ticks {
    let output =
        rebalancer::next_cooldown_ticks(previous_ticks, move_cooldown_ticks, backoff, cooldown_max_ticks);
    log.log(Decision::NextCooldownTicks {
        shard,
        previous_ticks,
        move_cooldown_ticks,
        backoff,
        cooldown_max_ticks,
        output,
    });
    output
}

pub fn after_failure(
    log: &DecisionLog,
    policy: &RetryPolicy,
    attempts_made: u8,
    retries_used: u8,
) -> RetryDecision {
    let output = retry::after_failure(policy, attempts_made, retries_used);
    log.log(Decision::AfterFailure { policy: *policy, attempts_made, retries_used, output });
    output
}

pub fn copies_needed(log: &DecisionLog, read_quorum: u8, source_count: usize) -> u8 {
    let output = quorum::copies_needed(read_quorum, source_count);
    log.log(Decision::CopiesNeeded { read_quorum, source_count, output });
    output
}

pub fn key_partition(
    log: &DecisionLog,
    prefix_partition: u8,
    key_hash: u8,
    write_shard_suffixes: u8,
    partition_count: u8,
) -> u8 {
    let output = routing::key_partition(prefix_partition, key_hash, write_shard_suffixes, partition_count);
    log.log(Decision::KeyPartition {
        prefix_partition,
        key_hash,
        write_shard_suffixes,
        partition_count,
        output,
    });
    output
}

pub fn partition_capacity(
    log: &DecisionLog,
    partition_cap_per_tick: Option<u16>,
    table_cap_per_tick: Option<u16>,
    partition_count: u8,
) -> Option<u16> {
    let output = routing::partition_capacity(partition_cap_per_tick, table_cap_per_tick, partition_count);
    log.log(Decision::PartitionCapacity {
        partition_cap_per_tick,
        table_cap_per_tick,
        partition_count,
        output,
    });
    output
}

/// `unit` is context for the reader ("partition 2"); it is only formatted when logging.
pub fn admits(
    log: &DecisionLog,
    unit: impl FnOnce() -> String,
    offered_before: u16,
    capacity_per_tick: Option<u16>,
) -> bool {
    let output = routing::admits(offered_before, capacity_per_tick);
    if log.is_on() {
        log.log(Decision::Admits { unit: unit(), offered_before, capacity_per_tick, output });
    }
    output
}

pub fn route_write(
    log: &DecisionLog,
    policy: &RoutingPolicy,
    partition_offered_before: u16,
    partition_capacity_per_tick: Option<u16>,
    backends: Option<&[BackendLoad]>,
) -> WriteRoute {
    let output =
        routing::route_write(policy, partition_offered_before, partition_capacity_per_tick, backends);
    log.log(Decision::RouteWrite {
        policy: *policy,
        partition_offered_before,
        partition_capacity_per_tick,
        backends: backends.map(<[BackendLoad]>::to_vec),
        output,
    });
    output
}

pub fn choose_backend(log: &DecisionLog, policy: &RoutingPolicy, backends: &[BackendLoad]) -> Option<NodeId> {
    let output = routing::choose_backend(policy, backends);
    log.log(Decision::ChooseBackend { policy: *policy, backends: backends.to_vec(), output });
    output
}

pub fn version_for_attempt(
    log: &DecisionLog,
    idempotency_tokens: bool,
    version_of_token: Option<KeyVersion>,
    next_version: KeyVersion,
) -> KeyVersion {
    let output = retry::version_for_attempt(idempotency_tokens, version_of_token, next_version);
    log.log(Decision::VersionForAttempt { idempotency_tokens, version_of_token, next_version, output });
    output
}

/// The outcome of replaying a whole log.
#[derive(Debug, PartialEq, Eq)]
pub enum Conformance {
    /// Every line replayed to its logged output.
    Conforms { decisions: usize },
    /// The first line whose logged output differs from the policy's.
    Mismatch { line: usize, logged: Box<Decision>, recomputed: Box<Decision> },
}

/// A log line that is not a decision, or whose inputs no policy function accepts.
#[derive(Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

/// Replay every line of a log's text (blank lines are skipped). Stops at the first mismatch.
pub fn conform(text: &str) -> Result<Conformance, BadLine> {
    let mut decisions = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() || is_event_line(raw) {
            continue;
        }
        let parsed: LogLine = serde_json::from_str(raw)
            .map_err(|e| BadLine { line, message: format!("not a decision: {e}") })?;
        let recomputed = parsed.decision.replay().map_err(|message| BadLine { line, message })?;
        if recomputed != parsed.decision {
            return Ok(Conformance::Mismatch {
                line,
                logged: Box::new(parsed.decision),
                recomputed: Box::new(recomputed),
            });
        }
        decisions += 1;
    }
    Ok(Conformance::Conforms { decisions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::eviction::Suppressed;
    use crate::policy::rebalancer::Scoring;
    use crate::policy::retry::Backoff;

    /// A writer whose bytes the test can read after the log is dropped.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn text(shared: &Shared) -> String {
        String::from_utf8(shared.0.lock().unwrap().clone()).unwrap()
    }

    const RETRY: RetryPolicy = RetryPolicy {
        max_attempts: Some(3),
        backoff: Backoff::ExponentialJitter,
        backoff_base_ticks: 10,
        backoff_max_ticks: 80,
        retry_budget: Some(5),
        idempotency_tokens: true,
    };

    #[test]
    fn routing_decisions_replay_and_a_tampered_placement_is_caught() {
        use crate::policy::routing::{Placement, UploadPlanner};
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "coordinator");
        let sorted = RoutingPolicy {
            placement: Placement::Sorted,
            spill_threshold_permille: 800,
            upload_planner: UploadPlanner::CapacityAware,
            write_shard_suffixes: 4,
        };
        let backends = [
            BackendLoad { node: 0, up: true, capacity_per_tick: Some(3), load_per_tick: 3 },
            BackendLoad { node: 1, up: true, capacity_per_tick: Some(4), load_per_tick: 0 },
        ];
        assert_eq!(key_partition(&log, 1, 6, 4, 4), 3);
        assert_eq!(partition_capacity(&log, Some(2), Some(4), 4), Some(1));
        assert!(!admits(&log, || "partition 1".into(), 2, Some(2)));
        assert_eq!(choose_backend(&log, &sorted, &backends), Some(0));
        drop(log);
        let out = text(&shared);
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 4 }));
        // A store that had spilled to node 1 under sorted placement did not run this policy.
        let tampered = out.replacen("\"output\":0", "\"output\":1", 1);
        assert_ne!(tampered, out);
        assert!(matches!(conform(&tampered), Ok(Conformance::Mismatch { line: 4, .. })));
        // Inputs outside a precondition are an error, not a panic.
        let bad = out.replacen(
            "\"write_shard_suffixes\":4,\"partition_count\"",
            "\"write_shard_suffixes\":0,\"partition_count\"",
            1,
        );
        assert!(conform(&bad).unwrap_err().message.contains("write_shard_suffixes 0"));
    }

    #[test]
    fn wrappers_return_the_policy_output_and_log_one_line_each() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(BufWriter::new(shared.clone())), "coordinator");
        assert_eq!(read_result(&log, &[(3, "a"), (7, "b"), (7, "c")]), Some((7, "b")));
        assert_eq!(health_from_silence(&log, 2, 60, 30, 50), Health::Dead);
        assert!(!quorum_reached(&log.with_actor("client-1"), 1, 2));
        assert_eq!(version_for_attempt(&log, true, Some(4), 9), 4);
        let retry = after_failure(&log, &RETRY, 1, 0);
        assert_eq!(retry, RetryDecision::RetryAfter { earliest_ticks: 10, latest_ticks: 20 });
        drop(log);
        let out = text(&shared);
        let lines: Vec<LogLine> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        assert_eq!(lines[2].actor, "client-1");
        assert_eq!(
            lines[0].decision,
            Decision::ReadResult {
                versions: vec![3, 7, 7],
                output: Some(ReadChoice { version: 7, reply: 1 })
            }
        );
        assert!(out.starts_with(r#"{"seq":1,"elapsed_ms":"#), "{out}");
        assert!(out.contains(r#""decision":"health_from_silence","node":2,"silence_ticks":60"#), "{out}");
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 5 }));
    }

    #[test]
    fn a_tampered_output_is_the_first_mismatch() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "coordinator");
        let spare = Candidate { node: 3, zone: 0, health: Health::Alive, is_member: false };
        let policy =
            EvictionPolicy { enabled: true, max_dead_fraction_permille: 340, max_concurrent_evictions: 1 };
        let view = ClusterView { dead_nodes: 1, total_nodes: 4, evictions_in_progress: 0 };
        assert_eq!(
            decide_eviction(&log, 1, policy, view, 0, &[spare]),
            EvictionDecision::Evict { replacement: 3 }
        );
        let crowded = ClusterView { dead_nodes: 2, ..view };
        let suppressed = decide_eviction(&log, 2, policy, crowded, 0, &[spare]);
        assert_eq!(suppressed, EvictionDecision::Suppressed(Suppressed::CircuitBreaker));
        log.flush().unwrap();
        let out = text(&shared);
        let tampered =
            out.replacen(r#"{"suppressed":"circuit_breaker"}"#, r#"{"evict":{"replacement":3}}"#, 1);
        assert_ne!(tampered, out);
        match conform(&tampered) {
            Ok(Conformance::Mismatch { line, logged, recomputed }) => {
                assert_eq!(line, 2);
                assert_eq!(logged.output_json(), serde_json::json!({"evict": {"replacement": 3}}));
                assert_eq!(recomputed.output_json(), serde_json::json!({"suppressed": "circuit_breaker"}));
                assert!(logged.inputs_json().get("output").is_none());
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn inputs_outside_a_precondition_are_an_error_not_a_panic() {
        let bad = Decision::HealthFromSilence {
            node: 0,
            silence_ticks: 1,
            suspect_after_ticks: 9,
            dead_after_ticks: 3,
            output: Health::Alive,
        };
        assert!(bad.replay().unwrap_err().contains("suspect_after_ticks 9 > dead_after_ticks 3"));
        let unsorted = Decision::ChooseMove {
            nodes: vec![
                NodeLoad { node: 1, disk_pct: 90, compaction_debt_pct: 0, slow: false },
                NodeLoad { node: 0, disk_pct: 10, compaction_debt_pct: 0, slow: false },
            ],
            shards: vec![],
            policy: RebalancePolicy {
                disk_high_watermark_pct: 80,
                scoring: Scoring::Disk,
                compaction_debt_max_pct: 50,
            },
            output: None,
        };
        assert!(unsorted.replay().unwrap_err().contains("not sorted"));
        let token = Decision::VersionForAttempt {
            idempotency_tokens: true,
            version_of_token: Some(5),
            next_version: 5,
            output: 5,
        };
        assert!(token.replay().is_err());
        let line = r#"{"seq":1,"elapsed_ms":0,"actor":"x","decision":"no_such_function","output":1}"#;
        let err = conform(&format!("\n{line}\n")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("no_such_function"), "{}", err.message);
    }

    #[test]
    fn an_off_log_still_decides() {
        let log = DecisionLog::off();
        assert!(!log.is_on());
        assert_eq!(next_cooldown_ticks(&log, 0, 20, 20, 2, 80), 40);
        assert!(log.flush().is_ok());
    }

    #[test]
    fn lines_from_many_threads_are_whole_and_numbered_in_order() {
        let shared = Shared::default();
        let log = DecisionLog::to_writer(Box::new(shared.clone()), "coordinator");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.with_actor(&format!("client-{t}"));
                std::thread::spawn(move || {
                    for i in 0..200u32 {
                        health_from_silence(&log, t, i, 50, 100);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(log);
        let out = text(&shared);
        let seqs: Vec<u64> = out.lines().map(|l| serde_json::from_str::<LogLine>(l).unwrap().seq).collect();
        assert_eq!(seqs, (1..=800).collect::<Vec<u64>>());
        assert_eq!(conform(&out), Ok(Conformance::Conforms { decisions: 800 }));
    }
}
