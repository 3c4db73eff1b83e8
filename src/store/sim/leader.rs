//! `store sim` of the leader family: the code `store up --replication leader` runs (each
//! node's replica loop, `leader::node::serve`, on its redb; the coordinator's failover
//! manager, `leader::manager`, on its state file) with the machines' messages carried by the
//! simulated network instead of the TCP mesh, under the simulated clock.
//!
//! A message to a machine that is down is lost when it is sent, and one on its way when its
//! receiver crashes is lost with the crash (it was for that incarnation), as the TCP mesh's
//! connections lose them; a replay delivers as the model does (to the receiver if it runs when
//! the message arrives), since that is what the trace shows. A
//! crashed node's task is dropped: what it committed is on its disk, the rest is gone; its
//! restart opens the same database, as the process's restart does.

use super::net::{SimNet, Wire};
use super::replay::kind;
use super::Setup;
use crate::config::Resolved;
use crate::policy::NodeId;
use crate::protocol::leader::Manager;
use crate::protocol::Endpoint;
use crate::store::cluster::datadir::node_dir;
use crate::store::coordinator::clients::ClientLimits;
use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::state::write_durably;
use crate::store::leader::manager::{self, ManagerHost};
use crate::store::leader::mesh::{LeaderLink, LeaderMsg};
use crate::store::leader::replica_db::ReplicaDb;
use crate::store::leader::{node, LeaderData, ModelPlacement, Spec, POLICY_FILE};
use crate::store::run::PromotionWatch;
use crate::store::trace::{TraceLine, TraceWriter};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

type Inbox = mpsc::Sender<(Endpoint, LeaderMsg)>;

/// A machine's inbox while it runs, and its incarnation (one more at each crash and start).
type Slot = Mutex<(u64, Option<Inbox>)>;

/// Where each machine receives, and the zones messages travel between.
struct Receivers {
    nodes: Vec<Slot>,
    manager: Slot,
    node_zones: Vec<u8>,
    manager_zone: u8,
}

impl Receivers {
    fn slot(&self, e: Endpoint) -> Option<&Slot> {
        match e {
            Endpoint::Node(n) => self.nodes.get(usize::from(n)),
            Endpoint::Coordinator(0) => Some(&self.manager),
            Endpoint::Coordinator(_) | Endpoint::Client(_) => None,
        }
    }

    fn zone(&self, e: Endpoint) -> u8 {
        match e {
            Endpoint::Node(n) => self.node_zones[usize::from(n)],
            _ => self.manager_zone,
        }
    }

    /// `e`'s incarnation and inbox, if it runs.
    fn current(&self, e: Endpoint) -> Option<(u64, Inbox)> {
        let slot = self.slot(e)?.lock().unwrap_or_else(|p| p.into_inner());
        slot.1.clone().map(|inbox| (slot.0, inbox))
    }

    /// `e`'s incarnation, and whether it runs.
    fn incarnation(&self, e: Endpoint) -> (u64, bool) {
        let slot = self.slot(e).expect("a node or the manager").lock().unwrap_or_else(|p| p.into_inner());
        (slot.0, slot.1.is_some())
    }

    /// `e` stops (`None`) or starts on `inbox`: a new incarnation either way.
    fn set(&self, e: Endpoint, inbox: Option<Inbox>) {
        let mut slot = self.slot(e).expect("a node or the manager").lock().unwrap_or_else(|p| p.into_inner());
        slot.0 += 1;
        slot.1 = inbox;
    }
}

/// What every machine's sends go through.
#[derive(Clone)]
struct Wires {
    net: Arc<SimNet>,
    receivers: Arc<Receivers>,
    /// Each message and its delivery into the receiver's machine, for validation against the
    /// model's environment (`store::trace`).
    trace: TraceWriter,
}

impl Wires {
    /// Machine `me`'s sends.
    fn mesh(&self, me: Endpoint) -> Arc<SimMesh> {
        Arc::new(SimMesh { me, wires: self.clone() })
    }
}

