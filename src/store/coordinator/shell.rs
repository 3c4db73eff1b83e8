//! The coordinator's I/O shell: the protocol's coordinator (`protocol::Coordinator`, the state
//! machine the models check) driven by real sockets, a real clock and a state file.
//!
//! What the shell does and nothing more:
//! - time: one protocol tick is one millisecond, counted from `start_clock`. A clock task
//!   sleeps until the machine's next timer may be due (`Coordinator::quiet_ticks`), and
//!   before any message is stepped the ticks since are caught up, each after every timer due
//!   before it fired, as a task ticking every millisecond would have done them (the policy,
//!   resolved with a 1 ms tick, is in those ticks);
//! - messages: each `Msg` the machine sends to a node becomes a `NodeRequest` on that node's
//!   link, and the node's reply, whenever it comes, is delivered back as the protocol's
//!   answer (`ReplicateAck`, `ReadReply`, `Pong`). A request that fails (the node is down, the
//!   connection broke) is a lost message, as in the models;
//! - the catch-up copy a source is asked for (`CopyRequest`) is carried out here: the source's
//!   keys of the partition are scanned and written to the replacement, which then
//!   acknowledges (`CopyAck`);
//! - durability: after every step, what the machine says must survive a crash
//!   (`Coordinator::durable`) is written to the state file, with fsync, before any of the
//!   step's messages leave; if it cannot be written, they do not leave;
//! - clients: a RESP command becomes a `Request`, and its `Response` the reply.
//!
//! The machine sits behind one mutex: each input (a client's command, a node's reply, a tick)
//! is one step under it, so steps are atomic as the model's actions are.

use super::failure::failure_text;
use super::info::{config_name, Counters, Observed};
use super::layout::Layout;
use super::link::{request_on, NodeChannel, Traffic};
use super::machine::StoreData;
use super::peer::{PeerChannel, PeerLinks, PeerMsg};
pub use super::shell_fault::ShellFault;
use super::state::{SavedMember, SavedShard, SavedState, StateFile};
use super::tokens::{TokenId, Tokens};
use crate::config::{OpKind, Resolved};
use crate::policy::detector::Health;
use crate::policy::NodeId;
use crate::protocol::coordinator::{Durable, Timer};
use crate::protocol::{self, Endpoint, Event, Failure, Msg, Outbox, PerNode};
use crate::store::decision::DecisionLog;
use crate::store::node::wire::{NodeReply, NodeRequest, StoredValue, SCAN_ENTRIES_MAX};
use crate::store::trace::{TraceLine, TraceWriter};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

#[path = "clock.rs"]
mod clock;

/// A node's reply later than this many ack timeouts is no longer waited for (a lost message).
const REPLY_WAIT_ACK_TIMEOUTS: u32 = 4;
const REPLY_WAIT_MIN_MS: u64 = 1_000;

type Machine = protocol::Coordinator<StoreData>;
type StoreMsg = Msg<StoreData>;

/// A client waiting for its request's response.
struct Waiting {
    kind: OpKind,
    shard: u8,
    /// A write's token and key (for the duplicate-effect observation).
    token: Option<TokenId>,
    reply: oneshot::Sender<Result<StoredValue, String>>,
    /// Why it failed, as the client reads it (from the machine's event).
    why: Option<String>,
}

struct Inner {
    /// The coordinator crashed: no step runs any more (a restart is a new shell).
    crashed: bool,
    /// Why it stopped by itself: a step's state could not be saved.
    stalled: Option<String>,
    /// The scenario and the policy the machine runs: replaced whole by a policy reload, under
    /// the lock, so every step runs one policy from start to end.
    cfg: Arc<Resolved>,
    machine: Machine,
    waiting: BTreeMap<u64, Waiting>,
    /// Each token's first value and first replicated version.
    tokens: Tokens,
    /// What the state file holds (replica sets and version floors), as the machine and as
    /// written.
    saved: Option<Durable<StoreData>>,
    last_saved: Option<SavedState>,
    observed: Observed,
    /// The tick the clock task sleeps until: a step that sets a timer due sooner wakes it.
    clock_wake_tick: u64,
}

