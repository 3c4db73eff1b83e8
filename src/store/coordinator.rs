//! The coordinator: serves RESP to clients, replicates each write to the replica set and acks
//! it once `write_quorum` members acked within `replica_ack_timeout`, reads `read_quorum`
//! members and answers with the newest version, detects failed nodes and replaces evicted
//! replicas with a spare after a catch-up copy.
//!
//! Partitions: the keyspace is split into the partitions of a [`Layout`], each with its own
//! replica set; a key's partition is decided by `routing::key_partition`. Before a write is
//! replicated the coordinator, as the request router, offers it to its partition and (when
//! backends have capacities) to the ingest backend `routing::choose_backend` places it on,
//! counting writes per capacity window; above capacity it is throttled (an error reply, which
//! clients retry per their policy), exactly as the models route.
//!
//! Rebalancing: every `rebalance_interval` the rebalancer asks `choose_move` (through
//! `decision`) whether to move a partition, from the node loads given in `LoadFacts` and the
//! partitions' sizes; a move swaps the member `from` for `to` exactly as an eviction swaps in
//! its replacement (writes at once, quorums after the catch-up copy), and `from`, still
//! healthy, is one of the copy sources. The rebalancer's tick is one millisecond: the policy's
//! `interval_ticks`, `move_cooldown_ticks` and `cooldown_max_ticks` are milliseconds here.
//!
//! Linearizability: versions come from one counter, so a write that starts after another
//! finished gets a higher version. A read that finds its newest version on fewer than
//! `write_quorum` of the members that answered writes it back to a write quorum before
//! answering (ABD's read phase two): once a reader saw a value, every later read quorum
//! meets a member that holds it.

use super::datadir::{Change, SavedMember, SavedShard, SavedState, StateFile};
use super::decision::{self, DecisionLog};
use super::layout::Layout;
use super::link::{LinkError, NodeLink};
use super::resp;
use super::wire::{NodeReply, NodeRequest, StoredValue, SCAN_ENTRIES_MAX};
use crate::config::policy::Rebalance;
use crate::config::Policy;
use crate::policy::detector::{FailureDetection, Health};
use crate::policy::eviction::{Candidate, ClusterView, EvictionDecision};
use crate::policy::rebalancer::{NodeLoad, ShardLoad};
use crate::policy::routing::{BackendLoad, WriteRoute};
use crate::policy::NodeId;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Idempotency tokens remembered at most; the oldest is forgotten first.
const TOKENS_MAX: usize = 100_000;
/// Probe period when the policy sets no heartbeat (coupled detection with `heartbeat_interval`
/// = 0): a dead node still has to be seen coming back.
const PROBE_INTERVAL_DEFAULT_MS: u64 = 1000;
/// Every node must answer the first heartbeat within this, so that the version counter starts
/// above every version already stored.
const STARTUP_TIMEOUT_MS: u64 = 10_000;
/// A catch-up polls this often for the writes that began before its change to end.
const WRITE_END_POLL_MS: u64 = 2;
/// How long past its ack deadline a write may take to finish (scheduling), at most.
const WRITE_END_SLACK_MS: u64 = 5_000;
/// Client connections read at most this much ahead of the command being executed.
const CLIENT_BUFFER_SLACK_BYTES: usize = 64 * 1024;
/// Versions reserved at once: the block's end is saved before its first version is used, so
/// one fsync covers this many writes and a restart skips at most this many versions.
const VERSION_BLOCK: u64 = 100_000;

/// One member of the replica set. A replacement receives writes at once but counts toward
/// quorums only once its catch-up copy finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    node: NodeId,
    caught_up: bool,
    /// The partition's epoch when it joined (0 for an initial member): a catch-up task ends
    /// the change it was started for, not a later one of the same node.
    joined_epoch: u64,
    /// How it joined (`None`: an initial member); saved while it catches up, so a restarted
    /// coordinator resumes the right catch-up.
    change: Option<Change>,
}

struct NodeState {
    health: Health,
    last_heard: Instant,
}

/// One partition's replica set.
struct ShardMembers {
    members: Vec<Member>,
    /// Membership changes of this partition still catching up (the rebalancer leaves a
    /// changing partition alone, as the models do).
    catching_up: usize,
    /// Bumped by every membership change; a write replicates to the members of the epoch it
    /// began in.
    epoch: u64,
    /// Writes in flight, by the epoch they began in: a catch-up copies once every write that
    /// may have counted the replaced member's ack has ended.
    writes_in_flight: std::collections::BTreeMap<u64, usize>,
}

impl ShardMembers {
    fn new(members: Vec<Member>) -> ShardMembers {
        ShardMembers { members, catching_up: 0, epoch: 0, writes_in_flight: Default::default() }
    }

    /// Replace `old` by `new` (not yet caught up); returns the new epoch.
    fn replace(&mut self, old: NodeId, new: NodeId, change: Change) -> u64 {
        let slot = self.members.iter().position(|m| m.node == old).expect("replaces a member");
        self.epoch += 1;
        self.members[slot] =
            Member { node: new, caught_up: false, joined_epoch: self.epoch, change: Some(change) };
        self.catching_up += 1;
        self.epoch
    }

    /// Undo a change that could not be saved (it never took effect).
    fn undo(&mut self, members: Vec<Member>, epoch: u64) {
        self.members = members;
        self.epoch = epoch;
        self.catching_up -= 1;
    }

    fn writes_before(&self, epoch: u64) -> usize {
        self.writes_in_flight.range(..epoch).map(|(_, n)| n).sum()
    }
}

/// A write in flight on a partition, counted until dropped.
struct WriteInFlight<'a> {
    coordinator: &'a Coordinator,
    shard: usize,
    epoch: u64,
}

impl Drop for WriteInFlight<'_> {
    fn drop(&mut self) {
        let mut membership = self.coordinator.membership.lock().unwrap_or_else(|p| p.into_inner());
        let in_flight = &mut membership.shards[self.shard].writes_in_flight;
        let n = in_flight.get_mut(&self.epoch).expect("counted when the write began");
        *n -= 1;
        if *n == 0 {
            in_flight.remove(&self.epoch);
        }
    }
}

struct Membership {
    /// Indexed by partition.
    shards: Vec<ShardMembers>,
    /// Bumped by every membership change, which is saved before it takes effect.
    epoch: u64,
    nodes: Vec<NodeState>,
    evictions_in_progress: usize,
    /// Rebalancing moves whose replacement has not caught up yet.
    moves_in_progress: usize,
    last_suppressed: Option<String>,
}

impl Membership {
    fn holds(&self, node: NodeId) -> bool {
        self.shards.iter().any(|s| s.members.iter().any(|m| m.node == node))
    }

