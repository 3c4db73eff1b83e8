//! A load generator that records a history for the linearizability check (over `resp::Client`).
//!
//! The load generator runs N client threads, each issuing GET and SET on a small key set with
//! the policy's retry rules: after a failed attempt it asks `policy::retry::after_failure`
//! (through `store::decision`, so the decision is logged) whether and when to try again. Every
//! SET carries an idempotency token (`SET key value TOKEN t`), the same on each retry of one
//! operation: the coordinator decides with `policy::retry::version_for_attempt` whether the
//! retry reuses the first attempt's version (`idempotency_tokens = true`) or is a new write;
//! a retry given a new version is a `duplicate_effect` event line of the decision log.
//!
//! Every value written is unique (client and sequence number in one `u64`), so a read tells
//! which write it saw. An operation is recorded with its call time and, when it completed,
//! its return time; a SET that never got an OK (timeouts, cut connections, errors) may or may
//! not have taken effect, and is recorded with an unknown outcome. A GET that failed has no
//! effect and constrains nothing.

use crate::lincheck::register::{RegisterInput, RegisterOutput};
use crate::lincheck::Operation;
use crate::policy::retry::{RetryDecision, RetryPolicy};
use crate::store::coordinator::resp::{Client, ClientError};
use crate::store::decision::{self, DecisionLog};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Client threads at most, and keys at most: a load generator, not a benchmark.
pub const LOAD_CLIENTS_MAX: usize = 64;
pub const LOAD_KEYS_MAX: usize = 1024;

/// What an operation asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    Read,
    Write(u64),
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Completed at `return_ns`; a read's value (`None`: the key was absent), `None` for a write.
    Ok { return_ns: u64, read: Option<u64> },
    /// A write without an OK: it may have taken effect, at any time after its call, or never.
    Unknown,
    /// A read that got no answer: no effect.
    Failed,
}

/// One client operation of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub client: u64,
    pub key: String,
    pub input: Input,
    /// Since the load started, when the first attempt was sent.
    pub call_ns: u64,
    pub outcome: Outcome,
    pub attempts: u8,
    /// The load ended while the retry policy still meant to try again: the operation never
    /// completed and was not given up (the retry storm's signature when it lasts).
    pub cut_off: bool,
}

impl Op {
    /// This operation for the register checker (`lincheck::register`): a write without an OK
    /// has an unknown outcome; a read without an answer constrains nothing (`None`).
    pub fn as_register_op(&self) -> Option<Operation<RegisterInput, RegisterOutput>> {
        let (input, output, return_ns) = match (self.input, self.outcome) {
            (Input::Read, Outcome::Ok { return_ns, read }) => {
                (RegisterInput::Read, Some(RegisterOutput::Read(read)), Some(return_ns))
            }
            (Input::Read, _) => return None,
            (Input::Write(v), Outcome::Ok { return_ns, .. }) => {
                (RegisterInput::Write(Some(v)), Some(RegisterOutput::WriteOk), Some(return_ns))
            }
            (Input::Write(v), _) => (RegisterInput::Write(Some(v)), None, None),
        };
        Some(Operation { client: self.client, call_ns: self.call_ns, return_ns, input, output })
    }
}

impl Op {
    /// The operation in the key-value vocabulary other checkers read (Jepsen's EDN: Knossos,
    /// Elle, Porcupine): a write is a put of its value's decimal text, a read a get that
    /// returned it ("" for an absent key).
    pub fn as_kv_op(&self) -> Option<Operation<crate::lincheck::kv::KvInput, crate::lincheck::kv::KvOutput>> {
        use crate::lincheck::kv::{KvInput, KvOutput};
        let r = self.as_register_op()?;
        let key = self.key.clone();
        let input = match r.input {
            RegisterInput::Read => KvInput::Get { key },
            RegisterInput::Write(v) => {
                KvInput::Put { key, value: v.map_or(String::new(), |v| v.to_string()) }
            }
            RegisterInput::Cas { .. } => return None,
        };
        let output = r.output.map(|o| match o {
            RegisterOutput::Read(v) => KvOutput::Value(v.map_or(String::new(), |v| v.to_string())),
            _ => KvOutput::Written,
        });
        Some(Operation { client: r.client, call_ns: r.call_ns, return_ns: r.return_ns, input, output })
    }
}

