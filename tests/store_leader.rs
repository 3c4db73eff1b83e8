//! The leader family's store (`store up --replication leader`), as a user runs it: node
//! processes running the replica machine, the coordinator running the failover manager.
//!
//! - A primary's node SIGKILLed: the manager promotes an in-sync follower in a new epoch, and
//!   every write acknowledged before is read back through the new primary.
//! - 20 cycles of SIGKILL on the primary's node, another node and the coordinator (`store up`,
//!   whose nodes die with it), under load: every key's history, with final reads, is
//!   linearizable (seed printed; rerun with `REPLICHECK_KILL_SEED=<seed>`).
//! - A primary frozen (SIGSTOP) with a write on its way, deposed, then thawed: with fencing
//!   its late ack is refused; with `fencing = false` the coordinator lets it through and
//!   reports `single_primary` violated.

#[path = "support/store_proc.rs"]
mod store_proc;

#[path = "support/linearizable.rs"]
mod linearizable;

#[path = "support/kill_client.rs"]
mod kill_client;
use kill_client::{client_loop, History, KEYS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use replicheck::lincheck::register::{RegisterInput, RegisterOutput};
use replicheck::lincheck::Operation;
use replicheck::store::coordinator::resp::Client;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store_proc::{free_port, signal_pid, StoreProc};

const POLICY: &str = r#"
replication = "leader"
replication_factor = 3
acks = "in_sync"
min_in_sync = 2
replica_lag_timeout = "500ms"
failure_detection = "independent"
heartbeat_interval = "100ms"
suspect_after = "300ms"
dead_after = "400ms"
replica_ack_timeout = "1s"
"#;

fn info(addr: SocketAddr) -> String {
    Client::connect_timeout(addr, Duration::from_secs(2)).and_then(|mut c| c.info()).unwrap_or_default()
}

/// `partition_s0:epoch=E,primary=P,...` from INFO.
fn route(info: &str, partition: &str) -> Option<(u64, usize)> {
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("partition_{partition}:")))?;
    let field = |name: &str| {
        line.split(',').find_map(|f| f.strip_prefix(&format!("{name}="))).and_then(|v| v.parse().ok())
    };
    Some((field("epoch")?, field("primary")? as usize))
}

