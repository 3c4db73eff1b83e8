//! `store sim --replay`: a counterexample of the model played on the store's own code.
//!
//! The model's path names every step, so the replay can make the store's environment do what
//! the trace's did: each fault at its step's moment, each client invocation and retry at
//! theirs, and each message the trace sent delivered at the moment the trace delivered it, or
//! lost where the trace lost it. A step's moment is its tick plus a millisecond for each step
//! before it in that tick, so steps of one tick keep their order, after the timers due at the
//! tick's start (the shell fires those first).
//!
//! The store's own steps (its machine's timers, what it sends in answer) are not forced: it is
//! the code under test. Each message the store sends is matched to one the trace sent from the
//! same sender to the same receiver, of the same kind, in the same tick; a message with no
//! match is the store doing something the trace did not, and a message of the trace's that
//! the store never sent is the trace doing something the store did not. The first of either is
//! where the store left the trace; from there on its messages travel as in a seed.

use super::net::Wire;
use crate::config::Scenario;
use crate::policy::{quorum, NodeId};
use crate::protocol::coordinator::Timer;
use crate::protocol::data::Data;
use crate::protocol::leader::LeaderMsg;
use crate::protocol::{Endpoint, Msg};
use crate::store::node::wire::StoredValue;
use crate::store::run::Step;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// The shell's own messages (no model message is one of them): a catch-up copy's scan of its
/// source and writes to the replacement, and the startup probe. A replay times a copy as the
/// trace times its three messages: the scan arrives when the copy request does (the source's
/// snapshot), the last page's reply and the writes when the copy data does, and the writes'
/// replies when the copy ack does, so the shell's ack step falls where the trace's does (an
/// empty copy, which writes nothing, ends when its last page's reply arrives: then).
pub const SCAN: &str = "scan";
pub const COPY_WRITE: &str = "copy write";
pub const PROBE: &str = "probe";
pub const LAST_SCAN_REPLY: &str = "last scan reply";
pub const COPY_WRITE_REPLY: &str = "copy write reply";
pub const SHELL_REPLY: &str = "shell reply";

/// A step's place in the model's time: its tick, and how many steps came before it in that tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Moment {
    pub tick: u64,
    pub order: u32,
}

impl Moment {
    /// When on the simulated clock, from tick 0: a millisecond (tokio's timers' grain) for
    /// each step before it in the tick, after the tick's start, where the shell fires its due
    /// timers. A tick of more steps than milliseconds ends with its last steps at one moment.
    pub fn offset(self, ms_per_tick: u64) -> Duration {
        let within_ms = (u64::from(self.order) + 1).min(ms_per_tick.saturating_sub(1));
        Duration::from_millis(self.tick * ms_per_tick + within_ms)
    }
}

/// What became of a message the trace sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Delivered at this step.
    Delivered { step: usize, at: Moment },
    /// Lost to the drop fault at this step.
    Lost { step: usize },
    /// Gone with a crash, a partition or a restart: the store's fault does the same.
    Vanished,
    /// Still travelling when the trace ends.
    InFlight,
}

/// A message of the trace.
#[derive(Clone, Debug)]
pub struct Planned {
    pub src: Endpoint,
    pub dst: Endpoint,
    pub kind: &'static str,
    /// The step that sent it and its moment.
    pub sent_step: usize,
    pub sent: Moment,
    pub fate: Fate,
    /// A copy data message that carries nothing (the source never held a write).
    pub empty_copy: bool,
}

/// A client's step of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientStep {
    Invoke,
    Retry,
}

