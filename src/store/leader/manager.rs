//! The leader family's coordinator: the failover manager's machine, stepped by one task, and
//! the RESP front end that turns each client command into a request to it. The manager's
//! durable state (per partition: epoch, primary, confirmed in-sync set) is written to
//! `DIR/manager-state` before any send of the step that changed it, so no replica hears of an
//! epoch the manager could forget.

use super::mesh::{self, LeaderLink, Mesh};
use super::{LeaderData, Spec};
use crate::config::{OpKind, Resolved};
use crate::policy::detector::Health;
use crate::policy::leader::NodeSet;
use crate::policy::NodeId;
use crate::protocol::leader::{
    LeaderEvent, LeaderFailure, Manager, ManagerDurable, ManagerTimer, Refusal, RouteDurable,
};
use crate::protocol::{Endpoint, Event, Msg, Outbox};
use crate::store::clock::{Clock, Clocked};
use crate::store::coordinator::clients::{self, ClientLimits, ClientStats, RespService};
use crate::store::coordinator::info::config_name;
use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::resp;
use crate::store::coordinator::state::write_durably;
use crate::store::node::wire::StoredValue;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

pub const STATE_FILE: &str = "manager-state";
/// Client requests waiting for the machine's task at most; the connections wait beyond it.
const REQUESTS_QUEUED_MAX: usize = 4096;
pub(crate) const INBOX_MAX: usize = 4096;
/// How often a coordinator that could not save its state tries again.
const STALL_RETRY_MS: u64 = 200;

/// One partition's durable route, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RouteRecord {
    epoch: u64,
    primary: NodeId,
    in_sync: NodeSet,
    in_sync_seq: u8,
}

/// The manager's state file: its routes, or `None` if there is none yet.
pub fn load_state(path: &Path, partitions: usize) -> Result<Option<ManagerDurable<LeaderData>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let records: Vec<RouteRecord> = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not a manager's state: {e}", path.display()))?;
    if records.len() != partitions {
        return Err(format!(
            "{}: holds {} partitions, the cluster has {partitions}",
            path.display(),
            records.len()
        ));
    }
    Ok(Some(ManagerDurable {
        shards: records
            .into_iter()
            .map(|r| RouteDurable {
                epoch: r.epoch,
                primary: r.primary,
                in_sync: r.in_sync,
                in_sync_seq: r.in_sync_seq,
            })
            .collect(),
    }))
}

pub fn save_state(path: &Path, durable: &ManagerDurable<LeaderData>) -> Result<(), String> {
    let records: Vec<RouteRecord> = durable
        .shards
        .iter()
        .map(|r| RouteRecord {
            epoch: r.epoch,
            primary: r.primary,
            in_sync: r.in_sync,
            in_sync_seq: r.in_sync_seq,
        })
        .collect();
    write_durably(path, &serde_json::to_vec(&records).expect("records serialize"))
}

/// A client's command on its way to the machine.
struct ClientRequest {
    kind: OpKind,
    key: Vec<u8>,
    value: StoredValue,
    reply: oneshot::Sender<Result<StoredValue, String>>,
}

/// What INFO shows, refreshed after every step.
struct View {
    /// Per partition: epoch, primary, confirmed in-sync set, a failover under way.
    routes: Vec<(u64, NodeId, NodeSet, bool)>,
    health: Vec<Health>,
}

impl View {
    fn of(machine: &Manager<LeaderData>) -> View {
        View {
            routes: machine
                .shards
                .iter()
                .map(|r| (r.epoch, r.primary, r.in_sync, r.failover.is_some()))
                .collect(),
            health: machine.health.to_vec(),
        }
    }
}

#[derive(Default)]
struct Counters {
    writes_acked: AtomicU64,
    writes_failed: AtomicU64,
    reads_ok: AtomicU64,
    reads_failed: AtomicU64,
    promotions: AtomicU64,
    unclean_promotions: AtomicU64,
    failovers_blocked: AtomicU64,
    stale_refused: AtomicU64,
    /// Writes acknowledged in an epoch older than one that had acknowledged a write already:
    /// a deposed primary's (`single_primary` violated; fencing keeps it from happening).
    late_epoch_acks: AtomicU64,
}

