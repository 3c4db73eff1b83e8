//! Catch-ups on a real cluster, with the bad interleavings forced by frame-level gates.
//!
//! 1. The catch-up of a replacement waits for the writes that began before its membership
//!    change. A write that began before node 1 was evicted replicates to the old replica set
//!    {0, 1, 2} and may be acked by node 1 and node 0. If the replacement's copy scanned node
//!    0 before that write was durable there (a node answers a scan while an earlier write
//!    still waits for its fsync), the replacement would miss an acked write, and once node 1
//!    is gone a read quorum of nodes 2 and 3 would not see it.
//!
//!    A gate in front of each of nodes 0, 1 and 2 (behind the cluster's own proxies) decides
//!    what each node sees and when:
//!    - node 1 stores and acks the write, then goes silent (its gate swallows every later
//!      request), so independent detection declares it dead and evicts it for the spare, 3;
//!    - node 2 never receives the write (its gate swallows that one request);
//!    - node 0's gate holds the write back until a catch-up scan of node 0 has been answered,
//!      then lets it through, so node 0's ack completes the write quorum {1, 0}. If no scan
//!      comes (a catch-up that waits for the write cannot scan before the write ended), the
//!      gate lets the write through after `NO_SCAN_RELEASE_MS`.
//!
//!    A catch-up that did not wait copies node 0 and node 2 without the write: with node 0
//!    and node 1 killed afterwards, the read from nodes 2 and 3 returns the old value. The
//!    waiting catch-up copies node 0 after the write ended there, so node 3 holds it.
//!
//! 2. A member that dies while a rebalancing move of its partition catches up is evicted only
//!    after the move's copy ended, and that copy completes from a read quorum of its sources
//!    although one of them is dead (see the test's comment).

#[path = "support/info.rs"]
mod info;

use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::layout::LoadFacts;
use replicheck::store::coordinator::resp::{Client, Reply};
use replicheck::store::node::wire::{read_frame, write_frame, Frame, NodeReply, NodeRequest};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long node 0's gate waits for a catch-up scan before it lets the held write through.
/// A catch-up that skips the wait scans within milliseconds of the eviction; a longer wait
/// here only makes the passing run slower, never a failure.
const NO_SCAN_RELEASE_MS: u64 = 1500;

/// What a gate does with the one `Replicate` of the watched key and value, or with scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Forward it; once its reply went back, swallow every later request (the node is silent).
    SilenceAfterReply,
    /// Drop it (the node never stores it; the request misses its deadline).
    Swallow,
    /// Keep it until `release`, then forward it.
    Hold,
    /// Keep the first catch-up `Scan` until `release` (the copy from this node stalls there).
    HoldFirstScan,
}

#[derive(Default)]
struct GateState {
    /// The watched request arrived (and was forwarded, dropped or held per the rules).
    seen: bool,
    /// Its reply went back to the coordinator.
    replied: bool,
    /// Request ids of the watched write and of scans, to recognise their replies.
    watched_ids: HashSet<u64>,
    scan_ids: HashSet<u64>,
    scans_seen: usize,
    scans_answered: usize,
    /// Held frames, and where to send them on release.
    held: Vec<(Frame<NodeRequest>, mpsc::UnboundedSender<Frame<NodeRequest>>)>,
    /// After `release` nothing more is held: a frame that arrives late is not stuck.
    released: bool,
}