/// The unique value a client's `seq`-th write stores.
pub fn unique_value(client: u64, seq: u32) -> u64 {
    assert!(client < (1 << 31));
    ((client + 1) << 32) | u64::from(seq)
}

/// Client `client`'s own random source in a load seeded with `seed`.
pub fn client_rng(seed: u64, client: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ client.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A client's next operation on one of `keys`: with `write_permille` a write of its next
/// unique value (`writes` counts its writes), else a read.
pub fn next_operation(
    rng: &mut StdRng,
    keys: &[String],
    write_permille: u16,
    client: u64,
    writes: &mut u32,
) -> (String, Input) {
    let key = keys[rng.random_range(0..keys.len())].clone();
    let input = if rng.random_range(0..1000u16) < write_permille {
        *writes += 1;
        Input::Write(unique_value(client, *writes))
    } else {
        Input::Read
    };
    (key, input)
}

/// After a failed attempt, how long to wait before the next, as the retry policy decides
/// (`decision::after_failure`, logged): a draw from its window, ticks of `ms_per_tick` ms;
/// `None`: give up.
pub fn retry_wait(
    log: &DecisionLog,
    retry: &RetryPolicy,
    attempts: u8,
    retries_used: u8,
    rng: &mut StdRng,
    ms_per_tick: u64,
) -> Option<Duration> {
    match decision::after_failure(log, retry, attempts, retries_used) {
        RetryDecision::GiveUp => None,
        RetryDecision::RetryAfter { earliest_ticks, latest_ticks } => {
            let wait_ticks = rng.random_range(earliest_ticks..=latest_ticks);
            Some(Duration::from_millis(u64::from(wait_ticks) * ms_per_tick))
        }
    }
}

/// What one kind of client does: its keys and its share of writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRole {
    pub keys: Vec<String>,
    /// Share of operations that are writes, in thousandths.
    pub write_permille: u16,
    /// Pause between operations, drawn uniformly.
    pub think_lo_ms: u64,
    pub think_hi_ms: u64,
    /// Where this role's requests go (default: the load's `addr`): its model client's
    /// coordinator.
    pub addr: Option<SocketAddr>,
}

/// The load to generate.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub addr: SocketAddr,
    pub clients: usize,
    pub keys: Vec<String>,
    /// Share of operations that are writes, in thousandths.
    pub write_permille: u16,
    /// If not empty, client `i` plays role `i % roles.len()` instead of using `keys` and
    /// `write_permille` (`store run` gives each of a model's clients its keys).
    pub roles: Vec<ClientRole>,
    /// One request attempt waits this long for its reply.
    pub request_timeout_ms: u64,
    /// Retry knobs in policy ticks; a tick lasts `ms_per_tick` real milliseconds.
    pub retry: RetryPolicy,
    pub ms_per_tick: u64,
    /// Pause between a client's operations, drawn uniformly.
    pub think_lo_ms: u64,
    pub think_hi_ms: u64,
    pub duration: Duration,
    pub seed: u64,
    /// SET carries the operation's idempotency token; `false` for the leader family, whose
    /// primaries keep no token table (a retry is a new write of the same value).
    pub tokens: bool,
}

impl LoadConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.clients == 0 || self.clients > LOAD_CLIENTS_MAX {
            return Err(format!("clients = {}: must be 1 to {LOAD_CLIENTS_MAX}", self.clients));
        }
        if self.keys.is_empty() || self.keys.len() > LOAD_KEYS_MAX {
            return Err(format!("{} keys: must be 1 to {LOAD_KEYS_MAX}", self.keys.len()));
        }
        if self.write_permille > 1000 {
            return Err(format!("write_permille = {}: at most 1000", self.write_permille));
        }
        for (i, role) in self.roles.iter().enumerate() {
            if role.keys.is_empty() || role.keys.len() > LOAD_KEYS_MAX {
                return Err(format!(
                    "client role {i}: {} keys: must be 1 to {LOAD_KEYS_MAX}",
                    role.keys.len()
                ));
            }
            if role.write_permille > 1000 {
                return Err(format!(
                    "client role {i}: write_permille = {}: at most 1000",
                    role.write_permille
                ));
            }
            if role.think_lo_ms > role.think_hi_ms {
                return Err(format!(
                    "client role {i}: think time {}..{} ms: lo exceeds hi",
                    role.think_lo_ms, role.think_hi_ms
                ));
            }
        }
        if self.think_lo_ms > self.think_hi_ms {
            return Err(format!("think time {}..{} ms: lo exceeds hi", self.think_lo_ms, self.think_hi_ms));
        }
        if self.request_timeout_ms == 0 || self.ms_per_tick == 0 {
            return Err("request_timeout_ms and ms_per_tick must be positive".into());
        }
        Ok(())
    }
}