pub struct Shell {
    /// Which coordinator this is (0 leads membership).
    pub me: u8,
    pub layout: Layout,
    /// The other coordinators (none with one coordinator).
    peers: Option<Arc<dyn PeerChannel>>,
    /// `write_shard_suffixes`, which no reload changes: keys are routed without the lock.
    suffixes: u8,
    pub links: Vec<Arc<dyn NodeChannel>>,
    state_file: Option<StateFile>,
    inner: Mutex<Inner>,
    next_op: AtomicU64,
    /// Shared with the shell a stall restart replaces, so INFO's counts go on.
    pub counters: Arc<Counters>,
    pub started: Instant,
    /// The machine's clock, from `start_clock` on (no time passes before); held while it
    /// catches up, so ticks pass one catch-up at a time.
    clock: Mutex<Option<crate::store::clock::Clock>>,
    /// Wakes the clock task when a step set a timer sooner than it sleeps until.
    clock_wake: Arc<tokio::sync::Notify>,
    log: DecisionLog,
    trace: Option<TraceWriter>,
    fault: Option<ShellFault>,
    /// Draws the moment a jittered timer fires within its window (`seed_windows`).
    windows_rng: Mutex<StdRng>,
    /// Orders the timers due at one moment before they fire (`order_due_timers`); none: the
    /// machine's order.
    due_order: Mutex<Option<clock::DueOrder>>,
    pub fleet: Arc<super::fleet::FleetMeter>,
}

