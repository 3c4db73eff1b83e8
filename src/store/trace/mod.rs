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
//!
//! The leader family's machines talk to each other, not only to a coordinator: its trace
//! records each one-way message (`message`: from, to, kind) and its delivery into the
//! receiver's machine. A message must arrive within the one-way latency of its link (zones of
//! sender and receiver), and may be lost only where the model loses it: the receiver was down
//! (a node crashed, or the coordinator restarted) while it was on its way, their zones were cut
//! apart, the link was dropping, or the run ended first.

use crate::config::Scenario;
use crate::policy::NodeId;
use crate::protocol::Endpoint;
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
    /// Coordinator 0 (the only one the models' fault menus crash) crashed and a new one started
    /// on its data directory: replies to the old one's requests reach no machine.
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
    /// The first line: model time in real time, and what a trip may take beyond the model's
    /// latencies (`store run`'s [`real_slack_ms`] when left out).
    StoreTrace {
        ms_per_tick: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slack_ms: Option<u64>,
    },
    /// Coordinator `coordinator` sent request `id` (`msg`: replicate, read, ping) to `node`.
    Send {
        at_ms: u64,
        id: u64,
        node: NodeId,
        msg: String,
        /// Left out for coordinator 0 (a trace of one coordinator names none).
        #[serde(default, skip_serializing_if = "is_zero")]
        coordinator: u8,
    },
    /// The leader family: `from`'s machine sent message `id` (`msg`: its kind) to `to` (the
    /// failover manager is coordinator 0).
    Message {
        at_ms: u64,
        id: u64,
        from: Endpoint,
        to: Endpoint,
        msg: String,
    },
    /// The reply to request `id` was delivered to the coordinator's machine (message `id`, to
    /// its receiver's).
    Deliver {
        at_ms: u64,
        id: u64,
    },
    Fault {
        at_ms: u64,
        fault: TraceFault,
    },
    /// The run's load ended: requests in flight then are not judged, and the writer writes
    /// nothing after it.
    End {
        at_ms: u64,
    },
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// What a real round trip may take beyond the model's latencies: a tick (time is discrete in
/// the model), fsync and scheduling.
pub fn real_slack_ms(ms_per_tick: u64) -> u64 {
    ms_per_tick + 500
}

/// Writes a trace; clones share the file and the clock.
#[derive(Clone)]
pub struct TraceWriter {
    /// The file, and whether its end line is written.
    out: Arc<Mutex<(BufWriter<std::fs::File>, bool)>>,
    started: Instant,
    /// Request ids, unique across coordinator restarts.
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl TraceWriter {
    /// A trace at `path` whose milliseconds count from `epoch`, judged with `slack_ms`.
    pub fn create(
        path: &Path,
        ms_per_tick: u64,
        slack_ms: u64,
        epoch: impl Into<Instant>,
    ) -> Result<TraceWriter, String> {
        let epoch = epoch.into();
        let file =
            std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let writer = TraceWriter {
            out: Arc::new(Mutex::new((BufWriter::new(file), false))),
            started: epoch,
            next_id: Arc::default(),
        };
        writer.line(&TraceLine::StoreTrace { ms_per_tick, slack_ms: Some(slack_ms) });
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
        if out.1 {
            return;
        }
        out.1 = matches!(line, TraceLine::End { .. });
        // A trace that cannot be written is reported by `flush`.
        let _ = out.0.write_all(text.as_bytes());
    }

    pub fn fault(&self, fault: TraceFault) {
        self.fault_at(self.now_ms(), fault);
    }

    /// `fault` at `at_ms` (from this trace's start), as its caller read the clock.
    pub fn fault_at(&self, at_ms: u64, fault: TraceFault) {
        self.line(&TraceLine::Fault { at_ms, fault });
    }

    pub fn flush(&self) -> Result<(), String> {
        self.out.lock().unwrap_or_else(|p| p.into_inner()).0.flush().map_err(|e| format!("trace: {e}"))
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
    /// `messages`: one-way messages delivered within the model's bounds (the leader family).
    Conforms { round_trips: usize, messages: usize, lost: usize, open: usize, slowest_ms: u64 },
    /// The request sent on line `line` (1-based) is not: `why` says what happened and what the
    /// model allows.
    Diverges { line: usize, why: String },
}

struct Sent {
    line: usize,
    at_ms: u64,
    from: Endpoint,
    to: Endpoint,
    /// A request whose reply comes back to `from` (the quorum family), or a one-way message.
    round_trip: bool,
    msg: String,
}

/// The fault state over time, from the trace's fault lines.
struct Faults<'a> {
    scenario: &'a Scenario,
    ms_per_tick: u64,
    /// (at_ms, fault), in order.
    events: Vec<(u64, TraceFault)>,
}

impl Faults<'_> {
    fn zone(&self, p: Endpoint) -> u8 {
        match p {
            Endpoint::Coordinator(c) => self.scenario.coordinators[usize::from(c)].zone,
            Endpoint::Node(n) => self.scenario.nodes[usize::from(n)].zone,
            Endpoint::Client(c) => self.scenario.clients[usize::from(c)].zone,
        }
    }