pub struct ManagerHost {
    cfg: Resolved,
    layout: Layout,
    requests: mpsc::Sender<ClientRequest>,
    limits: ClientLimits,
    clients: ClientStats,
    stopped: watch::Sender<bool>,
    view: Mutex<View>,
    counters: Counters,
    started: tokio::time::Instant,
    /// Why the coordinator cannot save its state now, while it cannot (INFO's `state_file`).
    stalled: Mutex<Option<String>>,
    /// Stalls so far (INFO's `stall_restarts`: each ends in a restart from the state file).
    stalls: AtomicU64,
}

impl ManagerHost {
    /// Start the manager of the cluster in `data_dir` (from its state file, which must exist)
    /// and its client listener on `client_addr`; returns where clients connect.
    pub async fn start(
        spec: &Spec,
        data_dir: &Path,
        limits: ClientLimits,
        client_addr: SocketAddr,
        mesh_listener: Option<std::net::TcpListener>,
    ) -> Result<(Arc<ManagerHost>, SocketAddr), String> {
        limits.check()?;
        let (cfg, layout) = spec.config(data_dir)?;
        let state_path = data_dir.join(STATE_FILE);
        let durable = load_state(&state_path, spec.partitions)?.ok_or_else(|| {
            format!("{}: missing (a leader cluster writes it when first created)", state_path.display())
        })?;
        let mesh_listener = match mesh_listener {
            Some(l) => l
                .set_nonblocking(true)
                .and_then(|_| tokio::net::TcpListener::from_std(l))
                .map_err(|e| format!("the coordinator's listener: {e}"))?,
            None => crate::store::node::bind_with_retry(spec.manager).await?,
        };
        let client_listener = crate::store::node::bind_with_retry(client_addr).await?;
        let client_addr = client_listener.local_addr().map_err(|e| format!("client listener: {e}"))?;
        let (inbox_tx, inbox) = mpsc::channel(INBOX_MAX);
        tokio::spawn(mesh::listen(mesh_listener, Endpoint::LEADER, spec.cluster_id, inbox_tx));
        let addrs = spec.clone();
        let mesh = Mesh::new(Endpoint::LEADER, spec.cluster_id, move |e| addrs.route(Endpoint::LEADER, e));
        let host = ManagerHost::launch(cfg, layout, limits, (state_path, durable), Arc::new(mesh), inbox);
        tokio::spawn(clients::serve(Arc::clone(&host), client_listener));
        Ok((host, client_addr))
    }

    /// The manager recovered from `saved` (its state file and what it holds), stepping the
    /// replicas' messages from `inbox` and client requests (`request`), sending through `link`:
    /// the coordinator's, and `store sim`'s simulated one (which has no client listener).
    pub(crate) fn launch(
        cfg: Resolved,
        layout: Layout,
        limits: ClientLimits,
        saved: (PathBuf, ManagerDurable<LeaderData>),
        link: Arc<dyn LeaderLink>,
        inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>,
    ) -> Arc<ManagerHost> {
        let (state_path, durable) = saved;
        let machine = Manager::<LeaderData>::recover(&cfg, &durable);
        let (requests, requests_rx) = mpsc::channel(REQUESTS_QUEUED_MAX);
        let partitions = layout.shards.len();
        let host = Arc::new(ManagerHost {
            cfg: cfg.clone(),
            layout,
            requests,
            limits,
            clients: ClientStats::default(),
            stopped: watch::Sender::new(false),
            // From the recovered machine, not the stepper's first step: INFO may be asked before
            // that task first runs, and must show the routes then too.
            view: Mutex::new(View::of(&machine)),
            counters: Counters::default(),
            started: tokio::time::Instant::now(),
            stalled: Mutex::new(None),
            stalls: AtomicU64::new(0),
        });
        let stepper = Stepper {
            host: Arc::clone(&host),
            cfg,
            machine,
            mesh: link,
            state_path,
            saved: durable,
            waiting: HashMap::new(),
            failures: HashMap::new(),
            acked_epoch: vec![0; partitions],
            blocked_logged: std::collections::BTreeSet::new(),
            next_op: 1,
        };
        tokio::spawn(stepper.run(inbox, requests_rx));
        host
    }

