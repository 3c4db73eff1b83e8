//! Trace validation: is an observed run a behaviour of the model?
//!
//! A trace is what a run of the protocol's machines saw and did, one step a line (JSON):
//! the tick it happened at and the step, named as the model's actions are (a delivery with
//! its sender, receiver and message; a timer; a client's invocation, timeout or retry; a
//! fault). [`validate`] follows it through the model from the initial state: time passes tick
//! by tick up to each step's tick (only while nothing is due, as in the model), then the step
//! must be one of the actions the model allows in the state reached. A delivery names no
//! latency window: any message in flight with that sender, receiver and content matches, so
//! the validator keeps every state the trace can have reached and fails only when none allows
//! the next step. The first step no reached state allows is named with what the model allowed
//! instead.

use crate::model::{display, Action, World, WorldState};
use crate::protocol::{Endpoint, Msg, OpId};
use serde::{Deserialize, Serialize};

/// One observed step, as a trace line: `{"tick": 3, "deliver": {"src": ..., "dst": ..., "msg": ...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStep {
    /// Model ticks since the start of the run.
    pub tick: u64,
    #[serde(flatten)]
    pub step: Step,
}

/// A step of the world as an observer can name it: everything an [`Action`] says except the
/// model's own bookkeeping (a message's remaining latency window, its sender's fault epoch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Deliver {
        src: Endpoint,
        dst: Endpoint,
        msg: Msg,
    },
    Lose {
        src: Endpoint,
        dst: Endpoint,
        msg: Msg,
    },
    AckDeadline {
        op: OpId,
        attempt: u8,
    },
    FanOut {
        op: OpId,
        attempt: u8,
    },
    ApplyMembershipUpdate,
    Heartbeat,
    Rebalance,
    CopyRetry {
        shard: u8,
    },
    ClientInvoke {
        client: u8,
    },
    ClientTimeout {
        client: u8,
    },
    ClientRetry {
        client: u8,
    },
    Crash {
        node: u8,
    },
    Restart {
        node: u8,
    },
    CoordinatorRestart,
    Partition {
        zone: u8,
    },
    Heal {
        zone: u8,
    },
    Degrade {
        index: u8,
    },
    Restore {
        index: u8,
    },
    /// A timer of a coordinator other than the leader.
    PeerTimer {
        coord: u8,
        timer: crate::model::Timer,
    },
    Upgrade {
        coord: u8,
    },
    Rollback {
        coord: u8,
    },
    BurstEnds {
        shard: u8,
    },
    /// Leader family: a timer of the failover manager.
    ManagerTimer {
        timer: crate::protocol::leader::ManagerTimer,
    },
    /// Leader family: a timer of a node's replica.
    ReplicaTimer {
        node: u8,
        timer: crate::protocol::leader::ReplicaTimer,
    },
}

impl Step {
    /// The step an action is observed as; `None` for `Tick` (time is the trace's `tick`).
    pub fn of(action: &Action) -> Option<Step> {
        Some(match *action {
            Action::Deliver(e) => Step::Deliver { src: e.src, dst: e.dst, msg: e.msg },
            Action::Lose(e) => Step::Lose { src: e.src, dst: e.dst, msg: e.msg },
            Action::AckDeadline { op, attempt } => Step::AckDeadline { op, attempt },
            Action::FanOut { op, attempt } => Step::FanOut { op, attempt },
            Action::ApplyMembershipUpdate => Step::ApplyMembershipUpdate,
            Action::Heartbeat => Step::Heartbeat,
            Action::Rebalance => Step::Rebalance,
            Action::CopyRetry(shard) => Step::CopyRetry { shard },
            Action::ClientInvoke(client) => Step::ClientInvoke { client },
            Action::ClientTimeout(client) => Step::ClientTimeout { client },
            Action::ClientRetry(client) => Step::ClientRetry { client },
            Action::Crash(node) => Step::Crash { node },
            Action::Restart(node) => Step::Restart { node },
            Action::CoordinatorRestart => Step::CoordinatorRestart,
            Action::Partition(zone) => Step::Partition { zone },
            Action::Heal(zone) => Step::Heal { zone },
            Action::Degrade(index) => Step::Degrade { index },
            Action::Restore(index) => Step::Restore { index },
            Action::PeerTimer { coord, timer } => Step::PeerTimer { coord, timer },
            Action::Upgrade(coord) => Step::Upgrade { coord },
            Action::Rollback(coord) => Step::Rollback { coord },
            Action::BurstEnds(shard) => Step::BurstEnds { shard },
            Action::ManagerTimer(timer) => Step::ManagerTimer { timer },
            Action::ReplicaTimer { node, timer } => Step::ReplicaTimer { node, timer },
            Action::Tick => return None,
        })
    }
}