/// The outcome of a load run.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    pub history: Vec<Op>,
    pub retries: u64,
    pub give_ups: u64,
}

impl LoadReport {
    pub fn count(&self, f: impl Fn(&Op) -> bool) -> usize {
        self.history.iter().filter(|op| f(op)).count()
    }
}

/// Run the load until `config.duration` passed or `stop` is set. Retry decisions go to `log`
/// (as actor `client-N`). Times in the history are measured from `epoch`.
pub fn run_load(
    config: &LoadConfig,
    log: &DecisionLog,
    epoch: Instant,
    stop: Arc<AtomicBool>,
) -> Result<LoadReport, String> {
    config.validate()?;
    let deadline = Instant::now() + config.duration;
    let threads: Vec<_> = (0..config.clients as u64)
        .map(|client| {
            let config = config.clone();
            let log = log.with_actor(&format!("client-{client}"));
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name(format!("load-client-{client}"))
                .spawn(move || ClientLoop::new(&config, client, log, epoch).run(deadline, &stop))
                .map_err(|e| format!("cannot start a client thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut report = LoadReport::default();
    for t in threads {
        let part = t.join().map_err(|_| "a client thread panicked".to_string())?;
        report.history.extend(part.history);
        report.retries += part.retries;
        report.give_ups += part.give_ups;
    }
    report.history.sort_by_key(|op| (op.call_ns, op.client));
    Ok(report)
}

struct ClientLoop<'a> {
    config: &'a LoadConfig,
    client: u64,
    log: DecisionLog,
    epoch: Instant,
    rng: StdRng,
    /// The coordinator this client talks to (its role's, or the load's).
    addr: SocketAddr,
    conn: Option<Client>,
    retries_used: u8,
    writes: u32,
    report: LoadReport,
}

impl<'a> ClientLoop<'a> {
    fn new(config: &'a LoadConfig, client: u64, log: DecisionLog, epoch: Instant) -> ClientLoop<'a> {
        let rng = client_rng(config.seed, client);
        ClientLoop {
            config,
            client,
            log,
            epoch,
            rng,
            addr: config.addr,
            conn: None,
            retries_used: 0,
            writes: 0,
            report: LoadReport::default(),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self, deadline: Instant, stop: &AtomicBool) -> LoadReport {
        let role = match self.config.roles.len() {
            0 => ClientRole {
                keys: self.config.keys.clone(),
                write_permille: self.config.write_permille,
                think_lo_ms: self.config.think_lo_ms,
                think_hi_ms: self.config.think_hi_ms,
                addr: None,
            },
            n => self.config.roles[self.client as usize % n].clone(),
        };
        self.addr = role.addr.unwrap_or(self.config.addr);
        let (keys, write_permille) = (&role.keys, role.write_permille);
        while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            let (key, input) =
                next_operation(&mut self.rng, keys, write_permille, self.client, &mut self.writes);
            let op = self.operation(key, input, deadline, stop);
            let cut_off = op.cut_off;
            self.report.history.push(op);
            if cut_off {
                break; // the load is over for this client
            }
            let think_ms = self.rng.random_range(role.think_lo_ms..=role.think_hi_ms);
            thread::sleep(Duration::from_millis(think_ms));
        }
        self.report
    }

    /// One operation with its retries.
    fn operation(&mut self, key: String, input: Input, deadline: Instant, stop: &AtomicBool) -> Op {
        let call_ns = self.now_ns();
        // The same token on every attempt: the coordinator recognises a retry by it.
        let token = format!("c{}-{}", self.client, self.writes);
        let mut attempts: u8 = 0;
        loop {
            // Saturates: with `max_attempts` unset only the deadline ends the retries.
            attempts = attempts.saturating_add(1);
            match self.attempt(&key, input, &token) {
                Ok(read) => {
                    let outcome = Outcome::Ok { return_ns: self.now_ns(), read };
                    return Op {
                        client: self.client,
                        key,
                        input,
                        call_ns,
                        outcome,
                        attempts,
                        cut_off: false,
                    };
                }
                Err(e) => {
                    if !matches!(e, ClientError::Server(_)) {
                        // A reply may still be on its way: this connection is out of step.
                        self.conn = None;
                    }
                }
            }
            let unfinished = match input {
                Input::Read => Outcome::Failed,
                Input::Write(_) => Outcome::Unknown,
            };
            let give_up = Op {
                client: self.client,
                key: key.clone(),
                input,
                call_ns,
                outcome: unfinished,
                attempts,
                cut_off: false,
            };
            let (log, retry) = (&self.log, &self.config.retry);
            match retry_wait(log, retry, attempts, self.retries_used, &mut self.rng, self.config.ms_per_tick)
            {
                None => {
                    self.report.give_ups += 1;
                    return give_up;
                }
                Some(wait) => {
                    if Instant::now() + wait >= deadline || stop.load(Ordering::Relaxed) {
                        return Op { cut_off: true, ..give_up };
                    }
                    thread::sleep(wait);
                    self.retries_used = self.retries_used.saturating_add(1);
                    self.report.retries += 1;
                }
            }
        }
    }

    fn attempt(&mut self, key: &str, input: Input, token: &str) -> Result<Option<u64>, ClientError> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self.conn.insert(Client::connect_timeout(self.addr, timeout)?),
        };
        match input {
            Input::Write(value) => {
                let token = self.config.tokens.then_some(token.as_bytes());
                conn.set(key.as_bytes(), value.to_string().as_bytes(), token)?;
                Ok(None)
            }
            Input::Read => match conn.get(key.as_bytes())? {
                None => Ok(None),
                Some(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    text.parse::<u64>().map(Some).map_err(|_| {
                        ClientError::Protocol(format!("GET {key}: not a value this load wrote: {text:?}"))
                    })
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::retry::Backoff;
    use crate::store::coordinator::resp::{read_reply, Reply};
    use std::collections::HashMap;
    use std::io::{self, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;

    /// A tiny single-node RESP server for the client's tests: GET/SET/PING/INFO, SET with a
    /// token applied once per token. `fail_first` SETs are answered with an error after being
    /// applied, as a coordinator whose quorum timed out after one replica applied the write.
    fn server(fail_first: usize) -> (SocketAddr, Arc<Mutex<HashMap<String, String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let shared = Arc::clone(&data);
        let failures = Arc::new(Mutex::new(fail_first));
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let data = Arc::clone(&shared);
                let failures = Arc::clone(&failures);
                thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut out = stream;
                    while let Ok(Reply::Array(args)) = read_reply(&mut reader) {
                        let args: Vec<String> = args
                            .into_iter()
                            .map(|a| match a {
                                Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
                                other => panic!("{other:?}"),
                            })
                            .collect();
                        let reply = match args[0].as_str() {
                            "PING" => "+PONG\r\n".to_string(),
                            "INFO" => "$7\r\nkeys:ok\r\n".to_string(),
                            "GET" => match data.lock().unwrap().get(&args[1]) {
                                Some(v) => format!("${}\r\n{v}\r\n", v.len()),
                                None => "$-1\r\n".to_string(),
                            },
                            "SET" => {
                                data.lock().unwrap().insert(args[1].clone(), args[2].clone());
                                let mut left = failures.lock().unwrap();
                                if *left > 0 {
                                    *left -= 1;
                                    "-ERR write quorum not reached\r\n".to_string()
                                } else {
                                    "+OK\r\n".to_string()
                                }
                            }
                            _ => "-ERR unknown command\r\n".to_string(),
                        };
                        if out.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, data)
    }

    fn retry(max_attempts: u8) -> RetryPolicy {
        RetryPolicy {
            max_attempts: Some(max_attempts),
            backoff: Backoff::Fixed,
            backoff_base_ticks: 1,
            backoff_max_ticks: 1,
            retry_budget: None,
            idempotency_tokens: true,
        }
    }

    #[test]
    fn the_client_speaks_resp() {
        let (addr, _) = server(0);
        let mut c = Client::connect_timeout(addr, Duration::from_secs(5)).unwrap();
        c.ping().unwrap();
        assert_eq!(c.get(b"k").unwrap(), None);
        c.set(b"k", b"v\r\nx", Some(b"t1")).unwrap();
        assert_eq!(c.get(b"k").unwrap(), Some(b"v\r\nx".to_vec()));
        assert_eq!(c.info().unwrap(), "keys:ok");
        assert_eq!(c.call(&[b"NOPE"]).unwrap(), Reply::Error("ERR unknown command".into()));
        // A failed SET: the server's text without the `ERR ` prefix.
        let (addr, _) = server(1);
        let mut c = Client::connect_timeout(addr, Duration::from_secs(5)).unwrap();
        match c.set(b"k", b"v", None) {
            Err(ClientError::Server(e)) => assert_eq!(e, "write quorum not reached"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failed_writes_are_retried_through_the_policy_and_recorded_as_unknown() {
        // Every SET fails for the first 3 attempts: with 2 attempts per operation the first
        // write gives up (unknown outcome) and the second write succeeds on its retry.
        let (addr, data) = server(3);
        let shared = Arc::new(Mutex::new(Vec::new()));
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let log = DecisionLog::to_writer(Box::new(Sink(Arc::clone(&shared))), "load");
        let config = LoadConfig {
            addr,
            clients: 1,
            keys: vec!["a".into()],
            write_permille: 1000,
            roles: Vec::new(),
            request_timeout_ms: 2000,
            retry: retry(2),
            ms_per_tick: 1,
            think_lo_ms: 0,
            think_hi_ms: 0,
            duration: Duration::from_secs(60),
            seed: 7,
            tokens: true,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let client = ClientLoop::new(&config, 0, log.clone(), Instant::now());
        let mut client = client;
        let deadline = Instant::now() + config.duration;
        let first = client.operation("a".into(), Input::Write(unique_value(0, 1)), deadline, &stop);
        let second = client.operation("a".into(), Input::Write(unique_value(0, 2)), deadline, &stop);
        assert_eq!((first.outcome, first.attempts), (Outcome::Unknown, 2));
        assert!(matches!(second.outcome, Outcome::Ok { read: None, .. }), "{second:?}");
        assert_eq!(second.attempts, 2);
        let read = client.operation("a".into(), Input::Read, deadline, &stop);
        assert!(matches!(read.outcome, Outcome::Ok { read: Some(v), .. } if v == unique_value(0, 2)));
        assert_eq!(data.lock().unwrap()["a"], unique_value(0, 2).to_string());
        assert_eq!((client.report.retries, client.report.give_ups), (2, 1));
        drop(client);
        drop(log);
        let text = String::from_utf8(shared.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().filter(|l| l.contains(r#""decision":"after_failure""#)).count(), 3);
        assert_eq!(decision::conform(&text), Ok(decision::Conformance::Conforms { decisions: 3, events: 0 }));
    }

    #[test]
    fn run_load_records_every_client_and_stops_at_the_deadline() {
        let (addr, _) = server(0);
        let config = LoadConfig {
            addr,
            clients: 3,
            keys: vec!["x".into(), "y".into()],
            write_permille: 500,
            roles: Vec::new(),
            request_timeout_ms: 2000,
            retry: retry(3),
            ms_per_tick: 1,
            think_lo_ms: 1,
            think_hi_ms: 2,
            duration: Duration::from_millis(150),
            seed: 1,
            tokens: true,
        };
        let report = run_load(&config, &DecisionLog::off(), Instant::now(), Arc::default()).unwrap();
        for client in 0..3 {
            assert!(report.count(|op| op.client == client) > 5, "client {client}: {report:?}");
        }
        assert!(report.count(|op| op.input == Input::Read) > 0);
        assert!(report.count(|op| matches!(op.input, Input::Write(_))) > 0);
        assert!(report.history.iter().all(|op| matches!(op.outcome, Outcome::Ok { .. })));
        assert!(report.history.windows(2).all(|w| w[0].call_ns <= w[1].call_ns));
        let bad = LoadConfig { clients: 0, ..config };
        assert!(run_load(&bad, &DecisionLog::off(), Instant::now(), Arc::default()).is_err());
    }
}