    /// A client's GET (`Read`) or SET (`Write`), as the RESP front end asks it.
    pub(crate) async fn request(
        &self,
        kind: OpKind,
        key: &[u8],
        value: StoredValue,
    ) -> Result<StoredValue, String> {
        let (reply, answer) = oneshot::channel();
        let request = ClientRequest { kind, key: key.to_vec(), value, reply };
        if self.requests.send(request).await.is_err() {
            return Err("the coordinator stopped".into());
        }
        answer.await.unwrap_or_else(|_| Err("the coordinator stopped before the request was answered".into()))
    }

    async fn execute_command(self: Arc<Self>, args: Vec<Vec<u8>>) -> (Vec<u8>, bool) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let reply = match (name.as_str(), args.len()) {
            ("PING", 1) => resp::simple("PONG"),
            ("PING", 2) => resp::bulk(Some(&args[1])),
            ("GET", 2) => match self.request(OpKind::Read, &args[1], None).await {
                Ok(value) => {
                    self.counters.reads_ok.fetch_add(1, Ordering::Relaxed);
                    resp::bulk(value.as_deref())
                }
                Err(e) => {
                    self.counters.reads_failed.fetch_add(1, Ordering::Relaxed);
                    resp::error(&e)
                }
            },
            ("SET", 3) => match self.request(OpKind::Write, &args[1], Some(args[2].clone())).await {
                Ok(_) => {
                    self.counters.writes_acked.fetch_add(1, Ordering::Relaxed);
                    resp::simple("OK")
                }
                Err(e) => {
                    self.counters.writes_failed.fetch_add(1, Ordering::Relaxed);
                    resp::error(&e)
                }
            },
            ("SET", n) if n > 3 => resp::error(
                "syntax error: SET key value (no options; the leader family takes no TOKEN either: its primary keeps no token table)",
            ),
            ("INFO", 1 | 2) => resp::bulk(Some(self.info().as_bytes())),
            ("COMMAND", _) => resp::array(&[]),
            ("QUIT", 1) => return (resp::simple("OK"), true),
            ("PING" | "GET" | "SET" | "INFO" | "QUIT", _) => {
                resp::error(&format!("wrong number of arguments for '{}' command", name.to_lowercase()))
            }
            ("DEL" | "CONFIG", _) => resp::error(&format!(
                "'{}' is not served with replication = \"leader\" (SET, GET, INFO, PING, QUIT are)",
                name.to_lowercase()
            )),
            _ => resp::error(&format!("unknown command '{}'", String::from_utf8_lossy(&args[0]))),
        };
        (reply, false)
    }

    /// The INFO reply's text.
    pub fn info(&self) -> String {
        let p = &self.cfg.policy;
        let lp = p.leader.as_ref().expect("the leader family's policy");
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        let mut out = String::new();
        let _ = write!(
            out,
            "# Server\r\nreplicheck_version:{}\r\nuptime_in_seconds:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            self.started.elapsed().as_secs()
        );
        let _ = write!(
            out,
            "# Replication\r\nreplication:leader\r\nreplication_factor:{}\r\nacks:{}\r\nmin_in_sync:{}\r\nreplica_lag_timeout_ms:{}\r\nunclean_election:{}\r\nfencing:{}\r\nread_from:{}\r\nreplica_ack_timeout_ms:{}\r\nfailure_detection:{}\r\nfailover_delay_ms:{}\r\n",
            p.replication_factor,
            config_name(&lp.acks),
            lp.min_in_sync,
            lp.replica_lag_timeout_ticks,
            lp.unclean_election,
            lp.fencing,
            config_name(&lp.read_from),
            p.replica_ack_timeout_ticks,
            config_name(&p.failure_detection),
            lp.failover_delay_ticks,
        );
        let stalled = self.stalled.lock().expect("no panic holds it").clone();
        let _ = write!(
            out,
            "state_file:{}\r\nstall_restarts:{}\r\n",
            stalled.map_or("ok".to_string(), |why| format!("cannot save its state: {why}")),
            get(&self.stalls)
        );
        let view = self.view.lock().expect("no panic holds the view");
        for (i, &(epoch, primary, in_sync, failover)) in view.routes.iter().enumerate() {
            let members: Vec<String> =
                (0..8).filter(|n| in_sync & (1 << n) != 0).map(|n| n.to_string()).collect();
            let _ = write!(
                out,
                "partition_{}:epoch={epoch},primary={primary},in_sync={},failover={}\r\n",
                self.layout.shards[i].name,
                members.join("|"),
                if failover { "under_way" } else { "none" }
            );
        }
        for (n, h) in view.health.iter().enumerate() {
            let _ = write!(out, "node_{n}:{}\r\n", config_name(h));
        }
        let _ = write!(
            out,
            "\r\n# Stats\r\nwrites_acked:{}\r\nwrites_failed:{}\r\nreads_ok:{}\r\nreads_failed:{}\r\npromotions:{}\r\nunclean_promotions:{}\r\nfailovers_blocked:{}\r\nstale_refused:{}\r\nlate_epoch_acks:{}\r\n",
            get(&c.writes_acked),
            get(&c.writes_failed),
            get(&c.reads_ok),
            get(&c.reads_failed),
            get(&c.promotions),
            get(&c.unclean_promotions),
            get(&c.failovers_blocked),
            get(&c.stale_refused),
            get(&c.late_epoch_acks),
        );
        // Counted under the view's lock (`Stepper::finish` refreshes the view before it counts
        // a step's events): a promotion counted here is one whose route is shown above.
        drop(view);
        let s = &self.clients;
        let _ = write!(
            out,
            "\r\n# Clients\r\nconnected_clients:{}\r\nrejected_connections:{}\r\n",
            s.connected.load(Ordering::Relaxed),
            get(&s.rejected)
        );
        out
    }

    /// Stop serving: the listener and every client connection close.
    pub fn crash(&self) {
        self.stopped.send_replace(true);
    }
}

