//! A local leader-family cluster: the data directory's spec and policy, the node processes and
//! the manager, as `store up --replication leader` and the tests run them.

use super::manager::{self, ManagerHost};
use super::{policy_of, Spec, POLICY_FILE};
use crate::config::Resolved;
use crate::policy::NodeId;
use crate::protocol::leader::Manager;
use crate::protocol::Endpoint;
use crate::store::cluster::datadir::{node_dir, DirLock};
use crate::store::cluster::die_with_parent;
use crate::store::cluster::proxy::{Proxy, ProxyHandle};
use crate::store::coordinator::clients::ClientLimits;
use crate::store::coordinator::state::write_durably;
use crate::store::StoreError;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

/// What `store up --replication leader` starts.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// The replicheck binary the node processes run.
    pub binary: PathBuf,
    pub node_count: usize,
    pub node_zones: Vec<u8>,
    pub partitions: usize,
    pub replication_factor: Option<u8>,
    /// The policy file (`replication` is taken as "leader" whatever it says).
    pub policy_file: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub client_addr: SocketAddr,
    pub clients: ClientLimits,
    /// Every link between two machines (nodes and the manager, each direction) through a
    /// fault-injecting proxy seeded from this, as tests and `store run` need; `None` for
    /// `store up`.
    pub link_proxy_seed: Option<u64>,
    /// The model `store run` plays (its shards become the partitions); `None` for `store up`.
    pub model: Option<super::ModelPlacement>,
}

pub struct LeaderCluster {
    spec: Spec,
    data_dir: PathBuf,
    binary: PathBuf,
    cfg: Resolved,
    nodes: Vec<Option<Child>>,
    /// Node listeners bound for a node's first start (given to its process).
    reserved: Vec<Option<std::net::TcpListener>>,
    manager: Arc<ManagerHost>,
    client_addr: SocketAddr,
    client_limits: ClientLimits,
    runtime: Option<tokio::runtime::Runtime>,
    /// By (from, to), where links go through proxies.
    proxies: Vec<((Endpoint, Endpoint), Proxy)>,
    _lock: DirLock,
}

/// A listener on a free port of 127.0.0.1, held until the process it is for takes it over
/// (so that no proxy or outgoing connection of a new cluster takes the port meanwhile).
fn reserve() -> Result<(std::net::TcpListener, SocketAddr), String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr().map(|a| (l, a)))
        .map_err(|e| format!("cannot find a free port: {e}"))
}