/// A frame-level relay in front of one node.
#[derive(Clone)]
struct Gate {
    addr: SocketAddr,
    rules: Vec<Rule>,
    key: Vec<u8>,
    value: Vec<u8>,
    state: Arc<Mutex<GateState>>,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(
        runtime: &tokio::runtime::Runtime,
        upstream: SocketAddr,
        rules: &[Rule],
        key: &[u8],
        value: &[u8],
    ) -> Gate {
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("gate binds");
        let gate = Gate {
            addr: listener.local_addr().expect("gate address"),
            rules: rules.to_vec(),
            key: key.to_vec(),
            value: value.to_vec(),
            state: Arc::default(),
        };
        let accepting = gate.clone();
        runtime.spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                tokio::spawn(accepting.clone().relay(down, upstream));
            }
        });
        gate
    }

    fn has(&self, rule: Rule) -> bool {
        self.rules.contains(&rule)
    }

    fn is_watched(&self, request: &NodeRequest) -> bool {
        matches!(request, NodeRequest::Replicate { key, value: Some(value), .. }
            if *key == self.key && *value == self.value)
    }

    /// Relay one connection. When the node's side ends (it was killed), the coordinator's
    /// side is closed too, so its requests fail at once as on a direct connection.
    async fn relay(self, down: TcpStream, upstream: SocketAddr) {
        let Ok(up) = TcpStream::connect(upstream).await else { return };
        let (mut down_read, mut down_write) = down.into_split();
        let (mut up_read, mut up_write) = up.into_split();
        // One writer toward the node, so a released frame queues behind those sent before.
        let (to_node, mut outbox) = mpsc::unbounded_channel::<Frame<NodeRequest>>();
        tokio::spawn(async move {
            while let Some(frame) = outbox.recv().await {
                if write_frame(&mut up_write, &frame).await.is_err() {
                    return;
                }
            }
        });
        let replies = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(frame)) = read_frame::<NodeReply, _>(&mut up_read).await {
                let id = frame.id;
                if write_frame(&mut down_write, &frame).await.is_err() {
                    return;
                }
                // Recorded once the reply is on its way to the coordinator.
                let mut s = replies.lock();
                if s.watched_ids.contains(&id) {
                    s.replied = true;
                }
                if s.scan_ids.remove(&id) {
                    s.scans_answered += 1;
                }
            }
        });
        while let Ok(Some(frame)) = read_frame::<NodeRequest, _>(&mut down_read).await {
            let mut s = self.lock();
            if self.has(Rule::SilenceAfterReply) && s.replied {
                continue;
            }
            if matches!(frame.body, NodeRequest::Scan { .. }) {
                s.scan_ids.insert(frame.id);
                s.scans_seen += 1;
                if self.has(Rule::HoldFirstScan) && s.scans_seen == 1 && !s.released {
                    s.held.push((frame, to_node.clone()));
                    continue;
                }
            }
            if !s.seen && self.is_watched(&frame.body) {
                s.seen = true;
                s.watched_ids.insert(frame.id);
                if self.has(Rule::Swallow) {
                    continue;
                }
                if self.has(Rule::Hold) && !s.released {
                    s.held.push((frame, to_node.clone()));
                    continue;
                }
            }
            drop(s);
            if to_node.send(frame).is_err() {
                return;
            }
        }
    }

    fn holds(&self) -> usize {
        self.lock().held.len()
    }

    /// Forward the held frames (once).
    fn release(&self) {
        let mut s = self.lock();
        s.released = true;
        for (frame, to_node) in s.held.drain(..) {
            let _ = to_node.send(frame);
        }
    }
}

