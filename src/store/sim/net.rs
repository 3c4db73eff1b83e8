//! The simulated network and nodes of `store sim`: each coordinator->node request and its
//! reply is a message with a latency drawn from the scenario's link (or its degraded latency
//! while that fault is on), lost while either end's zone is cut off, while its node is down,
//! or to the drop fault (one message, as in the model); a node answers with its real storage (`node::Storage`, redb
//! and its write log in a directory of its own) and its real request handler.
//!
//! Everything runs on one thread under tokio's paused clock: a message is a task sleeping
//! for its latency, and the one random source is drawn in the order the tasks run, which is
//! the same on every run of a seed.

use super::replay::{
    kind, Replayer, Route, COPY_WRITE, COPY_WRITE_REPLY, LAST_SCAN_REPLY, PROBE, SCAN, SHELL_REPLY,
};
use crate::config::{LatencyTicks, Scenario};
use crate::policy::NodeId;
use crate::protocol::Endpoint;
use crate::store::coordinator::link::Traffic;
use crate::store::coordinator::link::{LinkStats, Measured, NodeChannel, OnReply};
use crate::store::coordinator::peer::{PeerChannel, PeerMsg};
use crate::store::coordinator::shell::Shell;
use crate::store::node::storage::Storage;
use crate::store::node::wire::{NodeReply, NodeRequest, StoredValue, SCAN_ENTRIES_MAX};
use crate::store::run::Fault;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// One storage node: its real storage while it is up.
pub struct SimNode {
    pub id: NodeId,
    dir: PathBuf,
    storage: Mutex<Option<Storage>>,
}

impl SimNode {
    pub fn start(id: NodeId, dir: PathBuf) -> Result<SimNode, String> {
        let storage = Storage::open(&dir)?;
        Ok(SimNode { id, dir, storage: Mutex::new(Some(storage)) })
    }

    /// The node's process dies: what it did not write durably is gone with it (the write log
    /// is synced before every reply, so nothing it acknowledged is).
    pub fn crash(&self) {
        *self.lock() = None;
    }

    /// Start again from its directory, replaying its write log.
    pub fn restart(&self) -> Result<(), String> {
        let mut storage = self.lock();
        if storage.is_none() {
            *storage = Some(Storage::open(&self.dir)?);
        }
        Ok(())
    }

    /// What the node stores for `key` (its disk's, up or not: a crashed node's disk is read
    /// as its restart would).
    pub fn stored(&self, key: &[u8]) -> Result<(u64, StoredValue), String> {
        let storage = self.lock().clone();
        match storage {
            Some(storage) => storage.read(key),
            None => Storage::open(&self.dir)?.read(key),
        }
    }

    pub fn is_up(&self) -> bool {
        self.lock().is_some()
    }

