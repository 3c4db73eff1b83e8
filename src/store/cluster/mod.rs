//! A whole local cluster, startable from Rust: node processes, the coordinator and its client
//! port. `store up`, `store run` and the tests drive the store through this.
//!
//! ```no_run
//! # use replicheck::store::cluster::{Cluster, ClusterConfig};
//! # fn demo(config: ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
//! let mut cluster = Cluster::start(config)?;
//! let addr = cluster.client_addr(); // speak RESP to it
//! cluster.kill(1)?;                  // SIGKILL node 1's process
//! cluster.restart(1)?;               // same address, same data directory
//! cluster.proxy(2).set_partitioned(true); // the coordinator<->node 2 link drops everything
//! # Ok(()) }
//! ```
//! Dropping the `Cluster` kills every node process and stops the coordinator. The cluster
//! holds its data directory's lock (`datadir::DirLock`) while it runs, and keeps its layout
//! and coordinator state there. On Linux a node process dies with the thread that spawned it
//! (`PR_SET_PDEATHSIG`), so a killed `store up` leaves no node behind.
//!
//! The cluster's room: this, the proxies every link goes through ([`proxy`]) and the data
//! directory's lock and layout file ([`datadir`]). It starts the coordinator and the nodes;
//! they know nothing of it.

pub mod datadir;
pub mod proxy;

use crate::config::Policy;
use crate::policy::NodeId;
use crate::store::coordinator::clients::ClientLimits;
use crate::store::coordinator::layout::{Layout, LoadFacts};
use crate::store::coordinator::link::NodeAddrs;
use crate::store::coordinator::peer::Peering;
use crate::store::coordinator::state::{SavedState, StateFile};
use crate::store::coordinator::Coordinator;
use crate::store::decision::DecisionLog;
use crate::store::trace::TraceWriter;
use crate::store::StoreError;
use datadir::DirLock;
use proxy::{Proxy, ProxyHandle};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;

pub use crate::store::coordinator::clients::VALUE_BYTES_MAX_DEFAULT;

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The `replicheck` executable that runs `store node` (the current one for `store up`,
    /// `env!("CARGO_BIN_EXE_replicheck")` in tests).
    pub binary: PathBuf,
    pub node_count: usize,
    /// The zone of each node (`node_count` entries); the coordinator prefers a spare in the
    /// evicted replica's zone when it replaces one. A local cluster puts every node in zone 0.
    pub node_zones: Vec<u8>,
    /// The policy with every duration in milliseconds (`SourcedPolicy::resolve_ms`).
    pub policy: Policy,
    /// Node `i` keeps its data in `data_dir/node-i`.
    pub data_dir: PathBuf,
    /// Where clients connect; port 0 picks a free port (see `client_addr`).
    pub client_addr: SocketAddr,
    /// What client connections may hold: argument size, connections, idle time, request bytes.
    pub clients: ClientLimits,
    /// Seed of the proxies' random draws (latency, loss), for repeatable fault runs.
    pub proxy_seed: u64,
    /// Whether each coordinator-to-node link goes through a proxy whose faults can be set
    /// (`proxy`, `store run`'s fault menu). Without them (`store up`, `store bench`) a
    /// coordinator dials its nodes directly: one hop and two thread hand-offs fewer per
    /// message.
    pub link_proxies: bool,
    /// Where the coordinator logs every policy decision (JSON lines, for `replicheck
    /// conform`); `None`: not logged.
    pub decision_log: Option<PathBuf>,
    /// The node loads the rebalancer sees (all 0 by default: nothing to move).
    pub load: LoadFacts,
    /// The partitions with their replica sets, and the capacities writes are routed by
    /// (default: one partition on nodes `0..replication_factor`, no capacities).
    pub layout: Layout,
    /// The membership queue's capacity and the time an update takes (`None`: one change per
    /// partition may wait, applied at once).
    pub membership: Option<crate::config::CoordinatorSpec>,
    /// Where the coordinator writes its trace (`store::trace`), and model time in real time
    /// (`None`: no trace). Every coordinator writes to it, each request under its index.
    pub trace: Option<(PathBuf, u64)>,
    /// Nodes whose data is gone, to recreate from their partitions' other replicas before the
    /// cluster starts (`datadir::check_identity` refuses such a node otherwise).
    pub rebuild_nodes: Vec<NodeId>,
    /// Each coordinator's zone: one entry per coordinator, the first the membership leader.
    /// Coordinator `c` serves clients on `client_addr`'s port + `c` (port 0: any free port).
    pub coordinator_zones: Vec<u8>,
    /// The moment the decision log and the trace count their milliseconds from: `store run`
    /// passes its own start, so the run's timeline, log and trace read one clock
    /// (`ClusterConfig::local` and `store up`: when the config is made, just before the start).
    pub epoch: std::time::Instant,
}

