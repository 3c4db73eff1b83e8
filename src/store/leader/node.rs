//! A leader-family storage node: its own OS process (`replicheck store leader-node --id N
//! --data-dir DIR`) running node N's replica machine on the cluster's spec and policy. It
//! listens where the spec says, prints `listening ADDR` once it does, and runs until killed.
//!
//! Time: the machine counts 1 ms ticks; every millisecond of real time the node fires the
//! timers that are due, then lets one tick pass, as the timed world does per tick.

use super::committer::{Batch, Committer};
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
/// Steps (messages and timers) whose commit is not written yet, at most (timers that fall
/// due meanwhile may add a few): what arrives during an fsync is stepped and shares the next
/// commit (group commit), and at this many the node stops taking messages until one ends.
pub(super) const BATCH_STEPS_MAX: usize = 256;

/// Where a node writes its commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Commits {
    /// On a thread of their own, while the node steps on (`committer`): a heartbeat is
    /// answered during a slow fsync (a node with a slow disk is slow, not silent). The node's
    /// process.
    Background,
    /// In the node's step loop: `store sim`, whose run may not depend on a thread's timing.
    Inline,
}

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
        let link = std::sync::Arc::new(mesh);
        serve(me, cfg, db, link, shard_names, &node_dir, inbox, Commits::Background).await
    })
}

