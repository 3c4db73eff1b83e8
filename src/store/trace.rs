//! The store's trace, and its validation against a model's environment.
//!
//! `store run` records what the coordinator's shell put on the network and what came back
//! into the protocol's machine: each request to a node (`send`: a Replicate, a read or a
//! ping) and the delivery of its reply (`deliver`), beside the faults the run injected, named
//! as the model's fault menu names them. Since the machine is the model's own coordinator
//! (`protocol::Coordinator`), what remains to be checked about a run is its environment:
//! whether every message's fate is one the model allows.
//!
//! [`validate`] checks each request against the scenario: its reply must come back within the
//! round trip the model's latencies allow on that node's link (the base latency, or a
//! degradation while one is on), plus `slack_ms` for what the model does not see (fsync,
//! scheduling), and may be lost only where the model loses messages: the node crashed, its
//! zone was cut off, the link is lossy while the drop fault is on, connections were reset at
//! the heal, or the run ended first. The first request whose fate is none of these is named.
//! A shell that drops a late reply, or a link slower than the model says, shows up here.

use crate::config::Scenario;
use crate::policy::NodeId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
// tokio's: the simulated store (`store sim`) runs on its paused clock; elsewhere the same as std's.
use tokio::time::Instant;

/// A fault as the model's menu names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFault {
    Crash {
        node: NodeId,
    },
    Partition {
        zone: u8,
    },
    /// `faults.degrade[index]` of the scenario.
    Degrade {
        index: u8,
    },
    Drop,
    /// The coordinator crashed and a new one started on its data directory: replies to the
    /// old one's requests reach no machine.
    CoordinatorRestart,
    /// Every fault undone (crashed nodes restarted, links as in the scenario).
    Heal,
    /// A crash with a duration ended: the node restarted.
    Restart {
        node: NodeId,
    },
    /// A partition with a duration ended: the zone's links carry traffic again (connections
    /// that lived through the cut are reset).
    Healed {
        zone: u8,
    },
    /// `faults.degrade[index]`, which has a duration, ended.
    Restored {
        index: u8,
    },
}

/// One line of a store trace (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceLine {
    /// The first line: model time in real time.
    StoreTrace {
        ms_per_tick: u64,
    },
    /// The coordinator sent request `id` (`msg`: replicate, read, ping) to `node`.
    Send {
        at_ms: u64,
        id: u64,
        node: NodeId,
        msg: String,
    },
    /// The reply to request `id` was delivered to the coordinator's machine.
    Deliver {
        at_ms: u64,
        id: u64,
    },
    Fault {
        at_ms: u64,
        fault: TraceFault,
    },
    /// The run's load ended: requests in flight then are not judged.
    End {
        at_ms: u64,
    },
}

/// Writes a trace; clones share the file and the clock.
#[derive(Clone)]
pub struct TraceWriter {
    out: Arc<Mutex<BufWriter<std::fs::File>>>,
    started: Instant,
    /// Request ids, unique across coordinator restarts.
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl TraceWriter {
    /// A trace at `path` whose milliseconds count from `epoch`.
    pub fn create(path: &Path, ms_per_tick: u64, epoch: impl Into<Instant>) -> Result<TraceWriter, String> {
        let epoch = epoch.into();
        let file =
            std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let writer = TraceWriter {
            out: Arc::new(Mutex::new(BufWriter::new(file))),
            started: epoch,
            next_id: Arc::default(),
        };
        writer.line(&TraceLine::StoreTrace { ms_per_tick });
        Ok(writer)
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn line(&self, line: &TraceLine) {
        let mut text = serde_json::to_string(line).expect("a trace line serializes");
        text.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A trace that cannot be written is reported by `flush`.
        let _ = out.write_all(text.as_bytes());
    }

    pub fn fault(&self, fault: TraceFault) {
        self.line(&TraceLine::Fault { at_ms: self.now_ms(), fault });
    }

    pub fn flush(&self) -> Result<(), String> {
        self.out.lock().unwrap_or_else(|p| p.into_inner()).flush().map_err(|e| format!("trace: {e}"))
    }
}

/// Whether `text` is a store trace (its first line says so).
pub fn is_store_trace(text: &str) -> bool {
    text.lines()
        .next()
        .and_then(|l| serde_json::from_str::<TraceLine>(l).ok())
        .is_some_and(|l| matches!(l, TraceLine::StoreTrace { .. }))
}

/// What [`validate`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceVerdict {
    /// Every request's fate is one the model allows: `round_trips` replies within the model's
    /// bounds, `lost` requests lost where the model loses messages, `open` in flight at the
    /// end.
    Conforms { round_trips: usize, lost: usize, open: usize, slowest_ms: u64 },
    /// The request sent on line `line` (1-based) is not: `why` says what happened and what the
    /// model allows.
    Diverges { line: usize, why: String },
}

struct Sent {
    line: usize,
    at_ms: u64,
    node: NodeId,
    msg: String,
}

/// Per node, the fault state over time, from the trace's fault lines.
struct Faults<'a> {
    scenario: &'a Scenario,
    ms_per_tick: u64,
    /// (at_ms, fault), in order.
    events: Vec<(u64, TraceFault)>,
}