impl ClusterConfig {
    /// A cluster on 127.0.0.1 with an ephemeral client port, the default value limit, no
    /// decision log and proxy seed 0.
    pub fn local(binary: PathBuf, node_count: usize, policy: Policy, data_dir: PathBuf) -> ClusterConfig {
        ClusterConfig {
            binary,
            node_count,
            node_zones: vec![0; node_count],
            layout: Layout::round_robin(1, node_count, policy.replication_factor),
            policy,
            data_dir,
            client_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            clients: ClientLimits::default(),
            proxy_seed: 0,
            link_proxies: true,
            decision_log: None,
            load: LoadFacts::default(),
            membership: None,
            trace: None,
            rebuild_nodes: Vec::new(),
            coordinator_zones: vec![0],
            epoch: std::time::Instant::now(),
        }
    }
}

struct NodeProcess {
    child: Option<Child>,
    /// Fixed after the first start, so a restarted node is where the coordinator dials.
    addr: SocketAddr,
    data_dir: PathBuf,
    /// Each coordinator's link to this node goes through one of these (a plain relay until
    /// faults are set through its handle), coordinator `c`'s through `proxies[c]`; none
    /// without `link_proxies`.
    proxies: Vec<Proxy>,
}

impl NodeProcess {
    /// Where coordinator `c` dials this node: its proxy, or the node itself.
    fn link_addr(&self, c: usize) -> SocketAddr {
        self.proxies.get(c).map_or(self.addr, Proxy::addr)
    }
}

impl Drop for NodeProcess {
    /// A node is never left running: this covers a `Cluster::start` that fails half-way.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct Cluster {
    config: ClusterConfig,
    nodes: Vec<NodeProcess>,
    /// The leader first.
    coordinators: Vec<Arc<Coordinator>>,
    client_addrs: Vec<SocketAddr>,
    /// `peer_proxies[c][d]`: coordinator `c`'s link to coordinator `d` (none for `c == d`).
    peer_proxies: Vec<Vec<Option<Proxy>>>,
    runtime: Option<tokio::runtime::Runtime>,
    log: DecisionLog,
    trace: Option<TraceWriter>,
    /// Kept across a coordinator restart: a breach before it still counts.
    fleet: Arc<crate::store::coordinator::fleet::FleetMeter>,
    /// The data directory's (`datadir::check_identity`): a node restarted must still hold it,
    /// and every link's hello names it.
    cluster_id: u64,
    /// Released last, once every node is stopped.
    _lock: DirLock,
}