    fn name(&self, p: Endpoint) -> String {
        match p {
            Endpoint::Coordinator(0) if self.scenario.coordinators.len() == 1 => "the coordinator".into(),
            Endpoint::Coordinator(c) => {
                format!("coordinator {}", self.scenario.coordinators[usize::from(c)].name)
            }
            Endpoint::Node(n) => self.scenario.nodes[usize::from(n)].name.clone(),
            Endpoint::Client(c) => self.scenario.clients[usize::from(c)].name.clone(),
        }
    }

    /// The longest one-way latency (ticks) of the link between `a` and `b` while any fault
    /// active in `[from, to]` ms was on.
    fn worst_one_way_ticks(&self, (a, b): (Endpoint, Endpoint), from: u64, to: u64) -> u32 {
        let s = self.scenario;
        let (za, zb) = (self.zone(a), self.zone(b));
        let mut worst = s.latency[usize::from(za)][usize::from(zb)].hi;
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
                if d.zones == (za, zb) || d.zones == (zb, za) {
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

    /// The nodes down and the zones cut off after the faults before `t` ms, or (`at_too`)
    /// those at `t` as well.
    fn in_force(&self, t: u64, at_too: bool) -> (Vec<NodeId>, Vec<u8>) {
        let (mut down, mut cut) = (Vec::new(), Vec::new());
        for (_, f) in self.events.iter().take_while(|(at, _)| *at < t || (at_too && *at == t)) {
            match f {
                TraceFault::Crash { node } => down.push(*node),
                TraceFault::Restart { node } => down.retain(|n| n != node),
                TraceFault::Partition { zone } => cut.push(*zone),
                TraceFault::Healed { zone } => cut.retain(|z| z != zone),
                TraceFault::Heal => {
                    down.clear();
                    cut.clear();
                }
                _ => {}
            }
        }
        (down, cut)
    }

    /// The nodes down and the zones cut off at `t` ms whichever way the faults of that very
    /// millisecond fell: in force just before it and just after it.
    fn in_force_throughout(&self, t: u64) -> (Vec<NodeId>, Vec<u8>) {
        let (before, after) = (self.in_force(t, false), self.in_force(t, true));
        (
            before.0.into_iter().filter(|n| after.0.contains(n)).collect(),
            before.1.into_iter().filter(|z| after.1.contains(z)).collect(),
        )
    }

    /// Why the model could not have delivered message `sent` at `at` ms (one way), if so: its
    /// sender was down when it sent it, or its receiver down or cut off from it at the arrival.
    fn impossible_delivery(&self, sent: &Sent, at: u64) -> Option<String> {
        if let Endpoint::Node(n) = sent.from {
            if self.in_force_throughout(sent.at_ms).0.contains(&n) {
                return Some(format!("{} sent it while crashed", self.name(sent.from)));
            }
        }
        let (down, cut) = self.in_force_throughout(at);
        if let Endpoint::Node(n) = sent.to {
            if down.contains(&n) {
                let to = self.name(sent.to);
                return Some(format!("it reached {to}'s machine at {at} ms, while {to} was crashed"));
            }
        }
        let (za, zb) = (self.zone(sent.from), self.zone(sent.to));
        cut.iter().find(|&&z| (za == z) != (zb == z)).map(|&z| {
            let zone = &self.scenario.zones[usize::from(z)];
            format!("it arrived at {at} ms, while zone {zone} was cut off from the sender's")
        })
    }

    /// Why the model may lose `sent`, whose reply (or, one way, itself) was due by `to` ms, if
    /// it may.
    fn loss_excuse(&self, sent: &Sent, to: u64) -> Option<String> {
        let s = self.scenario;
        let from = sent.at_ms;
        let (za, zb) = (self.zone(sent.from), self.zone(sent.to));
        let mut active: Vec<&TraceFault> = Vec::new();
        for (at, f) in &self.events {
            if *at > to {
                break;
            }
            if matches!(f, TraceFault::CoordinatorRestart) && *at >= from {
                if sent.round_trip && sent.from == Endpoint::Coordinator(0) {
                    return Some("the coordinator that sent it crashed".into());
                }
                // The restarted coordinator is a new process: what was on its way to the old
                // one went with it.
                if sent.to == Endpoint::Coordinator(0) {
                    return Some("the coordinator it was sent to restarted".into());
                }
            }
            // A fault that ended before the message was sent excuses nothing; one that ended
            // after it was in force when it was sent (and ending a cut resets connections).
            let ended = |active: &mut Vec<&TraceFault>, ended: &dyn Fn(&TraceFault) -> bool| {
                if *at < from {
                    active.retain(|f| !ended(f));
                }
            };
            match f {
                // A request's reply comes back on the connection the heal resets; the leader
                // family's messages lose nothing at a heal.
                TraceFault::Heal if *at >= from && sent.round_trip => {
                    return Some("connections were reset at the heal".into())
                }
                // Faults the heal ended after the message left were in force when it left.
                TraceFault::Heal if *at >= from => {}
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
        // Of a round trip, the node is the far end; of a message, the receiver.
        active.into_iter().find_map(|f| match f {
            TraceFault::Crash { node: n } if sent.to == Endpoint::Node(*n) => {
                Some(format!("{} was crashed", self.name(sent.to)))
            }
            TraceFault::Partition { zone } if (za == *zone) != (zb == *zone) => {
                Some(format!("zone {} was cut off", s.zones[usize::from(*zone)]))
            }
            TraceFault::Drop if s.lossy[usize::from(za)][usize::from(zb)] => {
                Some("the lossy link was dropping messages".into())
            }
            _ => None,
        })
    }
}

/// The slowest time scale a store plays a model tick at, in milliseconds.
pub const MS_PER_TICK_MAX: u64 = 10_000;
/// The most slack a trace's header may grant: an hour.
const SLACK_MS_MAX: u64 = 3_600_000;

/// Check a store trace against `scenario`'s environment (see the module doc).
pub fn validate(scenario: &Scenario, text: &str) -> Result<TraceVerdict, String> {
    let mut lines = text.lines().enumerate();
    let (ms_per_tick, slack_ms) = match lines.next().map(|(_, l)| serde_json::from_str::<TraceLine>(l)) {
        Some(Ok(TraceLine::StoreTrace { ms_per_tick, slack_ms })) => {
            if ms_per_tick == 0 || ms_per_tick > MS_PER_TICK_MAX {
                return Err(format!("line 1: ms_per_tick = {ms_per_tick}: must be 1 to {MS_PER_TICK_MAX}"));
            }
            match slack_ms {
                Some(ms) if ms > SLACK_MS_MAX => {
                    return Err(format!("line 1: slack_ms = {ms}: must be at most {SLACK_MS_MAX}"));
                }
                Some(ms) => (ms_per_tick, ms),
                None => (ms_per_tick, real_slack_ms(ms_per_tick)),
            }
        }
        _ => return Err("line 1: not a store trace (no store_trace header)".into()),
    };
    let known = |line: usize, p: Endpoint| match p {
        Endpoint::Node(n) if usize::from(n) >= scenario.nodes.len() => {
            Err(format!("line {line}: node {n}: the model has {}", scenario.nodes.len()))
        }
        Endpoint::Coordinator(c) if usize::from(c) >= scenario.coordinators.len() => {
            Err(format!("line {line}: coordinator {c}: the model has {}", scenario.coordinators.len()))
        }
        Endpoint::Client(c) if usize::from(c) >= scenario.clients.len() => {
            Err(format!("line {line}: client {c}: the model has {}", scenario.clients.len()))
        }
        _ => Ok(p),
    };
    let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
    // Each id delivered, and the line that did.
    let mut delivered: BTreeMap<u64, usize> = BTreeMap::new();
    let mut done: Vec<(Sent, Option<u64>)> = Vec::new();
    let mut faults = Vec::new();
    let mut end_ms = None;
    for (index, raw) in lines {
        if raw.trim().is_empty() {
            continue;
        }
        let line = index + 1;
        let parsed = serde_json::from_str::<TraceLine>(raw).map_err(|e| format!("line {line}: {e}"))?;
        match parsed {
            TraceLine::StoreTrace { .. } => return Err(format!("line {line}: a second header")),
            TraceLine::Send { at_ms, id, node, msg, coordinator } => {
                let (from, to) =
                    (known(line, Endpoint::Coordinator(coordinator))?, known(line, Endpoint::Node(node))?);
                sent.insert(id, Sent { line, at_ms, from, to, round_trip: true, msg });
            }
            TraceLine::Message { at_ms, id, from, to, msg } => {
                let (from, to) = (known(line, from)?, known(line, to)?);
                sent.insert(id, Sent { line, at_ms, from, to, round_trip: false, msg });
            }
            TraceLine::Deliver { at_ms, id } => {
                let Some(s) = sent.remove(&id) else {
                    return Err(match delivered.get(&id) {
                        Some(first) => format!("line {line}: {id} was delivered already, on line {first}"),
                        None => format!("line {line}: {id} was never sent"),
                    });
                };
                delivered.insert(id, line);
                done.push((s, Some(at_ms)));
            }
            TraceLine::Fault { at_ms, fault } => {
                if let TraceFault::Degrade { index: d } | TraceFault::Restored { index: d } = fault {
                    if usize::from(d) >= scenario.faults.degrade.len() {
                        return Err(format!("line {line}: the model has no degrade fault {d}"));
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
    let (mut round_trips, mut messages, mut lost, mut open, mut slowest_ms) = (0, 0, 0, 0, 0);
    for (s, delivered) in done {
        let legs = if s.round_trip { 2 } else { 1 };
        let bound_at =
            |to: u64| legs * u64::from(faults.worst_one_way_ticks((s.from, s.to), s.at_ms, to)) * ms_per_tick;
        let what = if s.round_trip {
            format!("the reply to a {} sent to {} at {} ms", s.msg, faults.name(s.to), s.at_ms)
        } else {
            format!("the {} {} sent to {} at {} ms", s.msg, faults.name(s.from), faults.name(s.to), s.at_ms)
        };
        let (arrived, machine, trip) = if s.round_trip {
            ("came back", format!("{}'s machine", faults.name(s.from)), "a round trip")
        } else {
            ("arrived", format!("{}'s machine", faults.name(s.to)), "a message's trip")
        };
        match delivered {
            Some(at) => {
                let impossible = if at < s.at_ms {
                    Some(format!("it was delivered at {at} ms, before it was sent"))
                } else if s.round_trip {
                    None
                } else {
                    faults.impossible_delivery(&s, at)
                };
                if let Some(why) = impossible {
                    return Ok(TraceVerdict::Diverges { line: s.line, why: format!("{what}: {why}") });
                }
                let took = at - s.at_ms;
                let bound = bound_at(at);
                if took > bound + slack_ms && faults.loss_excuse(&s, at).is_none() {
                    return Ok(TraceVerdict::Diverges {
                        line: s.line,
                        why: format!(
                            "{what} {arrived} after {took} ms; the model's latencies allow {trip} of at most {bound} ms (+{slack_ms} ms slack)"
                        ),
                    });
                }
                slowest_ms = slowest_ms.max(took);
                if s.round_trip {
                    round_trips += 1;
                } else {
                    messages += 1;
                }
            }
            None => {
                let due = s.at_ms.saturating_add(bound_at(end_ms)).saturating_add(slack_ms);
                if due >= end_ms {
                    open += 1;
                } else if faults.loss_excuse(&s, due).is_some() {
                    lost += 1;
                } else {
                    let far = faults.name(s.to);
                    return Ok(TraceVerdict::Diverges {
                        line: s.line,
                        why: format!(
                            "{what} never reached {machine}, although the model's latencies bring it within {} ms and nothing in the model loses it there ({far} up, not cut off, the link not dropping)",
                            bound_at(due)
                        ),
                    });
                }
            }
        }
    }
    Ok(TraceVerdict::Conforms { round_trips, messages, lost, open, slowest_ms })
}

/// The verdict in one line, for `store run`'s report and `conform`.
pub fn describe(verdict: &TraceVerdict, model: &str) -> String {
    match verdict {
        TraceVerdict::Conforms { round_trips, messages, lost, open, slowest_ms } => {
            let carried = match (round_trips, messages) {
                (r, 0) => format!("every request's fate is a behaviour of model {model}: {r} round trips"),
                (0, m) => format!("every message's fate is a behaviour of model {model}: {m} delivered"),
                (r, m) => format!(
                    "every message's fate is a behaviour of model {model}: {r} round trips, {m} one-way messages"
                ),
            };
            format!(
                "{carried} (slowest {slowest_ms} ms), {lost} lost where the model loses messages, {open} in flight at the end"
            )
        }
        TraceVerdict::Diverges { line, why } => {
            format!("line {line} is not a behaviour of model {model}: {why}")
        }
    }
}

#[cfg(test)]
mod tests;