impl Faults<'_> {
    /// The longest one-way latency (ticks) of `node`'s link to the coordinator while any fault
    /// active in `[from, to]` ms was on.
    fn worst_one_way_ticks(&self, node: NodeId, from: u64, to: u64) -> u32 {
        let s = self.scenario;
        let (cz, nz) = (s.coordinator.zone, s.nodes[usize::from(node)].zone);
        let mut worst = s.latency[usize::from(cz)][usize::from(nz)].hi;
        let mut degraded: Vec<u8> = Vec::new();
        for (at, f) in &self.events {
            if *at > to {
                break;
            }
            match f {
                TraceFault::Degrade { index } => degraded.push(*index),
                // A link is a byte stream: what was sent before the heal still delays what
                // follows it for one degraded round trip.
                TraceFault::Heal if *at + self.degraded_round_trip_ms(&degraded) < from => degraded.clear(),
                TraceFault::Restored { index } if *at + self.degraded_round_trip_ms(&[*index]) < from => {
                    if let Some(i) = degraded.iter().position(|d| d == index) {
                        degraded.remove(i);
                    }
                }
                _ => {}
            }
        }
        for index in degraded {
            if let Some(d) = s.faults.degrade.get(usize::from(index)) {
                if d.zones == (cz, nz) || d.zones == (nz, cz) {
                    worst = worst.max(d.latency.hi);
                }
            }
        }
        worst
    }

    fn degraded_round_trip_ms(&self, degraded: &[u8]) -> u64 {
        let worst = degraded
            .iter()
            .filter_map(|&i| self.scenario.faults.degrade.get(usize::from(i)))
            .map(|d| d.latency.hi)
            .max()
            .unwrap_or(0);
        2 * u64::from(worst) * self.ms_per_tick
    }

    /// Why the model may lose a request to `node` sent at `from` whose reply was due by `to`,
    /// if it may.
    fn loss_excuse(&self, node: NodeId, from: u64, to: u64) -> Option<String> {
        let s = self.scenario;
        let (cz, nz) = (s.coordinator.zone, s.nodes[usize::from(node)].zone);
        let name = &s.nodes[usize::from(node)].name;
        let mut active: Vec<&TraceFault> = Vec::new();
        for (at, f) in &self.events {
            if *at > to {
                break;
            }
            if matches!(f, TraceFault::CoordinatorRestart) && *at >= from {
                return Some("the coordinator that sent it crashed".into());
            }
            // A fault that ended before the request was sent excuses nothing; one that ended
            // after it was in force when it was sent (and ending a cut resets connections).
            let ended = |active: &mut Vec<&TraceFault>, ended: &dyn Fn(&TraceFault) -> bool| {
                if *at < from {
                    active.retain(|f| !ended(f));
                }
            };
            match f {
                TraceFault::Heal if *at >= from => return Some("connections were reset at the heal".into()),
                TraceFault::Heal => active.clear(),
                TraceFault::Restart { node: n } => {
                    ended(&mut active, &|f| *f == TraceFault::Crash { node: *n })
                }
                TraceFault::Healed { zone } => {
                    ended(&mut active, &|f| *f == TraceFault::Partition { zone: *zone })
                }
                TraceFault::Restored { .. } => {}
                _ => active.push(f),
            }
        }
        active.into_iter().find_map(|f| match f {
            TraceFault::Crash { node: n } if *n == node => Some(format!("{name} was crashed")),
            TraceFault::Partition { zone } if (nz == *zone) != (cz == *zone) => {
                Some(format!("zone {} was cut off", s.zones[usize::from(*zone)]))
            }
            TraceFault::Drop if s.lossy[usize::from(cz)][usize::from(nz)] => {
                Some("the lossy link was dropping messages".into())
            }
            _ => None,
        })
    }
}