impl Cluster {
    /// Spawn `node_count` node processes, wait until each listens, then start the coordinator
    /// and its client listener. Errors name the node or address that failed.
    pub fn start(config: ClusterConfig) -> Result<Cluster, StoreError> {
        if config.node_count == 0 || config.node_count > crate::policy::NODE_COUNT_MAX {
            return Err(StoreError::Input(format!(
                "--nodes {}: must be 1 to {}",
                config.node_count,
                crate::policy::NODE_COUNT_MAX
            )));
        }
        if usize::from(config.policy.replication_factor) > config.node_count {
            return Err(StoreError::Input(format!(
                "replication_factor {} exceeds --nodes {}",
                config.policy.replication_factor, config.node_count
            )));
        }
        let coordinator_count = config.coordinator_zones.len();
        if coordinator_count == 0 || coordinator_count > crate::config::COORDINATOR_COUNT_MAX {
            return Err(StoreError::Input(format!(
                "--coordinators {coordinator_count}: must be 1 to {}",
                crate::config::COORDINATOR_COUNT_MAX
            )));
        }
        let port = config.client_addr.port();
        if port != 0 && usize::from(port) + coordinator_count - 1 > usize::from(u16::MAX) {
            return Err(StoreError::Input(format!(
                "--port {port}: coordinator {} would serve on port {}, above {}; coordinator i serves on --port + i",
                coordinator_count - 1,
                usize::from(port) + coordinator_count - 1,
                u16::MAX
            )));
        }
        if config.node_zones.len() != config.node_count {
            return Err(StoreError::Input(format!(
                "node_zones has {} entries for --nodes {}: one zone per node",
                config.node_zones.len(),
                config.node_count
            )));
        }
        let lock = DirLock::acquire(&config.data_dir).map_err(StoreError::Runtime)?;
        let leader_spec = config.data_dir.join(datadir::LEADER_SPEC_FILE);
        if leader_spec.exists() {
            return Err(StoreError::Input(format!(
                "{}: this data directory holds a leader-family cluster; start it with `store up --replication leader`, or give a quorum cluster its own directory",
                leader_spec.display()
            )));
        }
        datadir::check_layout(&config.data_dir, &config.layout, config.policy.routing.write_shard_suffixes)
            .map_err(StoreError::Input)?;
        let state_file = StateFile::in_dir(&config.data_dir);
        let saved = state_file.load()?;
        if let Some(saved) = &saved {
            // Refused before any node starts.
            saved.check(&config.layout, config.node_count, state_file.path()).map_err(StoreError::Input)?;
        }
        let identity = datadir::check_identity(
            &config.data_dir,
            config.node_count,
            saved.as_ref(),
            &config.rebuild_nodes,
        )
        .map_err(StoreError::Input)?;
        for &node in &identity.rebuild {
            let copied = Self::rebuild(&config, saved.as_ref(), node, identity.cluster_id)
                .map_err(StoreError::Runtime)?;
            eprintln!("replicheck store: node {node} rebuilt from its partitions' other replicas: {copied} entries copied");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("coordinator")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Runtime(format!("cannot start the coordinator runtime: {e}")))?;
        Self::start_processes(config, runtime, lock, state_file, saved, identity.cluster_id)
            .map_err(StoreError::Runtime)
    }

    /// Recreate `node`'s database from the other nodes' copies of its partitions: those the saved
    /// membership or the layout makes it a replica of.
    fn rebuild(
        config: &ClusterConfig,
        saved: Option<&SavedState>,
        node: NodeId,
        cluster_id: u64,
    ) -> Result<u64, String> {
        let partitions: Vec<u8> = (0..config.layout.shards.len())
            .filter(|&k| {
                config.layout.shards[k].replicas.contains(&node)
                    || saved.is_some_and(|s| s.shards[k].members.iter().any(|m| m.node == node))
            })
            .map(|k| k as u8)
            .collect();
        let suffixes = config.policy.routing.write_shard_suffixes;
        let partition_of = |key: &[u8]| config.layout.partition_of(key, suffixes);
        datadir::rebuild_node(
            &config.data_dir,
            config.node_count,
            node,
            cluster_id,
            &partitions,
            &partition_of,
        )
    }