/// One machine's sends, over the simulated network.
struct SimMesh {
    me: Endpoint,
    wires: Wires,
}

impl LeaderLink for SimMesh {
    fn send(&self, to: Endpoint, msg: LeaderMsg) {
        let Wires { net, receivers, trace } = self.wires.clone();
        let (id, at_ms, me) = (trace.next_id(), trace.now_ms(), self.me);
        trace.line(&TraceLine::Message { at_ms, id, from: me, to, msg: kind(&msg).into() });
        let (incarnation, up) = receivers.incarnation(to);
        // Lost when sent; but a replay matches it first: the leader model delivers a message
        // to a node that is down (which loses it), so its trace has it.
        if !up && net.replay.is_none() {
            net.lost_when_sent();
            return;
        }
        let (from_zone, to_zone) = (receivers.zone(me), receivers.zone(to));
        let wire = Wire { src: me, dst: to, kind: kind(&msg), copy: None };
        tokio::spawn(async move {
            if !net.carry_to(wire, from_zone, to_zone, !up).await {
                return;
            }
            // A replay delivers as the model does: to the receiver if it runs when the
            // message arrives, whichever incarnation it was sent to.
            let replaying = net.replay.is_some();
            let Some((now, inbox)) = receivers.current(to) else { return };
            // A full inbox loses the message, as the mesh's full queue does.
            if (now == incarnation || replaying) && inbox.try_send((me, msg)).is_ok() {
                trace.line(&TraceLine::Deliver { at_ms: trace.now_ms(), id });
            }
        });
    }
}

/// The leader family's store of one seed.
pub(super) struct LeaderWorld {
    wires: Wires,
    dir: PathBuf,
    spec: Spec,
    cfg: Resolved,
    layout: Layout,
    nodes: Vec<Option<JoinHandle<Result<(), String>>>>,
    pub(super) manager: Arc<ManagerHost>,
    /// The promotions the manager made, looked at every tick (as `store run` looks at INFO).
    pub(super) watch: PromotionWatch,
    /// Why a node stopped by itself (a step it could not persist), if one did.
    failed: Option<String>,
}

impl LeaderWorld {
    /// A new cluster in `dir` for the model's placement and the variant's policy (as `store
    /// run` creates one): epoch 0 saved, the nodes started, then the manager.
    pub(super) async fn start(
        setup: &Setup,
        dir: &Path,
        net: Arc<SimNet>,
        trace: TraceWriter,
    ) -> Result<LeaderWorld, String> {
        let s = &setup.scenario;
        let policy_text = setup.leader_policy.as_deref().expect("a leader-family setup has its policy file");
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let spec = Spec {
            cluster_id: 1,
            partitions: s.shards.len(),
            replication_factor: None,
            node_zones: s.nodes.iter().map(|n| n.zone).collect(),
            nodes: vec![unbound; s.nodes.len()],
            manager: unbound,
            replicas: crate::store::leader::replica_sets(&setup.layout),
            routes: Vec::new(),
            model: Some(ModelPlacement::of(&setup.layout, s.coordinators[0].zone)),
        };
        write_durably(&dir.join(POLICY_FILE), policy_text.as_bytes())?;
        let (cfg, layout) = spec.config(dir)?;
        manager::save_state(&dir.join(manager::STATE_FILE), &Manager::<LeaderData>::new(&cfg).durable())?;
        let receivers = Arc::new(Receivers {
            nodes: s.nodes.iter().map(|_| Mutex::new((0, None))).collect(),
            manager: Mutex::new((0, None)),
            node_zones: spec.node_zones.clone(),
            manager_zone: s.coordinators[0].zone,
        });
        let wires = Wires { net, receivers, trace };
        let mut world = LeaderWorld {
            manager: launch_manager(dir, &spec, &cfg, &layout, &wires)?,
            wires,
            dir: dir.to_path_buf(),
            spec,
            cfg,
            layout,
            nodes: s.nodes.iter().map(|_| None).collect(),
            watch: PromotionWatch::default(),
            failed: None,
        };
        for n in 0..s.nodes.len() as NodeId {
            world.start_node(n)?;
        }
        Ok(world)
    }

