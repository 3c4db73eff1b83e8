//! What a run measured: from the clients' history, the final reads and the decision log's
//! protocol events.

use super::*;

/// An eviction the run's coordinator asked for, from the decision log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreEviction {
    pub at_ms: u64,
    pub shard: u8,
    pub node: NodeId,
    pub replacement: NodeId,
    /// The fault schedule had not crashed or cut off the node by then.
    pub healthy: bool,
}

/// Everything measured from the history, the final reads and the decision log.
pub(crate) fn measure(
    load: &LoadReport,
    finals: &[Op],
    log_text: &str,
    faulted_at_ms: &BTreeMap<NodeId, u64>,
) -> Result<RunOutcome, String> {
    let mut outcome = RunOutcome {
        ops: load.history.len(),
        ops_ok: load.count(|op| matches!(op.outcome, Outcome::Ok { .. })),
        writes_unknown: load.count(|op| op.outcome == Outcome::Unknown),
        reads_failed: load.count(|op| op.outcome == Outcome::Failed),
        retries: load.retries,
        ..RunOutcome::default()
    };
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in &load.history {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut pairs: Vec<(String, Operation<RegisterInput, RegisterOutput>)> = Vec::new();
    for (key, ops) in &by_key {
        let last = finals.iter().find(|f| f.key == *key).expect("a final read per key");
        if let Some(why) = acked_write_missed(ops, last) {
            outcome.acked_writes_lost.push(format!("{key}: {why}"));
        }
        // `linearizable` is judged on the clients' history, as the model judges its clients'
        // (where no client reads after a lost write, it holds); the checker's final reads
        // judge `acked_writes_persist`, above.
        pairs.extend(ops.iter().filter_map(|op| op.as_register_op()).map(|op| (key.to_string(), op)));
    }
    // Every key's verdict (the report lists each key that is not linearizable), searched in
    // turns under one memory bound for all keys.
    let partitions = lincheck::partition_pairs(pairs);
    let options = lincheck::Options { threads: 1, every_key: true };
    let checked =
        lincheck::check_partitions_with(&Register, &partitions, Budget::steps(LINCHECK_STEPS_MAX), options);
    for (key, verdict) in checked.per_key {
        match verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { .. } => outcome.not_linearizable.push(key),
            Verdict::Unknown { reason } => outcome.undecided.push(format!("{key}: {reason}")),
        }
    }
    // The detector's latest death verdict on each node, for the eviction that follows it.
    let mut death: BTreeMap<NodeId, DeathEvidence> = BTreeMap::new();
    for (index, raw) in log_text.lines().enumerate() {
        if let Ok(line) = serde_json::from_str::<EventLine>(raw) {
            let at_ms = line.elapsed_ms;
            let event = ProtocolEvent::parse(&line.event)
                .ok_or_else(|| format!("decision log line {}: unknown event {:?}", index + 1, line.event))?;
            match event {
                ProtocolEvent::DeclaredDead { node, silence_ms: Some(silence_ms) } => {
                    death.insert(node, DeathEvidence::Silence { silence_ms });
                }
                ProtocolEvent::DeclaredDead { node, silence_ms: None } => {
                    outcome.deadline_deaths += 1;
                    death.insert(node, DeathEvidence::DeadlineMiss);
                }
                ProtocolEvent::ChangeRequested { shard, from, to, is_move: true } => {
                    outcome.moves.push((at_ms, shard, from, to));
                }
                ProtocolEvent::ChangeRequested { shard, from, to, is_move: false } => {
                    let healthy = faulted_at_ms.get(&from).is_none_or(|t| *t > at_ms);
                    outcome.evictions.push(StoreEviction {
                        at_ms,
                        shard,
                        node: from,
                        replacement: to,
                        healthy,
                    });
                    outcome.evicted_because.push(death.get(&from).copied());
                }
                ProtocolEvent::ChangeRejected { shard, evicted } => {
                    outcome.changes_rejected.push((at_ms, shard, evicted));
                }
                ProtocolEvent::DuplicateEffect => outcome.duplicate_effects += 1,
                ProtocolEvent::Other => {}
            }
            continue;
        }
        let _: LogLine = serde_json::from_str(raw)
            .map_err(|e| format!("decision log line {}: not a decision: {e}", index + 1))?;
        outcome.decisions += 1;
    }
    Ok(outcome)
}