    /// The nodes, their proxies and the coordinator, once the inputs were checked: what fails
    /// here is the machine's doing (a port, a process, the disk), not the user's input.
    fn start_processes(
        config: ClusterConfig,
        runtime: tokio::runtime::Runtime,
        lock: DirLock,
        state_file: StateFile,
        saved: Option<SavedState>,
        cluster_id: u64,
    ) -> Result<Cluster, String> {
        let mut nodes = Vec::new();
        for id in 0..config.node_count {
            let data_dir = datadir::node_dir(&config.data_dir, id as NodeId);
            let mut node = NodeProcess {
                child: None,
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                data_dir,
                proxies: Vec::new(),
            };
            spawn_node(&config, id as NodeId, &mut node)?;
            let proxied = if config.link_proxies { config.coordinator_zones.len() as u64 } else { 0 };
            for c in 0..proxied {
                let seed = config.proxy_seed.wrapping_add(id as u64).wrapping_add(c << 32);
                let proxy = Proxy::start_seeded(node.addr, seed)
                    .map_err(|e| format!("cannot start the proxy for node {id}: {e}"))?;
                node.proxies.push(proxy);
            }
            nodes.push(node);
        }
        let log = match &config.decision_log {
            Some(path) => DecisionLog::create(path, "coordinator")
                .map_err(|e| format!("cannot create the decision log {}: {e}", path.display()))?
                .counting_from(config.epoch),
            None => DecisionLog::off(),
        };
        let trace = match &config.trace {
            Some((path, ms_per_tick)) => {
                let slack_ms = crate::store::trace::real_slack_ms(*ms_per_tick);
                Some(TraceWriter::create(path, *ms_per_tick, slack_ms, config.epoch)?)
            }
            None => None,
        };
        let count = config.coordinator_zones.len();
        // Every coordinator's peer listener first, so that each knows where the others are.
        let mut listeners = Vec::new();
        for c in 0..count {
            let listener = (count > 1)
                .then(|| std::net::TcpListener::bind(("127.0.0.1", 0)))
                .transpose()
                .map_err(|e| format!("cannot listen for coordinator {c}'s peers: {e}"))?;
            listeners.push(listener);
        }
        let listen_addrs: Vec<SocketAddr> = listeners
            .iter()
            .flatten()
            .map(|l| l.local_addr().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let mut peer_proxies = Vec::new();
        for c in 0..count {
            let mut row = Vec::new();
            for (d, &addr) in listen_addrs.iter().enumerate() {
                let seed = config.proxy_seed ^ (0xc0 + (c * 8 + d) as u64);
                row.push(
                    (c != d).then(|| Proxy::start_seeded(addr, seed)).transpose().map_err(|e| {
                        format!("cannot start the proxy between coordinators {c} and {d}: {e}")
                    })?,
                );
            }
            peer_proxies.push(row);
        }
        let (mut coordinators, mut client_addrs) = (Vec::new(), Vec::new());
        let fleet = Arc::new(crate::store::coordinator::fleet::FleetMeter::new(count));
        for (c, listener) in listeners.into_iter().enumerate() {
            let addrs = NodeAddrs { cluster_id, addrs: nodes.iter().map(|n| n.link_addr(c)).collect() };
            let peering = Peering {
                me: c as u8,
                zones: config.coordinator_zones.clone(),
                addrs: peer_proxies
                    .get(c)
                    .map(|row: &Vec<Option<Proxy>>| {
                        row.iter()
                            .enumerate()
                            .map(|(d, p)| p.as_ref().map_or(listen_addrs[d], Proxy::addr))
                            .collect()
                    })
                    .unwrap_or_default(),
                listener,
                fleet: Arc::clone(&fleet),
                simulated: None,
            };
            let client_addr = match config.client_addr.port() {
                0 => config.client_addr,
                port => SocketAddr::new(config.client_addr.ip(), port + c as u16),
            };
            let actor = if c == 0 { "coordinator".to_string() } else { format!("coordinator{c}") };
            let (coordinator, client_addr) = start_coordinator(
                &config,
                &runtime,
                &addrs,
                client_addr,
                &log.with_actor(&actor),
                trace.clone(),
                StateFile::in_dir(&config.data_dir),
                saved.clone(),
                false,
                peering,
            )?;
            coordinators.push(coordinator);
            client_addrs.push(client_addr);
        }
        drop(state_file);
        Ok(Cluster {
            config,
            nodes,
            coordinators,
            client_addrs,
            peer_proxies,
            runtime: Some(runtime),
            log,
            trace,
            fleet,
            cluster_id,
            _lock: lock,
        })
    }

    /// Where clients speak RESP (to the leader, with several coordinators).
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addrs[0]
    }

    /// Where clients of coordinator `c` speak RESP.
    pub fn client_addr_of(&self, c: u8) -> SocketAddr {
        self.client_addrs[usize::from(c)]
    }

