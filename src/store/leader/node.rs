//! A leader-family storage node: its own OS process (`replicheck store leader-node --id N
//! --data-dir DIR`) running node N's replica machine on the cluster's spec and policy. It
//! listens where the spec says, prints `listening ADDR` once it does, and runs until killed.
//!
//! Time: the machine counts 1 ms ticks; every millisecond of real time the node fires the
//! timers that are due, then lets one tick pass, as the timed world does per tick.

use super::mesh::{self, LeaderLink, Mesh};
use super::replica_db::ReplicaDb;
use super::{LeaderData, Spec};
use crate::config::Resolved;
use crate::policy::NodeId;
use crate::protocol::leader::{LeaderEvent, Replica, ReplicaTimer};
use crate::protocol::{Endpoint, Event, Outbox};
use crate::store::clock::{Clock, Clocked};
use std::io::Write;
use std::path::Path;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Messages received and not yet stepped at most; the connections wait beyond it.
pub(crate) const INBOX_MAX: usize = 4096;
/// Messages stepped before one commit at most (group commit: what arrived during the last
/// fsync shares the next one).
const BATCH_STEPS_MAX: usize = 256;

/// Run node `me` of the cluster in `data_dir` until killed; `listen_fd`: a listening socket
/// its parent bound on the node's address (else the node binds it).
pub fn run(me: NodeId, data_dir: &Path, listen_fd: Option<i32>) -> Result<(), String> {
    let spec = Spec::load(data_dir)?.ok_or_else(|| {
        format!("{}: no leader cluster here (`store up --replication leader` makes one)", data_dir.display())
    })?;
    let (cfg, layout) = spec.config(data_dir)?;
    let shard_names = layout.shards.iter().map(|s| s.name.clone()).collect();
    let listen = spec
        .addr(Endpoint::Node(me))
        .ok_or_else(|| format!("node {me}: the cluster has {} nodes", spec.node_count()))?;
    let node_dir = crate::store::cluster::datadir::node_dir(data_dir, me);
    let db = ReplicaDb::open(&node_dir, spec.cluster_id, spec.partitions)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = match listen_fd {
            Some(fd) => {
                // SAFETY: the parent passed this descriptor, a listening socket, for us alone.
                let l = unsafe { <std::net::TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                l.set_nonblocking(true)
                    .and_then(|_| TcpListener::from_std(l))
                    .map_err(|e| format!("listening socket {fd}: {e}"))?
            }
            None => crate::store::node::bind_with_retry(listen).await?,
        };
        let local = listener.local_addr().map_err(|e| format!("listener: {e}"))?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening {local}")
            .and_then(|_| stdout.flush())
            .map_err(|e| format!("stdout: {e}"))?;
        let (inbox_tx, inbox) = mpsc::channel(INBOX_MAX);
        tokio::spawn(mesh::listen(listener, Endpoint::Node(me), spec.cluster_id, inbox_tx));
        let addrs = spec.clone();
        let mesh =
            Mesh::new(Endpoint::Node(me), spec.cluster_id, move |e| addrs.route(Endpoint::Node(me), e));
        serve(me, cfg, db, std::sync::Arc::new(mesh), shard_names, &node_dir, inbox).await
    })
}

/// Node `me`'s replica on `db` (in `node_dir`), stepping what arrives in `inbox` and sending
/// through `link`, until `inbox` closes or a step cannot be persisted: the node's process, and
/// `store sim`'s simulated node.
pub(crate) async fn serve(
    me: NodeId,
    cfg: Resolved,
    db: ReplicaDb,
    link: std::sync::Arc<dyn LeaderLink>,
    shard_names: Vec<String>,
    node_dir: &Path,
    inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>,
) -> Result<(), String> {
    let primary_epochs = node_dir.join(super::PRIMARY_EPOCHS_FILE);
    NodeLoop {
        me,
        cfg,
        db,
        mesh: link,
        shard_names,
        stale_logged: Default::default(),
        primary_epochs,
        accepted: Default::default(),
    }
    .run(inbox)
    .await
}

struct NodeLoop {
    me: NodeId,
    cfg: Resolved,
    db: ReplicaDb,
    mesh: std::sync::Arc<dyn LeaderLink>,
    /// Each partition's name, for the log.
    shard_names: Vec<String>,
    /// Fencing refusals logged, once per partition and epoch.
    stale_logged: std::collections::BTreeSet<(u8, u64)>,
    /// `PRIMARY_EPOCHS_FILE`, and the partitions and epochs this process wrote to it.
    primary_epochs: std::path::PathBuf,
    accepted: std::collections::BTreeSet<(u8, u64)>,
}