/// A protocol event line of the decision log, as the run's report needs it.
pub(super) enum ProtocolEvent {
    DeclaredDead {
        node: NodeId,
        silence_ms: Option<u64>,
    },
    ChangeRequested {
        shard: u8,
        from: NodeId,
        to: NodeId,
        is_move: bool,
    },
    /// The membership queue was full: the change just requested was dropped.
    ChangeRejected {
        shard: u8,
        evicted: NodeId,
    },
    DuplicateEffect,
    Other,
}

impl ProtocolEvent {
    /// `declared_dead node=1 silence_ms=3100`, `change_requested shard=0 evicted=1
    /// replacement=3 move=false`, `change_rejected shard=0 evicted=1`, ... (`None`: malformed).
    pub(super) fn parse(text: &str) -> Option<ProtocolEvent> {
        let mut words = text.split(' ');
        let name = words.next()?;
        let fields: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
        let number = |k: &str| fields.get(k).and_then(|v| v.parse::<u64>().ok());
        let node = |k: &str| fields.get(k).and_then(|v| v.parse::<NodeId>().ok());
        Some(match name {
            "declared_dead" => {
                ProtocolEvent::DeclaredDead { node: node("node")?, silence_ms: number("silence_ms") }
            }
            "change_requested" => ProtocolEvent::ChangeRequested {
                shard: node("shard")?,
                from: node("evicted")?,
                to: node("replacement")?,
                is_move: *fields.get("move")? == "true",
            },
            "change_rejected" => {
                ProtocolEvent::ChangeRejected { shard: node("shard")?, evicted: node("evicted")? }
            }
            "duplicate_effect" => ProtocolEvent::DuplicateEffect,
            _ => ProtocolEvent::Other,
        })
    }
}

/// Why the final read `last` misses an acknowledged write of `ops`, if it does: it returned
/// nothing, or a value whose write was over before the newest acknowledged write began.
pub(super) fn acked_write_missed(ops: &[&Op], last: &Op) -> Option<String> {
    let writes = || {
        ops.iter().filter_map(|op| match op.input {
            Input::Write(value) => Some((value, *op)),
            Input::Read => None,
        })
    };
    let newest_acked = writes()
        .filter_map(|(value, op)| match op.outcome {
            Outcome::Ok { return_ns, .. } => Some((return_ns, value, op.call_ns)),
            _ => None,
        })
        .max()?;
    let Outcome::Ok { read, .. } = last.outcome else { return None };
    let Some(read) = read else {
        return Some(format!("reads nothing, but write {} was acknowledged", newest_acked.1));
    };
    let (_, op) = writes().find(|(value, _)| *value == read)?;
    match op.outcome {
        Outcome::Ok { return_ns, .. } if return_ns < newest_acked.2 => {
            Some(format!("reads {read}, written before acknowledged write {} began", newest_acked.1))
        }
        _ => None,
    }
}

/// Each node's link measurements from INFO's `nodeN:...,max_silence_ms=...` lines.
pub(super) fn link_facts(info: &str, node_count: usize) -> Result<Vec<LinkFacts>, String> {
    (0..node_count)
        .map(|n| {
            let prefix = format!("node{n}:");
            let line = info
                .lines()
                .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
                .ok_or_else(|| format!("INFO has no line for node {n}"))?;
            let field = |name: &str| -> Result<u64, String> {
                line.split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("INFO's node {n} line has no number {name}: {line}"))
            };
            Ok(LinkFacts {
                max_silence_ms: field("max_silence_ms")?,
                max_round_trip_ms: field("max_round_trip_ms")?,
                late_replies: field("late_replies")?,
            })
        })
        .collect()
}

/// INFO's `name:number` lines.
pub(super) fn info_counters(info: &str) -> BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            Some((name.to_string(), value.parse::<u64>().ok()?))
        })
        .collect()
}

/// What the coordinator's INFO says at the end: its counters, links and first capacity breach.
pub(crate) fn read_info(
    outcome: &mut RunOutcome,
    info: &str,
    followers: &[String],
    node_count: usize,
) -> Result<(), String> {
    outcome.info_counters = info_counters(info);
    for follower in followers {
        for (name, value) in info_counters(follower) {
            // The fleet's breaches are one meter for all: the leader's INFO has them.
            if matches!(name.as_str(), "capacity_breaches" | "writes_throttled" | "policy_reloads") {
                *outcome.info_counters.entry(name).or_insert(0) += value;
            }
        }
    }
    outcome.links = link_facts(info, node_count)?;
    let counter = |name: &str| outcome.info_counters.get(name).copied().unwrap_or(0);
    // What the partitions and backends took from every coordinator together: with one
    // coordinator its own count, with several what no one of them sees alone as well.
    outcome.capacity_breaches = counter("fleet_capacity_breaches").max(counter("capacity_breaches"));
    outcome.writes_throttled = counter("writes_throttled");
    outcome.changes_in_progress_at_end = counter("evictions_in_progress") + counter("moves_in_progress");
    let first = |key: &str| info.lines().find_map(|line| line.trim().strip_prefix(key)).map(str::to_string);
    outcome.first_capacity_breach =
        first("first_capacity_breach:").or_else(|| first("first_fleet_capacity_breach:"));
    Ok(())
}