    /// Node `n` starts (again) on its database, unless it runs.
    pub(super) fn start_node(&mut self, n: NodeId) -> Result<(), String> {
        if self.nodes[usize::from(n)].is_some() {
            return Ok(());
        }
        let dir = node_dir(&self.dir, n);
        let db = ReplicaDb::open(&dir, self.spec.cluster_id, self.spec.partitions)?;
        let (inbox, received) = mpsc::channel(node::INBOX_MAX);
        let link = self.wires.mesh(Endpoint::Node(n));
        let names = self.layout.shards.iter().map(|s| s.name.clone()).collect();
        let cfg = self.cfg.clone();
        self.wires.receivers.set(Endpoint::Node(n), Some(inbox));
        let task = tokio::spawn(async move {
            node::serve(n, cfg, db, link, names, &dir, received, node::Commits::Inline).await
        });
        self.nodes[usize::from(n)] = Some(task);
        Ok(())
    }

    /// Node `n` crashes: its task is dropped with what it held in memory (its database closes
    /// before this returns, so that its restart can open it).
    pub(super) async fn crash_node(&mut self, n: NodeId) {
        self.wires.receivers.set(Endpoint::Node(n), None);
        if let Some(task) = self.nodes[usize::from(n)].take() {
            task.abort();
            if let Ok(Err(e)) = task.await {
                self.failed.get_or_insert(format!("node {n}: {e}"));
            }
        }
    }

    /// Every node that is down starts again.
    pub(super) fn restart_all(&mut self) -> Result<(), String> {
        (0..self.nodes.len() as NodeId).try_for_each(|n| self.start_node(n))
    }

    /// The coordinator crashes and a new one starts from its state file: the model's
    /// coordinator restart.
    pub(super) fn restart_manager(&mut self) -> Result<Arc<ManagerHost>, String> {
        self.manager.crash();
        self.wires.receivers.set(Endpoint::LEADER, None);
        self.manager = launch_manager(&self.dir, &self.spec, &self.cfg, &self.layout, &self.wires)?;
        Ok(Arc::clone(&self.manager))
    }

    /// Look at the manager's INFO at `at_ms` for promotions and deposed primaries' acks.
    pub(super) fn look(&mut self, at_ms: u64, scenario: &crate::config::Scenario) {
        let info = self.manager.info();
        self.watch.look(&info, at_ms, scenario);
    }

    /// Each partition and epoch in which two nodes took writes as primary, named; or why a
    /// node stopped by itself.
    pub(super) fn two_primaries(&self, scenario: &crate::config::Scenario) -> Result<Vec<String>, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let found = crate::store::leader::two_primaries(&self.dir, self.nodes.len())?;
        Ok(crate::store::run::two_primaries_named(scenario, found))
    }

    /// The run is over: the manager stops and every node's task with it.
    pub(super) fn stop(&mut self) {
        self.manager.crash();
        for task in self.nodes.iter_mut().filter_map(Option::take) {
            task.abort();
        }
    }
}

/// The manager from the state file in `dir`, receiving from now on.
fn launch_manager(
    dir: &Path,
    spec: &Spec,
    cfg: &Resolved,
    layout: &Layout,
    wires: &Wires,
) -> Result<Arc<ManagerHost>, String> {
    let state_path = dir.join(manager::STATE_FILE);
    let durable = manager::load_state(&state_path, spec.partitions)?
        .ok_or_else(|| format!("{}: missing", state_path.display()))?;
    let (inbox, received) = mpsc::channel(manager::INBOX_MAX);
    let link = wires.mesh(Endpoint::LEADER);
    wires.receivers.set(Endpoint::LEADER, Some(inbox));
    Ok(ManagerHost::launch(
        cfg.clone(),
        layout.clone(),
        ClientLimits::default(),
        (state_path, durable),
        link,
        received,
    ))
}