impl NodeLoop {
    async fn run(mut self, mut inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>) -> Result<(), String> {
        let mut out = Outbox::default();
        let mut replica = match self.db.durable().cloned() {
            Some(durable) => Replica::restart(&self.cfg, self.me, &durable, &self.db, &mut out),
            None => Replica::<LeaderData>::new(&self.cfg, self.me),
        };
        self.finish(&replica, &mut out)?;
        // Asleep until a lag timer may be due: an idle node costs next to nothing.
        let mut clock = Clock::new();
        loop {
            let wake = clock.wake(replica.quiet_ticks().map(u32::from));
            // In a fixed order, so that `store sim` gives the same run for the same seed.
            tokio::select! {
                biased;
                received = inbox.recv() => {
                    let Some((src, msg)) = received else { return Ok(()) };
                    // Time first, so that the step sees the moment it happens at.
                    clock.catch_up(&mut Running { node: &mut self, replica: &mut replica })?;
                    replica.on_msg(&self.cfg, &mut self.db, src, msg, &mut out);
                    // What is already waiting is stepped too, and committed with it: the sends
                    // of every step wait for that one commit.
                    let mut sends = Vec::new();
                    self.take_step(&mut out, &mut sends);
                    for _ in 1..BATCH_STEPS_MAX {
                        let Ok((src, msg)) = inbox.try_recv() else { break };
                        replica.on_msg(&self.cfg, &mut self.db, src, msg, &mut out);
                        self.take_step(&mut out, &mut sends);
                    }
                    self.finish_batch(&replica, sends)?;
                }
                _ = tokio::time::sleep_until(wake) => {
                    clock.catch_up(&mut Running { node: &mut self, replica: &mut replica })?;
                }
            }
        }
    }

    /// After a step: persist what it changed, then send what it sent.
    fn finish(&mut self, replica: &Replica<LeaderData>, out: &mut Outbox<LeaderData>) -> Result<(), String> {
        let mut sends = Vec::new();
        self.take_step(out, &mut sends);
        self.finish_batch(replica, sends)
    }

    /// After steps whose sends are `sends`: persist what they changed, then send.
    fn finish_batch(
        &mut self,
        replica: &Replica<LeaderData>,
        sends: Vec<(Endpoint, mesh::LeaderMsg)>,
    ) -> Result<(), String> {
        self.db.commit(&replica.durable()).map_err(|e| {
            format!("node {}: cannot persist a step (nothing it decided was sent): {e}", self.me)
        })?;
        for (dst, msg) in sends {
            self.mesh.send(dst, msg);
        }
        Ok(())
    }

    /// Append `PARTITION EPOCH` to `PRIMARY_EPOCHS_FILE` (unbuffered: it survives the process's
    /// kill). A failure is logged: the record is for checking the store, not for serving.
    fn record_primary_epoch(&self, shard: u8, epoch: u64) {
        use std::io::Write as _;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.primary_epochs)
            .and_then(|mut f| f.write_all(format!("{shard} {epoch}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!(
                "replicheck store: node {}: cannot record {}: {e}",
                self.me,
                self.primary_epochs.display()
            );
        }
    }

    /// A step's outputs: its sends kept for after the commit, its events logged.
    fn take_step(&mut self, out: &mut Outbox<LeaderData>, sends: &mut Vec<(Endpoint, mesh::LeaderMsg)>) {
        sends.extend(out.sends.drain(..));
        for event in out.events.drain(..) {
            if let Event::Leader(LeaderEvent::WriteAccepted { shard, epoch, .. }) = event {
                if self.accepted.insert((shard, epoch)) {
                    self.record_primary_epoch(shard, epoch);
                }
                continue;
            }
            let Event::Leader(LeaderEvent::StaleRefused { shard, epoch, own, .. }) = event else { continue };
            if self.stale_logged.insert((shard, epoch)) {
                eprintln!(
                    "replicheck store: node {}: refused a message of partition {}'s epoch {epoch}, older than its epoch {own} (fencing)",
                    self.me,
                    self.shard_names[usize::from(shard)]
                );
            }
        }
    }
}

/// A node's replica on the clock: a timer fires as a step of its own, committed and sent.
struct Running<'a> {
    node: &'a mut NodeLoop,
    replica: &'a mut Replica<LeaderData>,
}

impl Clocked for Running<'_> {
    type Timer = ReplicaTimer;

    fn due(&self, out: &mut Vec<ReplicaTimer>) {
        self.replica.due(out);
    }

    fn fire(&mut self, timer: ReplicaTimer) -> Result<(), String> {
        let mut out = Outbox::default();
        self.replica.on_timer(&self.node.cfg, &self.node.db, timer, &mut out);
        self.node.finish(self.replica, &mut out)
    }

    fn quiet_ticks(&self) -> Option<u32> {
        self.replica.quiet_ticks().map(u32::from)
    }

    fn tick(&mut self) -> bool {
        self.replica.tick();
        true
    }
}