/// What the leader family's run found at the end: its coordinator's counters and failovers
/// still under way (INFO), writes a deposed primary acknowledged after a newer epoch's (seen
/// by `PromotionWatch`), and the partitions where two primaries took writes in one epoch.
pub(crate) fn read_leader_info(
    outcome: &mut RunOutcome,
    info: &str,
    late_epoch_acks: u64,
    two_primaries: Vec<String>,
) {
    outcome.leader = true;
    outcome.late_epoch_acks = late_epoch_acks;
    outcome.two_primaries = two_primaries;
    outcome.info_counters = info_counters(info);
    outcome.changes_in_progress_at_end = info
        .lines()
        .filter(|l| l.trim().starts_with("partition_") && l.contains("failover=under_way"))
        .count() as u64;
}

/// One attempt's timeout and the longest backoff after it (`judge_phases`); 0 if operations
/// are never retried (never cut off while retrying: always judged).
pub(crate) fn retry_round_ms(policy: &crate::config::Policy, request_timeout_ms: u64) -> u64 {
    let retries = policy.retry.max_attempts != Some(1);
    if retries {
        request_timeout_ms + u64::from(policy.retry.backoff_max_ticks)
    } else {
        0
    }
}

/// What happened after the faults healed: operations begun before the heal that never
/// completed, and membership changes in the second half of the healed phase (whatever the
/// faults set off has had the first half to settle).
/// `retry_round_ms`: one attempt's timeout and the longest backoff after it, the time an
/// operation caught by the faults needs after the heal to be retried once more; a healed
/// phase shorter than that cannot tell a retry that would have succeeded from one that never
/// does, and `ops_complete` is then not judged if any such operation is still outstanding.
pub(crate) fn judge_phases(
    outcome: &mut RunOutcome,
    load: &client::LoadReport,
    heal_at_ms: u64,
    load_end_ms: u64,
    retry_round_ms: u64,
) {
    let heal_ns = heal_at_ms * 1_000_000;
    outcome.ops_never_completed = load
        .history
        .iter()
        .filter(|op| op.cut_off && op.call_ns < heal_ns)
        .map(|op| {
            format!(
                "client {} {}: {} attempts since {} ms",
                op.client,
                op.key,
                op.attempts,
                op.call_ns / 1_000_000
            )
        })
        .collect();
    // With nothing outstanding, every operation caught by the faults completed: that holds
    // however short the healed phase was.
    let healed_ms = load_end_ms.saturating_sub(heal_at_ms);
    if !outcome.ops_never_completed.is_empty() && healed_ms <= retry_round_ms {
        outcome.ops_complete_unjudged = Some(format!(
            "not judged: the load ran {healed_ms} ms after the heal, not longer than one attempt and its backoff ({retry_round_ms} ms), and {} operations begun before it were still retried: run longer (--duration)",
            outcome.ops_never_completed.len()
        ));
    }
    outcome.settle_at_ms = heal_at_ms + load_end_ms.saturating_sub(heal_at_ms) / 2;
    outcome.changes_after_settle = changes_within(outcome, outcome.settle_at_ms..u64::MAX);
}

/// The replica-set changes (evictions, moves, promotions) made within `ms`, in time order.
pub(crate) fn changes_within(outcome: &RunOutcome, ms: std::ops::Range<u64>) -> Vec<(u64, String)> {
    let mut changes: Vec<(u64, String)> = outcome
        .evictions
        .iter()
        .filter(|e| ms.contains(&e.at_ms))
        .map(|e| (e.at_ms, format!("eviction of node {}", e.node)))
        .chain(
            outcome
                .moves
                .iter()
                .filter(|m| ms.contains(&m.0))
                .map(|m| (m.0, format!("move {} -> {}", m.2, m.3))),
        )
        .collect();
    changes.extend(outcome.promotions.iter().filter(|p| ms.contains(&p.0)).cloned());
    changes.sort();
    changes
}
