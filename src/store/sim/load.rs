//! The clients of a simulated run: `store run`'s load (the same roles, choice of operations,
//! unique values, idempotency tokens and retry decisions), as tasks on the simulated clock
//! calling the coordinator as its RESP server does, and the final read of every key.

use super::net::{SimNet, Wire};
use super::replay::ClientStep;
use crate::config::OpKind;
use crate::policy::retry::RetryPolicy;
use crate::protocol::Endpoint;
use crate::store::coordinator::Coordinator;
use crate::store::decision::DecisionLog;
use crate::store::leader::manager::ManagerHost;
use crate::store::node::wire::StoredValue;
use crate::store::run::client::{
    client_rng, next_operation, retry_wait, unique_value, ClientRole, Input, LoadReport, Op, Outcome,
};
use rand::Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A coordinator as its RESP server calls it: the quorum family's (the shell and its
/// machine), or the leader family's (the failover manager, which routes to primaries).
#[derive(Clone)]
pub enum Served {
    Quorum(Arc<Coordinator>),
    Leader(Arc<ManagerHost>),
}

impl Served {
    /// SET: `Ok` once acknowledged. The leader family takes no token.
    async fn write(&self, key: &[u8], value: StoredValue, token: Option<&[u8]>) -> Result<(), String> {
        match self {
            Served::Quorum(c) => c.write(key, value, token).await,
            Served::Leader(m) => m.request(OpKind::Write, key, value).await.map(|_| ()),
        }
    }

    async fn read(&self, key: &[u8]) -> Result<StoredValue, String> {
        match self {
            Served::Quorum(c) => c.read(key).await,
            Served::Leader(m) => m.request(OpKind::Read, key, None).await,
        }
    }

    /// The INFO reply's text.
    pub fn info(&self) -> String {
        match self {
            Served::Quorum(c) => c.info(),
            Served::Leader(m) => m.info(),
        }
    }

    /// Nothing more is decided or answered (a crash; the run's end).
    pub fn crash(&self) {
        match self {
            Served::Quorum(c) => c.crash(),
            Served::Leader(m) => m.crash(),
        }
    }

    /// The quorum family's coordinator (its shell, its reload): `store sim`'s world for that
    /// family holds only these.
    pub fn quorum(&self) -> &Arc<Coordinator> {
        match self {
            Served::Quorum(c) => c,
            Served::Leader(_) => unreachable!("the quorum family's world holds quorum coordinators"),
        }
    }
}

/// The coordinators clients reach, each replaced whole when it crashes and restarts.
pub struct Front {
    coordinators: Vec<Mutex<Served>>,
}

impl Front {
    pub fn new(coordinators: Vec<Served>) -> Front {
        Front { coordinators: coordinators.into_iter().map(Mutex::new).collect() }
    }

