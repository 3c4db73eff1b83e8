//! Clients: run their workload one operation at a time, time out, back off and retry per
//! policy, and record the history the `linearizable` property checks.
//!
//! A repeating client (`repeat = true`: continuous load) starts over after its last operation
//! and moves on to its next operation when it gives up on one, forever. It records no history
//! (the model refuses `linearizable` with one), and each of its writes writes the value of its
//! position in the workload: values are then read back by nobody who compares them, so the
//! world stays finite. Its operation numbers are kept relative (see `canon`).

use super::env::send;
use super::history::RegisterOp;
use super::{Action, ClientPhase, Endpoint, Msg, OpId, WorldConfig, WorldState};
use crate::config::OpKind;
use crate::policy::retry::{self, RetryDecision};

pub fn no_timer_due(s: &WorldState) -> bool {
    s.clients.iter().all(|c| match c.phase {
        ClientPhase::Waiting { timeout_ticks, .. } => timeout_ticks > 0,
        ClientPhase::Backoff { latest_ticks, .. } => latest_ticks > 0,
        ClientPhase::Idle { latest_ticks, .. } => latest_ticks > 0,
        ClientPhase::Done => true,
    })
}

pub fn actions(cfg: &WorldConfig, s: &WorldState, actions: &mut Vec<Action>) {
    for (i, c) in s.clients.iter().enumerate() {
        let i = i as u8;
        match c.phase {
            // The next operation starts anywhere in the think-time window.
            ClientPhase::Idle { earliest_ticks: 0, .. } => {
                let spec = &cfg.clients[usize::from(i)];
                assert!(spec.repeat || usize::from(c.next_op) < spec.ops.len());
                actions.push(Action::ClientInvoke(i))
            }
            ClientPhase::Waiting { timeout_ticks: 0, .. } => actions.push(Action::ClientTimeout(i)),
            ClientPhase::Backoff { earliest_ticks: 0, .. } => actions.push(Action::ClientRetry(i)),
            _ => {}
        }
    }
}

pub fn tick(s: &mut WorldState) {
    for c in &mut s.clients {
        match &mut c.phase {
            ClientPhase::Waiting { timeout_ticks, .. } => *timeout_ticks -= 1,
            ClientPhase::Idle { earliest_ticks, latest_ticks }
            | ClientPhase::Backoff { earliest_ticks, latest_ticks, .. } => {
                *earliest_ticks = earliest_ticks.saturating_sub(1);
                *latest_ticks -= 1;
            }
            ClientPhase::Done => {}
        }
    }
}

fn current(cfg: &WorldConfig, s: &WorldState, c: u8) -> (OpId, OpKind) {
    let seq = s.clients[usize::from(c)].next_op;
    (OpId { client: c, seq }, cfg.clients[usize::from(c)].op_kind(seq))
}

/// What operation `op` writes: unique per operation of a finite workload; per position in
/// the workload for a repeating client.
fn value_written(cfg: &WorldConfig, op: OpId) -> u8 {
    let spec = &cfg.clients[usize::from(op.client)];
    let seq = if spec.repeat { op.seq % spec.ops.len() as u8 } else { op.seq };
    OpId { seq, ..op }.write_value()
}

/// Whether client `c` records a history for `linearizable`.
fn records_history(cfg: &WorldConfig, c: u8) -> bool {
    !cfg.clients[usize::from(c)].repeat
}

fn send_attempt(cfg: &WorldConfig, s: &mut WorldState, c: u8, attempt: u8) {
    let (op, kind) = current(cfg, s, c);
    let spec = &cfg.clients[usize::from(c)];
    let shard = s.clients[usize::from(c)].partition;
    let value = value_written(cfg, op);
    let msg = Msg::Request { op, attempt, kind, shard, key: (), value, token: () };
    send(cfg, s, Endpoint::Client(c), Endpoint::Coordinator(spec.coordinator), msg);
    s.clients[usize::from(c)].phase =
        ClientPhase::Waiting { attempt, timeout_ticks: spec.request_timeout_ticks as u8 };
}

pub fn on_invoke(cfg: &WorldConfig, s: &mut WorldState, c: u8) {
    let (op, kind) = current(cfg, s, c);
    let shard = usize::from(s.clients[usize::from(c)].partition);
    if records_history(cfg, c) {
        let register_op = match kind {
            OpKind::Write => RegisterOp::Write(value_written(cfg, op)),
            OpKind::Read => RegisterOp::Read(0),
        };
        // The tester rejects only malformed histories (two ops in flight on one client), which
        // the client's phases rule out.
        std::sync::Arc::make_mut(&mut s.ghost_mut().history)[shard].invoke(c, op.seq, register_op);
    }
    send_attempt(cfg, s, c, 1);
}

pub fn on_retry(cfg: &WorldConfig, s: &mut WorldState, c: u8) {
    let ClientPhase::Backoff { attempt, .. } = s.clients[usize::from(c)].phase else { unreachable!() };
    let policy = &cfg.policy.retry;
    let client = &mut s.clients[usize::from(c)];
    client.retries_used = match policy.max_attempts {
        Some(_) if !cfg.clients[usize::from(c)].repeat => client.retries_used + 1,
        // Retrying without limit, or forever: only whether the budget is spent matters.
        _ => (client.retries_used + 1).min(policy.retry_budget.unwrap_or(0)),
    };
    let tracked = retry::attempts_tracked(policy);
    let next = if attempt < tracked {
        attempt + 1
    } else {
        // Past the attempts the policy tells apart, the new attempt reuses the last number;
        // what is still in flight of the previous one becomes an earlier attempt.
        assert!(policy.max_attempts.is_none(), "a limited client gives up before this");
        let (op, _) = current(cfg, s, c);
        retire_attempt(s, op, tracked);
        tracked
    };
    send_attempt(cfg, s, c, next);
}