    pub fn coordinator_count(&self) -> usize {
        self.coordinators.len()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The address node `node` listens on.
    /// The data directory's cluster id, which every node's database is stamped with (a link
    /// to a node says it in its hello).
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    pub fn node_addr(&self, node: NodeId) -> SocketAddr {
        self.nodes[usize::from(node)].addr
    }

    /// The fault controls of the (leader) coordinator's link to `node` (latency, drop,
    /// partition).
    pub fn proxy(&self, node: NodeId) -> ProxyHandle {
        self.proxy_of(0, node)
    }

    /// The fault controls of coordinator `c`'s link to `node`.
    pub fn proxy_of(&self, c: u8, node: NodeId) -> ProxyHandle {
        let proxies = &self.nodes[usize::from(node)].proxies;
        assert!(!proxies.is_empty(), "a cluster started without link proxies has no fault controls");
        proxies[usize::from(c)].handle()
    }

    /// The fault controls of coordinator `c`'s link to coordinator `d` (`None` for `c == d`
    /// and with one coordinator).
    pub fn peer_proxy(&self, c: u8, d: u8) -> Option<ProxyHandle> {
        self.peer_proxies.get(usize::from(c))?.get(usize::from(d))?.as_ref().map(Proxy::handle)
    }

    /// The (leader) coordinator.
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinators[0]
    }

    pub fn coordinator_of(&self, c: u8) -> &Arc<Coordinator> {
        &self.coordinators[usize::from(c)]
    }

    /// The coordinator's decision log (off unless `decision_log` was set); clients of a run
    /// log their retry decisions to it too (`with_actor`).
    pub fn decision_log(&self) -> &DecisionLog {
        &self.log
    }

    /// Crash the coordinator (it decides, saves, sends and answers nothing more; its client
    /// connections close) and start a new one on the same data directory and client port, from
    /// what the old one saved: the models' coordinator crash.
    pub fn restart_coordinator(&mut self) -> Result<(), String> {
        if self.coordinators.len() > 1 {
            // As in the models: the leader's recovery would need its followers' views.
            return Err("a coordinator restart is for one coordinator alone, not one of several".into());
        }
        self.coordinators[0].crash();
        let runtime = self.runtime.as_ref().ok_or("the cluster is stopped")?;
        let addrs = NodeAddrs {
            cluster_id: self.cluster_id,
            addrs: self.nodes.iter().map(|n| n.link_addr(0)).collect(),
        };
        let state_file = StateFile::in_dir(&self.config.data_dir);
        let saved = state_file.load().map_err(|e| e.to_string())?;
        let zone = self.config.coordinator_zones[0];
        let (coordinator, client_addr) = start_coordinator(
            &self.config,
            runtime,
            &addrs,
            self.client_addrs[0],
            &self.log,
            self.trace.clone(),
            state_file,
            saved,
            true,
            Peering { fleet: Arc::clone(&self.fleet), ..Peering::alone(zone) },
        )?;
        self.coordinators[0] = coordinator;
        self.client_addrs[0] = client_addr;
        Ok(())
    }

    /// The coordinator's trace, if it keeps one (`store run` adds its faults to it).
    pub fn trace(&self) -> Option<&TraceWriter> {
        self.trace.as_ref()
    }

    /// The (leader) coordinator's INFO text.
    pub fn info(&self) -> String {
        self.coordinators[0].info()
    }

    /// SIGKILL node `node`'s process and reap it. Killing a dead node is a no-op.
    pub fn kill(&mut self, node: NodeId) -> Result<(), String> {
        let process = self.nodes.get_mut(usize::from(node)).ok_or_else(|| format!("no node {node}"))?;
        if let Some(mut child) = process.child.take() {
            // `Child::kill` is SIGKILL on Unix: no chance to flush anything.
            child.kill().map_err(|e| format!("cannot kill node {node}: {e}"))?;
            child.wait().map_err(|e| format!("cannot reap node {node}: {e}"))?;
        }
        Ok(())
    }

    /// Start node `node` again on its address and data directory (after `kill`).
    pub fn restart(&mut self, node: NodeId) -> Result<(), String> {
        let config = self.config.clone();
        let process = self.nodes.get_mut(usize::from(node)).ok_or_else(|| format!("no node {node}"))?;
        if process.child.is_some() {
            return Err(format!("node {node} is running"));
        }
        match crate::store::node::storage::inspect(&process.data_dir)? {
            crate::store::node::storage::DataFile::Database { cluster_id: Some(id), .. } if id == self.cluster_id => {}
            found => {
                return Err(format!(
                    "node {node} not restarted: {} no longer holds its data ({found:?}); a replica served from it would lose what it acknowledged",
                    process.data_dir.join(crate::store::node::storage::DATABASE_FILE).display()
                ))
            }
        }
        spawn_node(&config, node, process)
    }