/// A counterexample as the store's environment plays it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Each step of the trace but time passing: its number (as `check` numbers them), its
    /// moment and its text.
    pub steps: Vec<(usize, Moment, String)>,
    pub messages: Vec<Planned>,
    /// Per client, its invocations and retries in order.
    pub clients: Vec<Vec<(Moment, ClientStep)>>,
    /// The faults and their ends, and the rollout's steps (`Step::Rollout(i)` is
    /// `stages[i]`), in order.
    pub(crate) env: Vec<(Moment, Step)>,
    /// A rollout's steps: (coordinator, the stage it moves to).
    pub stages: Vec<(u8, usize)>,
    /// The tick after the trace's last step.
    pub end_tick: u64,
    /// Each coordinator's timers as the trace fires them: (coordinator, tick, kind), in order.
    pub timers: Vec<(u8, u64, &'static str)>,
    /// The first step the store cannot take as the trace does, with the reason (a step of
    /// the model's environment that has no counterpart in the store's).
    pub cannot: Option<(usize, String)>,
    /// A lasso played several times: its loop's first and last step (as `check` numbers them)
    /// and how often it is played; the steps after the first pass are numbered on from there.
    pub looped: Option<(usize, usize, usize)>,
    /// The scenario's names of nodes and clients.
    node_names: Vec<String>,
    client_names: Vec<String>,
}

/// The kind of a message, as the store's wire and the model's name it alike. Messages the
/// store's machine never puts on a wire (the catch-up copy's, the debt query's) have kinds no
/// store message has.
pub fn kind<D: Data>(msg: &Msg<D>) -> &'static str {
    match msg {
        Msg::Request { .. } => "request",
        Msg::Response { .. } => "response",
        Msg::Replicate { .. } => "replicate",
        Msg::ReplicateAck { .. } | Msg::Refused { .. } => "replicate reply",
        Msg::ReadReq { .. } => "read",
        Msg::ReadReply { .. } => "read reply",
        Msg::Ping => "ping",
        Msg::Pong => "pong",
        Msg::CopyRequest { .. } => "copy request",
        Msg::CopyData { .. } => "copy data",
        Msg::CopyAck { .. } => "copy ack",
        Msg::View { .. } => "view",
        Msg::ViewAck { .. } => "view ack",
        Msg::Propose { .. } => "propose",
        Msg::LoadQuery => "load query",
        Msg::LoadReport { .. } => "load report",
        Msg::Leader(m) => leader_kind(m),
    }
}

/// The kind of a leader-family message, as the store's mesh and the model's name it alike.
fn leader_kind<D: Data>(msg: &LeaderMsg<D>) -> &'static str {
    match msg {
        LeaderMsg::Write { .. } => "write",
        LeaderMsg::Read { .. } => "read",
        LeaderMsg::WriteDone { .. } => "write done",
        LeaderMsg::ReadDone { .. } => "read done",
        LeaderMsg::Refused { .. } => "refused",
        LeaderMsg::Append { .. } => "append",
        LeaderMsg::CatchUp { .. } => "catch-up",
        LeaderMsg::Appended { .. } => "appended",
        LeaderMsg::Behind { .. } => "behind",
        LeaderMsg::Stale { .. } => "stale",
        LeaderMsg::Promote { .. } => "promote",
        LeaderMsg::Follow { .. } => "follow",
        LeaderMsg::RoleAck { .. } => "role ack",
        LeaderMsg::InSyncPropose { .. } => "in-sync propose",
        LeaderMsg::InSyncConfirmed { .. } => "in-sync confirmed",
        LeaderMsg::Query { .. } => "query",
        LeaderMsg::Position { .. } => "position",
    }
}

/// A coordinator timer's kind, as the trace's timer steps and the store's due timers name it.
pub fn timer_kind<O>(timer: &Timer<O>) -> &'static str {
    match timer {
        Timer::AckDeadline { .. } => "ack deadline",
        Timer::ApplyMembershipUpdate => "membership update",
        Timer::Heartbeat => "heartbeat",
        Timer::Rebalance => "rebalance",
        Timer::CopyRetry { .. } => "copy retry",
        Timer::ViewResend { .. } => "view resend",
        Timer::FanOut { .. } => "fan out",
        Timer::SilenceCrossed { .. } => "silence crossed",
        Timer::DownOut { .. } => "down out",
        Timer::CopyBackoffOver { .. } => "copy backoff over",
        Timer::JoinTimeout { .. } => "join timeout",
    }
}