/// Poll `predicate` until it holds; panics naming `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut predicate: impl FnMut() -> bool) {
    let start = Instant::now();
    while !predicate() {
        assert!(start.elapsed() < limit, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Poll INFO until `predicate` holds; panics with the last INFO after `limit`.
fn wait_for_info(cluster: &Cluster, limit: Duration, what: &str, predicate: impl Fn(&str) -> bool) -> String {
    info::wait_for_info(limit, what, || cluster.info(), predicate)
}

/// Put a gate with `rules` between the cluster's proxy for `node` and the node; the
/// coordinator's link re-dials through it.
fn gate_node(
    cluster: &Cluster,
    runtime: &tokio::runtime::Runtime,
    node: u8,
    rules: &[Rule],
    key: &[u8],
    value: &[u8],
) -> Gate {
    let gate = Gate::start(runtime, cluster.node_addr(node), rules, key, value);
    cluster.proxy(node).set_upstream(gate.addr);
    cluster.proxy(node).cut_all();
    gate
}

/// SET, retried while the links re-dial through their gates (a cut link fails a write once).
fn set_once_links_are_up(c: &mut Client, key: &[u8], value: &[u8]) {
    let written = (0..100).any(|_| {
        let ok = c.call(&[b"SET", key, value]).unwrap() == Reply::Simple("OK".into());
        if !ok {
            std::thread::sleep(Duration::from_millis(20));
        }
        ok
    });
    assert!(written, "a write succeeds once the links are re-dialled");
}

/// Independent detection (a missed deadline is not a death), so node 2 missing the write's
/// deadline changes nothing; the ack timeout leaves the write in flight for the whole
/// eviction and the gate's wait for a scan.
const POLICY: &str = r#"
failure_detection = "independent"
heartbeat_interval = "50ms"
suspect_after = "300ms"
dead_after = "600ms"
replica_ack_timeout = "5s"
"#;

#[test]
fn an_acked_write_in_flight_across_an_eviction_reaches_the_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, POLICY).unwrap();
    let policy = store_policy(Some(&policy_path), Some(3), 4).expect("policy loads");
    assert_eq!((policy.write_quorum, policy.read_quorum), (2, 2), "the scenario assumes majorities of 3");
    let config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        4,
        policy,
        dir.path().join("data"),
    );
    let mut cluster = Cluster::start(config).expect("cluster starts");
    assert!(cluster.info().contains("members:0,1,2\r\n"));

    let (key, old, new) = (b"k".as_slice(), b"old".as_slice(), b"new".as_slice());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let gates: Vec<Gate> = [Rule::Hold, Rule::SilenceAfterReply, Rule::Swallow]
        .into_iter()
        .enumerate()
        .map(|(node, rule)| gate_node(&cluster, &runtime, node as u8, &[rule], key, new))
        .collect();
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    set_once_links_are_up(&mut c, key, old);

    let client_addr = cluster.client_addr();
    let writer = std::thread::spawn(move || {
        let mut c = Client::connect(client_addr).unwrap();
        c.call(&[b"SET", b"k", b"new"]).unwrap()
    });
    wait_until(Duration::from_secs(10), "write reaching the gates", || {
        gates[0].lock().seen && gates[2].lock().seen && gates[1].lock().replied
    });
    // Node 1 acked and is silent now: it is evicted for node 3 while the write is in flight.
    wait_for_info(&cluster, Duration::from_secs(10), "eviction of node 1", |info| {
        info.contains("joining=3(replaces 1)") || info.contains("members:0,2,3\r\n")
    });
    let scan_wait = Instant::now();
    while gates[0].lock().scans_answered == 0
        && scan_wait.elapsed() < Duration::from_millis(NO_SCAN_RELEASE_MS)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    gates[0].release();
    let reply = writer.join().unwrap();
    assert_eq!(reply, Reply::Simple("OK".into()), "acked by nodes 1 and 0");
    let info = wait_for_info(&cluster, Duration::from_secs(10), "catch-up of node 3", |info| {
        info.contains("catchups_completed:1\r\n")
    });
    assert!(info.contains("members:0,2,3\r\n"), "{info}");

    // Only nodes 2 and 3 remain to answer: the acked write must be on one of them.
    cluster.kill(1).unwrap();
    cluster.kill(0).unwrap();
    let got = c.call(&[b"GET", key]).unwrap();
    assert_eq!(
        got,
        Reply::Bulk(Some(new.to_vec())),
        "the acked write is lost: node 3 was copied before it ended (catch-up scans of node 0 \
         answered before the write: {})",
        gates[0].lock().scans_answered
    );
}

/// A rebalancing move of the partition from node 1 to node 3, with node 0 crashing while the
/// move catches up. Nodes 0..=2 are in zones 0..=2, node 3 in zone 1 and node 4 in zone 0, so
/// node 0's replacement is node 4 (never node 1, which holds the write). Node 1 is over the
/// disk watermark, so the rebalancer's first round moves the partition to node 3, the
/// emptiest, and then has nothing left to move.
const MOVE_POLICY: &str = r#"
failure_detection = "independent"
heartbeat_interval = "50ms"
suspect_after = "300ms"
dead_after = "600ms"
replica_ack_timeout = "5s"
rebalance_enabled = true
rebalance_interval = "6s"
disk_high_watermark = 80
"#;