    pub fn is_running(&self, node: NodeId) -> bool {
        self.nodes[usize::from(node)].child.is_some()
    }

    /// Node `node`'s process id while it runs.
    pub fn node_pid(&self, node: NodeId) -> Option<u32> {
        self.nodes[usize::from(node)].child.as_ref().map(|c| c.id())
    }

    /// Reap every node process that exited (killed from outside, or crashed), so none stays a
    /// zombie; returns which, with how each ended. `restart` brings one back.
    pub fn reap_exited(&mut self) -> Vec<(NodeId, ExitStatus)> {
        let mut exited = Vec::new();
        for (id, node) in self.nodes.iter_mut().enumerate() {
            if let Some(child) = &mut node.child {
                if let Ok(Some(status)) = child.try_wait() {
                    node.child = None;
                    exited.push((id as NodeId, status));
                }
            }
        }
        exited
    }

    /// Kill every node and stop the coordinator.
    pub fn stop(&mut self) {
        for node in 0..self.nodes.len() {
            let _ = self.kill(node as NodeId);
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        for node in &mut self.nodes {
            node.proxies.clear();
        }
        self.peer_proxies.clear();
        if let Err(e) = self.log.flush() {
            eprintln!("replicheck store: {e}");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start a coordinator on the nodes at `addrs` and serve clients on `client_addr` (the same
/// port again after a crash, `bind_retry`: until the old listener is closed).
#[allow(clippy::too_many_arguments)]
fn start_coordinator(
    config: &ClusterConfig,
    runtime: &tokio::runtime::Runtime,
    addrs: &NodeAddrs,
    client_addr: SocketAddr,
    log: &DecisionLog,
    trace: Option<TraceWriter>,
    state_file: StateFile,
    saved: Option<SavedState>,
    bind_retry: bool,
    peering: Peering,
) -> Result<(Arc<Coordinator>, SocketAddr), String> {
    let (coordinator, listener) = runtime.block_on(async {
        let coordinator = Coordinator::start(
            config.policy.clone(),
            addrs,
            &config.node_zones,
            config.clients.clone(),
            log.clone(),
            config.load.clone(),
            config.layout.clone(),
            config
                .membership
                .clone()
                .unwrap_or_else(|| crate::store::coordinator::membership_default(config.layout.shards.len())),
            Some((state_file, saved)),
            trace,
            peering,
        )
        .await?;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(client_addr).await {
                Ok(l) => break l,
                Err(e) if !bind_retry || tokio::time::Instant::now() >= deadline => {
                    return Err(format!("cannot listen for clients on {client_addr}: {e}"))
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        };
        Ok::<_, String>((coordinator, listener))
    })?;
    let client_addr = listener.local_addr().map_err(|e| format!("client listener: {e}"))?;
    runtime.spawn(crate::store::coordinator::clients::serve(Arc::clone(&coordinator), listener));
    Ok((coordinator, client_addr))
}

/// Spawn `store node` and read its `listening ADDR` line.
fn spawn_node(config: &ClusterConfig, id: NodeId, node: &mut NodeProcess) -> Result<(), String> {
    let mut command = Command::new(&config.binary);
    command
        .args(["store", "node", "--id", &id.to_string(), "--listen", &node.addr.to_string(), "--data-dir"])
        .arg(&node.data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    die_with_parent(&mut command);
    let mut child =
        command.spawn().map_err(|e| format!("cannot start node {id} ({}): {e}", config.binary.display()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    let read = BufReader::new(stdout).read_line(&mut line);
    let addr = line.trim().strip_prefix("listening ").and_then(|a| a.parse::<SocketAddr>().ok());
    match (read, addr) {
        (Ok(_), Some(addr)) => {
            node.addr = addr;
            node.child = Some(child);
            Ok(())
        }
        (read, _) => {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(format!("node {id} did not start ({status}; read {read:?}, line {line:?})"))
        }
    }
}

/// The node gets SIGKILL when the thread that spawned it ends (the whole `store up`, killed
/// or not), so no node outlives its coordinator holding its redb lock.
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated after the fork.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then no signal would ever come.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the parent exited during the spawn"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut Command) {}