/// Check a store trace against `scenario`'s environment (see the module doc).
pub fn validate(scenario: &Scenario, text: &str, slack_ms: u64) -> Result<TraceVerdict, String> {
    let mut lines = text.lines().enumerate();
    let ms_per_tick = match lines.next().map(|(_, l)| serde_json::from_str::<TraceLine>(l)) {
        Some(Ok(TraceLine::StoreTrace { ms_per_tick })) => ms_per_tick,
        _ => return Err("line 1: not a store trace (no store_trace header)".into()),
    };
    let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
    let mut done: Vec<(Sent, Option<u64>)> = Vec::new();
    let mut faults = Vec::new();
    let mut end_ms = None;
    for (index, raw) in lines {
        if raw.trim().is_empty() {
            continue;
        }
        let line = serde_json::from_str::<TraceLine>(raw).map_err(|e| format!("line {}: {e}", index + 1))?;
        match line {
            TraceLine::StoreTrace { .. } => return Err(format!("line {}: a second header", index + 1)),
            TraceLine::Send { at_ms, id, node, msg } => {
                if usize::from(node) >= scenario.nodes.len() {
                    return Err(format!(
                        "line {}: node {node}: the model has {}",
                        index + 1,
                        scenario.nodes.len()
                    ));
                }
                sent.insert(id, Sent { line: index + 1, at_ms, node, msg });
            }
            TraceLine::Deliver { at_ms, id } => {
                let s = sent
                    .remove(&id)
                    .ok_or_else(|| format!("line {}: request {id} was never sent", index + 1))?;
                done.push((s, Some(at_ms)));
            }
            TraceLine::Fault { at_ms, fault } => {
                if let TraceFault::Degrade { index: d } | TraceFault::Restored { index: d } = fault {
                    if usize::from(d) >= scenario.faults.degrade.len() {
                        return Err(format!("line {}: the model has no degrade fault {d}", index + 1));
                    }
                }
                faults.push((at_ms, fault));
            }
            TraceLine::End { at_ms } => end_ms = Some(at_ms),
        }
    }
    let end_ms = end_ms.ok_or("the trace has no end line (the run did not finish?)")?;
    done.extend(sent.into_values().map(|s| (s, None)));
    done.sort_by_key(|(s, _)| s.line);
    let faults = Faults { scenario, ms_per_tick, events: faults };
    let (mut round_trips, mut lost, mut open, mut slowest_ms) = (0, 0, 0, 0);
    for (s, delivered) in done {
        let name = &scenario.nodes[usize::from(s.node)].name;
        let bound_at = |to: u64| 2 * u64::from(faults.worst_one_way_ticks(s.node, s.at_ms, to)) * ms_per_tick;
        match delivered {
            Some(at) => {
                let took = at.saturating_sub(s.at_ms);
                let bound = bound_at(at);
                if took > bound + slack_ms && faults.loss_excuse(s.node, s.at_ms, at).is_none() {
                    return Ok(TraceVerdict::Diverges {
                        line: s.line,
                        why: format!(
                            "the reply to a {} sent to {name} at {} ms came back after {took} ms; the model's latencies allow a round trip of at most {bound} ms (+{slack_ms} ms slack)",
                            s.msg, s.at_ms
                        ),
                    });
                }
                slowest_ms = slowest_ms.max(took);
                round_trips += 1;
            }
            None => {
                let due = s.at_ms + bound_at(end_ms) + slack_ms;
                if due >= end_ms {
                    open += 1;
                } else if faults.loss_excuse(s.node, s.at_ms, due).is_some() {
                    lost += 1;
                } else {
                    return Ok(TraceVerdict::Diverges {
                        line: s.line,
                        why: format!(
                            "the reply to a {} sent to {name} at {} ms never reached the coordinator's machine, although the model's latencies bring it back within {} ms and nothing in the model loses it there ({name} up, not cut off, the link not dropping)",
                            s.msg,
                            s.at_ms,
                            bound_at(due)
                        ),
                    });
                }
            }
        }
    }
    Ok(TraceVerdict::Conforms { round_trips, lost, open, slowest_ms })
}