    fn saved_shards(&self, layout: &Layout) -> Vec<SavedShard> {
        self.shards
            .iter()
            .zip(&layout.shards)
            .map(|(s, spec)| SavedShard {
                name: spec.name.clone(),
                epoch: s.epoch,
                members: s
                    .members
                    .iter()
                    .map(|m| SavedMember {
                        node: m.node,
                        joined_epoch: m.joined_epoch,
                        catching_up: if m.caught_up {
                            None
                        } else {
                            Some(m.change.unwrap_or(Change::Eviction))
                        },
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The version counter: `next` may be used once `next < reserved_end`, the saved floor.
struct VersionClock {
    next: u64,
    reserved_end: u64,
}

/// Where the coordinator saves its state, and what it saved last.
struct Durable {
    file: StateFile,
    saved: Mutex<SavedState>,
}

/// Writes offered in the current capacity window, per partition and per backend (background
/// load excluded), and what was seen over the whole run.
struct Admission {
    window: u64,
    partition_offered: Vec<u16>,
    backend_offered: Vec<u16>,
    /// Most offered in one window so far, background included.
    partition_peak: Vec<u16>,
    backend_peak: Vec<u16>,
    /// The first time a partition or backend was offered more than its capacity.
    first_breach: Option<String>,
}

impl Admission {
    /// Count from now on in `window`: a later window starts from zero offers. An earlier one
    /// (a writer that read the clock before another's later reading) counts in the current
    /// window instead of wiping it.
    fn enter_window(&mut self, window: u64) {
        if window > self.window {
            self.window = window;
            self.partition_offered.iter_mut().for_each(|o| *o = 0);
            self.backend_offered.iter_mut().for_each(|o| *o = 0);
        }
    }
}

/// What INFO shows; monotone counters.
#[derive(Default)]
pub struct Counters {
    pub writes_acked: AtomicU64,
    pub writes_failed: AtomicU64,
    pub reads_ok: AtomicU64,
    pub reads_failed: AtomicU64,
    pub read_repairs: AtomicU64,
    pub evictions: AtomicU64,
    pub catchups_completed: AtomicU64,
    pub keys_copied: AtomicU64,
    pub membership_changes: AtomicU64,
    pub moves: AtomicU64,
    /// Writes refused because their partition or backend was at capacity, or no backend had
    /// room (the error reply clients retry).
    pub writes_throttled: AtomicU64,
    /// Offers above a capacity: each write that found its partition or backend full, and
    /// each partition or backend that background load alone puts over its capacity.
    pub capacity_breaches: AtomicU64,
}

/// The load the rebalancer sees, fixed for a run (as in the models): per node the disk use
/// outside the partitions and the compaction debt, and the debt above which a node hosting a
/// hot partition is slow (the partitions' sizes and heat are in the [`Layout`]). `store up`
/// leaves them all 0 (no node is ever overloaded); `store run` copies them from the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadFacts {
    /// One entry per node, or empty for all 0.
    pub node_disk_used_pct: Vec<u8>,
    /// One entry per node, or empty for all 0.
    pub node_compaction_debt_pct: Vec<u8>,
    pub slow_compaction_debt_pct: u8,
}

impl LoadFacts {
    fn check(&self, node_count: usize) -> Result<(), String> {
        for (name, values) in [
            ("node_disk_used_pct", &self.node_disk_used_pct),
            ("node_compaction_debt_pct", &self.node_compaction_debt_pct),
        ] {
            if !values.is_empty() && values.len() != node_count {
                return Err(format!("{name} has {} entries for {node_count} nodes", values.len()));
            }
            if let Some(v) = values.iter().find(|v| **v > 100) {
                return Err(format!("{name} = {v}: a percentage, 0 to 100"));
            }
        }
        if self.slow_compaction_debt_pct > 100 {
            return Err(format!(
                "slow_compaction_debt_pct = {}: a percentage, 0 to 100",
                self.slow_compaction_debt_pct
            ));
        }
        Ok(())
    }

    fn of(values: &[u8], node: NodeId) -> u8 {
        values.get(usize::from(node)).copied().unwrap_or(0)
    }
}

/// The rebalancer's memory of a partition's cooldown (ms).
#[derive(Clone, Default)]
struct Cooldown {
    /// The cooldown after the latest move (0: no move yet).
    len_ms: u32,
    resting_until: Option<Instant>,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[derive(Default)]
struct Tokens {
    versions: HashMap<Vec<u8>, (Vec<u8>, u64)>,
    order: VecDeque<Vec<u8>>,
}

impl Tokens {
    fn version_of(&self, token: &[u8], key: &[u8]) -> Option<u64> {
        self.versions.get(token).filter(|(k, _)| k == key).map(|(_, v)| *v)
    }
    fn remember(&mut self, token: Vec<u8>, key: Vec<u8>, version: u64) {
        if self.versions.insert(token.clone(), (key, version)).is_none() {
            self.order.push_back(token);
        }
        while self.order.len() > TOKENS_MAX {
            let oldest = self.order.pop_front().expect("non-empty");
            self.versions.remove(&oldest);
        }
    }
}

pub struct Coordinator {
    policy: Policy,
    links: Vec<Arc<NodeLink>>,
    /// Zone of each node, indexed like `links`; replacements prefer the evicted one's zone.
    zones: Vec<u8>,
    membership: Mutex<Membership>,
    versions: Mutex<VersionClock>,
    /// `None`: nothing is saved (a coordinator without a data directory).
    durable: Option<Durable>,
    tokens: Mutex<Tokens>,
    pub counters: Counters,
    value_bytes_max: usize,
    started: Instant,
    /// Every policy decision goes through `decision::*` and is logged here.
    log: DecisionLog,
    load: LoadFacts,
    layout: Layout,
    /// Each partition's write capacity per window (`routing::partition_capacity`).
    partition_capacity_per_window: Option<u16>,
    /// Background writes per window on each partition (the bursts over their suffixes).
    partition_background: Vec<u16>,
    admission: Mutex<Admission>,
}

impl Coordinator {
    /// Connect to every node (each link dials `node_addrs[i]`: the node, or its proxy), learn
    /// the highest stored version, and start heartbeats and failure detection. Each partition
    /// of `layout` starts with its listed replicas; a node in no replica set is a spare. Node
    /// `i` is in zone `node_zones[i]`.
    ///
    /// With `state` (the state file and what it held, checked against the layout), the
    /// membership saved there replaces the layout's, its members still catching up resume
    /// their catch-up, and versions start at or above the saved floor. Every later membership
    /// change and version block is saved there before it takes effect.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        policy: Policy,
        node_addrs: &[SocketAddr],
        node_zones: &[u8],
        value_bytes_max: usize,
        log: DecisionLog,
        load: LoadFacts,
        layout: Layout,
        state: Option<(StateFile, Option<SavedState>)>,
    ) -> Result<Arc<Coordinator>, String> {
        load.check(node_addrs.len())?;
        layout.check(node_addrs.len(), policy.replication_factor)?;
        let rf = usize::from(policy.replication_factor);
        if rf > node_addrs.len() {
            return Err(format!("replication_factor {rf} exceeds the {} nodes", node_addrs.len()));
        }
        if node_zones.len() != node_addrs.len() {
            return Err(format!(
                "{} node zones for {} nodes: one zone per node",
                node_zones.len(),
                node_addrs.len()
            ));
        }
        let links: Vec<Arc<NodeLink>> = node_addrs.iter().map(|a| Arc::new(NodeLink::new(*a))).collect();
        let deadline = Instant::now() + Duration::from_millis(STARTUP_TIMEOUT_MS);
        let mut max_version = 0;
        for (node, link) in links.iter().enumerate() {
            // A node may still be starting: retry until the deadline.
            let reply = loop {
                match link.request(NodeRequest::Heartbeat, deadline).await {
                    Ok(reply) => break reply,
                    Err(LinkError::Deadline) => {
                        return Err(format!(
                            "node {node} at {} did not answer within {STARTUP_TIMEOUT_MS} ms",
                            link.addr()
                        ))
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            match reply {
                NodeReply::Alive { max_version: v, .. } => max_version = max_version.max(v),
                other => return Err(format!("node {node}: unexpected heartbeat reply {other:?}")),
            }
        }
        let now = Instant::now();
        let saved = state.as_ref().and_then(|(_, saved)| saved.clone());
        if let (Some((file, _)), Some(saved)) = (&state, &saved) {
            saved.check(&layout, node_addrs.len(), file.path())?;
        }
        let mut membership = Membership {
            shards: layout
                .shards
                .iter()
                .map(|s| {
                    ShardMembers::new(
                        s.replicas
                            .iter()
                            .map(|&node| Member { node, caught_up: true, joined_epoch: 0, change: None })
                            .collect(),
                    )
                })
                .collect(),
            epoch: 0,
            nodes: node_addrs.iter().map(|_| NodeState { health: Health::Alive, last_heard: now }).collect(),
            evictions_in_progress: 0,
            moves_in_progress: 0,
            last_suppressed: None,
        };
        // Catch-ups to resume once the coordinator runs: (partition, node, change, epoch).
        let mut resumed = Vec::new();
        if let Some(saved) = &saved {
            membership.epoch = saved.membership_epoch;
            for (k, s) in saved.shards.iter().enumerate() {
                let shard = &mut membership.shards[k];
                shard.epoch = s.epoch;
                shard.members = s
                    .members
                    .iter()
                    .map(|m| Member {
                        node: m.node,
                        caught_up: m.catching_up.is_none(),
                        joined_epoch: m.joined_epoch,
                        change: m.catching_up,
                    })
                    .collect();
                for m in &s.members {
                    if let Some(change) = m.catching_up {
                        shard.catching_up += 1;
                        match change {
                            Change::Eviction => membership.evictions_in_progress += 1,
                            Change::Move { .. } => membership.moves_in_progress += 1,
                        }
                        resumed.push((k as u8, m.node, change, m.joined_epoch));
                    }
                }
            }
        }
        // Versions a previous coordinator used are below its saved floor, or stored on a node.
        let floor = saved.as_ref().map_or(0, |s| s.version_floor);
        let first_version = (max_version + 1).max(floor);
        let durable =
            state.map(|(file, saved)| Durable { file, saved: Mutex::new(saved.unwrap_or_default()) });
        let partition_count = layout.partition_count();
        let partition_capacity_per_window = decision::partition_capacity(
            &log,
            layout.partition_write_capacity_per_window,
            layout.table_write_capacity_per_window,
            partition_count,
        );
        let partition_background = layout.partition_background(policy.routing.write_shard_suffixes);
        let admission = Admission {
            window: 0,
            partition_offered: vec![0; layout.shards.len()],
            backend_offered: vec![0; node_addrs.len()],
            partition_peak: vec![0; layout.shards.len()],
            backend_peak: vec![0; node_addrs.len()],
            first_breach: None,
        };
        let coordinator = Arc::new(Coordinator {
            policy,
            links,
            zones: node_zones.to_vec(),
            membership: Mutex::new(membership),
            versions: Mutex::new(VersionClock { next: first_version, reserved_end: first_version }),
            durable,
            tokens: Mutex::default(),
            counters: Counters::default(),
            value_bytes_max,
            started: now,
            log,
            load,
            layout,
            partition_capacity_per_window,
            partition_background,
            admission: Mutex::new(admission),
        });
        coordinator.note_background_breaches();
        for (node, link) in coordinator.links.iter().enumerate() {
            // Weak: the links belong to the coordinator.
            let weak = Arc::downgrade(&coordinator);
            link.on_heard(move || {
                if let Some(coordinator) = weak.upgrade() {
                    coordinator.heard_from(node as NodeId);
                }
            });
        }
        {
            // The restored (or initial) membership and the first version block are saved
            // before any client is served.
            let membership = coordinator.membership.lock().expect("membership lock");
            coordinator.save_membership(&membership)?;
            drop(membership);
            let mut clock = coordinator.versions.lock().expect("versions lock");
            coordinator.reserve_versions(&mut clock)?;
        }
        for (shard, node, change, epoch) in resumed {
            eprintln!(
                "replicheck store: resuming the catch-up of node {node} in partition {}",
                coordinator.layout.shards[usize::from(shard)].name
            );
            tokio::spawn(Arc::clone(&coordinator).catch_up(shard, node, change, epoch));
        }
        tokio::spawn(Arc::clone(&coordinator).detector_loop());
        if coordinator.policy.rebalance.is_some() {
            tokio::spawn(Arc::clone(&coordinator).rebalance_loop());
        }
        Ok(coordinator)
    }

    /// Save `membership` durably. A change is made under the membership lock and saved before
    /// the lock is released, so no read or write uses a member set that is not saved; if
    /// saving fails the change is undone.
    fn save_membership(&self, membership: &Membership) -> Result<(), String> {
        let Some(durable) = &self.durable else { return Ok(()) };
        let mut saved = durable.saved.lock().expect("saved state lock");
        let mut next = saved.clone();
        next.membership_epoch = membership.epoch;
        next.shards = membership.saved_shards(&self.layout);
        durable.file.save(&next)?;
        *saved = next;
        Ok(())
    }

    /// Reserve the next block of versions: its end is saved before any of them is used.
    fn reserve_versions(&self, clock: &mut VersionClock) -> Result<(), String> {
        let end = clock.next + VERSION_BLOCK;
        if let Some(durable) = &self.durable {
            let mut saved = durable.saved.lock().expect("saved state lock");
            let mut next = saved.clone();
            next.version_floor = end;
            durable.file.save(&next)?;
            *saved = next;
        }
        clock.reserved_end = end;
        Ok(())
    }

    /// A new version, higher than any this coordinator or an earlier one on the same data
    /// directory used.
    fn new_version(&self) -> Result<u64, String> {
        let mut clock = self.versions.lock().expect("versions lock");
        if clock.next >= clock.reserved_end {
            self.reserve_versions(&mut clock)?;
        }
        clock.next += 1;
        Ok(clock.next - 1)
    }

    fn ack_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.policy.replica_ack_timeout_ticks))
    }

    fn probe_interval(&self) -> Duration {
        match self.policy.heartbeat_interval_ticks {
            0 => Duration::from_millis(PROBE_INTERVAL_DEFAULT_MS),
            ms => Duration::from_millis(u64::from(ms)),
        }
    }

    fn members(&self, shard: u8) -> Vec<Member> {
        self.membership.lock().expect("membership lock").shards[usize::from(shard)].members.clone()
    }

    /// The members a write to `shard` replicates to, counted in flight until the guard drops.
    fn begin_write(&self, shard: u8) -> (Vec<Member>, WriteInFlight<'_>) {
        let mut membership = self.membership.lock().expect("membership lock");
        let s = &mut membership.shards[usize::from(shard)];
        *s.writes_in_flight.entry(s.epoch).or_default() += 1;
        let guard = WriteInFlight { coordinator: self, shard: usize::from(shard), epoch: s.epoch };
        (s.members.clone(), guard)
    }

    /// Partition `shard`'s member node ids in replica-set order, and whether each counts
    /// toward quorums.
    pub fn replica_set(&self, shard: u8) -> Vec<(NodeId, bool)> {
        self.members(shard).iter().map(|m| (m.node, m.caught_up)).collect()
    }

    /// The partition `key` is stored on (`routing::key_partition`, logged).
    pub fn partition_of(&self, key: &[u8]) -> u8 {
        self.partition_of_with(&self.log, key)
    }

    fn partition_of_with(&self, log: &DecisionLog, key: &[u8]) -> u8 {
        decision::key_partition(
            log,
            self.layout.prefix_partition(key),
            crate::policy::routing::key_hash(key),
            self.policy.routing.write_shard_suffixes,
            self.layout.partition_count(),
        )
    }

    /// Route one write: offer it to its partition, then place it on an ingest backend when
    /// backends have capacities. `Err`: throttled or shed, with why. Throttled writes count as
    /// offered, as in the models: a retry storm is load too.
    fn admit_write(&self, partition: u8) -> Result<(), String> {
        let up: Vec<bool> = {
            let membership = self.membership.lock().expect("membership lock");
            membership.nodes.iter().map(|n| n.health != Health::Dead).collect()
        };
        let window_ms = self.layout.window_ms;
        let mut a = self.admission.lock().expect("admission lock");
        // The clock is read under the lock, so the windows writers see never go back.
        a.enter_window(self.started.elapsed().as_millis() as u64 / window_ms);
        let p = usize::from(partition);
        let before = self.partition_background[p].saturating_add(a.partition_offered[p]);
        let backends: Option<Vec<BackendLoad>> = self.layout.backends_modelled().then(|| {
            (0..up.len())
                .map(|n| BackendLoad {
                    node: n as NodeId,
                    up: up[n],
                    capacity_per_tick: self.layout.node_capacity(n as NodeId),
                    load_per_tick: self
                        .layout
                        .node_base_load(n as NodeId)
                        .saturating_add(a.backend_offered[n]),
                })
                .collect()
        });
        let cap = self.partition_capacity_per_window;
        let route = decision::route_write(&self.log, &self.policy.routing, before, cap, backends.as_deref());
        // Offers are counted whether or not there is a capacity: INFO shows the peak.
        a.partition_offered[p] = a.partition_offered[p].saturating_add(1);
        a.partition_peak[p] = a.partition_peak[p].max(before.saturating_add(1));
        let name = &self.layout.shards[p].name;
        self.note_breach(&mut a, || format!("partition {name}"), before, cap);
        let chosen = route.backend_offered().zip(backends.as_deref()).map(|(b, loads)| loads[usize::from(b)]);
        if let Some(chosen) = chosen {
            let n = usize::from(chosen.node);
            a.backend_offered[n] = a.backend_offered[n].saturating_add(1);
            a.backend_peak[n] = a.backend_peak[n].max(chosen.load_per_tick.saturating_add(1));
            let unit = || format!("backend node {}", chosen.node);
            self.note_breach(&mut a, unit, chosen.load_per_tick, chosen.capacity_per_tick);
        }
        let window = |offered: u16, capacity: Option<u16>| {
            let capacity = capacity.expect("only a capacity throttles");
            format!(
                "was offered {} writes in this {window_ms} ms window, capacity {capacity}",
                offered.saturating_add(1)
            )
        };
        match (route, chosen) {
            (WriteRoute::Admitted { .. }, _) => Ok(()),
            (WriteRoute::PartitionThrottled, _) => {
                Err(format!("throttled: partition {name} {}", window(before, cap)))
            }
            (WriteRoute::Shed, _) => {
                Err("throttled: no ingest backend has room in this window (write shed)".into())
            }
            (WriteRoute::BackendThrottled { backend }, Some(c)) => Err(format!(
                "throttled: ingest backend node {backend} {}",
                window(c.load_per_tick, c.capacity_per_tick)
            )),
            (WriteRoute::BackendThrottled { .. }, None) => {
                unreachable!("a throttling backend was offered the write")
            }
        }
    }

    /// Count an offer above capacity (`capacity_respected` is violated by the first).
    fn note_breach(&self, a: &mut Admission, unit: impl FnOnce() -> String, before: u16, cap: Option<u16>) {
        if let Some(cap) = cap.filter(|&cap| before.saturating_add(1) > cap) {
            bump(&self.counters.capacity_breaches);
            if a.first_breach.is_none() {
                let at_ms = self.started.elapsed().as_millis();
                a.first_breach = Some(format!(
                    "{} offered {} > capacity {cap} at {at_ms} ms",
                    unit(),
                    before.saturating_add(1)
                ));
            }
        }
    }

    /// A partition or backend whose background load alone is above its capacity breaches it
    /// in every window, whether or not a client write is ever offered to it (the models'
    /// `background_breach`, which holds from the first tick): counted once, at start.
    fn note_background_breaches(&self) {
        let mut a = self.admission.lock().expect("admission lock");
        for (p, s) in self.layout.shards.iter().enumerate() {
            let background = self.partition_background[p];
            if background > 0 {
                let unit = || format!("partition {} by background load", s.name);
                self.note_breach(&mut a, unit, background - 1, self.partition_capacity_per_window);
            }
        }
        if self.layout.backends_modelled() {
            for n in 0..self.links.len() as NodeId {
                let base_load = self.layout.node_base_load(n);
                if base_load > 0 {
                    let unit = || format!("backend node {n} by base load");
                    self.note_breach(&mut a, unit, base_load - 1, self.layout.node_capacity(n));
                }
            }
        }
    }

    /// Any frame from `node`, a reply after its deadline or a heartbeat's pong included, is
    /// proof of life (`model::coordinator::heard_from`): the link calls this as it reads one.
    fn heard_from(&self, node: NodeId) {
        let mut membership = self.membership.lock().unwrap_or_else(|p| p.into_inner());
        let state = &mut membership.nodes[usize::from(node)];
        state.health = crate::policy::detector::health_after_hearing_from();
        state.last_heard = Instant::now();
    }

    /// `node` was asked and had not answered by the request's deadline: the detector's verdict
    /// on that (`health_after_deadline_miss`; coupled detection takes it as death). A node
    /// declared dead here is considered for eviction at once, as the models do, rather than
    /// at the next detector tick.
    fn missed_deadline(self: &Arc<Self>, node: NodeId) {
        let mut membership = self.membership.lock().expect("membership lock");
        let state = &mut membership.nodes[usize::from(node)];
        let was_dead = state.health == Health::Dead;
        if let Some(health) =
            decision::health_after_deadline_miss(&self.log, node, self.policy.failure_detection)
        {
            state.health = health;
        }
        let died = !was_dead && state.health == Health::Dead;
        let holds = membership.holds(node);
        drop(membership);
        if died && holds {
            self.consider_evictions();
        }
    }

    /// Send `request` to every member; collect answers until `enough` says stop or every
    /// member answered or failed. Each request has the ack deadline, so this ends by then.
    async fn fan_out(
        self: &Arc<Self>,
        members: &[Member],
        request: NodeRequest,
        mut enough: impl FnMut(Member, &NodeReply) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + self.ack_timeout();
        let (tx, mut rx) = mpsc::channel(members.len().max(1));
        for &member in members {
            let (this, tx, request) = (Arc::clone(self), tx.clone(), request.clone());
            tokio::spawn(async move {
                let result = this.links[usize::from(member.node)].request(request, deadline).await;
                match result {
                    Err(LinkError::Deadline) => {
                        this.missed_deadline(member.node);
                        let _ = tx.send((member, result)).await;
                    }
                    Err(LinkError::Unreachable(_)) => {
                        // The caller learns at once; the detector, as in the models, only at
                        // the deadline that the node (unreachable now) misses.
                        let _ = tx.send((member, result)).await;
                        tokio::time::sleep_until(deadline).await;
                        this.missed_deadline(member.node);
                    }
                    // Answered: the link already told the detector.
                    Ok(_) | Err(LinkError::Node(_)) => {
                        let _ = tx.send((member, result)).await;
                    }
                }
            });
        }
        drop(tx);
        let mut failures = Vec::new();
        while let Some((member, result)) = rx.recv().await {
            match result {
                Ok(reply) => {
                    if enough(member, &reply) {
                        return failures;
                    }
                }
                Err(e) => failures.push(format!("node {}: {e}", member.node)),
            }
        }
        failures
    }

    /// Store `value` at `version` on the replica set; Ok once a write quorum acked in time.
    async fn replicate(
        self: &Arc<Self>,
        shard: u8,
        key: &[u8],
        version: u64,
        value: &StoredValue,
    ) -> Result<(), String> {
        let w = self.policy.write_quorum;
        let (members, _in_flight) = self.begin_write(shard);
        let request = NodeRequest::Replicate { key: key.to_vec(), version, value: value.clone() };
        let mut acks = 0;
        let mut reached = false;
        let failures = self
            .fan_out(&members, request, |member, reply| {
                if member.caught_up && matches!(reply, NodeReply::Stored { .. }) {
                    acks += 1;
                }
                reached = decision::quorum_reached(&self.log, acks, w);
                reached
            })
            .await;
        if reached {
            return Ok(());
        }
        Err(format!(
            "write quorum not reached: {acks} of {w} acks within replica_ack_timeout {} ms ({})",
            self.policy.replica_ack_timeout_ticks,
            failures.join("; ")
        ))
    }

    /// SET or DEL (`value` = None): a new version, or the token's version for a retry.
    pub async fn write(
        self: &Arc<Self>,
        key: &[u8],
        value: StoredValue,
        token: Option<&[u8]>,
    ) -> Result<(), String> {
        let shard = self.partition_of(key);
        if let Err(e) = self.admit_write(shard) {
            bump(&self.counters.writes_throttled);
            bump(&self.counters.writes_failed);
            return Err(e);
        }
        let next = match self.new_version() {
            Ok(next) => next,
            Err(e) => {
                bump(&self.counters.writes_failed);
                return Err(format!("cannot reserve versions: {e}"));
            }
        };
        let version = match token {
            None => next,
            Some(token) => {
                let mut tokens = self.tokens.lock().expect("tokens lock");
                let known = tokens.version_of(token, key);
                let version = decision::version_for_attempt(
                    &self.log,
                    self.policy.retry.idempotency_tokens,
                    known,
                    next,
                );
                tokens.remember(token.to_vec(), key.to_vec(), version);
                version
            }
        };
        let result = self.replicate(shard, key, version, &value).await;
        bump(if result.is_ok() { &self.counters.writes_acked } else { &self.counters.writes_failed });
        result
    }

    /// A quorum read: the newest value among `read_quorum` caught-up members, written back to
    /// a write quorum first if fewer than that many of them hold it.
    pub async fn read(self: &Arc<Self>, key: &[u8]) -> Result<StoredValue, String> {
        let result = self.read_inner(key).await;
        bump(if result.is_ok() { &self.counters.reads_ok } else { &self.counters.reads_failed });
        result
    }

    async fn read_inner(self: &Arc<Self>, key: &[u8]) -> Result<StoredValue, String> {
        let r = self.policy.read_quorum;
        let shard = self.partition_of(key);
        let members = self.members(shard);
        let mut replies: Vec<(u64, StoredValue)> = Vec::new();
        let failures = self
            .fan_out(&members, NodeRequest::Read { key: key.to_vec() }, |member, reply| {
                if let (true, NodeReply::Value { version, value }) = (member.caught_up, reply) {
                    replies.push((*version, value.clone()));
                }
                decision::quorum_reached(&self.log, replies.len(), r)
            })
            .await;
        if replies.len() < usize::from(r) {
            return Err(format!(
                "read quorum not reached: {} of {r} replies within replica_ack_timeout {} ms ({})",
                replies.len(),
                self.policy.replica_ack_timeout_ticks,
                failures.join("; ")
            ));
        }
        let (version, value) = decision::read_result(&self.log, &replies).expect("a quorum is never empty");
        let holders = replies.iter().filter(|(v, _)| *v == version).count();
        if version > 0 && !decision::quorum_reached(&self.log, holders, self.policy.write_quorum) {
            self.replicate(shard, key, version, &value)
                .await
                .map_err(|e| format!("read repair failed: {e}"))?;
            bump(&self.counters.read_repairs);
        }
        Ok(value)
    }

    /// Every heartbeat interval, as `model::coordinator::on_heartbeat`: under independent
    /// detection each node's health from its silence since the last frame heard from it, then
    /// a ping to every node, then evictions. A ping's pong counts whenever it arrives (the
    /// link reports it); nothing waits for it. Under coupled detection the pings only let a
    /// node declared dead be heard again.
    async fn detector_loop(self: Arc<Self>) {
        let interval = self.probe_interval();
        let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if self.policy.failure_detection == FailureDetection::Independent {
                let mut membership = self.membership.lock().expect("membership lock");
                let now = Instant::now();
                for (node, state) in membership.nodes.iter_mut().enumerate() {
                    let silence_ms =
                        u32::try_from(now.duration_since(state.last_heard).as_millis()).unwrap_or(u32::MAX);
                    state.health = decision::health_from_silence(
                        &self.log,
                        node as NodeId,
                        silence_ms,
                        self.policy.suspect_after_ticks,
                        self.policy.dead_after_ticks,
                    );
                }
            }
            for link in &self.links {
                let link = Arc::clone(link);
                // Own task: dialling a node that is down must not hold up the detector.
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(interval, link.send_only(NodeRequest::Heartbeat)).await;
                });
            }
            self.consider_evictions();
        }
    }

    /// For each dead member of each partition, ask the eviction policy; an eviction swaps in
    /// the replacement, which starts its catch-up copy of that partition.
    fn consider_evictions(self: &Arc<Self>) {
        let mut membership = self.membership.lock().expect("membership lock");
        for shard in 0..membership.shards.len() {
            // While a change of this partition catches up, its caught-up members are its copy
            // sources and the holders of the writes only they and the replaced member have:
            // they are not evicted until it ended (the models leave a partition with a join
            // alone). A dead replacement that has not caught up may still be.
            let dead_members: Vec<Member> = membership.shards[shard]
                .members
                .iter()
                .filter(|m| membership.nodes[usize::from(m.node)].health == Health::Dead)
                .copied()
                .collect();
            for Member { node: dead, caught_up, .. } in dead_members {
                // Checked per member: an eviction just made here starts a change too.
                if caught_up && membership.shards[shard].catching_up > 0 {
                    continue;
                }
                let view = ClusterView {
                    dead_nodes: membership.nodes.iter().filter(|n| n.health == Health::Dead).count(),
                    total_nodes: membership.nodes.len(),
                    evictions_in_progress: membership.evictions_in_progress,
                };
                let members = &membership.shards[shard].members;
                let candidates: Vec<Candidate> = (0..membership.nodes.len())
                    .map(|n| Candidate {
                        node: n as NodeId,
                        zone: self.zones[n],
                        health: membership.nodes[n].health,
                        is_member: members.iter().any(|m| usize::from(m.node) == n),
                    })
                    .collect();
                match decision::decide_eviction(
                    &self.log,
                    dead,
                    self.policy.eviction,
                    view,
                    self.zones[usize::from(dead)],
                    &candidates,
                ) {
                    EvictionDecision::Evict { replacement } => {
                        let s = &mut membership.shards[shard];
                        let undo = (s.members.clone(), s.epoch);
                        let epoch = s.replace(dead, replacement, Change::Eviction);
                        membership.epoch += 1;
                        if let Err(e) = self.save_membership(&membership) {
                            membership.epoch -= 1;
                            membership.shards[shard].undo(undo.0, undo.1);
                            eprintln!("replicheck store: node {dead} not evicted: {e}");
                            continue;
                        }
                        membership.evictions_in_progress += 1;
                        membership.last_suppressed = None;
                        bump(&self.counters.evictions);
                        bump(&self.counters.membership_changes);
                        let name = &self.layout.shards[shard].name;
                        eprintln!(
                            "replicheck store: evicted node {dead} from partition {name}, replacing it with node {replacement}"
                        );
                        tokio::spawn(Arc::clone(self).catch_up(
                            shard as u8,
                            replacement,
                            Change::Eviction,
                            epoch,
                        ));
                    }
                    EvictionDecision::Suppressed(why) => {
                        membership.last_suppressed = Some(format!("node {dead}: {}", config_name(&why)));
                    }
                }
            }
        }
    }

    /// Every `rebalance_interval` ms, ask the rebalancer for a move of a partition.
    async fn rebalance_loop(self: Arc<Self>) {
        let r = self.policy.rebalance.clone().expect("started only when rebalancing is enabled");
        assert!(r.interval_ticks > 0, "the policy loader rejects a zero rebalance_interval");
        let interval = Duration::from_millis(u64::from(r.interval_ticks));
        let mut cooldowns = vec![Cooldown::default(); self.layout.shards.len()];
        let log = self.log.with_actor("rebalancer");
        loop {
            tokio::time::sleep(interval).await;
            self.consider_move(&log, &r, &mut cooldowns);
        }
    }

    /// The node loads as `model::coordinator::node_loads` computes them: a node carries the
    /// size of every partition it holds (as a member, caught up or not), and is slow if it
    /// holds a hot partition and its compaction debt is over the threshold.
    fn node_loads(&self, log: &DecisionLog, membership: &Membership) -> Vec<NodeLoad> {
        let f = &self.load;
        (0..self.links.len() as NodeId)
            .map(|n| {
                let held: Vec<usize> = (0..membership.shards.len())
                    .filter(|&k| membership.shards[k].members.iter().any(|m| m.node == n))
                    .collect();
                let debt = LoadFacts::of(&f.node_compaction_debt_pct, n);
                let held_pct: u16 = held.iter().map(|&k| u16::from(self.layout.shards[k].size_pct)).sum();
                let hosts_hot = held.iter().any(|&k| self.layout.shards[k].hot);
                NodeLoad {
                    node: n,
                    disk_pct: u16::from(LoadFacts::of(&f.node_disk_used_pct, n)) + held_pct,
                    compaction_debt_pct: debt,
                    slow: decision::is_slow(log, n, hosts_hot, debt, f.slow_compaction_debt_pct),
                }
            })
            .collect()
    }

    /// One rebalancer round. A partition rests during its cooldown and while a membership
    /// change of it (eviction or move) is still catching up.
    fn consider_move(self: &Arc<Self>, log: &DecisionLog, r: &Rebalance, cooldowns: &mut [Cooldown]) {
        let mut membership = self.membership.lock().expect("membership lock");
        let now = Instant::now();
        let nodes = self.node_loads(log, &membership);
        let shards: Vec<ShardLoad> = (0..membership.shards.len())
            .map(|k| ShardLoad {
                shard: k as u8,
                holders: membership.shards[k].members.iter().map(|m| m.node).collect(),
                size_pct: self.layout.shards[k].size_pct,
                hot: self.layout.shards[k].hot,
                resting: cooldowns[k].resting_until.is_some_and(|until| now < until)
                    || membership.shards[k].catching_up > 0,
            })
            .collect();
        let Some(m) = decision::choose_move(log, &nodes, &shards, &r.policy) else { return };
        let k = usize::from(m.shard);
        let cooldown = &mut cooldowns[k];
        cooldown.len_ms = decision::next_cooldown_ticks(
            log,
            m.shard,
            cooldown.len_ms,
            r.move_cooldown_ticks,
            r.cooldown_backoff,
            r.cooldown_max_ticks,
        );
        cooldown.resting_until = Some(now + Duration::from_millis(u64::from(cooldown.len_ms)));
        let s = &mut membership.shards[k];
        let undo = (s.members.clone(), s.epoch);
        let epoch = s.replace(m.from, m.to, Change::Move { from: m.from });
        membership.epoch += 1;
        if let Err(e) = self.save_membership(&membership) {
            membership.epoch -= 1;
            membership.shards[k].undo(undo.0, undo.1);
            eprintln!("replicheck store: partition {} not moved: {e}", self.layout.shards[k].name);
            return;
        }
        membership.moves_in_progress += 1;
        bump(&self.counters.moves);
        bump(&self.counters.membership_changes);
        eprintln!(
            "replicheck store: moving partition {} from node {} to node {}",
            self.layout.shards[k].name, m.from, m.to
        );
        tokio::spawn(Arc::clone(self).catch_up(m.shard, m.to, Change::Move { from: m.from }, epoch));
    }

    fn end_change(&self, shard: u8, change: Change) {
        let mut membership = self.membership.lock().expect("membership lock");
        let s = &mut membership.shards[usize::from(shard)];
        assert!(s.catching_up > 0, "a change ends only once");
        s.catching_up -= 1;
        let counter = match change {
            Change::Eviction => &mut membership.evictions_in_progress,
            Change::Move { .. } => &mut membership.moves_in_progress,
        };
        assert!(*counter > 0, "a change ends only once");
        *counter -= 1;
    }

    /// Copy every key of partition `shard` from its caught-up members (and, for a move, the
    /// node it moves away from) to `node`, then let it count toward quorums.
    async fn catch_up(self: Arc<Self>, shard: u8, node: NodeId, change: Change, epoch: u64) {
        // Writes that began before the change still count the replaced member's ack: wait
        // until they have ended, so that every such write that was acked is on a remaining
        // member by the time that member is copied. Each ends by its ack deadline.
        let waited_max = Instant::now() + self.ack_timeout() + Duration::from_millis(WRITE_END_SLACK_MS);
        loop {
            let before = self.membership.lock().expect("membership lock").shards[usize::from(shard)]
                .writes_before(epoch);
            if before == 0 {
                break;
            }
            if Instant::now() >= waited_max {
                // Not expected: every request has the ack deadline. Copy anyway rather than
                // leave the partition changing forever.
                eprintln!(
                    "replicheck store: {before} writes outlived their ack deadline; catching up anyway"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(WRITE_END_POLL_MS)).await;
        }
        loop {
            let members = self.members(shard);
            if !members.iter().any(|m| m.node == node && m.joined_epoch == epoch) {
                // Evicted before it caught up (perhaps picked again since: that change has
                // a task of its own).
                self.end_change(shard, change);
                return;
            }
            let mut sources: Vec<NodeId> = members.iter().filter(|m| m.caught_up).map(|m| m.node).collect();
            if let Change::Move { from } = change {
                // With one replica, the node the partition leaves is the only copy.
                if !sources.contains(&from) {
                    sources.push(from);
                }
            }
            // Every source that answers is copied; a read quorum of them (all, if fewer) is
            // enough, as in the models: a source that died must not hold the change forever,
            // now that its partition's caught-up members are not evicted while it lasts.
            let needed = decision::copies_needed(&self.log, self.policy.read_quorum, sources.len());
            let mut copied = 0;
            for &source in &sources {
                match self.copy_partition(shard, source, node).await {
                    Ok(()) => copied += 1,
                    Err(e) => eprintln!("replicheck store: catch-up of node {node} from node {source}: {e}"),
                }
            }
            // No source at all (one replica, evicted): nothing can be copied, as before.
            if sources.is_empty() || decision::quorum_reached(&self.log, copied, needed) {
                // Not counted toward quorums until saved: a restart would not count it.
                if let Err(e) = self.mark_caught_up(shard, node, epoch) {
                    eprintln!("replicheck store: catch-up of node {node} not recorded: {e}");
                    tokio::time::sleep(self.probe_interval()).await;
                    continue;
                }
                self.end_change(shard, change);
                return;
            }
            tokio::time::sleep(self.probe_interval()).await;
        }
    }

    /// Count `node` (joined at `epoch`, if still a member) toward quorums, once saved.
    fn mark_caught_up(&self, shard: u8, node: NodeId, epoch: u64) -> Result<(), String> {
        let mut membership = self.membership.lock().expect("membership lock");
        let s = &mut membership.shards[usize::from(shard)];
        let Some(slot) = s.members.iter().position(|m| m.node == node && m.joined_epoch == epoch) else {
            return Ok(());
        };
        s.members[slot].caught_up = true;
        membership.epoch += 1;
        if let Err(e) = self.save_membership(&membership) {
            membership.epoch -= 1;
            membership.shards[usize::from(shard)].members[slot].caught_up = false;
            return Err(e);
        }
        bump(&self.counters.catchups_completed);
        Ok(())
    }

    /// Copy `source`'s keys of partition `shard` to `target` (a node keeps every partition it
    /// holds in one key space; the partition of each key is decided as for a request).
    async fn copy_partition(&self, shard: u8, source: NodeId, target: NodeId) -> Result<(), String> {
        let log = self.log.with_actor("catch-up");
        let mut after: Option<Vec<u8>> = None;
        loop {
            let deadline = Instant::now() + self.ack_timeout();
            let scan = NodeRequest::Scan { after: after.clone(), limit: SCAN_ENTRIES_MAX };
            let entries = match self.links[usize::from(source)].request(scan, deadline).await {
                Ok(NodeReply::Entries { entries }) => entries,
                Ok(other) => return Err(format!("unexpected scan reply {other:?}")),
                Err(e) => return Err(format!("scan: {e}")),
            };
            let Some(last) = entries.last() else { return Ok(()) };
            after = Some(last.0.clone());
            // A page's writes go out together, so the target commits them in few fsyncs.
            let deadline = Instant::now() + self.ack_timeout();
            let mut copies = tokio::task::JoinSet::new();
            for (key, version, value) in entries {
                if self.partition_of_with(&log, &key) != shard {
                    continue;
                }
                let link = Arc::clone(&self.links[usize::from(target)]);
                copies.spawn(async move {
                    link.request(NodeRequest::Replicate { key, version, value }, deadline).await
                });
            }
            while let Some(copied) = copies.join_next().await {
                copied.map_err(|e| format!("copy task: {e}"))?.map_err(|e| format!("copy: {e}"))?;
                bump(&self.counters.keys_copied);
            }
        }
    }

    /// The INFO reply's text.
    pub fn info(&self) -> String {
        let membership = self.membership.lock().expect("membership lock");
        let p = &self.policy;
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = write!(
            out,
            "# Server\r\nreplicheck_version:{}\r\nuptime_in_seconds:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            self.started.elapsed().as_secs()
        );
        let _ = write!(
            out,
            "# Replication\r\nreplication_factor:{}\r\nwrite_quorum:{}\r\nread_quorum:{}\r\nreplica_ack_timeout_ms:{}\r\nfailure_detection:{}\r\nmembership_epoch:{}\r\n",
            p.replication_factor, p.write_quorum, p.read_quorum, p.replica_ack_timeout_ticks, config_name(&p.failure_detection),
            membership.epoch
        );
        let member_list = |members: &[Member]| -> String {
            let names: Vec<String> = members
                .iter()
                .map(|m| if m.caught_up { m.node.to_string() } else { format!("{}(catching_up)", m.node) })
                .collect();
            names.join(",")
        };
        // `members`: the first partition's replica set (the only one unless there are more).
        let _ = write!(out, "members:{}\r\n", member_list(&membership.shards[0].members));
        let _ = write!(out, "partitions:{}\r\n", membership.shards.len());
        for (k, s) in membership.shards.iter().enumerate() {
            let _ = write!(
                out,
                "partition{k}:name={},members={}\r\n",
                self.layout.shards[k].name,
                member_list(&s.members).replace(',', ";")
            );
        }
        for (n, state) in membership.nodes.iter().enumerate() {
            let role = if membership.holds(n as NodeId) { "member" } else { "spare" };
            let link = self.links[n].stats();
            let _ = write!(
                out,
                "node{n}:addr={},role={role},health={},last_heard_ms_ago={},max_silence_ms={},max_round_trip_ms={},late_replies={},zone={}\r\n",
                self.links[n].addr(),
                config_name(&state.health),
                state.last_heard.elapsed().as_millis(),
                link.max_silence_ms,
                link.max_round_trip_ms,
                link.late_replies,
                self.zones[n]
            );
        }
        let _ = write!(out, "evictions_in_progress:{}\r\n", membership.evictions_in_progress);
        let _ = write!(out, "moves_in_progress:{}\r\n", membership.moves_in_progress);
        let rebalancer = match &p.rebalance {
            Some(r) => format!("every {} ms, scoring {}", r.interval_ticks, config_name(&r.policy.scoring)),
            None => "off".into(),
        };
        let _ = write!(out, "rebalancer:{rebalancer}\r\n");
        if let Some(why) = &membership.last_suppressed {
            let _ = write!(out, "last_eviction_suppressed:{why}\r\n");
        }
        drop(membership);
        self.write_routing_info(&mut out);
        let _ = write!(
            out,
            "\r\n# Stats\r\nwrites_acked:{}\r\nwrites_failed:{}\r\nwrites_throttled:{}\r\ncapacity_breaches:{}\r\nreads_ok:{}\r\nreads_failed:{}\r\nread_repairs:{}\r\nevictions:{}\r\ncatchups_completed:{}\r\nkeys_copied:{}\r\nmembership_changes:{}\r\nmoves:{}\r\nnext_version:{}\r\n",
            get(&c.writes_acked),
            get(&c.writes_failed),
            get(&c.writes_throttled),
            get(&c.capacity_breaches),
            get(&c.reads_ok),
            get(&c.reads_failed),
            get(&c.read_repairs),
            get(&c.evictions),
            get(&c.catchups_completed),
            get(&c.keys_copied),
            get(&c.membership_changes),
            get(&c.moves),
            self.versions.lock().expect("versions lock").next,
        );
        out
    }

    /// INFO's routing section: placement, capacities per window, and per partition and
    /// backend the most writes offered in one window (background load included).
    fn write_routing_info(&self, out: &mut String) {
        let a = self.admission.lock().expect("admission lock");
        let r = &self.policy.routing;
        let cap = |c: Option<u16>| c.map_or("unlimited".to_string(), |c| c.to_string());
        let _ = write!(
            out,
            "\r\n# Routing\r\nplacement:{}\r\nupload_planner:{}\r\nspill_threshold_permille:{}\r\nwrite_shard_suffixes:{}\r\ncapacity_window_ms:{}\r\npartition_capacity_per_window:{}\r\n",
            config_name(&r.placement),
            config_name(&r.upload_planner),
            r.spill_threshold_permille,
            r.write_shard_suffixes,
            self.layout.window_ms,
            cap(self.partition_capacity_per_window)
        );
        for (k, s) in self.layout.shards.iter().enumerate() {
            let _ = write!(
                out,
                "partition{k}_load:name={},background_per_window={},peak_offered={}\r\n",
                s.name, self.partition_background[k], a.partition_peak[k]
            );
        }
        if self.layout.backends_modelled() {
            for n in 0..self.links.len() {
                let node = n as NodeId;
                let _ = write!(
                    out,
                    "backend{n}_load:capacity_per_window={},base_load_per_window={},peak_offered={}\r\n",
                    cap(self.layout.node_capacity(node)),
                    self.layout.node_base_load(node),
                    a.backend_peak[n]
                );
            }
        }
        if let Some(breach) = &a.first_breach {
            let _ = write!(out, "first_capacity_breach:{breach}\r\n");
        }
    }

    /// Accept clients until the listener fails.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(Arc::clone(&self).serve_client(stream));
        }
    }

    async fn serve_client(self: Arc<Self>, mut stream: TcpStream) {
        let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            // Execute every complete command in the buffer, answering in order.
            let mut out = Vec::new();
            let mut close = false;
            loop {
                match resp::parse_command(&buf, self.value_bytes_max) {
                    Ok(Some((args, used))) => {
                        buf.drain(..used);
                        if args.is_empty() {
                            continue;
                        }
                        let (reply, quit) = self.execute(&args).await;
                        out.extend_from_slice(&reply);
                        if quit {
                            close = true;
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        out.extend_from_slice(&e.reply());
                        close = true;
                        break;
                    }
                }
            }
            if !out.is_empty() && stream.write_all(&out).await.is_err() {
                return;
            }
            if close {
                return;
            }
            debug_assert!(buf.len() <= self.value_bytes_max + CLIENT_BUFFER_SLACK_BYTES);
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
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
/// An enum as the policy files and INFO spell it (`coupled`, `no_replacement`), not as Rust
/// does (`Coupled`, `NoReplacement`).
fn config_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(window: u64, offered: u16) -> Admission {
        Admission {
            window,
            partition_offered: vec![offered],
            backend_offered: vec![offered],
            partition_peak: vec![offered],
            backend_peak: vec![offered],
            first_breach: None,
        }
    }

    #[test]
    fn a_window_resets_offers_only_when_it_moves_forward() {
        let mut a = admission(6, 3);
        a.enter_window(6);
        assert_eq!((a.window, a.partition_offered[0], a.backend_offered[0]), (6, 3, 3));
        // A writer that read the clock in window 5 must not wipe window 6's offers.
        a.enter_window(5);
        assert_eq!((a.window, a.partition_offered[0], a.backend_offered[0]), (6, 3, 3));
        a.enter_window(7);
        assert_eq!((a.window, a.partition_offered[0], a.backend_offered[0]), (7, 0, 0));
        assert_eq!(a.partition_peak[0], 3, "peaks outlive their window");
    }
}
