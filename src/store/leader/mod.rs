//! The leader family's store: `store up --replication leader`. The same machines the models
//! check (`protocol::leader`: a [`Replica`](crate::protocol::leader::Replica) per storage node,
//! the failover [`Manager`](crate::protocol::leader::Manager) in the coordinator) run over
//! real sockets, real time and redb:
//!
//! - every storage node is its own process (`store leader-node`, so that SIGKILL is real)
//!   running its replica machine: as primary of a partition it orders the writes and sends
//!   them to its followers itself, node to node (`node`);
//! - the coordinator runs the manager: it routes each client request to the partition's
//!   primary, judges nodes by the policy's detector and promotes a follower in a new epoch
//!   when a primary is judged dead (`manager`);
//! - every machine's messages travel as frames between processes (`mesh`); a message to a
//!   process that is down is dropped, as a crash drops what is in flight in the model;
//! - what a machine persists (a replica's data, epoch, role and in-sync set; the manager's
//!   epochs, primaries and in-sync sets) is durable before the step that changed it sends
//!   anything (`replica_db`, `manager`), which is the machines' contract.
//!
//! A data directory holds `leader.json` (the cluster's fixed facts: id, nodes, partitions,
//! addresses), `leader-policy.toml` (the policy the processes run), `manager-state` and
//! `node-N/replica.redb`; a quorum-family directory is refused and the reverse.

pub mod cluster;
mod committer;
pub(crate) mod manager;
pub(crate) mod mesh;
pub mod node;
pub(crate) mod replica_db;

use crate::config::{PolicyPatch, Resolved, SourcedPolicy};
use crate::policy::leader::Replication;
use crate::policy::NodeId;
use crate::protocol::{Data, Endpoint, Stored};
use crate::store::coordinator::layout::Layout;
use crate::store::coordinator::machine;
use crate::store::node::wire::StoredValue;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The leader store's data: byte-string keys and values, 64-bit versions and epochs, and a
/// catch-up that carries a partition's keys whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaderData;

impl Data for LeaderData {
    type Op = u64;
    type Key = Vec<u8>;
    type Value = StoredValue;
    type Version = u64;
    type Epoch = u64;
    /// The leader family keeps no token table (the policy refuses `idempotency_tokens`).
    type Token = ();
    type TokenId = ();
    type Snapshot = Vec<(Vec<u8>, Stored<LeaderData>)>;
    /// As many as the store's partitions (`layout::PARTITIONS_MAX`).
    type Shards<T: Clone + std::fmt::Debug + Eq + std::hash::Hash> = Vec<T>;

    fn client(_op: u64) -> u8 {
        0
    }

    fn token_id(_op: u64, _key: &Vec<u8>, _token: &()) -> Option<()> {
        None
    }
}

/// What every process of a leader cluster agrees on, fixed for the directory's life
/// (`DIR/leader.json`); the policy they run is `DIR/leader-policy.toml` beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub cluster_id: u64,
    pub partitions: usize,
    /// Over the policy file's `replication_factor`, as `--replication-factor` said.
    pub replication_factor: Option<u8>,
    /// One per node.
    pub node_zones: Vec<u8>,
    /// Where each node's replica listens for its messages.
    pub nodes: Vec<SocketAddr>,
    /// Where the manager listens for the replicas' messages.
    pub manager: SocketAddr,
    /// Each partition's replicas as the cluster was created (lowest id first): a policy whose
    /// `replication_factor` makes others is refused, since the data is where these are.
    pub replicas: Vec<Vec<crate::policy::NodeId>>,
    /// Links that go through a fault-injecting proxy (tests, `store run`): a sender dials
    /// `via` instead of the receiver. Written at every start (none for `store up`).
    #[serde(default)]
    pub routes: Vec<Route>,
    /// The model `store run` plays, where it plays one: its partitions and the manager's zone
    /// instead of `store up`'s round-robin layout with the manager in zone 0.
    #[serde(default)]
    pub model: Option<ModelPlacement>,
}

/// A model's placement, as `store run` gives it to a leader cluster: each partition's name and
/// replicas (the lowest-numbered is its primary in epoch 0, as in the checker), the nodes' names and
/// the zone of the manager (reads go to the nearest replica, failovers prefer its zone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPlacement {
    pub shards: Vec<(String, Vec<crate::policy::NodeId>)>,
    pub node_names: Vec<String>,
    pub manager_zone: u8,
}