impl LeaderCluster {
    pub fn start(config: LeaderConfig) -> Result<LeaderCluster, StoreError> {
        let input = StoreError::Input;
        let n = config.node_count;
        if n == 0 || n > crate::policy::NODE_COUNT_MAX {
            return Err(input(format!("--nodes {n}: must be 1 to {}", crate::policy::NODE_COUNT_MAX)));
        }
        let max = crate::store::coordinator::layout::PARTITIONS_MAX;
        if config.partitions == 0 || config.partitions > max {
            return Err(input(format!("--partitions {}: must be 1 to {max}", config.partitions)));
        }
        if config.node_zones.len() != n {
            return Err(input(format!(
                "{} zones for --nodes {n}: one zone per node",
                config.node_zones.len()
            )));
        }
        // The user's file is checked where the user wrote it, before it is copied.
        let user_policy = config.policy_file.clone().unwrap_or_default();
        let sourced = policy_of(&user_policy, config.replication_factor).map_err(input)?;
        let policy = sourced.resolve_ms_any_family().map_err(input)?;
        use crate::store::coordinator::machine::{policy_timers_fit, timer_too_long};
        policy_timers_fit(&policy).map_err(|(key, ms)| input(timer_too_long(&sourced, key, ms)))?;
        let layout = super::layout_of(
            &sourced,
            policy.replication_factor,
            config.partitions,
            n,
            config.model.as_ref(),
        )
        .map_err(input)?;
        let dir = &config.data_dir;
        let lock = DirLock::acquire(dir).map_err(StoreError::Runtime)?;
        for quorum_file in ["coordinator-state", "layout"] {
            if dir.join(quorum_file).exists() {
                return Err(input(format!(
                    "{}: this data directory holds a quorum-family cluster (its {quorum_file}); a leader cluster needs its own directory",
                    dir.display()
                )));
            }
        }
        // Each node's listener and the manager's (last), where this start made the addresses.
        let mut reserved: Vec<Option<std::net::TcpListener>> = Vec::new();
        let (mut spec, created) = match Spec::load(dir).map_err(input)? {
            Some(spec) => {
                let same = spec.node_count() == n
                    && spec.partitions == config.partitions
                    && spec.model == config.model
                    && spec.replication_factor == config.replication_factor
                    && spec.node_zones == config.node_zones;
                if !same {
                    return Err(input(format!(
                        "{}: this leader cluster was created with {} nodes (zones {:?}), {} partition(s) and replication factor {}; start it with the same",
                        Spec::path(dir).display(),
                        spec.node_count(),
                        spec.node_zones,
                        spec.partitions,
                        spec.replication_factor.map_or("from its policy".to_string(), |rf| rf.to_string()),
                    )));
                }
                spec.check_replicas(&sourced, policy.replication_factor, &layout).map_err(input)?;
                let state = dir.join(manager::STATE_FILE);
                if !state.exists() {
                    return Err(input(format!(
                        "{}: missing beside {}: the epochs and primaries the cluster reached are gone, and replicas would refuse a coordinator that starts again from epoch 0",
                        state.display(),
                        Spec::path(dir).display()
                    )));
                }
                (spec, false)
            }
            None => {
                let held =
                    (0..=n).map(|_| reserve()).collect::<Result<Vec<_>, _>>().map_err(StoreError::Runtime)?;
                let nodes = held[..n].iter().map(|(_, a)| *a).collect();
                let manager = held[n].1;
                reserved = held.into_iter().map(|(l, _)| Some(l)).collect();
                let spec = Spec {
                    cluster_id: rand::random(),
                    partitions: config.partitions,
                    replication_factor: config.replication_factor,
                    node_zones: config.node_zones.clone(),
                    nodes,
                    manager,
                    replicas: super::replica_sets(&layout),
                    routes: Vec::new(),
                    model: config.model.clone(),
                };
                (spec, true)
            }
        };
        let text = match &config.policy_file {
            Some(path) => {
                std::fs::read(path).map_err(|e| input(format!("cannot read {}: {e}", path.display())))?
            }
            None => Vec::new(),
        };
        write_durably(&dir.join(POLICY_FILE), &text).map_err(StoreError::Runtime)?;
        let (cfg, _) = spec.config(dir).map_err(input)?;
        let mut proxies = Vec::new();
        if let Some(seed) = config.link_proxy_seed {
            let ends: Vec<Endpoint> =
                (0..n as NodeId).map(Endpoint::Node).chain([Endpoint::LEADER]).collect();
            for (i, &from) in ends.iter().enumerate() {
                for (j, &to) in ends.iter().enumerate().filter(|&(j, _)| j != i) {
                    let upstream = spec.addr(to).expect("every node and the manager listen");
                    let proxy = Proxy::start_seeded(upstream, seed ^ ((i * 16 + j) as u64))
                        .map_err(|e| StoreError::Runtime(format!("cannot start a link proxy: {e}")))?;
                    proxies.push(((from, to), proxy));
                }
            }
        }
        spec.routes = proxies
            .iter()
            .map(|&((from, to), ref proxy)| super::Route { from, to, via: proxy.addr() })
            .collect();
        if !created {
            spec.save(dir).map_err(StoreError::Runtime)?;
        }
        if created {
            // The first start: epoch 0 is written before any node can hear of it, and the spec
            // last, so that a start cut short before it begins anew.
            let state = dir.join(manager::STATE_FILE);
            manager::save_state(&state, &Manager::<super::LeaderData>::new(&cfg).durable())
                .map_err(StoreError::Runtime)?;
            spec.save(dir).map_err(StoreError::Runtime)?;
        }
        // The nodes first: a manager that started before them would judge the primaries dead
        // for the silence of their processes' start (and might fail over before any fault).
        // What they send it meanwhile waits in its listener's backlog, or is lost as messages
        // to a coordinator that is down are.
        let mut nodes: Vec<Option<Child>> = Vec::with_capacity(n);
        for node in 0..n {
            let listener = reserved.get_mut(node).and_then(Option::take);
            match spawn_node(&config.binary, dir, node as NodeId, listener) {
                Ok(child) => nodes.push(Some(child)),
                Err(e) => {
                    kill_all(&mut nodes);
                    return Err(StoreError::Runtime(e));
                }
            }
        }
        let started = coordinator_runtime().and_then(|runtime| {
            let host = runtime.block_on(ManagerHost::start(
                &spec,
                dir,
                config.clients.clone(),
                config.client_addr,
                reserved.get_mut(n).and_then(Option::take),
            ))?;
            Ok((runtime, host))
        });
        let (runtime, (manager, client_addr)) = match started {
            Ok(started) => started,
            Err(e) => {
                kill_all(&mut nodes);
                return Err(StoreError::Runtime(e));
            }
        };
        Ok(LeaderCluster {
            spec,
            data_dir: dir.clone(),
            binary: config.binary,
            cfg,
            nodes,
            reserved,
            manager,
            client_addr,
            client_limits: config.clients.clone(),
            runtime: Some(runtime),
            proxies,
            _lock: lock,
        })
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn node_addr(&self, node: NodeId) -> SocketAddr {
        self.spec.nodes[usize::from(node)]
    }

    pub fn node_pid(&self, node: NodeId) -> Option<u32> {
        self.nodes[usize::from(node)].as_ref().map(|c| c.id())
    }

    /// The fault controls of the link from `from` to `to`, if links go through proxies.
    pub fn link(&self, from: Endpoint, to: Endpoint) -> Option<ProxyHandle> {
        self.proxies.iter().find(|(k, _)| *k == (from, to)).map(|(_, p)| p.handle())
    }

    /// Both directions between `a` and `b` cut (`true`) or healed.
    pub fn set_partitioned(&self, a: Endpoint, b: Endpoint, partitioned: bool) {
        for (from, to) in [(a, b), (b, a)] {
            if let Some(link) = self.link(from, to) {
                link.set_partitioned(partitioned);
            }
        }
    }

    pub fn config(&self) -> &Resolved {
        &self.cfg
    }

    pub fn info(&self) -> String {
        self.manager.info()
    }

    /// SIGKILL node `node`.
    pub fn kill(&mut self, node: NodeId) -> Result<(), String> {
        if let Some(mut child) = self.nodes[usize::from(node)].take() {
            child.kill().map_err(|e| format!("cannot kill node {node}: {e}"))?;
            let _ = child.wait();
        }
        Ok(())
    }

    /// Start node `node`'s process (again), on its address and data.
    pub fn restart(&mut self, node: NodeId) -> Result<(), String> {
        self.kill(node)?;
        let listener = self.reserved.get_mut(usize::from(node)).and_then(Option::take);
        let child = spawn_node(&self.binary, &self.data_dir, node, listener)?;
        self.nodes[usize::from(node)] = Some(child);
        Ok(())
    }

    /// Whether node `node`'s process is running (as far as this cluster started it).
    pub fn is_running(&self, node: NodeId) -> bool {
        self.nodes[usize::from(node)].is_some()
    }

    /// The coordinator crashes (every task of its runtime stops, its connections close and
    /// what it held in memory is gone) and a new one starts from `manager-state`, on the same
    /// addresses: the model's coordinator restart.
    pub fn restart_manager(&mut self) -> Result<(), String> {
        self.manager.crash();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        }
        let runtime = coordinator_runtime()?;
        let (manager, client_addr) = runtime.block_on(ManagerHost::start(
            &self.spec,
            &self.data_dir,
            self.client_limits.clone(),
            self.client_addr,
            None,
        ))?;
        assert_eq!(client_addr, self.client_addr, "the coordinator restarts on its address");
        self.manager = manager;
        self.runtime = Some(runtime);
        Ok(())
    }