/// A write acked by nodes 1 and 0 (node 2 never gets it) before the partition moves from node
/// 1 to node 3; node 0 crashes while node 3 catches up. The write is then only on node 1,
/// which the move copies from, and on the dead node 0.
///
/// Evicting node 0 while the move still catches up would start a second catch-up, of node 4,
/// from the caught-up members only (node 2): node 4 would miss the write, and with node 3 gone
/// the read quorum {2, 4} would return the old value. The coordinator leaves node 0 in place
/// until the move's copy (from nodes 2 and 1: a read quorum of its sources, node 0 being dead)
/// ended, then evicts it for node 4, which copies from nodes 3 and 2.
///
/// Forced by gates: node 0's gate holds the move's scan of node 0 until node 0 is killed, so
/// that copy fails; node 2's gate drops the write and holds the first scan of node 2 until
/// node 0 has been dead for a while, so the move's copy is still running when an eviction of
/// node 0 would start.
#[test]
fn a_member_that_dies_while_a_move_catches_up_is_evicted_after_it_without_losing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, MOVE_POLICY).unwrap();
    let policy = store_policy(Some(&policy_path), Some(3), 5).expect("policy loads");
    assert_eq!((policy.write_quorum, policy.read_quorum), (2, 2), "the scenario assumes majorities of 3");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        5,
        policy,
        dir.path().join("data"),
    );
    config.node_zones = vec![0, 1, 2, 1, 0];
    config.load = LoadFacts {
        node_disk_used_pct: vec![10, 90, 10, 0, 50],
        node_compaction_debt_pct: vec![0; 5],
        slow_compaction_debt_pct: 50,
    };
    let mut cluster = Cluster::start(config).expect("cluster starts");
    assert!(cluster.info().contains("members:0,1,2\r\n"));

    let (key, old, new) = (b"k".as_slice(), b"old".as_slice(), b"new".as_slice());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let gate0 = gate_node(&cluster, &runtime, 0, &[Rule::HoldFirstScan], key, new);
    let gate2 = gate_node(&cluster, &runtime, 2, &[Rule::Swallow, Rule::HoldFirstScan], key, new);
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    set_once_links_are_up(&mut c, key, old);
    assert_eq!(c.call(&[b"SET", key, new]).unwrap(), Reply::Simple("OK".into()), "acked by nodes 0 and 1");
    // Acked by nodes 0 and 1, the write may still be on its way to node 2's gate.
    wait_until(Duration::from_secs(10), "the write reaching node 2's gate", || gate2.lock().seen);
    let info = cluster.info();
    assert!(
        info.contains("moves:0\r\n"),
        "the setup took longer than the rebalance interval: the write should precede the move\n{info}"
    );

    wait_for_info(&cluster, Duration::from_secs(10), "move from node 1 to node 3", |info| {
        info.contains("joining=3(replaces 1)")
    });
    wait_until(Duration::from_secs(10), "the move's scan of node 0", || gate0.holds() == 1);
    cluster.kill(0).unwrap();
    wait_for_info(&cluster, Duration::from_secs(10), "node 0 declared dead", |info| {
        info.lines().any(|line| line.starts_with("node0:") && line.contains("health=dead"))
    });
    // Several detector rounds with node 0 dead while the move's copy is held at node 2.
    std::thread::sleep(Duration::from_millis(400));
    gate2.release();

    let info = wait_for_info(&cluster, Duration::from_secs(10), "both catch-ups", |info| {
        info.contains("catchups_completed:2\r\n") && info.contains("members:2,3,4\r\n")
    });
    assert!(info.contains("evictions:1\r\n") && info.contains("moves:1\r\n"), "{info}");
    // Nodes 2 and 4 form the only read quorum left: the acked write must be on one of them.
    cluster.kill(3).unwrap();
    cluster.kill(1).unwrap();
    let got = c.call(&[b"GET", key]).unwrap();
    assert_eq!(got, Reply::Bulk(Some(new.to_vec())), "the acked write is lost:\n{}", cluster.info());
}