impl ModelPlacement {
    /// The model's shards on `layout` (from `Layout::of_model`), the manager in `manager_zone`.
    pub fn of(layout: &Layout, manager_zone: u8) -> ModelPlacement {
        ModelPlacement {
            shards: layout.shards.iter().map(|s| (s.name.clone(), s.replicas.clone())).collect(),
            node_names: layout.node_names.clone(),
            manager_zone,
        }
    }
}

/// The link from `from` to `to` goes through `via`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub from: Endpoint,
    pub to: Endpoint,
    pub via: SocketAddr,
}

pub const SPEC_FILE: &str = crate::store::cluster::datadir::LEADER_SPEC_FILE;
/// In each node's directory: one line `PARTITION EPOCH` for each partition and epoch in which
/// the node took a client write as primary (the machine's `WriteAccepted`), written as it
/// happens, so that `store run` can ask `single_primary`'s first half of the nodes themselves.
pub const PRIMARY_EPOCHS_FILE: &str = "primary-epochs";

/// Each (partition, epoch) in which more than one node took writes as primary, with those
/// nodes, from every node's `PRIMARY_EPOCHS_FILE` (a node that never took a write has none).
pub fn two_primaries(data_dir: &Path, node_count: usize) -> Result<Vec<(u8, u64, Vec<NodeId>)>, String> {
    let mut by_epoch: std::collections::BTreeMap<(u8, u64), Vec<NodeId>> = Default::default();
    for n in 0..node_count as NodeId {
        let path = crate::store::cluster::datadir::node_dir(data_dir, n).join(PRIMARY_EPOCHS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        for line in text.lines() {
            let parsed = line.split_once(' ').and_then(|(p, e)| Some((p.parse().ok()?, e.parse().ok()?)));
            let Some(key) = parsed else {
                return Err(format!("{}: not `PARTITION EPOCH`: {line:?}", path.display()));
            };
            let nodes = by_epoch.entry(key).or_default();
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
    }
    Ok(by_epoch
        .into_iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|((p, e), nodes)| (p, e, nodes))
        .collect())
}
pub const POLICY_FILE: &str = "leader-policy.toml";

impl Spec {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(SPEC_FILE)
    }

    /// The directory's spec, if it has one.
    pub fn load(data_dir: &Path) -> Result<Option<Spec>, String> {
        let path = Spec::path(data_dir);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: not a leader cluster's description: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    pub fn save(&self, data_dir: &Path) -> Result<(), String> {
        let bytes = serde_json::to_vec_pretty(self).expect("a spec serializes");
        crate::store::coordinator::state::write_durably(&Spec::path(data_dir), &bytes)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Where `from` sends its messages for `to`: the link's proxy, or where `to` listens.
    pub fn route(&self, from: Endpoint, to: Endpoint) -> Option<SocketAddr> {
        match self.routes.iter().find(|r| r.from == from && r.to == to) {
            Some(r) => Some(r.via),
            None => self.addr(to),
        }
    }

    /// Where `to` listens for machine messages.
    pub fn addr(&self, to: Endpoint) -> Option<SocketAddr> {
        match to {
            Endpoint::Node(n) => self.nodes.get(usize::from(n)).copied(),
            Endpoint::Coordinator(0) => Some(self.manager),
            Endpoint::Coordinator(_) | Endpoint::Client(_) => None,
        }
    }

    /// `layout` (from `sourced`'s `replication_factor`) puts the partitions on the replicas the
    /// cluster was created with: its data is there.
    pub fn check_replicas(
        &self,
        sourced: &SourcedPolicy,
        replication_factor: u8,
        layout: &Layout,
    ) -> Result<(), String> {
        let replicas = replica_sets(layout);
        if replicas != self.replicas {
            return Err(format!(
                "{}: key `replication_factor` = {replication_factor}: gives the partitions the replicas {replicas:?}; this cluster was created with {:?} (its data is there): start it with the replication factor it was created with",
                sourced.origin("replication_factor"),
                self.replicas
            ));
        }
        Ok(())
    }

    /// The policy (`DIR/leader-policy.toml` with the spec's overrides, the leader family) and
    /// the scenario every process of the cluster runs, with a 1 ms tick.
    pub fn config(&self, data_dir: &Path) -> Result<(Resolved, Layout), String> {
        let sourced = policy_of(&data_dir.join(POLICY_FILE), self.replication_factor)?;
        let policy = sourced.resolve_ms_any_family()?;
        let layout = layout_of(
            &sourced,
            policy.replication_factor,
            self.partitions,
            self.node_count(),
            self.model.as_ref(),
        )?;
        self.check_replicas(&sourced, policy.replication_factor, &layout)?;
        let resolved = machine::resolved(
            &policy,
            &self.node_zones,
            &layout,
            &crate::store::coordinator::layout::LoadFacts::default(),
            &crate::store::coordinator::membership_default(self.partitions),
            &[self.model.as_ref().map_or(0, |m| m.manager_zone)],
        )?;
        Ok((resolved, layout))
    }
}

/// The partitions round-robin over the nodes with `replication_factor` replicas each, as
/// `store up` lays them out, or the model's (`store run`), whose replica sets must have that
/// many replicas each.
pub fn layout_of(
    sourced: &SourcedPolicy,
    replication_factor: u8,
    partitions: usize,
    node_count: usize,
    model: Option<&ModelPlacement>,
) -> Result<Layout, String> {
    if usize::from(replication_factor) > node_count {
        return Err(format!(
            "{}: key `replication_factor` = {replication_factor}: exceeds --nodes {node_count}",
            sourced.origin("replication_factor")
        ));
    }
    let mut layout = Layout::round_robin(partitions, node_count, replication_factor);
    if let Some(model) = model {
        if model.shards.len() != partitions {
            return Err(format!("the model has {} shards for {partitions} partitions", model.shards.len()));
        }
        for (shard, (name, replicas)) in layout.shards.iter_mut().zip(&model.shards) {
            if replicas.len() != usize::from(replication_factor) {
                return Err(format!(
                    "{}: key `replication_factor` = {replication_factor}: shard {name} has {} replicas",
                    sourced.origin("replication_factor"),
                    replicas.len()
                ));
            }
            shard.name = name.clone();
            shard.replicas = replicas.clone();
        }
        layout.node_names = model.node_names.clone();
    }
    layout.check(node_count, replication_factor)?;
    Ok(layout)
}

/// Each partition's replicas, lowest id first (its primary in epoch 0).
pub fn replica_sets(layout: &Layout) -> Vec<Vec<crate::policy::NodeId>> {
    layout
        .shards
        .iter()
        .map(|s| {
            let mut r = s.replicas.clone();
            r.sort_unstable();
            r
        })
        .collect()
}

/// The policy file at `path` (or the defaults where there is none) with `replication_factor`
/// overridden and the leader family chosen, as `store up --replication leader` runs it.
pub fn policy_of(path: &Path, replication_factor: Option<u8>) -> Result<SourcedPolicy, String> {
    let mut sourced = if path.exists() {
        crate::config::load_policy(path).map_err(|e| e.to_string())?
    } else {
        SourcedPolicy::default()
    };
    if let Some(rf) = replication_factor {
        let patch = PolicyPatch { replication_factor: Some(rf), ..Default::default() };
        sourced = sourced.then(&SourcedPolicy::new(patch, "--replication-factor"));
    }
    let leader = PolicyPatch { replication: Some(Replication::Leader), ..Default::default() };
    Ok(sourced.then(&SourcedPolicy::new(leader, "--replication")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_nodes_that_took_writes_as_primary_in_one_epoch_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let write = |n: NodeId, text: &str| {
            let node = crate::store::cluster::datadir::node_dir(dir.path(), n);
            std::fs::create_dir_all(&node).unwrap();
            std::fs::write(node.join(PRIMARY_EPOCHS_FILE), text).unwrap();
        };
        // Node 0 led partition 0 in epochs 0 and 2 (restarted: epoch 2 twice); node 1 in
        // epoch 1 and, wrongly, 2; node 2 led partition 1; node 3 never took a write.
        write(0, "0 0\n0 2\n0 2\n");
        write(1, "0 1\n0 2\n");
        write(2, "1 1\n");
        assert_eq!(two_primaries(dir.path(), 4).unwrap(), vec![(0, 2, vec![0, 1])]);
        write(2, "1 x\n");
        let e = two_primaries(dir.path(), 4).unwrap_err();
        assert!(e.ends_with("primary-epochs: not `PARTITION EPOCH`: \"1 x\""), "{e}");
    }
}