/// The timers due at one moment of coordinator `me`'s, in the order the trace fires their
/// kinds in the tick of `now_ms` (a stable sort: kinds the trace does not fire then keep the
/// machine's order, after those it does).
pub fn order_as_traced(timers: &[(u8, u64, &'static str)], me: u8, tick: u64, due: &mut [Timer<u64>]) {
    let traced: Vec<&str> =
        timers.iter().filter(|(c, t, _)| *c == me && *t == tick).map(|(_, _, kind)| *kind).collect();
    if traced.is_empty() {
        return;
    }
    due.sort_by_key(|timer| traced.iter().position(|k| *k == timer_kind(timer)).unwrap_or(usize::MAX));
}

/// Why the store does not send a message of this kind (`None`: it does).
pub fn not_sent_by_store(kind: &str) -> Option<&'static str> {
    match kind {
        "load query" | "load report" => {
            Some("the store's coordinator reads compaction debt from its load facts, not by asking nodes")
        }
        _ => None,
    }
}

impl Plan {
    /// An endpoint as the scenario names it.
    pub fn name(&self, e: Endpoint) -> String {
        match e {
            Endpoint::Node(n) => {
                self.node_names.get(usize::from(n)).cloned().unwrap_or_else(|| format!("node {n}"))
            }
            Endpoint::Coordinator(0) => "coordinator".to_string(),
            Endpoint::Coordinator(c) => format!("coordinator {c}"),
            Endpoint::Client(c) => {
                self.client_names.get(usize::from(c)).cloned().unwrap_or_else(|| "checker".into())
            }
        }
    }

    /// An empty plan, naming the scenario's nodes and clients.
    pub fn new(scenario: &Scenario) -> Plan {
        Plan {
            steps: Vec::new(),
            messages: Vec::new(),
            clients: vec![Vec::new(); scenario.clients.len()],
            env: Vec::new(),
            stages: Vec::new(),
            end_tick: 0,
            cannot: None,
            looped: None,
            timers: Vec::new(),
            node_names: scenario.nodes.iter().map(|n| n.name.clone()).collect(),
            client_names: scenario.clients.iter().map(|c| c.name.clone()).collect(),
        }
    }

    /// Step `step` as `check` numbers it: a lasso's later passes repeat its loop's numbers.
    pub fn shown(&self, step: usize) -> usize {
        match (self.pass_of(step), self.looped) {
            (Some(pass), Some((from, to, _))) => step - pass * (to + 1 - from),
            _ => step,
        }
    }

    /// The busiest tick's steps: a replay keeps them a millisecond apart.
    pub fn most_steps_in_a_tick(&self) -> u32 {
        self.steps.iter().map(|(_, at, _)| at.order + 1).max().unwrap_or(0)
    }

    /// Which pass of a lasso's loop step `step` is in (0: the first); `None` before the loop.
    pub fn pass_of(&self, step: usize) -> Option<usize> {
        let (from, to, _) = self.looped?;
        (step >= from).then(|| (step - from) / (to + 1 - from))
    }

    /// A lasso's passes of its loop, from tick 0: each from the start of the tick of its first
    /// step (time passing aside) to the next's, the last to the trace's end.
    pub fn passes(&self, ms_per_tick: u64) -> Vec<std::ops::Range<Duration>> {
        let Some((_, _, plays)) = self.looped else { return Vec::new() };
        let starts: Vec<Duration> = (0..plays)
            .filter_map(|pass| {
                let (_, at, _) = self.steps.iter().find(|(step, _, _)| self.pass_of(*step) == Some(pass))?;
                Some(Duration::from_millis(at.tick * ms_per_tick))
            })
            .collect();
        let ends = starts.iter().skip(1).copied().chain([self.end(ms_per_tick)]);
        starts.iter().zip(ends).map(|(&start, end)| start..end).collect()
    }

    /// When the trace is over, from tick 0.
    pub fn end(&self, ms_per_tick: u64) -> Duration {
        Duration::from_millis(self.end_tick * ms_per_tick)
    }
}

/// A catch-up copy of the store's, as the replay times it.
struct CopyRun {
    source: NodeId,
    /// The trace's copy data message for it, if the trace's copy request was delivered.
    data: Option<usize>,
    /// When its last page's reply arrives, and its writes.
    reply_at: Option<Duration>,
    write_at: Option<Duration>,
}

/// Which message of the trace: sent in a tick, or by a step.
#[derive(Clone, Copy)]
enum Sent {
    InTick(u64),
    ByStep(usize),
}

/// Where the store's message goes: at a moment, lost, or as a seed would carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    At(Duration),
    Lost,
    Free,
}

