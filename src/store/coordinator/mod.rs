//! The coordinator as a server: RESP for clients, INFO, and the protocol's coordinator behind
//! them (`shell`, which drives `protocol::Coordinator`, the state machine the models
//! check). Nothing here decides: a command becomes a protocol request and its response the
//! reply.
//!
//! The coordinator's room, below the cluster that starts it and above the nodes it talks to:
//! this server; [`clients`] (client connections and their limits); [`resp`] (the RESP it
//! speaks, and the client side of it); [`shell`] (drives the protocol's machine with sockets,
//! a clock and the state file); [`machine`] (the store's
//! instantiation of the protocol's data and scenario); [`layout`] (the partitions, capacities
//! and load facts it is started with); [`state`] (its state file); [`info`] (what INFO counts);
//! [`link`] (its connection to a node); [`peer`] (coordinator<->coordinator); [`fleet`] (the
//! meter of what all coordinators offer the backends). The server drives the shell, which
//! uses the rest; none of them uses the server or the shell.
//!
//! Partitions: the keyspace is split into the partitions of a [`Layout`], each with its own
//! replica set; a key's partition is decided by `routing::key_partition`. Writes are admitted
//! against partition and backend capacities per window, replicated to the replica set (and to
//! a joining replacement), and acked at a write quorum within `replica_ack_timeout`; reads
//! answer from a read quorum with the newest version, written back to a write quorum first
//! when fewer hold it. Failure detection, eviction through the membership queue, the catch-up
//! copy, the rebalancer and what is saved before a change takes effect are the protocol's.

pub mod clients;
mod failure;
pub mod fleet;
pub mod info;
pub mod layout;
pub mod link;
pub mod machine;
pub mod peer;
pub mod resp;
pub mod shell;
pub mod shell_fault;
pub mod state;
mod tokens;

use crate::config::{CoordinatorSpec, OpKind, Policy};
use crate::policy::NodeId;
use crate::store::decision::DecisionLog;
use crate::store::node::wire::{NodeReply, NodeRequest, StoredValue};
use crate::store::trace::TraceWriter;
use clients::{ClientLimits, ClientStats};
use info::config_name;
use layout::Layout;
use layout::LoadFacts;
use link::{LinkError, NodeAddrs, NodeLink};
use peer::Peering;
use shell::Shell;
use state::{SavedState, StateFile};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Every node must answer the first heartbeat within this, so that the version counter starts
/// above every version already stored.
const STARTUP_TIMEOUT_MS: u64 = 10_000;
/// With a saved version floor, how long a restarting coordinator probes the nodes (a down
/// node is not waited for: the floor already covers the versions used before).
const RESTART_PROBE_MS: u64 = 1_000;
/// How often a stalled coordinator tries to restart from its state file.
const STALL_RETRY_MS: u64 = 1_000;
/// A restart that keeps failing is logged at most this often.
const STALL_LOG_INTERVAL_MS: u64 = 10_000;

/// The membership queue of `store up`: one change per partition may wait, applied at once.
pub fn membership_default(partitions: usize) -> CoordinatorSpec {
    CoordinatorSpec {
        zone: 0,
        membership_queue_capacity: u8::try_from(partitions.max(1)).unwrap_or(u8::MAX),
        membership_update_ticks: 0,
        churn_budget: None,
        // `store up`'s coordinator does not model its own work queue: requests never wait.
        work: None,
        work_round_ticks: 1,
    }
}

/// What a coordinator alone needs to start a new machine after a stall.
struct Restart {
    nodes: NodeAddrs,
    state_file: StateFile,
    log: DecisionLog,
    trace: Option<TraceWriter>,
    zone: u8,
    fleet: Arc<fleet::FleetMeter>,
}

/// The shell's view of the store's TCP links.
fn channels(links: Vec<Arc<NodeLink>>) -> Vec<Arc<dyn link::NodeChannel>> {
    links.into_iter().map(|l| l as Arc<dyn link::NodeChannel>).collect()
}