/// The verdict in one line, for `store run`'s report and `conform`.
pub fn describe(verdict: &TraceVerdict, model: &str) -> String {
    match verdict {
        TraceVerdict::Conforms { round_trips, lost, open, slowest_ms } => format!(
            "every request's fate is a behaviour of model {model}: {round_trips} round trips (slowest {slowest_ms} ms), {lost} lost where the model loses messages, {open} in flight at the end"
        ),
        TraceVerdict::Diverges { line, why } => {
            format!("line {line} is not a behaviour of model {model}: {why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remirror_storm() -> Scenario {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/remirror-storm.toml");
        Scenario::load(std::path::Path::new(path)).expect("the library model loads")
    }

    /// A trace of requests to `node` (each `(sent_ms, delivered_ms)`), beside `faults`, ending
    /// at 20 s, validated against the remirror-storm model (100 ms ticks, 100 ms links).
    fn judge(node: NodeId, requests: &[(u64, Option<u64>)], faults: &[(u64, TraceFault)]) -> TraceVerdict {
        let scenario = remirror_storm();
        let mut lines = vec![TraceLine::StoreTrace { ms_per_tick: 100 }];
        lines.extend(
            faults.iter().map(|(at_ms, fault)| TraceLine::Fault { at_ms: *at_ms, fault: fault.clone() }),
        );
        for (id, (sent, delivered)) in requests.iter().enumerate() {
            let id = id as u64 + 1;
            lines.push(TraceLine::Send { at_ms: *sent, id, node, msg: "ping".into() });
            if let Some(at_ms) = delivered {
                lines.push(TraceLine::Deliver { at_ms: *at_ms, id });
            }
        }
        lines.push(TraceLine::End { at_ms: 20_000 });
        let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
        validate(&scenario, &text, 100).expect("a well-formed trace")
    }

    #[test]
    fn a_crash_excuses_losses_only_until_the_node_restarts() {
        let crash = [(1_000, TraceFault::Crash { node: 1 }), (3_000, TraceFault::Restart { node: 1 })];
        let during = judge(1, &[(2_000, None)], &crash);
        assert!(matches!(during, TraceVerdict::Conforms { lost: 1, .. }), "{during:?}");
        // Sent before the restart, its reply due after it: the node was down when it arrived.
        let across = judge(1, &[(2_900, None)], &crash);
        assert!(matches!(across, TraceVerdict::Conforms { lost: 1, .. }), "{across:?}");
        let after = judge(1, &[(4_000, None)], &crash);
        assert!(matches!(after, TraceVerdict::Diverges { .. }), "{after:?}");
        // Without the restart the crash lasts to the end.
        let endless = judge(1, &[(4_000, None)], &crash[..1]);
        assert!(matches!(endless, TraceVerdict::Conforms { lost: 1, .. }), "{endless:?}");
    }

    #[test]
    fn a_cut_excuses_losses_on_its_zones_links_only_while_it_lasts() {
        let cut = [(1_000, TraceFault::Partition { zone: 1 }), (2_000, TraceFault::Healed { zone: 1 })];
        let during = judge(1, &[(1_500, None)], &cut);
        assert!(matches!(during, TraceVerdict::Conforms { lost: 1, .. }), "{during:?}");
        let after = judge(1, &[(2_500, None)], &cut);
        assert!(matches!(after, TraceVerdict::Diverges { .. }), "{after:?}");
        // n1 is in zone a, on the coordinator's side of the cut.
        let other_side = judge(0, &[(1_500, None)], &cut);
        assert!(matches!(other_side, TraceVerdict::Diverges { .. }), "{other_side:?}");
    }

    #[test]
    fn an_ended_fault_that_the_model_does_not_list_is_refused() {
        let scenario = remirror_storm();
        let text = [
            TraceLine::StoreTrace { ms_per_tick: 100 },
            TraceLine::Fault { at_ms: 5, fault: TraceFault::Restored { index: 0 } },
            TraceLine::End { at_ms: 10 },
        ]
        .iter()
        .map(|l| serde_json::to_string(l).unwrap() + "\n")
        .collect::<String>();
        let err = validate(&scenario, &text, 100).unwrap_err();
        assert!(err.contains("line 2") && err.contains("no degrade fault 0"), "{err}");
    }
}