/// A message the store sent that the trace did not.
#[derive(Clone, Debug)]
pub struct Unplanned {
    pub at: Duration,
    pub tick: u64,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub kind: &'static str,
}

/// The replay as the simulated network follows it.
pub struct Replayer {
    pub plan: Plan,
    ms_per_tick: u64,
    /// For each planned message, when the store sent it.
    pub matched: Vec<Option<Duration>>,
    pub unplanned: Vec<Unplanned>,
    /// Catch-up copies under way, oldest first.
    copies: Vec<CopyRun>,
}

impl Replayer {
    pub fn new(plan: Plan, ms_per_tick: u64) -> Replayer {
        let matched = vec![None; plan.messages.len()];
        Replayer { plan, ms_per_tick, matched, unplanned: Vec::new(), copies: Vec::new() }
    }

    /// The first unmatched message of the trace of `kind` from `src` to `dst` that `sent`
    /// (a tick, or the step that sent it).
    fn find(&self, kind: &str, src: Endpoint, dst: Option<Endpoint>, sent: Sent) -> Option<usize> {
        self.plan.messages.iter().enumerate().position(|(i, m)| {
            self.matched[i].is_none()
                && m.kind == kind
                && m.src == src
                && dst.is_none_or(|d| d == m.dst)
                && match sent {
                    Sent::InTick(tick) => m.sent.tick == tick,
                    Sent::ByStep(step) => m.sent_step == step,
                }
        })
    }

    /// Message `i` of the trace, sent by the store at `now`: where the trace's went.
    fn as_planned(&mut self, i: usize, now: Duration) -> Route {
        self.matched[i].get_or_insert(now);
        match self.plan.messages[i].fate {
            Fate::Delivered { at, .. } => Route::At(at.offset(self.ms_per_tick).max(now)),
            Fate::Lost { .. } => Route::Lost,
            Fate::Vanished | Fate::InFlight => Route::Free,
        }
    }

    fn delivered_by(&self, i: usize) -> Option<usize> {
        match self.plan.messages[i].fate {
            Fate::Delivered { step, .. } => Some(step),
            _ => None,
        }
    }