/// Coordinator `peering.me`'s shell over `links` (one per node): the scenario checked, the
/// highest version any node stores learned, the machine recovered from `state` (or fresh) and
/// its clock started. The TCP coordinator and the simulated store (`store sim`) start here.
#[allow(clippy::too_many_arguments)]
pub async fn start_shell(
    policy: &Policy,
    links: Vec<Arc<dyn link::NodeChannel>>,
    node_zones: &[u8],
    log: DecisionLog,
    load: &LoadFacts,
    layout: Layout,
    membership: &CoordinatorSpec,
    state: Option<(StateFile, Option<SavedState>)>,
    trace: Option<TraceWriter>,
    peering: &Peering,
) -> Result<Arc<Shell>, String> {
    let node_count = links.len();
    load.check(node_count)?;
    layout.check(node_count, policy.replication_factor)?;
    let rf = usize::from(policy.replication_factor);
    if rf > node_count {
        return Err(format!("replication_factor {rf} exceeds the {node_count} nodes"));
    }
    if node_zones.len() != node_count {
        return Err(format!("{} node zones for {node_count} nodes: one zone per node", node_zones.len()));
    }
    if let Some((file, Some(saved))) = &state {
        saved.check(&layout, node_count, file.path())?;
    }
    let max_version = max_stored_version(&links, matches!(&state, Some((_, Some(_))))).await?;
    let cfg = machine::resolved(policy, node_zones, &layout, load, membership, &peering.zones)?;
    let (state_file, saved) = match state {
        // Only the leader keeps the state file: the others learn every change from it.
        Some((file, saved)) => ((peering.me == 0).then_some(file), saved),
        None => (None, None),
    };
    let shell = Shell::new(
        cfg,
        peering.me,
        peering,
        layout,
        links,
        state_file,
        saved,
        max_version,
        log,
        trace,
        None,
    )?;
    shell.start_clock();
    Ok(shell)
}

/// The highest version any node stores, asked by heartbeat. With a saved version floor every
/// version used before is below it: a node that is down (the coordinator restarts after a
/// crash) need not be waited for.
async fn max_stored_version(links: &[Arc<dyn link::NodeChannel>], floor_saved: bool) -> Result<u64, String> {
    let wait_ms = if floor_saved { RESTART_PROBE_MS } else { STARTUP_TIMEOUT_MS };
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut max_version = 0;
    for (node, link) in links.iter().enumerate() {
        // A node may still be starting: retry until the deadline.
        let reply = loop {
            match link::request_on(link, NodeRequest::Heartbeat, link::Traffic::Probe, deadline).await {
                Ok(reply) => break Some(reply),
                // The floor covers every version used before: a node down now adds nothing.
                Err(LinkError::Deadline | LinkError::Unreachable(_)) if floor_saved => break None,
                Err(LinkError::Deadline) => {
                    return Err(format!(
                        "node {node} at {} did not answer within {STARTUP_TIMEOUT_MS} ms",
                        link.place()
                    ))
                }
                Err(_) if floor_saved && Instant::now() >= deadline => break None,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let Some(reply) = reply else { continue };
        match reply {
            NodeReply::Alive { max_version: v, .. } => max_version = max_version.max(v),
            other => return Err(format!("node {node}: unexpected heartbeat reply {other:?}")),
        }
    }
    Ok(max_version)
}

/// Restart a coordinator alone whose machine stalled (its state could not be saved) from
/// its state file, as soon as that can be written again; until then it answers every request
/// with the stall's cause.
async fn supervise(
    coordinator: std::sync::Weak<Coordinator>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut last_logged: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(Duration::from_millis(STALL_RETRY_MS)) => {}
        }
        let Some(c) = coordinator.upgrade() else { return };
        if c.shell().stalled().is_none() {
            continue;
        }
        match c.restart_after_stall().await {
            Ok(()) => {
                eprintln!("replicheck store: the coordinator's state can be saved again: restarted from it");
                last_logged = None;
            }
            Err(e) => {
                let interval = Duration::from_millis(STALL_LOG_INTERVAL_MS);
                if last_logged.is_none_or(|at| at.elapsed() >= interval) {
                    eprintln!("replicheck store: the coordinator is still stalled (retrying every {STALL_RETRY_MS} ms): {e}");
                    last_logged = Some(Instant::now());
                }
            }
        }
    }
}

/// A join as INFO shows it: (replacement, leaving node, is a move).
type JoinView = (NodeId, NodeId, bool);