/// Node `me`'s replica on `db` (in `node_dir`), stepping what arrives in `inbox` and sending
/// through `link`, until `inbox` closes or a step cannot be persisted: the node's process, and
/// `store sim`'s simulated node.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve(
    me: NodeId,
    cfg: Resolved,
    db: ReplicaDb,
    link: std::sync::Arc<dyn LeaderLink>,
    shard_names: Vec<String>,
    node_dir: &Path,
    inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>,
    commits: Commits,
) -> Result<(), String> {
    let primary_epochs = node_dir.join(super::PRIMARY_EPOCHS_FILE);
    let committer = match commits {
        Commits::Background => {
            Some(Committer::start(format!("node-{me}-commits"), std::sync::Arc::clone(&link))?)
        }
        Commits::Inline => None,
    };
    NodeLoop {
        me,
        cfg,
        db,
        mesh: link,
        shard_names,
        stale_logged: Default::default(),
        primary_epochs,
        accepted: Default::default(),
        committer,
        held: Vec::new(),
        steps_held: 0,
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
    /// With [`Commits::Background`]; else commits are written in the step loop.
    committer: Option<Committer>,
    /// The sends of the steps since the last batch was committed or queued: they leave once
    /// what those steps changed is durable.
    held: Vec<(Endpoint, mesh::LeaderMsg)>,
    /// Steps since the last batch was committed or queued.
    steps_held: usize,
}

impl NodeLoop {
    async fn run(mut self, mut inbox: mpsc::Receiver<(Endpoint, mesh::LeaderMsg)>) -> Result<(), String> {
        let mut out = Outbox::default();
        let mut replica = match self.db.durable().cloned() {
            Some(durable) => Replica::restart(&self.cfg, self.me, &durable, &self.db, &mut out),
            None => Replica::<LeaderData>::new(&self.cfg, self.me),
        };
        self.take_step(&mut out);
        self.commit(&replica)?;
        // Asleep until a lag timer may be due: an idle node costs next to nothing.
        let mut clock = Clock::new();
        loop {
            let wake = clock.wake(replica.quiet_ticks().map(u32::from));
            let room = self.committer.as_ref().map_or(0, Committer::unwritten_steps) < BATCH_STEPS_MAX;
            // In a fixed order, so that `store sim` gives the same run for the same seed.
            tokio::select! {
                biased;
                _ = async { self.committer.as_ref().expect("enabled only with one").written().await },
                    if self.committer.is_some() =>
                {
                    if let Some(e) = self.committer.as_ref().and_then(Committer::failed) {
                        return Err(self.unpersisted(e));
                    }
                }
                received = inbox.recv(), if room => {
                    let Some((src, msg)) = received else {
                        self.commit(&replica)?;
                        if let Some(committer) = self.committer.take() {
                            committer.finish().await.map_err(|e| self.unpersisted(e))?;
                        }
                        return Ok(());
                    };
                    // Time first, so that the step sees the moment it happens at.
                    clock.catch_up(&mut Running { node: &mut self, replica: &mut replica })?;
                    replica.on_msg(&self.cfg, &mut self.db, src, msg, &mut out);
                    self.take_step(&mut out);
                    // What is already waiting is stepped too, and committed with it.
                    let unwritten = self.committer.as_ref().map_or(0, Committer::unwritten_steps);
                    while unwritten + self.steps_held < BATCH_STEPS_MAX {
                        let Ok((src, msg)) = inbox.try_recv() else { break };
                        replica.on_msg(&self.cfg, &mut self.db, src, msg, &mut out);
                        self.take_step(&mut out);
                    }
                    self.commit(&replica)?;
                }
                _ = tokio::time::sleep_until(wake) => {
                    clock.catch_up(&mut Running { node: &mut self, replica: &mut replica })?;
                    self.commit(&replica)?;
                }
            }
        }
    }

    /// Commit what the steps held so far changed, and let their sends go once it is durable:
    /// queued for the commit thread, or written here without one. Sends of steps that changed
    /// nothing go at once when nothing queued before is still unwritten.
    fn commit(&mut self, replica: &Replica<LeaderData>) -> Result<(), String> {
        let staged = self.db.stage(&replica.durable());
        let steps = std::mem::take(&mut self.steps_held);
        match &self.committer {
            Some(committer) if staged.is_some() || committer.unwritten_steps() > 0 => {
                if staged.is_some() || !self.held.is_empty() {
                    let sends = std::mem::take(&mut self.held);
                    committer.queue(Batch { staged, sends, steps: steps.max(1) });
                }
                return Ok(());
            }
            // Everything queued before is written and sent.
            Some(_) => {}
            None => {
                if let Some(staged) = staged {
                    staged.write().map_err(|e| self.unpersisted(e))?;
                }
            }
        }
        for (dst, msg) in std::mem::take(&mut self.held) {
            self.mesh.send(dst, msg);
        }
        Ok(())
    }

    fn unpersisted(&self, e: String) -> String {
        format!("node {}: cannot persist a step (nothing it decided was sent): {e}", self.me)
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

    /// A step's outputs: its sends held for after its commit, its events logged. A heartbeat's
    /// answer leaves at once: it says the node is up, nothing of what it stores.
    fn take_step(&mut self, out: &mut Outbox<LeaderData>) {
        self.steps_held += 1;
        for (dst, msg) in out.sends.drain(..) {
            if matches!(msg, crate::protocol::Msg::Pong) {
                self.mesh.send(dst, msg);
            } else {
                self.held.push((dst, msg));
            }
        }
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

/// A node's replica on the clock: a timer fires as a step of its own, committed with the
/// steps around it.
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
        self.node.take_step(&mut out);
        Ok(())
    }

    fn quiet_ticks(&self) -> Option<u32> {
        self.replica.quiet_ticks().map(u32::from)
    }

    fn tick(&mut self) -> bool {
        self.replica.tick();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::leader::LeaderMsg as Leader;
    use crate::protocol::Msg;
    use crate::store::leader::Spec;
    use std::net::SocketAddr;
    use std::time::Duration;

    /// Every send, in the order the node made it.
    struct Recorder(std::sync::Mutex<mpsc::UnboundedSender<(Endpoint, mesh::LeaderMsg)>>);

    impl LeaderLink for Recorder {
        fn send(&self, to: Endpoint, msg: mesh::LeaderMsg) {
            let _ = self.0.lock().unwrap().send((to, msg));
        }
    }

    async fn next_send(
        sent: &mut mpsc::UnboundedReceiver<(Endpoint, mesh::LeaderMsg)>,
        within: Duration,
    ) -> Option<mesh::LeaderMsg> {
        tokio::time::timeout(within, sent.recv()).await.ok().flatten().map(|(_, msg)| msg)
    }

    /// A node whose disk stalls still answers heartbeats, and sends nothing that a commit it
    /// waits for holds (its role's ack) until the disk is back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_heartbeat_is_answered_while_a_commit_stalls() {
        let dir = tempfile::tempdir().unwrap();
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let spec = Spec {
            cluster_id: 1,
            partitions: 1,
            replication_factor: Some(3),
            node_zones: vec![0; 3],
            nodes: vec![unbound; 3],
            manager: unbound,
            replicas: vec![vec![0, 1, 2]],
            routes: Vec::new(),
            model: None,
        };
        let (cfg, _) = spec.config(dir.path()).unwrap();
        let node_dir = dir.path().join("node-0");
        let db = ReplicaDb::open(&node_dir, 1, 1).unwrap();
        let disk = db.database();
        let (inbox, received) = mpsc::channel(16);
        let (recorder, mut sent) = mpsc::unbounded_channel();
        let link = std::sync::Arc::new(Recorder(std::sync::Mutex::new(recorder)));
        let names = vec!["p0".to_string()];
        let node = tokio::spawn(async move {
            serve(0, cfg, db, link, names, &node_dir, received, Commits::Background).await
        });
        let manager = Endpoint::Coordinator(0);
        inbox.send((manager, Msg::Ping)).await.unwrap();
        assert_eq!(
            next_send(&mut sent, Duration::from_secs(5)).await,
            Some(Msg::Pong),
            "a heartbeat on a free disk"
        );

        // The disk stalls: a write transaction held elsewhere keeps the node's commit waiting.
        let (stalled, release) = std::sync::mpsc::channel::<()>();
        let (holding, held) = std::sync::mpsc::channel::<()>();
        let stall = std::thread::spawn(move || {
            let txn = disk.begin_write().unwrap();
            holding.send(()).unwrap();
            let _ = release.recv();
            drop(txn);
        });
        held.recv().unwrap();
        let promote = Leader::Promote { shard: 0, epoch: 1, in_sync: 0b111 };
        inbox.send((manager, Msg::Leader(promote))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        inbox.send((manager, Msg::Ping)).await.unwrap();
        assert_eq!(
            next_send(&mut sent, Duration::from_secs(3)).await,
            Some(Msg::Pong),
            "the heartbeat is answered during the stalled commit, before the role's ack"
        );
        assert_eq!(
            next_send(&mut sent, Duration::from_millis(300)).await,
            None,
            "the role's ack waits for its commit"
        );

        stalled.send(()).unwrap();
        stall.join().unwrap();
        assert_eq!(
            next_send(&mut sent, Duration::from_secs(5)).await,
            Some(Msg::Leader(Leader::RoleAck { shard: 0, epoch: 1 })),
            "the role's ack once the disk is back"
        );
        drop(inbox);
        node.await.unwrap().unwrap();
        let reopened = ReplicaDb::open(&dir.path().join("node-0"), 1, 1).unwrap();
        let shard =
            reopened.durable().and_then(|d| d.shards[0].clone()).expect("the promotion was persisted");
        assert_eq!((shard.epoch, shard.role), (1, crate::protocol::leader::Role::Primary));
    }
}