    pub fn get(&self, c: u8) -> Served {
        self.coordinators[usize::from(c)].lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn replace(&self, c: u8, coordinator: Served) {
        *self.coordinators[usize::from(c)].lock().unwrap_or_else(|p| p.into_inner()) = coordinator;
    }
}

/// A write the coordinator acknowledged: its key, its value, and when (ns since tick 0).
pub type Ack = (String, u64, u64);

/// What the clients do: `store run`'s load settings.
#[derive(Clone)]
pub struct SimLoad {
    /// Client `i` plays `roles[i % roles.len()]`, through coordinator `coordinator_of[i % ..]`,
    /// over the edge link from `zones[i % ..].0` (the model client's zone) to `.1` (its
    /// coordinator's).
    pub roles: Vec<ClientRole>,
    pub coordinator_of: Vec<u8>,
    pub zones: Vec<(u8, u8)>,
    /// The model's own operations per role (`--load model`): each client plays its model
    /// client's `ops` in order on its group's key, thinking before each, and stops after the
    /// last unless the client repeats. `None`: `store run`'s continuous random mix.
    pub scripts: Option<Vec<(Vec<OpKind>, bool)>>,
    pub clients: usize,
    /// Replaying a counterexample: client `i`'s invocations and retries, as offsets from tick
    /// 0 (each client plays its model client's script; it stops when its steps run out).
    pub replay: Option<Arc<ReplayLoad>>,
    /// Each write the coordinator acknowledged, when it did (before its response travels
    /// back): (key, value, ns since tick 0). The model counts a write acknowledged then.
    pub acked: Arc<Mutex<Vec<Ack>>>,
    pub request_timeout_ms: u64,
    pub retry: RetryPolicy,
    pub tokens: bool,
    pub seed: u64,
}

/// A replay's client steps: client `i`'s invocations and retries as offsets from tick 0, and
/// when the trace ends.
pub struct ReplayLoad {
    pub steps: Vec<Vec<(Duration, ClientStep)>>,
    pub end: Duration,
}

/// Run every client until `end`; the history is in call order, times from `epoch`.
pub async fn run_load(
    front: Arc<Front>,
    net: Arc<SimNet>,
    load: SimLoad,
    log: DecisionLog,
    epoch: Instant,
    end: Instant,
) -> LoadReport {
    let mut tasks = Vec::new();
    for client in 0..load.clients as u64 {
        let (front, net, load) = (Arc::clone(&front), Arc::clone(&net), load.clone());
        let log = log.with_actor(&format!("client-{client}"));
        tasks.push(tokio::spawn(
            async move { client_loop(&front, &net, &load, client, log, epoch, end).await },
        ));
    }
    let mut report = LoadReport::default();
    for task in tasks {
        let part = task.await.expect("a simulated client does not panic");
        report.history.extend(part.history);
        report.retries += part.retries;
        report.give_ups += part.give_ups;
    }
    report.history.sort_by_key(|op| (op.call_ns, op.client));
    report
}

fn ns_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

async fn client_loop(
    front: &Front,
    net: &SimNet,
    load: &SimLoad,
    client: u64,
    log: DecisionLog,
    epoch: Instant,
    end: Instant,
) -> LoadReport {
    let index = client as usize % load.roles.len();
    let (role, coordinator, zones) = (&load.roles[index], load.coordinator_of[index], load.zones[index]);
    let mut rng = client_rng(load.seed, client);
    let (mut writes, mut retries_used) = (0u32, 0u8);
    let mut report = LoadReport::default();
    // A call after the client's last return, by a nanosecond at least: on the paused clock
    // they can fall on one instant, and a history must order a process's operations.
    let mut last_ns = 0u64;
    let think = |rng: &mut rand::rngs::StdRng| {
        Duration::from_millis(rng.random_range(role.think_lo_ms..=role.think_hi_ms))
    };
    let script = load.scripts.as_ref().map(|s| &s[index]);
    let mut seq = 0usize;
    let mut replay = load.replay.as_ref().map(|r| r.steps[client as usize].iter().copied().peekable());
    while Instant::now() < end {
        if let Some(steps) = replay.as_mut() {
            // The trace's next invocation (a retry of an attempt that succeeded here is skipped).
            match steps.find(|(_, step)| *step == ClientStep::Invoke) {
                Some((at, _)) => tokio::time::sleep_until(epoch + at).await,
                None => break,
            }
        }
        let (key, input) = match script {
            None => next_operation(&mut rng, &role.keys, role.write_permille, client, &mut writes),
            Some((ops, repeat)) => {
                if seq == ops.len() && !repeat {
                    break;
                }
                let kind = ops[seq % ops.len()];
                seq += 1;
                if replay.is_none() {
                    tokio::time::sleep(think(&mut rng)).await;
                }
                if Instant::now() >= end {
                    break;
                }
                let input = match kind {
                    OpKind::Write => {
                        writes += 1;
                        Input::Write(unique_value(client, writes))
                    }
                    OpKind::Read => Input::Read,
                };
                (role.keys[0].clone(), input)
            }
        };
        let call_ns = ns_since(epoch).max(last_ns + 1);
        // The same token on every attempt: the coordinator recognises a retry by it.
        let token = format!("c{client}-{writes}");
        let mut attempts: u8 = 0;
        let op = loop {
            attempts = attempts.saturating_add(1);
            let done = Op {
                client,
                key: key.clone(),
                input,
                call_ns,
                outcome: Outcome::Failed,
                attempts,
                cut_off: false,
            };
            let token = load.tokens.then_some(token.as_bytes());
            let timeout = Duration::from_millis(load.request_timeout_ms);
            let edge =
                Edge { net, zones, client: client as u8, coordinator, acked: Some((&load.acked, epoch)) };
            if let Some(read) = attempt(&front.get(coordinator), &edge, &key, input, token, timeout).await {
                break Op {
                    outcome: Outcome::Ok { return_ns: ns_since(epoch).max(call_ns + 1), read },
                    ..done
                };
            }
            let unfinished = Op {
                outcome: if matches!(input, Input::Write(_)) { Outcome::Unknown } else { Outcome::Failed },
                ..done
            };
            // The policy is in milliseconds here: one tick is one millisecond.
            match retry_wait(&log, &load.retry, attempts, retries_used, &mut rng, 1) {
                None => {
                    report.give_ups += 1;
                    break unfinished;
                }
                Some(wait) => {
                    // A replay retries when the trace does, and gives up when the trace does.
                    let wait = match replay.as_mut() {
                        None => wait,
                        Some(steps) => match steps.next_if(|(_, step)| *step == ClientStep::Retry) {
                            Some((at, _)) => (epoch + at).saturating_duration_since(Instant::now()),
                            // Past the trace's end the client goes on as its policy says (a
                            // retry storm the trace loops in goes on, or ends, by itself).
                            None if steps.peek().is_none() => {
                                let trace_end =
                                    epoch + load.replay.as_ref().map_or(Duration::ZERO, |r| r.end);
                                wait.max(trace_end.saturating_duration_since(Instant::now()))
                            }
                            None => break unfinished,
                        },
                    };
                    if Instant::now() + wait >= end {
                        break Op { cut_off: true, ..unfinished };
                    }
                    tokio::time::sleep(wait).await;
                    retries_used = retries_used.saturating_add(1);
                    report.retries += 1;
                }
            }
        };
        let cut_off = op.cut_off;
        if let Outcome::Ok { return_ns, .. } = op.outcome {
            last_ns = return_ns.max(call_ns);
        } else {
            last_ns = call_ns;
        }
        report.history.push(op);
        if cut_off {
            break; // the load is over for this client
        }
        if script.is_none() {
            tokio::time::sleep(think(&mut rng)).await;
        }
    }
    report
}

/// A client's link to its coordinator: (client's zone, coordinator's zone).
struct Edge<'a> {
    net: &'a SimNet,
    zones: (u8, u8),
    client: u8,
    coordinator: u8,
    acked: Option<(&'a Mutex<Vec<Ack>>, Instant)>,
}

/// One attempt, the request and its reply each carried over the edge link: `Some(read
/// value)` (`Some(None)` for a write or an absent key) if it succeeded within `timeout`.
async fn attempt(
    coordinator: &Served,
    edge: &Edge<'_>,
    key: &str,
    input: Input,
    token: Option<&[u8]>,
    timeout: Duration,
) -> Option<Option<u64>> {
    let (client, coordinator_zone) = edge.zones;
    let (src, dst) = (Endpoint::Client(edge.client), Endpoint::Coordinator(edge.coordinator));
    let round_trip = async {
        if !edge.net.carry(Wire { src, dst, kind: "request", copy: None }, client, coordinator_zone).await {
            return std::future::pending().await; // lost: the client waits out its timeout
        }
        let answer = match input {
            Input::Write(number) => {
                let value: StoredValue = Some(number.to_string().into_bytes());
                let written = coordinator.write(key.as_bytes(), value, token).await;
                if let (Ok(()), Some((acked, epoch))) = (&written, edge.acked) {
                    acked.lock().unwrap_or_else(|p| p.into_inner()).push((
                        key.to_string(),
                        number,
                        ns_since(epoch),
                    ));
                }
                written.map(|()| None)
            }
            Input::Read => coordinator.read(key.as_bytes()).await.map(|value| match value {
                None => Some(None),
                Some(bytes) => String::from_utf8_lossy(&bytes).parse::<u64>().ok().map(Some),
            }),
        };
        if !edge
            .net
            .carry(Wire { src: dst, dst: src, kind: "response", copy: None }, coordinator_zone, client)
            .await
        {
            return std::future::pending().await;
        }
        answer
    };
    match tokio::time::timeout(timeout, round_trip).await {
        Ok(Ok(Some(read))) => Some(read),
        Ok(Ok(None)) => Some(None),
        _ => None,
    }
}

/// The last value of every key the load touched, each read by a checker of its own after
/// every other operation ended, retried while catch-up copies may keep quorums short.
/// The checker stands beside coordinator 0, in its zone.
pub async fn final_reads(
    front: &Front,
    net: &SimNet,
    checker_zone: u8,
    load: &LoadReport,
    timeout: Duration,
    attempts: u32,
    epoch: Instant,
) -> Result<Vec<Op>, String> {
    const RETRY_PAUSE_MS: u64 = 200;
    let checker = 1_000_000;
    let mut keys: Vec<&str> = load.history.iter().map(|op| op.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut finals = Vec::new();
    let mut checker_ns = 0u64;
    for key in keys {
        let mut read = None;
        for _ in 0..attempts {
            let call_ns = ns_since(epoch).max(checker_ns + 1);
            checker_ns = call_ns;
            let edge = Edge {
                net,
                zones: (checker_zone, checker_zone),
                client: u8::MAX,
                coordinator: 0,
                acked: None,
            };
            if let Some(value) = attempt(&front.get(0), &edge, key, Input::Read, None, timeout).await {
                checker_ns = ns_since(epoch).max(call_ns + 1);
                let outcome = Outcome::Ok { return_ns: checker_ns, read: value };
                read = Some(Op {
                    client: checker,
                    key: key.to_string(),
                    input: Input::Read,
                    call_ns,
                    outcome,
                    attempts: 1,
                    cut_off: false,
                });
                break;
            }
            tokio::time::sleep(Duration::from_millis(RETRY_PAUSE_MS)).await;
        }
        let waited_s = f64::from(attempts) * (timeout.as_secs_f64() + RETRY_PAUSE_MS as f64 / 1000.0);
        finals.push(read.ok_or_else(|| {
            format!("after the heal, {key} could not be read in {attempts} attempts ({waited_s:.0} s): the store is unavailable")
        })?);
    }
    Ok(finals)
}