/// Renumber attempt `attempt` of `op` as `attempt - 1` everywhere it is in flight (messages
/// and the coordinator's requests), so the number can be reused for a new attempt. Nothing
/// matches an earlier attempt but the coordinator's bookkeeping, which stays per attempt.
fn retire_attempt(s: &mut WorldState, op: OpId, attempt: u8) {
    assert!(attempt >= 2);
    let older = attempt - 1;
    for e in &mut s.net {
        match &mut e.msg {
            Msg::Request { op: o, attempt: a, .. }
            | Msg::Response { op: o, attempt: a, .. }
            | Msg::Replicate { op: o, attempt: a, .. }
            | Msg::ReplicateAck { op: o, attempt: a, .. }
            | Msg::Refused { op: o, attempt: a, .. }
            | Msg::ReadReq { op: o, attempt: a, .. }
            | Msg::ReadReply { op: o, attempt: a, .. }
                if *o == op && *a == attempt =>
            {
                *a = older
            }
            _ => {}
        }
    }
    for c in 0..s.peers.len() as u8 + 1 {
        if !s.coordinator(c).ops.iter().any(|o| o.op == op && o.attempt == attempt) {
            continue;
        }
        for o in &mut s.coordinator_mut(c).ops {
            if o.op == op && o.attempt == attempt {
                o.attempt = older;
            }
        }
    }
}

pub fn on_timeout(cfg: &WorldConfig, s: &mut WorldState, c: u8) {
    let ClientPhase::Waiting { attempt, .. } = s.clients[usize::from(c)].phase else { unreachable!() };
    failed(cfg, s, c, attempt);
}

/// Attempt `attempt` failed (an error reply or a timeout): retry per policy, or give up. A
/// client that gives up leaves the operation in flight in the history forever: its effect is
/// unknown, so it may linearize at any point after its invocation, or never.
fn failed(cfg: &WorldConfig, s: &mut WorldState, c: u8, attempt: u8) {
    let client = &mut s.clients[usize::from(c)];
    client.phase = match retry::after_failure(&cfg.policy.retry, attempt, client.retries_used) {
        // Continuous load goes on: the user saw an error, and the next operation comes.
        RetryDecision::GiveUp if cfg.clients[usize::from(c)].repeat => {
            client.next_op += 1;
            idle(cfg, c)
        }
        RetryDecision::GiveUp => ClientPhase::Done,
        RetryDecision::RetryAfter { earliest_ticks, latest_ticks } => ClientPhase::Backoff {
            attempt,
            earliest_ticks: earliest_ticks as u8,
            latest_ticks: latest_ticks as u8,
        },
    };
}

pub fn on_msg(cfg: &WorldConfig, s: &mut WorldState, c: u8, msg: Msg) {
    let Msg::Response { op, attempt, ok, value } = msg else {
        unreachable!("a client is only sent responses")
    };
    let client = &s.clients[usize::from(c)];
    if op.seq != client.next_op {
        return; // a late answer to an operation already finished
    }
    match (client.phase, ok) {
        // Success of any attempt of the current op completes it, even during a backoff.
        (ClientPhase::Waiting { .. } | ClientPhase::Backoff { .. }, true) => {
            if records_history(cfg, c) {
                let (_, kind) = current(cfg, s, c);
                let shard = usize::from(s.clients[usize::from(c)].partition);
                let read_value = match kind {
                    OpKind::Write => 0,
                    OpKind::Read => value,
                };
                std::sync::Arc::make_mut(&mut s.ghost_mut().history)[shard].ret(c, read_value);
                // Once a history has no linearization, no extension gets one back.
                if s.ghost.linearizable {
                    s.ghost_mut().linearizable = s.ghost.history[shard].linearizable();
                }
            }
            let spec = &cfg.clients[usize::from(c)];
            let client = &mut s.clients[usize::from(c)];
            client.next_op += 1;
            if spec.repeat {
                // Under continuous load the retry budget is earned back: a success renews it
                // (as retry budgets that deposit per success do), so it bounds retries per
                // failure streak rather than once for ever.
                client.retries_used = 0;
            }
            client.phase = if spec.repeat || usize::from(client.next_op) < spec.ops.len() {
                idle(cfg, c)
            } else {
                ClientPhase::Done
            };
        }
        (ClientPhase::Waiting { attempt: current_attempt, .. }, false) if current_attempt == attempt => {
            failed(cfg, s, c, attempt);
        }
        _ => {}
    }
}

/// A client between operations, waiting out its think time.
pub fn idle(cfg: &WorldConfig, c: u8) -> ClientPhase {
    let think = cfg.clients[usize::from(c)].think_ticks;
    ClientPhase::Idle { earliest_ticks: think.lo as u8, latest_ticks: think.hi as u8 }
}