impl RespService for ManagerHost {
    fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    fn client_stats(&self) -> &ClientStats {
        &self.clients
    }

    fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    async fn execute(self: Arc<Self>, args: Vec<Vec<u8>>) -> (Vec<u8>, bool) {
        self.execute_command(args).await
    }
}

/// The task that owns the machine: every step, then its persistence, then its sends.
struct Stepper {
    host: Arc<ManagerHost>,
    cfg: Resolved,
    machine: Manager<LeaderData>,
    mesh: Arc<dyn LeaderLink>,
    state_path: PathBuf,
    saved: ManagerDurable<LeaderData>,
    /// Client requests waiting for their response, by op.
    waiting: HashMap<u64, (OpKind, oneshot::Sender<Result<StoredValue, String>>)>,
    /// Why a request failed, from this step's events, until its response goes out.
    failures: HashMap<u64, LeaderFailure>,
    /// Per partition, the newest epoch in which a write was acknowledged.
    acked_epoch: Vec<u64>,
    /// Failovers found blocked, by (partition, primary), logged once until the partition's
    /// primary changes or is heard from again: the manager retries one every heartbeat round.
    blocked_logged: std::collections::BTreeSet<(u8, NodeId)>,
    next_op: u64,
}

impl Stepper {
    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>,
        mut requests: mpsc::Receiver<ClientRequest>,
    ) {
        // Whoever it recovered is told its role when next heard from (`launch` set the view).
        let mut out = Outbox::default();
        let mut clock = Clock::new();
        let mut stopped = self.host.stopped.subscribe();
        loop {
            // Asleep until the next timer may be due, not woken every millisecond.
            let wake = clock.wake(self.machine.quiet_ticks(&self.cfg));
            // In a fixed order, so that `store sim` gives the same run for the same seed.
            let stepped = tokio::select! {
                biased;
                _ = stopped.wait_for(|s| *s) => return,
                received = inbox.recv() => {
                    let Some((src, msg)) = received else { return };
                    // Time first, so that the step sees the moment it happens at.
                    clock.catch_up(&mut self).and_then(|()| {
                        self.machine.on_msg(&self.cfg, src, msg, &mut out);
                        self.finish(&mut out)
                    })
                }
                request = requests.recv() => {
                    let Some(r) = request else { return };
                    if let Err(e) = clock.catch_up(&mut self) {
                        let _ = r.reply.send(Err(stalled_answer(&e)));
                        Err(e)
                    } else {
                    let op = self.next_op;
                    self.next_op += 1;
                    let shard = self.host.layout.partition_of(&r.key, self.cfg.policy.routing.write_shard_suffixes);
                    self.waiting.insert(op, (r.kind, r.reply));
                    let msg = Msg::Request { op, attempt: 0, kind: r.kind, shard, key: r.key, value: r.value, token: () };
                    self.machine.on_msg(&self.cfg, Endpoint::Client(0), msg, &mut out);
                    self.finish(&mut out)
                    }
                }
                _ = tokio::time::sleep_until(wake) => clock.catch_up(&mut self),
            };
            if let Err(e) = stepped {
                if !self.stall(&e, &mut inbox, &mut requests, &mut stopped).await {
                    return;
                }
                // A crash and restart from the state file, as the protocol allows any time.
                self.machine = Manager::recover(&self.cfg, &self.saved);
                out = Outbox::default();
                clock = Clock::new();
                self.refresh_view();
                eprintln!("replicheck store: the coordinator saved its state again and restarted from it");
            }
        }
    }

    /// A step could not be persisted: nothing it decided was sent, and the machine's memory is
    /// ahead of its state file. Until the file takes the last saved state again, the
    /// coordinator is down: every request is answered with the cause at once, messages to it
    /// are lost (as to a crashed one) and it judges no node. `false` if it was stopped.
    async fn stall(
        &mut self,
        cause: &str,
        inbox: &mut mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>,
        requests: &mut mpsc::Receiver<ClientRequest>,
        stopped: &mut watch::Receiver<bool>,
    ) -> bool {
        let answer = stalled_answer(cause);
        eprintln!("replicheck store: {answer} (it tries again every {STALL_RETRY_MS} ms)");
        self.host.stalls.fetch_add(1, Ordering::Relaxed);
        *self.host.stalled.lock().expect("no panic holds it") = Some(cause.to_string());
        for (_, (_, reply)) in self.waiting.drain() {
            let _ = reply.send(Err(answer.clone()));
        }
        self.failures.clear();
        let mut retry = tokio::time::interval(Duration::from_millis(STALL_RETRY_MS));
        loop {
            tokio::select! {
                biased;
                _ = stopped.wait_for(|s| *s) => return false,
                received = inbox.recv() => if received.is_none() { return false },
                request = requests.recv() => match request {
                    Some(r) => { let _ = r.reply.send(Err(answer.clone())); }
                    None => return false,
                },
                _ = retry.tick() => {
                    if save_state(&self.state_path, &self.saved).is_ok() {
                        *self.host.stalled.lock().expect("no panic holds it") = None;
                        return true;
                    }
                }
            }
        }
    }

    /// After a step: persist what it changed, then act on its events and sends.
    fn finish(&mut self, out: &mut Outbox<LeaderData>) -> Result<(), String> {
        let durable = self.machine.durable();
        if durable != self.saved {
            save_state(&self.state_path, &durable)?;
            self.saved = durable;
        }
        // The view first, then the counters its events bump (INFO reads both under the view's
        // lock): whoever sees a promotion counted sees the route it made.
        self.refresh_view();
        for event in out.events.drain(..) {
            self.observe(event);
        }
        for (dst, msg) in out.sends.drain(..) {
            match (dst, msg) {
                (Endpoint::Client(_), Msg::Response { op, ok, value, .. }) => {
                    let Some((kind, reply)) = self.waiting.remove(&op) else { continue };
                    let why = self.failures.remove(&op);
                    let _ = reply.send(if ok { Ok(value) } else { Err(self.failure_text(kind, op, why)) });
                }
                (Endpoint::Client(_), other) => {
                    unreachable!("a client is sent only responses, not {other:?}")
                }
                (dst, msg) => self.mesh.send(dst, msg),
            }
        }
        Ok(())
    }

    fn observe(&mut self, event: Event<LeaderData>) {
        let Event::Leader(e) = event else { return };
        let c = &self.host.counters;
        let name = |shard: u8| self.host.layout.shards[usize::from(shard)].name.clone();
        let node = |n: NodeId| self.host.layout.node(n);
        match e {
            LeaderEvent::RequestFailed { op, why } => {
                self.failures.insert(op, why);
            }
            LeaderEvent::Promoted { shard, old, new, epoch, clean } => {
                self.blocked_logged.retain(|(s, _)| *s != shard);
                c.promotions.fetch_add(1, Ordering::Relaxed);
                if !clean {
                    c.unclean_promotions.fetch_add(1, Ordering::Relaxed);
                }
                let how =
                    if clean { "from the in-sync set" } else { "UNCLEAN: from outside the in-sync set" };
                eprintln!(
                    "replicheck store: partition {}: {} promoted in place of {}, epoch {epoch} ({how})",
                    name(shard),
                    node(new),
                    node(old)
                );
            }
            LeaderEvent::FailoverStarted { shard, primary }
                if !self.blocked_logged.contains(&(shard, primary)) =>
            {
                eprintln!(
                    "replicheck store: partition {}: primary {} judged dead; failover started",
                    name(shard),
                    node(primary)
                );
            }
            LeaderEvent::FailoverStarted { .. } => {} // blocked again, said once
            LeaderEvent::FailoverCalledOff { shard, primary } => {
                self.blocked_logged.retain(|(s, _)| *s != shard);
                eprintln!(
                    "replicheck store: partition {}: primary {} heard from again; failover called off",
                    name(shard),
                    node(primary)
                );
            }
            LeaderEvent::FailoverBlocked { shard, primary, why } => {
                c.failovers_blocked.fetch_add(1, Ordering::Relaxed);
                if !self.blocked_logged.insert((shard, primary)) {
                    return;
                }
                eprintln!(
                    "replicheck store: partition {}: no replica to promote in place of {} ({}); it takes no writes until one is",
                    name(shard),
                    node(primary),
                    config_name(&why)
                );
            }
            LeaderEvent::StaleRefused { .. } => {
                c.stale_refused.fetch_add(1, Ordering::Relaxed);
            }
            LeaderEvent::WriteAcked { shard, node, epoch, version } => {
                let newest = &mut self.acked_epoch[usize::from(shard)];
                if epoch < *newest {
                    c.late_epoch_acks.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "replicheck store: partition {}: single_primary violated: {} acknowledged a write (version {version}) in epoch {epoch}, after epoch {newest} acknowledged one (a deposed primary's write, let through with fencing = false)",
                        name(shard),
                        self.host.layout.node(node)
                    );
                }
                *newest = (*newest).max(epoch);
            }
            LeaderEvent::InSyncChanged { .. } | LeaderEvent::WriteAccepted { .. } => {}
        }
    }

    fn failure_text(&self, kind: OpKind, op: u64, why: Option<LeaderFailure>) -> String {
        let what = if kind == OpKind::Write { "write" } else { "read" };
        // A write that reached a primary may be stored, and kept by the next one.
        let maybe = if kind == OpKind::Write { "; the write may or may not have taken effect" } else { "" };
        match why {
            Some(LeaderFailure::Refused(Refusal::Deposed)) => {
                format!("{what} failed: its primary was deposed before the write was acknowledged{maybe}")
            }
            Some(LeaderFailure::Refused(r)) => {
                let reason = match r {
                    Refusal::NotPrimary => {
                        "the replica asked is not the partition's primary (a failover is under way)"
                    }
                    Refusal::StaleEpoch => "fencing: the request's epoch is older than the replica's",
                    Refusal::NotEnoughInSync => "fewer replicas in sync than min_in_sync",
                    Refusal::Busy => "the primary has too many writes waiting for acks",
                    Refusal::Deposed => unreachable!("matched above"),
                };
                let applied = if kind == OpKind::Write { "; the write was not applied" } else { "" };
                format!("{what} refused: {reason}{applied}")
            }
            Some(LeaderFailure::Deadline) => format!(
                "{what} failed: no answer within replica_ack_timeout ({} ms){maybe}",
                self.cfg.policy.replica_ack_timeout_ticks
            ),
            Some(LeaderFailure::StaleResult) => {
                format!(
                    "{what} failed: fencing: its answer came from an older epoch than the partition's{maybe}"
                )
            }
            None => format!("{what} {op} failed{maybe}"),
        }
    }

    fn refresh_view(&self) {
        *self.host.view.lock().expect("no panic holds the view") = View::of(&self.machine);
    }
}