fn stat(info: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(dir: &std::path::Path, policy: &str, port: u16, extra: &[&str]) -> StoreProc {
    let path = dir.join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    let mut args = vec!["--nodes", "3", "--policy", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    StoreProc::start(&dir.join("data"), port, &args)
}

#[test]
fn a_killed_primary_is_replaced_by_an_in_sync_follower_that_has_every_acked_write() {
    let dir = tempfile::tempdir().unwrap();
    let up = start(dir.path(), POLICY, 0, &[]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap();
    for i in 0..50 {
        c.set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes(), None).unwrap();
    }
    assert_eq!(route(&info(up.addr), "s0"), Some((0, 0)), "node 0 is the first primary");
    signal_pid(up.node_pids[0], libc::SIGKILL);
    wait_until(Duration::from_secs(10), "promotion", || {
        route(&info(up.addr), "s0").is_some_and(|(e, p)| e == 1 && p != 0)
    });
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap();
    for i in 0..50 {
        assert_eq!(c.get(format!("k{i}").as_bytes()).unwrap(), Some(format!("v{i}").into_bytes()), "k{i}");
    }
    // Two replicas in sync are left: min_in_sync = 2 still takes writes.
    c.set(b"after", b"failover", None).unwrap();
    assert_eq!(c.get(b"after").unwrap(), Some(b"failover".to_vec()));
    let info = info(up.addr);
    assert_eq!(stat(&info, "promotions"), 1, "{info}");
    assert!(info.contains("node_0:dead"), "{info}");
    // A token is refused: the primary keeps no token table.
    let refused = c.call(&[b"SET", b"a", b"1", b"TOKEN", b"t"]);
    assert!(format!("{refused:?}").contains("no TOKEN"), "{refused:?}");
}

#[test]
fn primary_node_and_coordinator_kills_lose_no_acked_write_and_history_is_linearizable() {
    let seed: u64 =
        std::env::var("REPLICHECK_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261203);
    println!("store_leader seed {seed} (rerun with REPLICHECK_KILL_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let started = Instant::now();
    let mut up = start(dir.path(), POLICY, port, &[]);
    let addr = up.addr;
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::new()));
    let clients: Vec<_> = (0..4u64)
        .map(|client| {
            let (stop, history) = (Arc::clone(&stop), Arc::clone(&history));
            std::thread::spawn(move || {
                let mine = client_loop(client, addr, epoch, seed, &stop);
                history.lock().unwrap().extend(mine);
            })
        })
        .collect();
    let (mut node_kills, mut primary_kills, mut promotions) = (0, 0, 0);
    for cycle in 0..20 {
        std::thread::sleep(Duration::from_millis(rng.random_range(100..400)));
        // Two cycles in three kill the primary's node, and wait for the failover (or not);
        // one in three of those kills a second node, which leaves one replica: writes are
        // refused (min_in_sync = 2) until the coordinator's restart brings every node back.
        if rng.random_range(0..3) > 0 {
            let Some((epoch_before, primary)) = route(&info(addr), "s0") else { continue };
            signal_pid(up.node_pids[primary], libc::SIGKILL);
            (node_kills, primary_kills) = (node_kills + 1, primary_kills + 1);
            if rng.random_bool(0.7) {
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline
                    && route(&info(addr), "s0").is_none_or(|(e, _)| e == epoch_before)
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
            }
            if rng.random_range(0..3) == 0 {
                let other = (primary + rng.random_range(1..3)) % 3;
                signal_pid(up.node_pids[other], libc::SIGKILL);
                node_kills += 1;
                std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
            }
        }
        promotions += stat(&info(addr), "promotions");
        up.signal(libc::SIGKILL);
        up.wait_exit(Duration::from_secs(10));
        up = start(dir.path(), POLICY, port, &[]);
        assert_eq!(up.addr, addr, "cycle {cycle}: the same client port");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let final_route = route(&info(addr), "s0").unwrap();
    println!(
        "20 coordinator kills, {node_kills} node kills ({primary_kills} primaries), {promotions} promotions, now epoch {} on node {}, {:?}",
        final_route.0,
        final_route.1,
        started.elapsed()
    );
    assert!(promotions >= 5, "the failovers are what this test is about: {promotions} promotions");
    let mut history = std::mem::take(&mut *history.lock().unwrap());
    let mut reader = Client::connect_timeout(addr, Duration::from_secs(10)).unwrap();
    for key in KEYS {
        let call_ns = epoch.elapsed().as_nanos() as u64;
        // Right after a start the manager may still be telling the replicas their roles.
        let deadline = Instant::now() + Duration::from_secs(10);
        let value = loop {
            match reader.get(key.as_bytes()) {
                Ok(value) => break value,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("final read of {key}: {e}; again");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("final read of {key}: {e}"),
            }
        };
        let read = value.map(|b| String::from_utf8(b).unwrap().parse::<u64>().unwrap());
        let op = Operation {
            client: u64::MAX,
            call_ns,
            return_ns: Some(epoch.elapsed().as_nanos() as u64),
            input: RegisterInput::Read,
            output: Some(RegisterOutput::Read(read)),
        };
        history.push((key.to_string(), op));
    }
    let acked = history.iter().filter(|(_, op)| op.output == Some(RegisterOutput::WriteOk)).count();
    let unknown = history.iter().filter(|(_, op)| op.return_ns.is_none()).count();
    println!("{} operations: {acked} acked writes, {unknown} of unknown outcome", history.len());
    assert!(acked >= 200, "too little load to mean anything: {acked} acked writes");
    linearizable::assert_every_key_linearizable(seed, history);
}

/// Node 0 (the first primary) frozen with a write on its way to it; once node 1 is promoted
/// and has acked a write of its own, node 0 thaws and takes the first write as the primary of
/// epoch 0 (it has not heard of epoch 1 yet, unless node 1's append of the second write
/// reaches it first: then it has, and the attempt is tried again). Returns the first write's
/// outcome and INFO at the end.
fn deposed_primary_acks(fencing: bool) -> Option<(Result<(), String>, String)> {
    let policy = format!(
        r#"
replication = "leader"
replication_factor = 2
acks = "leader"
fencing = {fencing}
failure_detection = "independent"
heartbeat_interval = "100ms"
suspect_after = "600ms"
dead_after = "600ms"
replica_ack_timeout = "10s"
replica_lag_timeout = "10s"
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let up = start(dir.path(), &policy, 0, &[]);
    let addr = up.addr;
    let mut c = Client::connect_timeout(addr, Duration::from_secs(5)).unwrap();
    c.set(b"k", b"first", None).unwrap();
    signal_pid(up.node_pids[0], libc::SIGSTOP);
    let late = std::thread::spawn(move || {
        let mut c = Client::connect_timeout(addr, Duration::from_secs(5)).unwrap();
        c.set_timeout(Some(Duration::from_secs(20))).unwrap();
        c.set(b"k", b"late", None).map_err(|e| e.to_string())
    });
    wait_until(Duration::from_secs(10), "promotion of node 1", || route(&info(addr), "s0") == Some((1, 1)));
    c.set(b"k", b"new", None).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    signal_pid(up.node_pids[0], libc::SIGCONT);
    let outcome = late.join().unwrap();
    let info = info(addr);
    // Decisive: node 0 took the write as the primary of epoch 0 and acked it, and the
    // coordinator either let the ack through (reported) or refused it (fencing). Otherwise
    // node 0 had heard of epoch 1 first (node 1's append came first: refused as a follower),
    // or the write left after the failover and went to node 1: try again.
    let late_acks = stat(&info, "late_epoch_acks");
    let decisive = match &outcome {
        Ok(()) => late_acks == 1,
        Err(e) => e.contains("fencing") && late_acks == 0,
    };
    decisive.then_some((outcome, info))
}

fn first_decisive(fencing: bool) -> (Result<(), String>, String) {
    (0..5)
        .find_map(|_| deposed_primary_acks(fencing))
        .expect("in 5 attempts the deposed primary took the write as primary once")
}

#[test]
fn without_fencing_a_deposed_primarys_late_ack_gets_through_and_is_reported() {
    let (outcome, info) = first_decisive(false);
    assert_eq!(outcome, Ok(()), "acked by the deposed primary:\n{info}");
    assert_eq!(stat(&info, "late_epoch_acks"), 1, "{info}");
}

#[test]
fn with_fencing_a_deposed_primarys_late_ack_is_refused() {
    let (outcome, info) = first_decisive(true);
    let error = outcome.expect_err("fenced");
    assert!(error.contains("fencing"), "{error}");
    assert_eq!(stat(&info, "late_epoch_acks"), 0, "{info}");
}

/// `store up` on `data` with `args` that must refuse to start: its exit code and stderr.
fn refused(data: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--port", "0", "--data-dir"])
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_leader_directory_and_a_quorum_directory_refuse_each_other_and_unsupported_flags_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (leader, quorum) = (dir.path().join("leader"), dir.path().join("quorum"));
    drop(StoreProc::start(&leader, 0, &["--nodes", "3", "--replication", "leader"]));
    drop(StoreProc::start(&quorum, 0, &["--nodes", "3"]));
    let (code, stderr) = refused(&leader, &["--nodes", "3"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("leader.json: this data directory holds a leader-family cluster"), "{stderr}");
    let (code, stderr) = refused(&quorum, &["--nodes", "3", "--replication", "leader"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("holds a quorum-family cluster"), "{stderr}");
    let (code, stderr) = refused(&leader, &["--nodes", "4", "--replication", "leader"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("was created with 3 nodes"), "{stderr}");
    let (code, stderr) =
        refused(&dir.path().join("new"), &["--replication", "leader", "--coordinators", "2"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--coordinators: not with replication = \"leader\""), "{stderr}");
    // A duration the store's 16-bit millisecond timers cannot count names its file and key.
    let long = dir.path().join("long.toml");
    std::fs::write(&long, "replication = \"leader\"\nreplica_lag_timeout = \"100s\"\n").unwrap();
    let (code, stderr) = refused(&dir.path().join("new"), &["--policy", long.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "long.toml: key `replica_lag_timeout` = 100000 ms: the store's timers count at most 65535 ms"
        ),
        "{stderr}"
    );
}

mod links {
    //! Link faults between the machines (every link through a proxy, as `store run` sets them).
    use super::{route, stat};
    use replicheck::protocol::Endpoint;
    use replicheck::store::coordinator::clients::ClientLimits;
    use replicheck::store::coordinator::resp::Client;
    use replicheck::store::leader::cluster::{LeaderCluster, LeaderConfig};
    use std::time::{Duration, Instant};

    fn cluster(dir: &std::path::Path, policy: &str) -> LeaderCluster {
        let policy_file = dir.join("policy.toml");
        std::fs::write(&policy_file, policy).unwrap();
        LeaderCluster::start(LeaderConfig {
            binary: env!("CARGO_BIN_EXE_replicheck").into(),
            node_count: 3,
            node_zones: vec![0; 3],
            partitions: 1,
            replication_factor: None,
            policy_file: Some(policy_file),
            data_dir: dir.join("data"),
            client_addr: "127.0.0.1:0".parse().unwrap(),
            clients: ClientLimits::default(),
            link_proxy_seed: Some(7),
            model: None,
        })
        .unwrap()
    }

    fn wait_info(c: &LeaderCluster, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = c.info();
            if done(&info) {
                return info;
            }
            assert!(Instant::now() < deadline, "no {what} within 10 s:\n{info}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn in_sync(info: &str) -> String {
        let line = info.lines().find(|l| l.starts_with("partition_s0:")).unwrap();
        line.split(',').find_map(|f| f.strip_prefix("in_sync=")).unwrap().to_string()
    }

    /// The primary cut off from the coordinator (both ways) while it still reaches its
    /// followers: the coordinator promotes a follower in epoch 1; once the cut heals, the old
    /// primary learns the new epoch, follows and catches up (it is in sync again, and a second
    /// failover onto it keeps every acknowledged write).
    #[test]
    fn a_primary_cut_off_from_the_coordinator_is_replaced_and_comes_back_as_a_follower() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cluster(dir.path(), super::POLICY);
        let mut client = Client::connect_timeout(c.client_addr(), Duration::from_secs(5)).unwrap();
        client.set(b"before", b"1", None).unwrap();
        c.set_partitioned(Endpoint::LEADER, Endpoint::Node(0), true);
        let info = wait_info(&c, "promotion", |i| route(i, "s0").is_some_and(|(e, p)| e == 1 && p != 0));
        let (_, new_primary) = route(&info, "s0").unwrap();
        client.set(b"during", b"2", None).unwrap();
        c.set_partitioned(Endpoint::LEADER, Endpoint::Node(0), false);
        wait_info(&c, "node 0 back in sync", |i| i.contains("node_0:alive") && in_sync(i).contains('0'));
        client.set(b"after", b"3", None).unwrap();
        c.kill(new_primary as u8).unwrap();
        wait_info(&c, "second promotion", |i| route(i, "s0").is_some_and(|(e, _)| e == 2));
        let mut client = Client::connect_timeout(c.client_addr(), Duration::from_secs(5)).unwrap();
        for (k, v) in [("before", "1"), ("during", "2"), ("after", "3")] {
            assert_eq!(client.get(k.as_bytes()).unwrap(), Some(v.as_bytes().to_vec()), "{k}");
        }
        assert_eq!(stat(&c.info(), "promotions"), 2);
        // Each primary recorded the epochs it took writes in (`single_primary` under store
        // run): node 0 in epoch 0, the first promoted node in epoch 1, and no epoch twice.
        let epochs = |n: u8| {
            let path = c.data_dir().join(format!("node-{n}")).join("primary-epochs");
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        assert!(epochs(0).lines().any(|l| l == "0 0"), "{}", epochs(0));
        assert!(epochs(new_primary as u8).lines().any(|l| l == "0 1"), "{}", epochs(new_primary as u8));
        assert_eq!(c.two_primaries().unwrap(), Vec::new());
    }

    /// A follower cut off from its primary leaves the in-sync set once it has been behind for
    /// `replica_lag_timeout`, and writes go on with the two left (`min_in_sync = 2`); healed,
    /// it catches up and is in sync again.
    #[test]
    fn a_follower_cut_off_from_its_primary_leaves_the_in_sync_set_and_rejoins() {
        let dir = tempfile::tempdir().unwrap();
        let c = cluster(dir.path(), super::POLICY);
        let mut client = Client::connect_timeout(c.client_addr(), Duration::from_secs(5)).unwrap();
        client.set(b"k", b"1", None).unwrap();
        assert_eq!(in_sync(&c.info()), "0|1|2");
        c.set_partitioned(Endpoint::Node(0), Endpoint::Node(2), true);
        // The write waits for node 2 until it leaves the set (500 ms), then is acked.
        let sent = Instant::now();
        client.set(b"k", b"2", None).unwrap();
        assert!(sent.elapsed() >= Duration::from_millis(400), "acked in {:?}", sent.elapsed());
        assert_eq!(in_sync(&c.info()), "0|1");
        c.set_partitioned(Endpoint::Node(0), Endpoint::Node(2), false);
        // A lagging follower catches up from the primary's next append (the protocol sends
        // none without a write).
        client.set(b"k", b"3", None).unwrap();
        wait_info(&c, "node 2 back in sync", |i| in_sync(i) == "0|1|2");
        assert_eq!(route(&c.info(), "s0"), Some((0, 0)), "no failover: the primary was never cut off");
    }
}

/// The replication factor is where the data is: a policy file that changes it is refused
/// before anything starts (the replicas would not be the ones the data is on).
#[test]
fn a_policy_that_changes_the_replication_factor_of_a_leader_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |rf: u8| {
        let path = dir.path().join(format!("rf{rf}.toml"));
        std::fs::write(&path, format!("replication = \"leader\"\nreplication_factor = {rf}\n")).unwrap();
        path
    };
    let (rf3, rf2) = (policy(3), policy(2));
    let data = dir.path().join("data");
    drop(StoreProc::start(&data, 0, &["--nodes", "3", "--policy", rf3.to_str().unwrap()]));
    let (code, stderr) = refused(&data, &["--nodes", "3", "--policy", rf2.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("rf2.toml: key `replication_factor` = 2: gives the partitions the replicas [[0, 1]]; this cluster was created with [[0, 1, 2]]"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let up = StoreProc::start(&data, 0, &["--nodes", "3", "--policy", rf3.to_str().unwrap()]);
    let info = info(up.addr);
    assert!(route(&info, "s0").is_some_and(|(epoch, _)| epoch == 0), "nothing failed over: {info}");
}