/// A path of the model as a trace: the steps of `actions` with the tick each happened at.
pub fn trace_of(actions: &[Action]) -> Vec<TraceStep> {
    let mut tick = 0;
    let mut out = Vec::new();
    for a in actions {
        match Step::of(a) {
            None => tick += 1,
            Some(step) => out.push(TraceStep { tick, step }),
        }
    }
    out
}

/// What [`validate`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conformance {
    /// Every step is one the model allows. `states` is how many model states the whole trace
    /// can end in (more than one where deliveries were ambiguous).
    Conforms { steps: usize, ticks: u64, states: usize },
    /// Step `index` (0-based) is not: `why` says what failed, `allowed` lists what the model
    /// allowed instead (in one of the states the trace had reached), `state` shows that state.
    Diverges { index: usize, why: String, allowed: Vec<String>, state: String },
}

/// States kept at once while deliveries are ambiguous; a trace needing more is refused.
pub const STATES_MAX: usize = 4096;

/// The most ticks between two steps of a trace that [`validate`] follows while time still
/// changes the model's states (27 hours at 100 ms a tick); once time changes nothing, it
/// jumps to the next step.
pub const TICK_GAP_MAX: u64 = 1_000_000;

/// Follow `trace` through `world` (see the module doc).
pub fn validate(world: &World, trace: &[TraceStep]) -> Conformance {
    use stateright::Model;
    let mut states: Vec<WorldState> = world.init_states();
    let mut tick = 0u64;
    let diverge = |index: usize, why: String, s: &WorldState| {
        let mut actions = Vec::new();
        world.actions(s, &mut actions);
        Conformance::Diverges {
            index,
            why,
            allowed: actions.iter().map(|a| display::action(&world.cfg, a)).collect(),
            state: display::state(&world.cfg, s),
        }
    };
    for (index, observed) in trace.iter().enumerate() {
        if observed.tick < tick {
            return diverge(
                index,
                format!("tick {} is before tick {tick}: time goes back", observed.tick),
                &states[0],
            );
        }
        let gap_from = tick;
        while tick < observed.tick {
            if tick - gap_from == TICK_GAP_MAX {
                let why = format!(
                    "tick {} is {} ticks after tick {gap_from}, and time still changes the model's states after {TICK_GAP_MAX}: a trace's steps are at most {TICK_GAP_MAX} ticks apart",
                    observed.tick,
                    observed.tick - gap_from
                );
                return diverge(index, why, &states[0]);
            }
            let before = states.clone();
            states.retain(|s| world.tick_enabled(s));
            if states.is_empty() {
                let why = format!(
                    "time cannot pass from tick {tick} to {}: something is due first ({} state(s) reached)",
                    observed.tick,
                    before.len()
                );
                return diverge(index, why, &before[0]);
            }
            states = states.iter().filter_map(|s| world.next_state(s, Action::Tick)).collect();
            dedup(&mut states);
            tick += 1;
            if states.len() == before.len() && states.iter().all(|s| before.contains(s)) {
                // Time no longer changes anything: the rest of the gap is this same set.
                tick = observed.tick;
            }
        }
        let mut next = Vec::new();
        for s in &states {
            let mut actions = Vec::new();
            world.actions(s, &mut actions);
            for a in actions {
                if Step::of(&a).as_ref() == Some(&observed.step) {
                    next.extend(world.next_state(s, a));
                }
            }
        }
        if next.is_empty() {
            let why = format!("the model allows no such step at tick {tick}");
            return diverge(index, why, &states[0]);
        }
        dedup(&mut next);
        if next.len() > STATES_MAX {
            let why = format!("more than {STATES_MAX} model states match the trace so far");
            return diverge(index, why, &states[0]);
        }
        states = next;
    }
    Conformance::Conforms { steps: trace.len(), ticks: tick, states: states.len() }
}

fn dedup(states: &mut Vec<WorldState>) {
    let mut unique: Vec<WorldState> = Vec::with_capacity(states.len());
    for s in states.drain(..) {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    *states = unique;
}

/// Parse a trace file: one [`TraceStep`] per line, blank lines skipped. Errors name the line.
pub fn parse(text: &str) -> Result<Vec<TraceStep>, (usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| (i + 1, e.to_string())))
        .collect()
}

/// How an observed step reads in a report: its trace line (indices as in the trace, since
/// a step the model does not allow may name no node or client of the model).
pub fn describe(step: &TraceStep) -> String {
    serde_json::to_string(step).unwrap_or_else(|e| format!("unprintable step: {e}"))
}