    /// Node processes that exited on their own since the last call.
    pub fn reap_exited(&mut self) -> Vec<(NodeId, std::process::ExitStatus)> {
        let mut exited = Vec::new();
        for (n, slot) in self.nodes.iter_mut().enumerate() {
            if let Some(status) = slot.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                exited.push((n as NodeId, status));
                *slot = None;
            }
        }
        exited
    }

    /// Stop the manager and every node.
    pub fn stop(&mut self) {
        self.manager.crash();
        for n in 0..self.nodes.len() {
            let _ = self.kill(n as NodeId);
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        }
    }

    /// Each (partition, epoch) in which more than one node took writes as primary.
    pub fn two_primaries(&self) -> Result<Vec<(u8, u64, Vec<NodeId>)>, String> {
        super::two_primaries(&self.data_dir, self.nodes.len())
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for LeaderCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn kill_all(nodes: &mut [Option<Child>]) {
    for mut child in nodes.iter_mut().filter_map(Option::take) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn coordinator_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("coordinator")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the coordinator runtime: {e}"))
}

/// Spawn `store leader-node` (with `listener` as its listening socket, else it binds its
/// address itself) and wait for its `listening ADDR` line.
fn spawn_node(
    binary: &Path,
    data_dir: &Path,
    id: NodeId,
    listener: Option<std::net::TcpListener>,
) -> Result<Child, String> {
    let mut command = Command::new(binary);
    command
        .args(["store", "leader-node", "--id", &id.to_string(), "--data-dir"])
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(listener) = &listener {
        use std::os::fd::AsRawFd;
        let fd = listener.as_raw_fd();
        command.arg("--listen-fd").arg(fd.to_string());
        use std::os::unix::process::CommandExt;
        // SAFETY: fcntl is async-signal-safe; the child inherits this one descriptor.
        unsafe {
            command.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    die_with_parent(&mut command);
    let mut child =
        command.spawn().map_err(|e| format!("cannot start node {id} ({}): {e}", binary.display()))?;
    // The child has its copy now.
    drop(listener);
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    let read = BufReader::new(stdout).read_line(&mut line);
    if matches!(read, Ok(n) if n > 0) && line.starts_with("listening ") {
        return Ok(child);
    }
    let _ = child.kill();
    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
    Err(format!("node {id} did not start ({status}; its data: {})", node_dir(data_dir, id).display()))
}