    /// The node's answer, as its server gives it; `None` if it is down.
    fn answer(&self, request: NodeRequest) -> Option<NodeReply> {
        let storage = self.lock().clone()?;
        Some(match request {
            // Durable before the reply, as the server's committer makes it.
            NodeRequest::Replicate { key, version, value } => match storage.write(key, version, value) {
                Ok(version) => NodeReply::Stored { version },
                Err(message) => NodeReply::Failed { message },
            },
            request => crate::store::node::handle(self.id, &storage, request),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Storage>> {
        self.storage.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The links' state: latencies, the faults in force, and the run's one random source.
struct Links {
    rng: StdRng,
    /// One-way latency between two zones, now (a degraded link's while it is).
    latency: Vec<Vec<LatencyTicks>>,
    lossy: Vec<Vec<bool>>,
    /// Zones cut off from every other zone.
    partitioned: Vec<bool>,
    /// The drop fault loses one message on a lossy link, as the model's does: one of the
    /// next few (each with even chance), then it is spent.
    drop_armed: bool,
    sent: u64,
    lost: u64,
}

/// A message as the replay matches it to the model's: who sends it to whom, and its kind
/// (`replay::kind`).
#[derive(Clone, Copy, Debug)]
pub struct Wire {
    pub src: Endpoint,
    pub dst: Endpoint,
    pub kind: &'static str,
    /// A catch-up copy's scan or write: the copy's source.
    pub copy: Option<NodeId>,
}

pub struct SimNet {
    links: Mutex<Links>,
    /// Replaying a counterexample: the machines' messages go where the trace's went.
    pub replay: Option<Arc<Mutex<Replayer>>>,
    /// The scenario's latencies, to restore when a degradation ends.
    scenario_latency: Vec<Vec<LatencyTicks>>,
    /// Tick 0 of the model's time.
    epoch: Instant,
    ms_per_tick: u64,
    pub nodes: Vec<Arc<SimNode>>,
    node_zones: Vec<u8>,
}

impl SimNet {
    /// The scenario's network at `ms_per_tick`, its tick 0 at `epoch`.
    pub fn new(
        scenario: &Scenario,
        ms_per_tick: u64,
        epoch: Instant,
        nodes: Vec<Arc<SimNode>>,
        seed: u64,
        replay: Option<Arc<Mutex<Replayer>>>,
    ) -> SimNet {
        SimNet {
            replay,
            links: Mutex::new(Links {
                rng: StdRng::seed_from_u64(seed),
                latency: scenario.latency.clone(),
                lossy: scenario.lossy.clone(),
                partitioned: vec![false; scenario.zones.len()],
                drop_armed: false,
                sent: 0,
                lost: 0,
            }),
            scenario_latency: scenario.latency.clone(),
            epoch,
            ms_per_tick,
            nodes,
            node_zones: scenario.nodes.iter().map(|n| n.zone).collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Links> {
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The links as the faults in force leave them: their zones cut off, each degraded link
    /// at the slowest of its degradations, lossy links losing messages while `drop` is on.
    pub(crate) fn set_faults(&self, active: &[Fault]) {
        let mut links = self.lock();
        links.latency = self.scenario_latency.clone();
        links.partitioned.fill(false);
        // A drop not spent by the heal is called off: nothing is lost after it.
        links.drop_armed &= active.contains(&Fault::Drop);
        for fault in active {
            match *fault {
                Fault::Partition(zone) => links.partitioned[usize::from(zone)] = true,
                Fault::Degrade { zones: (a, b), latency, .. } => {
                    let (a, b) = (usize::from(a), usize::from(b));
                    if latency.hi > links.latency[a][b].hi {
                        links.latency[a][b] = latency;
                        links.latency[b][a] = latency;
                    }
                }
                Fault::Crash(_) | Fault::CoordinatorCrash | Fault::Drop => {}
            }
        }
    }

    /// The drop fault: the next few messages on a lossy link may be lost, one at most.
    pub fn arm_drop(&self) {
        // A replay loses the trace's lost message itself.
        self.lock().drop_armed = self.replay.is_none();
    }

    /// A message lost as it is sent (to a machine that is down, or as a replay's trace lost it):
    /// counted as sent and lost.
    pub fn lost_when_sent(&self) {
        let mut links = self.lock();
        links.sent += 1;
        links.lost += 1;
    }

    /// Messages sent and lost so far.
    pub fn counts(&self) -> (u64, u64) {
        let links = self.lock();
        (links.sent, links.lost)
    }

    fn cut(links: &Links, from: u8, to: u8) -> bool {
        from != to && (links.partitioned[usize::from(from)] || links.partitioned[usize::from(to)])
    }

    /// A message from zone `from` to zone `to` leaves now: how long it travels, or `None` if
    /// it is lost. As in the model, a message sent in tick t with a latency of L ticks arrives
    /// in tick t + L; the moment within that tick is drawn, so messages due in one tick arrive
    /// in any order, as the model explores them.
    fn send(&self, from: u8, to: u8) -> Option<Duration> {
        let mut links = self.lock();
        links.sent += 1;
        let lossy = links.lossy[usize::from(from)][usize::from(to)];
        let dropped = links.drop_armed && lossy && links.rng.random_bool(0.5);
        links.drop_armed &= !dropped;
        if Self::cut(&links, from, to) || dropped {
            links.lost += 1;
            return None;
        }
        let latency = links.latency[usize::from(from)][usize::from(to)];
        let ticks = u64::from(links.rng.random_range(latency.lo..=latency.hi));
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let arrival_ms = (now_ms / self.ms_per_tick + ticks) * self.ms_per_tick
            + links.rng.random_range(0..self.ms_per_tick);
        // At least a millisecond: a client whose every attempt failed at once would otherwise
        // retry for ever at one moment.
        Some(Duration::from_millis(arrival_ms.saturating_sub(now_ms).max(1)))
    }

    /// A message from zone `from` arrives in zone `to` now: lost if either is cut off by then.
    fn arrives(&self, from: u8, to: u8) -> bool {
        let mut links = self.lock();
        let cut = Self::cut(&links, from, to);
        links.lost += u64::from(cut);
        !cut
    }

    /// Carry a message from zone `from` to zone `to`: true once it arrived, false at once if
    /// it was lost when sent, false on arrival if it was lost on the way. `wire` names the
    /// message for a replay.
    pub async fn carry(&self, wire: Wire, from: u8, to: u8) -> bool {
        let down = matches!(wire.dst, Endpoint::Node(n) if !self.nodes[usize::from(n)].is_up());
        self.carry_to(wire, from, to, down).await
    }

    /// `carry`, to a receiver that is up or not (`receiver_down`): the leader family's
    /// machines are not `self.nodes`.
    pub async fn carry_to(&self, wire: Wire, from: u8, to: u8, receiver_down: bool) -> bool {
        if let Some(replay) = &self.replay {
            let now = self.epoch.elapsed();
            // The quorum model drops a message sent across a cut or to a crashed node when it
            // is sent (the leader model's is delivered to the node, which is down: lost then).
            let lost_now = Self::cut(&self.lock(), from, to) || receiver_down;
            let route = replay.lock().unwrap_or_else(|p| p.into_inner()).route(&wire, now, lost_now);
            match route {
                Route::At(at) => {
                    self.lock().sent += 1;
                    if at > now {
                        tokio::time::sleep_until(self.epoch + at).await;
                    }
                    return self.arrives(from, to);
                }
                Route::Lost => {
                    self.lost_when_sent();
                    return false;
                }
                Route::Free => {}
            }
        }
        let Some(latency) = self.send(from, to) else { return false };
        tokio::time::sleep(latency).await;
        self.arrives(from, to)
    }

    /// The link from coordinator `coordinator`, in `zone`, to node `node`.
    pub fn link(self: &Arc<Self>, coordinator: u8, zone: u8, node: NodeId) -> Arc<SimLink> {
        Arc::new(SimLink {
            net: Arc::clone(self),
            coordinator,
            zone,
            node,
            measured: Mutex::new(Measured::new(Instant::now())),
        })
    }
}

/// A coordinator's link to one node over the simulated network.
pub struct SimLink {
    net: Arc<SimNet>,
    coordinator: u8,
    /// The coordinator's zone.
    zone: u8,
    node: NodeId,
    measured: Mutex<Measured>,
}

impl NodeChannel for SimLink {
    fn post(self: Arc<Self>, request: NodeRequest, traffic: Traffic, deadline: Instant, done: OnReply) {
        let sent_at = Instant::now();
        let node_zone = self.net.node_zones[usize::from(self.node)];
        let (coordinator, node) = (Endpoint::Coordinator(self.coordinator), Endpoint::Node(self.node));
        let copy = match traffic {
            Traffic::Copy { source } => Some(source),
            _ => None,
        };
        let out = Wire { src: coordinator, dst: node, kind: request_kind(&request, traffic), copy };
        // Always a task of its own: the shell submits under its machine's lock.
        tokio::spawn(async move {
            if !self.net.carry(out, self.zone, node_zone).await {
                return;
            }
            let Some(reply) = self.net.nodes[usize::from(self.node)].answer(request) else { return };
            let back = Wire { src: node, dst: coordinator, kind: reply_kind(out.kind, &reply), copy };
            if !self.net.carry(back, node_zone, self.zone).await {
                return;
            }
            let now = Instant::now();
            self.measured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .heard(now, Some((sent_at, now > deadline)));
            if now <= deadline {
                done(reply);
            }
        });
    }

    fn stats(&self) -> LinkStats {
        self.measured.lock().unwrap_or_else(|p| p.into_inner()).stats()
    }

    fn place(&self) -> String {
        format!("sim:node{}", self.node)
    }
}

/// One coordinator's messages to the others over the simulated network (the membership
/// protocol's views, acks and proposals), each carried between the two coordinators' zones.
pub struct SimPeers {
    net: Arc<SimNet>,
    me: u8,
    /// Every coordinator's zone.
    zones: Vec<u8>,
    /// Every coordinator's shell running now (a message to one not started yet is lost).
    shells: Arc<Mutex<Vec<Weak<Shell>>>>,
}

impl SimPeers {
    pub fn new(net: &Arc<SimNet>, me: u8, zones: Vec<u8>, shells: &Arc<Mutex<Vec<Weak<Shell>>>>) -> SimPeers {
        SimPeers { net: Arc::clone(net), me, zones, shells: Arc::clone(shells) }
    }
}

impl PeerChannel for SimPeers {
    fn send(&self, to: u8, msg: PeerMsg) {
        let (net, shells, from) = (Arc::clone(&self.net), Arc::clone(&self.shells), self.me);
        let (from_zone, to_zone) = (self.zones[usize::from(from)], self.zones[usize::from(to)]);
        let msg = msg.into_msg();
        let wire = Wire {
            src: Endpoint::Coordinator(from),
            dst: Endpoint::Coordinator(to),
            kind: kind(&msg),
            copy: None,
        };
        tokio::spawn(async move {
            if !net.carry(wire, from_zone, to_zone).await {
                return;
            }
            let shell =
                shells.lock().unwrap_or_else(|p| p.into_inner()).get(usize::from(to)).and_then(Weak::upgrade);
            if let Some(shell) = shell {
                shell.deliver_peer(from, msg);
            }
        });
    }
}

/// A request's kind, as the model names the message it carries; the shell's own requests
/// (a catch-up copy's scans and writes, the startup probe) have kinds of their own.
fn request_kind(request: &NodeRequest, traffic: Traffic) -> &'static str {
    match (traffic, request) {
        (Traffic::Machine, NodeRequest::Replicate { .. }) => "replicate",
        (Traffic::Machine, NodeRequest::Read { .. }) => "read",
        (Traffic::Machine, _) => "ping",
        (Traffic::Copy { .. }, NodeRequest::Scan { .. }) => SCAN,
        (Traffic::Copy { .. }, _) => COPY_WRITE,
        (Traffic::Probe, _) => PROBE,
    }
}

/// A reply's kind: the answer to a request of kind `request` (a refusal answers a replicate
/// or a read as the machine takes it, `Refused`; a heartbeat's, a pong). The last page of a
/// scan (short of the limit) ends its copy.
fn reply_kind(request: &'static str, reply: &NodeReply) -> &'static str {
    match (request, reply) {
        ("replicate", _) => "replicate reply",
        ("read", _) => "read reply",
        ("ping", _) => "pong",
        (SCAN, NodeReply::Entries { entries }) if entries.len() < SCAN_ENTRIES_MAX as usize => {
            LAST_SCAN_REPLY
        }
        (COPY_WRITE, _) => COPY_WRITE_REPLY,
        _ => SHELL_REPLY,
    }
}