pub struct Coordinator {
    /// The machine's shell; replaced when a coordinator alone restarts after a stall.
    shell: std::sync::RwLock<Arc<Shell>>,
    /// What a coordinator alone needs to restart itself from its state file after a stall
    /// (`None` with several coordinators: the leader's recovery needs its followers' views).
    restart: Option<Restart>,
    /// Restarts after a stall (INFO's `stall_restarts`).
    stall_restarts: AtomicU64,
    limits: ClientLimits,
    clients: ClientStats,
    /// Set when the coordinator crashes: its listener and client connections close.
    stopped: tokio::sync::watch::Sender<bool>,
}

impl Coordinator {
    /// Connect to every node (each link dials `nodes.addrs[i]`, the node or its proxy, and
    /// talks only to node `i` of cluster `nodes.cluster_id` there), learn
    /// the highest stored version, and start the protocol's coordinator. Each partition of
    /// `layout` starts with its listed replicas; a node in no replica set is a spare. Node `i`
    /// is in zone `node_zones[i]`; `membership` is the membership queue (its capacity and the
    /// time an update takes).
    ///
    /// With `state` (the state file and what it held, checked against the layout), the
    /// replica sets saved there replace the layout's and versions start at or above the saved
    /// floor; every later change of either is saved there before it takes effect.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        policy: Policy,
        nodes: &NodeAddrs,
        node_zones: &[u8],
        limits: ClientLimits,
        log: DecisionLog,
        load: LoadFacts,
        layout: Layout,
        membership: CoordinatorSpec,
        state: Option<(StateFile, Option<SavedState>)>,
        trace: Option<TraceWriter>,
        peering: Peering,
    ) -> Result<Arc<Coordinator>, String> {
        limits.check()?;
        // Only the leader keeps the state file, and only a coordinator alone restarts itself.
        let restart = match &state {
            Some((file, _)) if peering.me == 0 && peering.addrs.len() <= 1 => Some(Restart {
                nodes: nodes.clone(),
                state_file: file.clone(),
                log: log.clone(),
                trace: trace.clone(),
                zone: peering.zones[0],
                fleet: Arc::clone(&peering.fleet),
            }),
            _ => None,
        };
        let (policy, links) = (&policy, channels(nodes.links()));
        let shell =
            start_shell(policy, links, node_zones, log, &load, layout, &membership, state, trace, &peering)
                .await?;
        let stopped = tokio::sync::watch::Sender::new(false);
        if let Some(listener) = peering.listener {
            listener.set_nonblocking(true).map_err(|e| format!("peer listener: {e}"))?;
            let listener = TcpListener::from_std(listener).map_err(|e| format!("peer listener: {e}"))?;
            let weak = Arc::downgrade(&shell);
            let deliver = move |from: u8, msg| {
                if let Some(shell) = weak.upgrade() {
                    shell.deliver_peer(from, msg);
                }
            };
            tokio::spawn(peer::serve(listener, peering.addrs.len(), deliver, stopped.subscribe()));
        }
        let coordinator = Arc::new(Coordinator {
            shell: std::sync::RwLock::new(shell),
            restart,
            stall_restarts: AtomicU64::new(0),
            limits,
            clients: ClientStats::default(),
            stopped,
        });
        if coordinator.restart.is_some() {
            tokio::spawn(supervise(Arc::downgrade(&coordinator), coordinator.stopped.subscribe()));
        }
        Ok(coordinator)
    }

    /// A coordinator around a shell already running, with no server of its own: the
    /// simulated store's (`store sim`), whose clients call `read` and `write` as the RESP
    /// server does. Nothing restarts it after a stall.
    pub fn around(shell: Arc<Shell>) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            shell: std::sync::RwLock::new(shell),
            restart: None,
            stall_restarts: AtomicU64::new(0),
            limits: ClientLimits::default(),
            clients: ClientStats::default(),
            stopped: tokio::sync::watch::Sender::new(false),
        })
    }

    /// The shell running now.
    pub(crate) fn shell(&self) -> Arc<Shell> {
        Arc::clone(&self.shell.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Start a new machine from the state file, as after a crash, if it can be written again.
    async fn restart_after_stall(&self) -> Result<(), String> {
        let r = self.restart.as_ref().expect("only a coordinator alone restarts itself");
        let old = self.shell();
        let saved = r.state_file.load().map_err(|e| e.to_string())?;
        let links = channels(r.nodes.links());
        let max_version = max_stored_version(&links, saved.is_some()).await?;
        let peering = Peering { fleet: Arc::clone(&r.fleet), ..Peering::alone(r.zone) };
        let cfg = (*old.cfg()).clone();
        let shell = Shell::new(
            cfg,
            0,
            &peering,
            old.layout.clone(),
            links,
            Some(r.state_file.clone()),
            saved,
            max_version,
            r.log.clone(),
            r.trace.clone(),
            Some(Arc::clone(&old.counters)),
        )?;
        if *self.stopped.borrow() {
            return Ok(()); // crashed meanwhile: nothing runs any more
        }
        shell.start_clock();
        *self.shell.write().unwrap_or_else(|p| p.into_inner()) = shell;
        self.stall_restarts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// SET or DEL (`value` = None): a new version, or the token's version for a retry.
    pub async fn write(
        self: &Arc<Self>,
        key: &[u8],
        value: StoredValue,
        token: Option<&[u8]>,
    ) -> Result<(), String> {
        self.shell().request(OpKind::Write, key, value, token).await.map(|_| ())
    }

    /// A quorum read (with read repair).
    pub async fn read(self: &Arc<Self>, key: &[u8]) -> Result<StoredValue, String> {
        self.shell().request(OpKind::Read, key, None, None).await
    }

    /// Partition `shard`'s members, and the replacement joining it (if any) as `(node, false)`.
    pub fn replica_set(&self, shard: u8) -> Vec<(NodeId, bool)> {
        self.shell().machine(|m| {
            let v = &m.shards[usize::from(shard)];
            v.members
                .iter()
                .map(|&n| (n, true))
                .chain(v.join.as_ref().map(|j| (j.replacement, false)))
                .collect()
        })
    }

    /// The partition `key` is stored on (`routing::key_partition`).
    pub fn partition_of(&self, key: &[u8]) -> u8 {
        self.shell().partition_of(key)
    }

    /// Run `policy` (durations in milliseconds) from now on, keeping what the coordinator
    /// knows: the rollout step of a model, played on the store.
    pub fn reload(&self, policy: Policy) -> Result<(), String> {
        let shell = self.shell();
        shell.reload(policy)?;
        shell.counters.policy_reloads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The INFO reply's text.
    pub fn info(&self) -> String {
        let sh = &self.shell();
        let cfg = sh.cfg();
        let p = &cfg.policy;
        let c = &sh.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = write!(
            out,
            "# Server\r\nreplicheck_version:{}\r\nuptime_in_seconds:{}\r\nclock_wakes:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            sh.started.elapsed().as_secs(),
            get(&c.clock_wakes)
        );
        let epoch = sh.observed(|o| o.membership_epoch);
        let _ = write!(
            out,
            "# Replication\r\nreplication_factor:{}\r\nwrite_quorum:{}\r\nread_quorum:{}\r\nreplica_ack_timeout_ms:{}\r\nfailure_detection:{}\r\nmembership_epoch:{}\r\n",
            p.replication_factor, p.write_quorum, p.read_quorum, p.replica_ack_timeout_ticks, config_name(&p.failure_detection),
            epoch
        );
        let stalled = sh.stalled();
        let _ = write!(
            out,
            "state_file:{}\r\nstall_restarts:{}\r\n",
            stalled.as_deref().unwrap_or("ok"),
            self.stall_restarts.load(Ordering::Relaxed)
        );
        let role = if sh.me == 0 { "leader" } else { "follower" };
        let _ = write!(
            out,
            "coordinator:{} of {},{role}\r\npolicy_reloads:{}\r\n",
            sh.me,
            cfg.coordinators.len(),
            get(&c.policy_reloads)
        );
        let (shards, health, queue, next_version) = sh.machine(|m| {
            let shards: Vec<(Vec<NodeId>, Option<JoinView>)> = m
                .shards
                .iter()
                .map(|v| (v.members.to_vec(), v.join.as_ref().map(|j| (j.replacement, j.evicted, j.is_move))))
                .collect();
            let next = m.shards.iter().map(|v| v.next_version).max().unwrap_or(1);
            (shards, m.health.to_vec(), m.queue.len(), next)
        });
        let list = |members: &[NodeId], sep: &str| {
            members.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(sep)
        };
        let joining = |j: &Option<(NodeId, NodeId, bool)>| match j {
            Some((r, e, _)) => format!(",joining={r}(replaces {e})"),
            None => String::new(),
        };
        // `members`: the first partition's replica set (the only one unless there are more).
        let _ = write!(out, "members:{}\r\n", list(&shards[0].0, ","));
        let _ = write!(out, "partitions:{}\r\n", shards.len());
        for (k, (members, join)) in shards.iter().enumerate() {
            let _ = write!(
                out,
                "partition{k}:name={},members={}{}\r\n",
                sh.layout.shards[k].name,
                list(members, ";"),
                joining(join)
            );
        }
        let (last_heard, late, evicted) =
            sh.observed(|o| (o.last_heard.clone(), o.late_replies.clone(), o.evicted.clone()));
        for (n, h) in health.iter().enumerate() {
            let node = n as NodeId;
            let role = if shards.iter().any(|(m, _)| m.contains(&node)) {
                "member"
            } else if shards.iter().any(|(_, j)| j.is_some_and(|j| j.0 == node)) {
                "joining"
            } else if evicted[n] {
                "evicted"
            } else {
                "spare"
            };
            let link = sh.links[n].stats();
            let _ = write!(
                out,
                "node{n}:addr={},role={role},health={},last_heard_ms_ago={},max_silence_ms={},max_round_trip_ms={},late_replies={},zone={}\r\n",
                sh.links[n].place(),
                config_name(h),
                last_heard[n].elapsed().as_millis(),
                link.max_silence_ms,
                link.max_round_trip_ms,
                late[n],
                cfg.nodes[n].zone
            );
        }
        let in_progress =
            |moving: bool| shards.iter().filter(|(_, j)| j.is_some_and(|j| j.2 == moving)).count();
        let _ = write!(out, "evictions_in_progress:{}\r\n", in_progress(false));
        let _ = write!(out, "moves_in_progress:{}\r\n", in_progress(true));
        let _ = write!(out, "membership_queue:{queue}/{}\r\n", cfg.coordinator.membership_queue_capacity);
        let rebalancer = match &p.rebalance {
            Some(r) => format!("every {} ms, scoring {}", r.interval_ticks, config_name(&r.policy.scoring)),
            None => "off".into(),
        };
        let _ = write!(out, "rebalancer:{rebalancer}\r\n");
        if let Some(why) = sh.observed(|o| o.last_suppressed.clone()) {
            let _ = write!(out, "last_eviction_suppressed:{why}\r\n");
        }
        if cfg.coordinator.work.is_some() {
            let peak = sh.observed(|o| o.backlog_work_peak);
            let _ = write!(
                out,
                "backlog_work:{}\r\nbacklog_work_peak:{peak}\r\n",
                sh.machine(|m| m.backlog_work)
            );
        }
        self.write_routing_info(&mut out);
        let _ = write!(
            out,
            "\r\n# Stats\r\nwrites_acked:{}\r\nwrites_failed:{}\r\nwrites_throttled:{}\r\ncapacity_breaches:{}\r\nfleet_capacity_breaches:{}\r\nreads_ok:{}\r\nreads_failed:{}\r\nread_repairs:{}\r\nevictions:{}\r\ncatchups_completed:{}\r\njoins_abandoned:{}\r\nkeys_copied:{}\r\nmembership_changes:{}\r\nmoves:{}\r\nnext_version:{}\r\n",
            get(&c.writes_acked),
            get(&c.writes_failed),
            get(&c.writes_throttled),
            get(&c.capacity_breaches),
            sh.fleet.breaches(),
            get(&c.reads_ok),
            get(&c.reads_failed),
            get(&c.read_repairs),
            get(&c.evictions),
            get(&c.catchups_completed),
            get(&c.joins_abandoned),
            get(&c.keys_copied),
            get(&c.membership_changes),
            get(&c.moves),
            next_version,
        );
        let (k, l) = (&self.clients, &self.limits);
        let _ = write!(
            out,
            "\r\n# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nrejected_connections:{}\r\nclient_request_bytes:{}\r\nrequest_bytes_max:{}\r\nclients_refused_busy:{}\r\nidle_timeout_ms:{}\r\nclients_closed_idle:{}\r\n",
            k.connected.load(Ordering::Relaxed),
            l.connections_max,
            get(&k.rejected),
            k.request_bytes.load(Ordering::Relaxed),
            l.request_bytes_max,
            get(&k.refused_busy),
            l.idle_timeout_ms,
            get(&k.closed_idle),
        );
        out
    }

    /// INFO's routing section: placement, capacities per window, and per partition and
    /// backend the most writes offered in one window (background load included).
    fn write_routing_info(&self, out: &mut String) {
        let sh = &self.shell();
        let cfg = sh.cfg();
        let r = &cfg.policy.routing;
        let cap = |c: Option<u16>| c.map_or("unlimited".to_string(), |c| c.to_string());
        let _ = write!(
            out,
            "\r\n# Routing\r\nplacement:{}\r\nupload_planner:{}\r\nspill_threshold_permille:{}\r\nwrite_shard_suffixes:{}\r\ncapacity_window_ms:{}\r\npartition_capacity_per_window:{}\r\n",
            config_name(&r.placement),
            config_name(&r.upload_planner),
            r.spill_threshold_permille,
            r.write_shard_suffixes,
            sh.layout.window_ms,
            cap(cfg.partition_capacity_per_tick)
        );
        let (partition_peak, backend_peak, first_breach) =
            sh.observed(|o| (o.partition_peak.clone(), o.backend_peak.clone(), o.first_breach.clone()));
        for (k, s) in sh.layout.shards.iter().enumerate() {
            let _ = write!(
                out,
                "partition{k}_load:name={},background_per_window={},peak_offered={}\r\n",
                s.name, cfg.partition_background[k], partition_peak[k]
            );
        }
        if sh.layout.backends_modelled() {
            for (n, peak) in backend_peak.iter().enumerate() {
                let node = n as NodeId;
                let _ = write!(
                    out,
                    "backend{n}_load:capacity_per_window={},base_load_per_window={},peak_offered={}\r\n",
                    cap(sh.layout.node_capacity(node)),
                    sh.layout.node_base_load(node),
                    peak
                );
            }
        }
        if let Some(breach) = first_breach {
            let _ = write!(out, "first_capacity_breach:{breach}\r\n");
        }
        // What the partitions and backends took from every coordinator together.
        if let Some((breach, at_ms)) = sh.fleet.first_breach() {
            let _ = write!(
                out,
                "first_fleet_capacity_breach:{}\r\n",
                sh.layout.describe_breach(breach, Some(at_ms))
            );
        }
    }

    /// Crash: nothing more is decided, saved, sent or answered (what was saved stays, what
    /// is on the wire still arrives), the listener and every client connection close. A new
    /// coordinator may then start on the same data directory.
    pub fn crash(&self) {
        self.shell().crash();
        self.stopped.send_replace(true);
    }

    /// One command's reply, and whether the connection ends after it.
    async fn execute(self: &Arc<Self>, args: &[Vec<u8>]) -> (Vec<u8>, bool) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let reply = match (name.as_str(), args.len()) {
            ("PING", 1) => resp::simple("PONG"),
            ("PING", 2) => resp::bulk(Some(&args[1])),
            ("GET", 2) => match self.read(&args[1]).await {
                Ok(value) => resp::bulk(value.as_deref()),
                Err(e) => resp::error(&e),
            },
            ("SET", 3) => self.set_reply(&args[1], &args[2], None).await,
            ("SET", 5) if args[3].eq_ignore_ascii_case(b"TOKEN") => {
                self.set_reply(&args[1], &args[2], Some(&args[4])).await
            }
            ("SET", n) if n > 3 => {
                resp::error("syntax error: SET key value [TOKEN token] (no other options)")
            }
            ("DEL", n) if n >= 2 => self.del_reply(&args[1..]).await,
            ("INFO", 1 | 2) => resp::bulk(Some(self.info().as_bytes())),
            ("CONFIG", n) if n >= 2 && args[1].eq_ignore_ascii_case(b"GET") => config_get(&args[2..]),
            ("CONFIG", 4)
                if args[1].eq_ignore_ascii_case(b"SET") && args[2].eq_ignore_ascii_case(b"policy") =>
            {
                self.config_set_policy(&args[3])
            }
            ("CONFIG", _) if args.len() >= 2 && args[1].eq_ignore_ascii_case(b"SET") => {
                resp::error("syntax error: CONFIG SET policy FILE (a policy file, durations in milliseconds)")
            }
            // redis-cli asks for command docs at start, for its hints.
            ("COMMAND", _) => resp::array(&[]),
            ("QUIT", 1) => return (resp::simple("OK"), true),
            ("PING" | "GET" | "SET" | "DEL" | "INFO" | "QUIT" | "CONFIG", _) => {
                resp::error(&format!("wrong number of arguments for '{}' command", name.to_lowercase()))
            }
            _ => resp::error(&format!("unknown command '{}'", String::from_utf8_lossy(&args[0]))),
        };
        (reply, false)
    }

    /// `CONFIG SET policy FILE`: reload this coordinator's policy from a policy file (as for
    /// `store up --policy`). A file that does not load, or that changes the replication factor
    /// or the write-shard suffixes, is refused with its path and key; the policy stays.
    ///
    /// The file is read on the store's machine (a relative path from `store up`'s working
    /// directory). Only a `.toml` file is read, and an error names its line and key but
    /// never quotes the file: a client must not be able to read files through the replies.
    fn config_set_policy(&self, path: &[u8]) -> Vec<u8> {
        let path = std::path::PathBuf::from(String::from_utf8_lossy(path).into_owned());
        if path.extension().is_none_or(|e| e != "toml") {
            return resp::error(&format!(
                "policy not reloaded: {}: not a policy file (a .toml file is expected)",
                path.display()
            ));
        }
        let loaded = crate::config::load_policy(&path)
            .map_err(|e| e.to_string())
            .and_then(|sourced| sourced.resolve_ms());
        match loaded.and_then(|policy| self.reload(policy).map_err(|e| format!("{}: {e}", path.display()))) {
            Ok(()) => resp::simple("OK"),
            // The first line names the file, the line and the key; the lines after it quote
            // the file's text.
            Err(e) => resp::error(&format!("policy not reloaded: {}", e.lines().next().unwrap_or_default())),
        }
    }

    async fn set_reply(self: &Arc<Self>, key: &[u8], value: &[u8], token: Option<&[u8]>) -> Vec<u8> {
        match self.write(key, Some(value.to_vec()), token).await {
            Ok(()) => resp::simple("OK"),
            Err(e) => resp::error(&e),
        }
    }

    /// DEL: a tombstone per key. The count comes from a quorum read just before each delete
    /// (a concurrent SET can make it stale; the delete itself is a write like any other).
    async fn del_reply(self: &Arc<Self>, keys: &[Vec<u8>]) -> Vec<u8> {
        let mut deleted = 0;
        for key in keys {
            let existed = match self.read(key).await {
                Ok(value) => value.is_some(),
                Err(e) => return resp::error(&e),
            };
            if let Err(e) = self.write(key, None, None).await {
                return resp::error(&e);
            }
            deleted += i64::from(existed);
        }
        resp::integer(deleted)
    }
}

/// CONFIG GET: redis-benchmark asks for `save` and `appendonly` at start. There are no RDB
/// snapshots, and every acked write is fsynced on a write quorum (like `appendfsync always`).
fn config_get(names: &[Vec<u8>]) -> Vec<u8> {
    let mut items = Vec::new();
    for name in names {
        let value: Option<&[u8]> = match name.to_ascii_lowercase().as_slice() {
            b"save" => Some(b""),
            b"appendonly" => Some(b"yes"),
            _ => None,
        };
        if let Some(value) = value {
            items.push(resp::bulk(Some(name)));
            items.push(resp::bulk(Some(value)));
        }
    }
    resp::array(&items)
}

impl clients::RespService for Coordinator {
    fn limits(&self) -> &ClientLimits {
        &self.limits
    }

    fn client_stats(&self) -> &ClientStats {
        &self.clients
    }

    fn stopped(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    async fn execute(self: Arc<Self>, args: Vec<Vec<u8>>) -> (Vec<u8>, bool) {
        Coordinator::execute(&self, &args).await
    }
}