    /// The shell's own message (see [`SCAN`]): at once, or as the copy's messages in the trace.
    /// The store's messages of one copy are told apart by their source and their moments: a
    /// copy's writes leave when its last page's reply arrives, their replies when they arrive.
    fn route_shell(&mut self, wire: &Wire, now: Duration, tick: u64) -> Route {
        let at_once = Route::At(now);
        let Some(source) = wire.copy else { return at_once };
        let run = |copies: &[CopyRun], f: &dyn Fn(&CopyRun) -> bool| {
            copies.iter().position(|c| c.source == source && f(c))
        };
        match wire.kind {
            SCAN => {
                if run(&self.copies, &|c| c.reply_at.is_none()).is_some() {
                    return at_once; // a later page
                }
                let Some(i) = self.find("copy request", wire.src, Some(wire.dst), Sent::InTick(tick)) else {
                    return at_once;
                };
                let data = self
                    .delivered_by(i)
                    .and_then(|step| self.find("copy data", wire.dst, None, Sent::ByStep(step)));
                self.copies.push(CopyRun { source, data, reply_at: None, write_at: None });
                self.as_planned(i, now)
            }
            LAST_SCAN_REPLY => {
                let Some(c) = run(&self.copies, &|c| c.reply_at.is_none()) else { return at_once };
                let route = match self.copies[c].data {
                    None => at_once,
                    Some(j) if self.plan.messages[j].empty_copy => {
                        // Nothing to write: the copy ends as this reply arrives, when the
                        // trace's ack does.
                        self.matched[j].get_or_insert(now);
                        self.ack_of(j).map_or(at_once, |k| self.as_planned(k, now))
                    }
                    Some(j) => self.as_planned(j, now),
                };
                self.copies[c].reply_at = Some(arrival(route, now));
                route
            }
            COPY_WRITE => {
                let Some(c) = run(&self.copies, &|c| c.reply_at == Some(now)) else { return at_once };
                let route = self.copies[c].data.map_or(at_once, |j| self.as_planned(j, now));
                self.copies[c].write_at.get_or_insert(arrival(route, now));
                route
            }
            COPY_WRITE_REPLY => {
                let Some(c) = run(&self.copies, &|c| c.write_at == Some(now)) else { return at_once };
                self.copies[c].data.and_then(|j| self.ack_of(j)).map_or(at_once, |k| self.as_planned(k, now))
            }
            _ => at_once,
        }
    }

    /// The trace's copy ack for its copy data message `j`.
    fn ack_of(&self, j: usize) -> Option<usize> {
        let target = self.plan.messages[j].dst;
        let step = self.delivered_by(j)?;
        self.plan.messages.iter().position(|m| m.kind == "copy ack" && m.src == target && m.sent_step == step)
    }

    /// The store sends `wire` at `now` (from tick 0): where it goes. `lost_now`: it is sent
    /// across a cut or to a crashed node, which the model loses as it is sent (the trace
    /// shows no such message, and none is missing from it).
    pub fn route(&mut self, wire: &Wire, now: Duration, lost_now: bool) -> Route {
        // Past the trace's last step the trace says nothing (what that step set off is in
        // the trace: it is sent at that step's moment, before the trace's end).
        let last = self.plan.steps.last().map_or(Duration::ZERO, |(_, at, _)| at.offset(self.ms_per_tick));
        if now > last {
            return Route::Free;
        }
        let tick = now.as_millis() as u64 / self.ms_per_tick;
        if [SCAN, COPY_WRITE, PROBE, LAST_SCAN_REPLY, COPY_WRITE_REPLY, SHELL_REPLY].contains(&wire.kind) {
            return self.route_shell(wire, now, tick);
        }
        let found = self.plan.messages.iter().enumerate().position(|(i, m)| {
            self.matched[i].is_none()
                && m.sent.tick == tick
                && (m.src, m.dst, m.kind) == (wire.src, wire.dst, wire.kind)
        });
        let Some(i) = found else {
            if lost_now {
                return Route::Lost;
            }
            self.unplanned.push(Unplanned { at: now, tick, src: wire.src, dst: wire.dst, kind: wire.kind });
            return Route::Free;
        };
        self.as_planned(i, now)
    }