/// The manager on the clock: a timer fires as a step of its own, saved and sent.
impl Clocked for Stepper {
    type Timer = ManagerTimer<u64>;

    fn due(&self, out: &mut Vec<ManagerTimer<u64>>) {
        self.machine.due(&self.cfg, out);
    }

    fn fire(&mut self, timer: ManagerTimer<u64>) -> Result<(), String> {
        let mut out = Outbox::default();
        self.machine.on_timer(&self.cfg, timer, &mut out);
        self.finish(&mut out)
    }

    fn quiet_ticks(&self) -> Option<u32> {
        self.machine.quiet_ticks(&self.cfg)
    }

    fn tick(&mut self) -> bool {
        self.machine.tick(&self.cfg);
        true
    }
}

/// What every request is answered while the coordinator cannot save its state.
fn stalled_answer(cause: &str) -> String {
    format!("coordinator stalled: cannot save its state: {cause}; retry later")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::leader::{layout_of, policy_of, replica_sets, POLICY_FILE};

    /// Drops every message: the test asks the host, not the replicas.
    struct Nowhere;

    impl LeaderLink for Nowhere {
        fn send(&self, _: Endpoint, _: mesh::LeaderMsg) {}
    }

    /// INFO shows every partition's route from the moment the manager is launched, before its
    /// stepper task first runs (a client may ask as soon as `store up` prints its port).
    #[test]
    fn info_shows_the_recovered_routes_before_the_first_step() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(POLICY_FILE), "replication_factor = 3\n").unwrap();
        let sourced = policy_of(&dir.path().join(POLICY_FILE), None).unwrap();
        let layout = layout_of(&sourced, 3, 2, 3, None).unwrap();
        let unused = SocketAddr::from(([127, 0, 0, 1], 9));
        let spec = Spec {
            cluster_id: 1,
            partitions: 2,
            replication_factor: None,
            node_zones: vec![0, 0, 0],
            nodes: vec![unused; 3],
            manager: unused,
            replicas: replica_sets(&layout),
            routes: Vec::new(),
            model: None,
        };
        let (cfg, layout) = spec.config(dir.path()).unwrap();
        // A recovered state that is not the first one: partition 1 failed over to node 2.
        let mut durable = Manager::<LeaderData>::new(&cfg).durable();
        durable.shards[1].epoch = 3;
        durable.shards[1].primary = 2;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let info = runtime.block_on(async {
            let (_inbox, received) = mpsc::channel(1);
            let state = dir.path().join(STATE_FILE);
            let host = ManagerHost::launch(
                cfg,
                layout,
                ClientLimits::default(),
                (state, durable),
                Arc::new(Nowhere),
                received,
            );
            // On a current-thread runtime the spawned stepper has not run: nothing awaited yet.
            let info = host.info();
            host.crash();
            info
        });
        let names: Vec<&str> = info.lines().filter(|l| l.starts_with("partition_")).collect();
        assert_eq!(names.len(), 2, "{info}");
        assert!(names[1].ends_with(":epoch=3,primary=2,in_sync=0|1|2,failover=none"), "{info}");
        assert_eq!(info.lines().filter(|l| l.ends_with(":alive")).count(), 3, "{info}");
    }
}