impl Shell {
    /// A shell around coordinator `me`'s machine recovered from `saved` (or fresh), whose
    /// versions start above `max_stored_version`; every later change of what must survive a
    /// crash goes to `state_file`. With several coordinators (`peering.addrs`, one per
    /// coordinator) every one starts from the leader's saved state and only the leader keeps
    /// the file: the others learn every change from it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: Resolved,
        me: u8,
        peering: &super::peer::Peering,
        layout: Layout,
        links: Vec<Arc<dyn NodeChannel>>,
        state_file: Option<StateFile>,
        saved: Option<SavedState>,
        max_stored_version: u64,
        log: DecisionLog,
        trace: Option<TraceWriter>,
        counters: Option<Arc<Counters>>,
    ) -> Result<Arc<Shell>, String> {
        let fresh_counters = counters.is_none();
        let fresh: Machine = protocol::Coordinator::new(&cfg, me);
        let mut durable = fresh.durable(&cfg);
        if let Some(saved) = &saved {
            for (k, s) in saved.shards.iter().enumerate() {
                let mut members: PerNode<NodeId> = s.members.iter().map(|m| m.node).collect();
                members.sort();
                durable.shards[k].0 = Some(members);
            }
        }
        let floor = saved.as_ref().map_or(0, |s| s.version_floor).max(max_stored_version + 1);
        for shard in durable.shards.iter_mut() {
            shard.1 = shard.1.max(floor);
        }
        if !cfg.policy.durable_membership {
            for shard in durable.shards.iter_mut() {
                shard.0 = None;
            }
        }
        let machine = protocol::Coordinator::recover(&cfg, me, &durable);
        let node_count = cfg.nodes.len();
        let now = Instant::now();
        let observed = Observed {
            last_heard: vec![now; node_count],
            late_replies: vec![0; node_count],
            partition_peak: cfg.partition_background.clone(),
            backend_peak: cfg.nodes.iter().map(|n| n.base_load_per_tick).collect(),
            backlog_work_peak: 0,
            first_breach: protocol::coordinator::background_breach(&cfg)
                .map(|b| layout.describe_breach(b, None)),
            last_suppressed: None,
            membership_epoch: saved.as_ref().map_or(0, |s| s.membership_epoch),
            evicted: vec![false; node_count],
            node_errors: vec![None; node_count],
        };
        let peer_addrs = &peering.addrs[..];
        let peers = match &peering.simulated {
            Some(simulated) => Some(Arc::clone(simulated)),
            None => (peer_addrs.len() > 1)
                .then(|| Arc::new(PeerLinks::start(me, peer_addrs)) as Arc<dyn PeerChannel>),
        };
        let suffixes = cfg.policy.routing.write_shard_suffixes;
        let shell = Arc::new(Shell {
            me,
            suffixes,
            layout,
            peers,
            links,
            state_file,
            inner: Mutex::new(Inner {
                crashed: false,
                stalled: None,
                cfg: Arc::new(cfg),
                machine,
                waiting: BTreeMap::new(),
                tokens: Tokens::default(),
                saved: None,
                last_saved: saved.clone(),
                observed,
                clock_wake_tick: u64::MAX,
            }),
            next_op: AtomicU64::new(1),
            counters: counters.unwrap_or_default(),
            started: now,
            clock: Mutex::new(None),
            clock_wake: Arc::new(tokio::sync::Notify::new()),
            log,
            trace,
            fault: ShellFault::from_env()?,
            windows_rng: Mutex::new(StdRng::from_os_rng()),
            due_order: Mutex::new(None),
            fleet: Arc::clone(&peering.fleet),
        });
        if fresh_counters && shell.observed(|o| o.first_breach.is_some()) {
            shell.counters.capacity_breaches.fetch_add(1, Ordering::Relaxed);
        }
        // What the machine starts from is saved before any client is served.
        let mut inner = shell.lock();
        let cfg = Arc::clone(&inner.cfg);
        shell.persist(&mut inner, &cfg)?;
        drop(inner);
        Ok(shell)
    }

    /// Crash: under the lock, so no step after this one persists or sends; clients waiting
    /// for a response hear nothing more (their connections close).
    pub fn crash(&self) {
        let mut inner = self.lock();
        inner.crashed = true;
        inner.waiting.clear();
    }

    /// Draw timer moments from `seed` from now on (a simulated run is the same every time).
    pub fn seed_windows(&self, seed: u64) {
        *self.windows_rng.lock().unwrap_or_else(|p| p.into_inner()) = StdRng::seed_from_u64(seed);
    }

    /// Why the machine stopped by itself (its state could not be saved), if it did.
    pub fn stalled(&self) -> Option<String> {
        self.lock().stalled.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The scenario and the policy running now.
    pub fn cfg(&self) -> Arc<Resolved> {
        Arc::clone(&self.lock().cfg)
    }

    /// Run `policy` from the next step on, keeping everything the machine knows (the model's
    /// rollout stage change: `protocol::Coordinator::reload`). A policy that changes what the
    /// clients or the replica sets are is refused, as a model's rollout stage is.
    pub fn reload(&self, policy: crate::config::Policy) -> Result<(), String> {
        let mut inner = self.lock();
        let from = Arc::clone(&inner.cfg);
        let to = super::machine::with_policy(&from, policy)?;
        inner.machine.reload(&from, &to);
        inner.cfg = Arc::new(to);
        drop(inner);
        self.log_event(format!("policy_reloaded coordinator={}", self.me));
        Ok(())
    }

    /// Read the machine's state (INFO, tests).
    pub fn machine<T>(&self, f: impl FnOnce(&Machine) -> T) -> T {
        f(&self.lock().machine)
    }

    pub fn observed<T>(&self, f: impl FnOnce(&Observed) -> T) -> T {
        f(&self.lock().observed)
    }

    /// A message from coordinator `from` (the membership protocol's), as one step.
    pub fn deliver_peer(self: &Arc<Self>, from: u8, msg: StoreMsg) {
        if self.lock().crashed {
            return;
        }
        self.step_msg(|m, cfg, io| m.on_msg(cfg, Endpoint::Coordinator(from), msg, io));
    }

    /// One step of the machine at the clock's tick: `f` under the lock, then what must be
    /// persisted, then its events and sends.
    fn step(self: &Arc<Self>, f: impl FnOnce(&mut Machine, &Resolved, &mut Outbox<StoreData>)) -> bool {
        self.step_now_with(|inner, cfg, io| f(&mut inner.machine, cfg, io))
    }

    /// False if the machine has crashed (nothing ran).
    fn step_now_with(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Inner, &Resolved, &mut Outbox<StoreData>),
    ) -> bool {
        let mut out = Outbox::default();
        let mut replies = Vec::new();
        {
            let mut inner = self.lock();
            if inner.crashed {
                return false;
            }
            let cfg = Arc::clone(&inner.cfg);
            f(&mut inner, &cfg, &mut out);
            if let Err(e) = self.persist(&mut inner, &cfg) {
                // The machine has taken a step whose state cannot be made durable, so nothing
                // it decided may take effect: it stops here, as a crash before the save (the
                // server restarts it from the state file once that can be written). Every
                // waiting client is answered; no node is judged by a machine that stopped.
                let why = format!("coordinator stalled: cannot save its state: {e}");
                eprintln!("replicheck store: {why}; nothing it decided since its last save is sent, and it restarts from that save once it can write there again");
                inner.crashed = true;
                inner.stalled = Some(why.clone());
                for mut w in std::mem::take(&mut inner.waiting).into_values() {
                    let unknown = if w.kind == OpKind::Write {
                        "; outcome unknown: the write may still have been applied"
                    } else {
                        ""
                    };
                    w.why = Some(format!("{why}{unknown}"));
                    replies.push((w, false, None));
                }
                drop(inner);
                for (w, ok, value) in replies {
                    self.reply(w, ok, value);
                }
                return false;
            }
            // Only a step that took effect is reported.
            for event in out.events.drain(..) {
                self.observe(&mut inner, &cfg, event);
            }
            self.note_peaks(&mut inner, &cfg);
            let m = &inner.machine;
            let at_ms = self.started.elapsed().as_millis();
            self.fleet.report(&cfg, self.me, &m.background, &m.partition_load, &m.backend_load, at_ms);
            for (dst, msg) in out.sends.drain(..) {
                match (dst, msg) {
                    (Endpoint::Client(_), Msg::Response { op, ok, value, .. }) => {
                        if let Some(w) = inner.waiting.remove(&op) {
                            replies.push((w, ok, value));
                        }
                    }
                    (Endpoint::Node(n), msg) => {
                        if let Msg::Replicate { op, version, .. } = &msg {
                            observe_token(&mut inner, *op, *version, &self.log);
                        }
                        self.send(n, msg, &cfg)
                    }
                    (Endpoint::Coordinator(c), msg) => {
                        let peers = self.peers.as_ref().expect("a coordinator with peers");
                        peers.send(c, PeerMsg::of(&msg).expect("a membership message between coordinators"));
                    }
                    (dst, msg) => unreachable!("the coordinator sends {msg:?} to {dst:?}"),
                }
            }
        }
        for (w, ok, value) in replies {
            self.reply(w, ok, value);
        }
        true
    }

    /// Write what must survive a crash, if it changed.
    fn persist(&self, inner: &mut Inner, cfg: &Resolved) -> Result<(), String> {
        let durable = inner.machine.durable_shards(cfg);
        if inner.saved.as_ref() == Some(&durable) {
            return Ok(());
        }
        let members_changed = inner
            .saved
            .as_ref()
            .is_some_and(|s| s.shards.iter().zip(&durable.shards).any(|(a, b)| a.0 != b.0));
        let epoch = inner.observed.membership_epoch + u64::from(members_changed);
        if let Some(file) = &self.state_file {
            let previous = &inner.last_saved;
            let state = SavedState {
                membership_epoch: epoch,
                version_floor: durable.shards.iter().map(|s| s.1).max().unwrap_or(1),
                shards: inner
                    .machine
                    .shards
                    .iter()
                    .zip(&self.layout.shards)
                    .enumerate()
                    .map(|(k, (v, spec))| {
                        let before = previous.as_ref().and_then(|p| p.shards.get(k));
                        let members: Vec<SavedMember> = v
                            .members
                            .iter()
                            .map(|&node| {
                                let joined = before
                                    .and_then(|b| b.members.iter().find(|m| m.node == node))
                                    .map_or(epoch, |m| m.joined_epoch);
                                SavedMember { node, joined_epoch: joined }
                            })
                            .collect();
                        let shard_epoch = match before {
                            Some(b) if b.members == members => b.epoch,
                            _ => epoch,
                        };
                        SavedShard { name: spec.name.clone(), epoch: shard_epoch, members }
                    })
                    .collect(),
            };
            file.save(&state)?;
            inner.last_saved = Some(state);
        }
        inner.observed.membership_epoch = epoch;
        inner.saved = Some(durable);
        Ok(())
    }

    fn note_peaks(&self, inner: &mut Inner, cfg: &Resolved) {
        let Inner { machine, observed, .. } = inner;
        observed.backlog_work_peak = observed.backlog_work_peak.max(machine.backlog_work);
        for (p, peak) in observed.partition_peak.iter_mut().enumerate() {
            *peak = (*peak).max(machine.background[p].saturating_add(machine.partition_load[p]));
        }
        for (n, peak) in observed.backend_peak.iter_mut().enumerate() {
            let base = cfg.nodes[n].base_load_per_tick;
            *peak = (*peak).max(base.saturating_add(machine.backend_load[n]));
        }
    }

    fn log_event(&self, text: String) {
        self.log.event(&text);
    }

    /// Counters, INFO and the log from what the machine did.
    fn observe(&self, inner: &mut Inner, cfg: &Resolved, event: Event<StoreData>) {
        let c = &self.counters;
        let bump = |a: &AtomicU64| {
            a.fetch_add(1, Ordering::Relaxed);
        };
        let name = |shard: u8| self.layout.shards[usize::from(shard)].name.clone();
        match event {
            // A single coordinator orders its own proposals: `ChangeRequested` follows.
            Event::WriteAcked { .. } | Event::WriteApplied { .. } => {}
            Event::Leader(_) => unreachable!("the store runs no leader-family machine yet"),
            // The leader orders its own proposals at once (`ChangeRequested` follows); another
            // coordinator's goes to the leader.
            Event::ChangeProposed(_) if self.me == 0 => {}
            Event::ChangeProposed(u) => self.log_event(format!(
                "change_proposed coordinator={} shard={} evicted={} replacement={}",
                self.me, u.shard, u.evicted, u.replacement
            )),
            Event::RequestFailed { op, why } => {
                if matches!(why, Failure::Throttled(_)) {
                    bump(&c.writes_throttled);
                }
                let Inner { waiting, machine, observed, .. } = inner;
                if let Some(w) = waiting.get_mut(&op) {
                    w.why = Some(failure_text(
                        &self.layout,
                        cfg,
                        w.kind,
                        w.shard,
                        why,
                        machine,
                        &observed.node_errors,
                    ));
                }
            }
            Event::ReadRepairStarted { .. } => bump(&c.read_repairs),
            Event::ChangeRequested(u) => {
                bump(if u.is_move { &c.moves } else { &c.evictions });
                inner.observed.last_suppressed = None;
                let what = if u.is_move { "move" } else { "eviction" };
                eprintln!(
                    "replicheck store: {what} of {} from partition {} requested, replacement {}",
                    self.layout.node(u.evicted),
                    name(u.shard),
                    self.layout.node(u.replacement)
                );
                self.log_event(format!(
                    "change_requested shard={} evicted={} replacement={} move={}",
                    u.shard, u.evicted, u.replacement, u.is_move
                ));
            }
            Event::ChangeRejected(u) => {
                // Requested and lost at once: INFO counts the changes taken on.
                (if u.is_move { &c.moves } else { &c.evictions }).fetch_sub(1, Ordering::Relaxed);
                eprintln!(
                    "replicheck store: the membership queue is full: {} stays in partition {}",
                    self.layout.node(u.evicted),
                    name(u.shard)
                );
                self.log_event(format!("change_rejected shard={} evicted={}", u.shard, u.evicted));
            }
            Event::ChangeStarted(u) => {
                bump(&c.membership_changes);
                inner.observed.evicted[usize::from(u.replacement)] = false;
                self.log_event(format!("change_started shard={} replacement={}", u.shard, u.replacement));
            }
            Event::ChangeCompleted(u) => {
                bump(&c.catchups_completed);
                if !u.is_move {
                    inner.observed.evicted[usize::from(u.evicted)] = true;
                }
                eprintln!(
                    "replicheck store: {} replaced {} in partition {}",
                    self.layout.node(u.replacement),
                    self.layout.node(u.evicted),
                    name(u.shard)
                );
                self.log_event(format!(
                    "change_completed shard={} evicted={} replacement={}",
                    u.shard, u.evicted, u.replacement
                ));
            }
            Event::ChangeAbandoned(u) => {
                bump(&c.joins_abandoned);
                eprintln!(
                    "replicheck store: {} did not catch up in time: the change of partition {} is abandoned, {} stays",
                    self.layout.node(u.replacement),
                    name(u.shard),
                    self.layout.node(u.evicted)
                );
                self.log_event(format!(
                    "change_abandoned shard={} evicted={} replacement={}",
                    u.shard, u.evicted, u.replacement
                ));
            }
            Event::ChangeLearned(u) => {
                // Counted where it was decided (the leader's INFO); shown here as there.
                inner.observed.evicted[usize::from(u.replacement)] = false;
                if !u.is_move {
                    inner.observed.evicted[usize::from(u.evicted)] = true;
                }
                self.log_event(format!(
                    "change_learned shard={} evicted={} replacement={}",
                    u.shard, u.evicted, u.replacement
                ));
            }
            Event::CapacityBreached(b) => {
                bump(&c.capacity_breaches);
                if inner.observed.first_breach.is_none() {
                    let at_ms = self.started.elapsed().as_millis();
                    inner.observed.first_breach = Some(self.layout.describe_breach(b, Some(at_ms)));
                }
            }
            Event::EvictionSuppressed { node, why, .. } => {
                inner.observed.last_suppressed = Some(format!("node {node}: {}", config_name(&why)));
            }
            Event::DeclaredDead { node, silence_ticks: Some(ms) } => {
                self.log_event(format!("declared_dead node={node} silence_ms={ms}"));
            }
            Event::DeclaredDead { node, silence_ticks: None } => {
                self.log_event(format!("declared_dead node={node} deadline_missed=true"));
            }
        }
    }

    fn reply(&self, w: Waiting, ok: bool, value: StoredValue) {
        let c = &self.counters;
        let counter = match (w.kind, ok) {
            (OpKind::Write, true) => &c.writes_acked,
            (OpKind::Write, false) => &c.writes_failed,
            (OpKind::Read, true) => &c.reads_ok,
            (OpKind::Read, false) => &c.reads_failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let result = if ok { Ok(value) } else { Err(w.why.unwrap_or_else(|| "request failed".into())) };
        let _ = w.reply.send(result);
    }

    /// Submit a client request and wait for its response.
    pub async fn request(
        self: &Arc<Self>,
        kind: OpKind,
        key: &[u8],
        value: StoredValue,
        token: Option<&[u8]>,
    ) -> Result<StoredValue, String> {
        if let (OpKind::Write, Some(token)) = (kind, token) {
            let mut inner = self.lock();
            // Without idempotency tokens the token is ignored.
            if inner.cfg.policy.retry.idempotency_tokens {
                inner.tokens.check_value(token, key, &value)?;
            }
        }
        let op = self.next_op.fetch_add(1, Ordering::Relaxed);
        let shard = self.partition_of(key);
        let (tx, rx) = oneshot::channel();
        let msg = Msg::Request {
            op,
            attempt: 1,
            kind,
            shard,
            key: key.to_vec(),
            value,
            token: token.map(<[u8]>::to_vec),
        };
        self.step_msg_with(|inner, cfg, io| {
            // Registered inside the step, so a response in the same step finds it.
            let token = match (kind, token) {
                (OpKind::Write, Some(t)) => Some((t.to_vec(), key.to_vec())),
                _ => None,
            };
            inner.waiting.insert(op, Waiting { kind, shard, token, reply: tx, why: None });
            inner.machine.on_msg(cfg, Endpoint::Client(0), msg, io);
        });
        rx.await.unwrap_or_else(|_| Err(self.stalled().unwrap_or_else(|| "the coordinator stopped".into())))
    }

    /// The partition `key` is stored on (`routing::key_partition`).
    pub fn partition_of(&self, key: &[u8]) -> u8 {
        // A reload keeps the suffixes (`machine::with_policy`): no lock needed for them.
        self.layout.partition_of(key, self.suffixes)
    }

    /// The ack timeout of the policy running now.
    fn ack_timeout(&self) -> Duration {
        ack_timeout(&self.lock().cfg)
    }

    /// Put `msg` on the link to node `n`; its reply comes back as a step.
    fn send(self: &Arc<Self>, n: NodeId, msg: StoreMsg, cfg: &Resolved) {
        let shell = Arc::clone(self);
        let sent_at = Instant::now();
        let request = match &msg {
            Msg::Replicate { key, version, value, .. } => {
                NodeRequest::Replicate { key: key.clone(), version: *version, value: value.clone() }
            }
            Msg::ReadReq { key, .. } => NodeRequest::Read { key: key.clone() },
            Msg::Ping => NodeRequest::Heartbeat,
            Msg::CopyRequest { shard, to } => {
                let (shard, to) = (*shard, *to);
                tokio::spawn(async move { shell.copy(shard, n, to).await });
                return;
            }
            other => unreachable!("a node is never sent {other:?} by the coordinator"),
        };
        let kind = match &msg {
            Msg::Replicate { .. } => "replicate",
            Msg::ReadReq { .. } => "read",
            _ => "ping",
        };
        // The policy the request was sent under judges its reply late or not.
        let ack_timeout = ack_timeout(cfg);
        let trace_id = self.trace.as_ref().map_or(0, |t| t.next_id());
        if let Some(t) = &self.trace {
            let (at_ms, msg, coordinator) = (t.now_ms(), kind.into(), self.me);
            t.line(&TraceLine::Send { at_ms, id: trace_id, node: n, msg, coordinator });
        }
        let deadline = sent_at + reply_wait(ack_timeout);
        let on_reply = move |reply: NodeReply| {
            if let NodeReply::Failed { message: why } = reply {
                // The node is up but could not do it (its disk is full): a refusal, so a
                // request too few can still answer fails at once, naming the cause.
                shell.heard(n, sent_at, ack_timeout);
                shell.lock().observed.node_errors[usize::from(n)] = Some((why, Instant::now()));
                let refused = match msg {
                    Msg::Replicate { op, attempt, shard, .. } | Msg::ReadReq { op, attempt, shard, .. } => {
                        Msg::Refused { op, attempt, shard }
                    }
                    _ => Msg::Pong, // a heartbeat answered with an error: alive
                };
                shell.step_msg(|m, cfg, io| m.on_msg(cfg, Endpoint::Node(n), refused, io));
                return;
            }
            if shell.fault == Some(ShellFault::DropLateReplies) && sent_at.elapsed() > ack_timeout {
                return;
            }
            if shell.lock().crashed {
                return; // the machine it was for is gone
            }
            if let Some(t) = &shell.trace {
                t.line(&TraceLine::Deliver { at_ms: t.now_ms(), id: trace_id });
            }
            let answer = match (msg, reply) {
                (Msg::Replicate { op, attempt, shard, .. }, NodeReply::Stored { .. }) => {
                    Msg::ReplicateAck { op, attempt, shard }
                }
                (Msg::ReadReq { op, attempt, shard, .. }, NodeReply::Value { version, value }) => {
                    Msg::ReadReply { op, attempt, shard, version, value }
                }
                (Msg::Ping, NodeReply::Alive { .. }) => Msg::Pong,
                (msg, reply) => {
                    eprintln!("replicheck store: node {n} answered {msg:?} with {reply:?}");
                    return;
                }
            };
            let from = match shell.fault {
                Some(ShellFault::WrongNodeReplies) => ((usize::from(n) + 1) % shell.links.len()) as NodeId,
                _ => n,
            };
            shell.heard(from, sent_at, ack_timeout);
            shell.step_msg(|m, cfg, io| m.on_msg(cfg, Endpoint::Node(from), answer, io));
        };
        // Lost (no reply by the deadline, or the connection broke): `on_reply` is dropped.
        Arc::clone(&self.links[usize::from(n)]).post(request, Traffic::Machine, deadline, Box::new(on_reply));
    }

    /// A reply to a request sent at `sent_at` under a policy with `ack_timeout`.
    fn heard(&self, n: NodeId, sent_at: Instant, ack_timeout: Duration) {
        let now = Instant::now();
        let late = now.duration_since(sent_at) > ack_timeout;
        let mut inner = self.lock();
        inner.observed.last_heard[usize::from(n)] = now;
        if late {
            inner.observed.late_replies[usize::from(n)] += 1;
        }
    }

    /// The copy node `source` was asked for: its keys of partition `shard` written to `to`,
    /// then `to` acknowledges. A copy that fails is a lost message (the round retries).
    async fn copy(self: Arc<Self>, shard: u8, source: NodeId, to: NodeId) {
        match self.copy_partition(shard, source, to).await {
            Ok(()) => {
                let now = Instant::now();
                self.lock().observed.last_heard[usize::from(to)] = now;
                let ack = Msg::CopyAck { shard, from: source };
                self.step_msg(|m, cfg, io| m.on_msg(cfg, Endpoint::Node(to), ack, io));
            }
            Err(e) => eprintln!(
                "replicheck store: catch-up copy of {} to {}: {e}",
                self.layout.node(source),
                self.layout.node(to)
            ),
        }
    }

    async fn copy_partition(&self, shard: u8, source: NodeId, target: NodeId) -> Result<(), String> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let deadline = Instant::now() + reply_wait(self.ack_timeout());
            let scan = NodeRequest::Scan { after: after.clone(), limit: SCAN_ENTRIES_MAX };
            let traffic = Traffic::Copy { source };
            let entries = match request_on(&self.links[usize::from(source)], scan, traffic, deadline).await {
                Ok(NodeReply::Entries { entries }) => entries,
                Ok(other) => return Err(format!("unexpected scan reply {other:?}")),
                Err(e) => return Err(format!("scan: {e}")),
            };
            let Some(last) = entries.last() else { return Ok(()) };
            after = Some(last.0.clone());
            // A page short of the limit is the last: no scan after it (the copy then needs its
            // source only for as long as the model's one copy message does).
            let last_page = entries.len() < SCAN_ENTRIES_MAX as usize;
            // A page's writes go out together, so the target commits them in few fsyncs.
            let deadline = Instant::now() + reply_wait(self.ack_timeout());
            let mut copies = tokio::task::JoinSet::new();
            for (key, version, value) in entries {
                if self.partition_of(&key) != shard {
                    continue;
                }
                let link = Arc::clone(&self.links[usize::from(target)]);
                copies.spawn(async move {
                    request_on(&link, NodeRequest::Replicate { key, version, value }, traffic, deadline).await
                });
            }
            while let Some(copied) = copies.join_next().await {
                copied.map_err(|e| format!("copy task: {e}"))?.map_err(|e| format!("copy: {e}"))?;
                self.counters.keys_copied.fetch_add(1, Ordering::Relaxed);
            }
            if last_page {
                return Ok(());
            }
        }
    }
}

fn ack_timeout(cfg: &Resolved) -> Duration {
    Duration::from_millis(u64::from(cfg.policy.replica_ack_timeout_ticks))
}

/// How long a node's reply is waited for before it counts as lost.
fn reply_wait(ack_timeout: Duration) -> Duration {
    (ack_timeout * REPLY_WAIT_ACK_TIMEOUTS).max(Duration::from_millis(REPLY_WAIT_MIN_MS))
}

/// A write with a token replicated at `version`: logged if its token was first replicated at
/// another version (a duplicate effect).
fn observe_token(inner: &mut Inner, op: u64, version: u64, log: &DecisionLog) {
    let Some(token) = inner.waiting.get(&op).and_then(|w| w.token.clone()) else { return };
    if let Some(first) = inner.tokens.replicated(token, version) {
        log.event(&format!("duplicate_effect first_version={first} version={version}"));
    }
}

/// Whether `node` is dead to the machine's detector.
pub fn is_dead(machine: &Machine, node: NodeId) -> bool {
    machine.health[usize::from(node)] == Health::Dead
}