    /// The first place the store left the trace: a message it sent that the trace did not,
    /// or one of the trace's it did not send (by the step that would have sent it).
    pub fn first_departure(&self) -> Option<(Moment, String)> {
        let missing = self
            .plan
            .messages
            .iter()
            .zip(&self.matched)
            .filter(|(m, sent)| sent.is_none() && m.sent_step > 0 && not_sent_by_store(m.kind).is_none())
            .map(|(m, _)| {
                let delivered = match m.fate {
                    Fate::Delivered { step, .. } => format!(", delivered at step {}", self.plan.shown(step)),
                    Fate::Lost { step } => format!(", lost at step {}", self.plan.shown(step)),
                    Fate::Vanished | Fate::InFlight => String::new(),
                };
                (
                    m.sent,
                    format!(
                        "step {} sends {} from {} to {} in tick {} ({:.3} s{delivered}); the store never sent it",
                        self.plan.shown(m.sent_step),
                        m.kind,
                        self.plan.name(m.src),
                        self.plan.name(m.dst),
                        m.sent.tick,
                        m.sent.offset(self.ms_per_tick).as_secs_f64(),
                    ),
                )
            })
            .min_by_key(|(at, _)| *at);
        let extra = self.unplanned.first().map(|u| {
            let after =
                self.plan.steps.iter().take_while(|(_, m, _)| m.tick <= u.tick).last().map_or(0, |s| self.plan.shown(s.0));
            (
                Moment { tick: u.tick, order: 0 },
                format!(
                    "after step {after}: the store sends {} from {} to {} in tick {} ({:.3} s); the trace sends none then",
                    u.kind,
                    self.plan.name(u.src),
                    self.plan.name(u.dst),
                    u.tick,
                    u.at.as_secs_f64()
                ),
            )
        });
        match (missing, extra) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// The first message of the trace the store cannot send (its machine has no such
    /// message), and why.
    pub fn cannot_follow(&self) -> Option<String> {
        let message =
            self.plan.messages.iter().find(|m| m.sent_step > 0 && not_sent_by_store(m.kind).is_some()).map(
                |m| {
                    (
                        m.sent_step,
                        format!(
                            "step {}: the trace sends {} from {} to {}; {}",
                            self.plan.shown(m.sent_step),
                            m.kind,
                            self.plan.name(m.src),
                            self.plan.name(m.dst),
                            not_sent_by_store(m.kind).unwrap_or_default()
                        ),
                    )
                },
            );
        let environment = self
            .plan
            .cannot
            .as_ref()
            .map(|(step, why)| (*step, format!("step {}: {why}", self.plan.shown(*step))));
        [message, environment].into_iter().flatten().min_by_key(|(step, _)| *step).map(|(_, what)| what)
    }

    /// The trace's steps with what the store did at each: a message delivered or lost as
    /// planned, or not sent by the store.
    pub fn side_by_side(&self, out: &mut String, ms_per_tick: u64) {
        let mut by_step: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (m, sent) in self.plan.messages.iter().zip(&self.matched) {
            let step = match m.fate {
                Fate::Delivered { step, .. } | Fate::Lost { step } => step,
                _ => continue,
            };
            let note = match sent {
                Some(at) => format!("store sent it at {:.3} s", at.as_secs_f64()),
                None => match not_sent_by_store(m.kind) {
                    Some(_) => "not a store message".to_string(),
                    None => "the store never sent it".to_string(),
                },
            };
            by_step.entry(step).or_default().push(note);
        }
        let mut shown_pass = None;
        for (step, at, text) in &self.plan.steps {
            if let (Some(pass), Some((from, to, _))) = (self.plan.pass_of(*step), self.plan.looped) {
                if pass > 0 && shown_pass != Some(pass) {
                    let _ =
                        writeln!(out, "  --- the loop again (pass {}): steps {from} to {to} ---", pass + 1);
                }
                shown_pass = Some(pass);
            }
            let store = by_step.get(step).map(|v| v.join("; ")).unwrap_or_default();
            let time_ms = at.tick * ms_per_tick;
            let shown = self.plan.shown(*step);
            let line = format!("  {shown:>4} {:>9.3} s  {text:<70} {store}", time_ms as f64 / 1000.0);
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

/// A key's replicas at the trace's end: its partition's replica set as the coordinator runs
/// it, each member with what its disk holds (version, value).
#[derive(Clone, Debug)]
pub struct Holding {
    pub key: String,
    pub members: Vec<(NodeId, u64, StoredValue)>,
}

/// `acked_writes_persist` as the model judges a state, on the store's state at the trace's
/// end: the newest write acknowledged by then of each key is held, at its version or newer, by
/// enough members that every read quorum of `read_quorum` sees it. Why not, if it is not.
pub fn acked_but_unseen(
    plan: &Plan,
    holdings: &[Holding],
    acked: &[super::load::Ack],
    until_ns: u64,
    read_quorum: u8,
) -> Option<String> {
    for held in holdings {
        // The acknowledged writes' versions: where a member holds the written value.
        let acked = acked
            .iter()
            .filter(|(key, _, ns)| *key == held.key && *ns <= until_ns)
            .map(|(_, value, _)| *value);
        let mut newest: Option<(u64, u64)> = None; // (version, value)
        for value in acked {
            let bytes = value.to_string().into_bytes();
            let version = held
                .members
                .iter()
                .find(|(_, _, v)| v.as_deref() == Some(bytes.as_slice()))
                .map_or(u64::MAX, |(_, version, _)| *version); // held by none: seen by no read
            if newest.is_none_or(|(v, _)| version > v) {
                newest = Some((version, value));
            }
        }
        let Some((version, value)) = newest else { continue };
        let holders: Vec<String> = held
            .members
            .iter()
            .filter(|(_, v, _)| *v >= version)
            .map(|(n, _, _)| plan.name(Endpoint::Node(*n)))
            .collect();
        let needed = quorum::holders_needed_for_reads(held.members.len(), read_quorum);
        if holders.len() < needed {
            let members: Vec<String> =
                held.members.iter().map(|(n, _, _)| plan.name(Endpoint::Node(*n))).collect();
            return Some(format!(
                "the acknowledged write of {} (value {value}) is on {} of its replicas [{}]{}; a read of {read_quorum} sees it for sure only if it is on {needed}",
                held.key,
                holders.len(),
                members.join(", "),
                if holders.is_empty() { String::new() } else { format!(" ({})", holders.join(", ")) },
            ));
        }
    }
    None
}

/// When a message routed `route` at `now` arrives (`now` if not at a set moment).
fn arrival(route: Route, now: Duration) -> Duration {
    match route {
        Route::At(at) => at,
        Route::Lost | Route::Free => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: &[(usize, u64)], looped: (usize, usize, usize)) -> Plan {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/small-quorum.toml"));
        let mut plan = Plan::new(&Scenario::load(path).expect("the test scenario loads"));
        plan.steps =
            steps.iter().map(|&(step, tick)| (step, Moment { tick, order: 0 }, String::new())).collect();
        plan.looped = Some(looped);
        plan.end_tick = steps.last().map_or(0, |s| s.1 + 1);
        plan
    }

    #[test]
    fn a_lassos_passes_start_at_their_first_steps_tick_and_end_where_the_next_starts() {
        let ms = |a: u64, b: u64| Duration::from_millis(a)..Duration::from_millis(b);
        // Steps 2-3 are the loop, played 3 times: 4-5, 6-7 the later passes.
        let p = plan(&[(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6)], (2, 3, 3));
        assert_eq!([1, 2, 3, 4, 6].map(|s| p.pass_of(s)), [None, Some(0), Some(0), Some(1), Some(2)]);
        assert_eq!(p.passes(100), [ms(100, 300), ms(300, 500), ms(500, 700)]);
        // A pass whose first step is time passing (not among the plan's steps) starts at its
        // next step.
        let p = plan(&[(1, 0), (2, 1), (3, 2), (5, 4), (6, 5), (7, 6)], (2, 3, 3));
        assert_eq!(p.passes(100), [ms(100, 400), ms(400, 500), ms(500, 700)]);
    }
}
