//! 64 partitions in the store (a model keeps at most 4 shards; the store's machines keep
//! theirs inline up to that and on the heap beyond): `store up --partitions 64` serves in both
//! families, keys spread over the partitions, and a node killed while it holds a third of them
//! loses no acknowledged write. In the leader family that node is the primary of 21 or 22
//! partitions, all failed over in one step of the manager (more events and sends than a
//! model's step ever has).

#[path = "support/store_proc.rs"]
mod store_proc;
use replicheck::store::coordinator::resp::Client;
use std::time::{Duration, Instant};
use store_proc::{signal_pid, StoreProc};

const PARTITIONS: usize = 64;
const KEYS: usize = 256;

fn key(i: usize) -> String {
    format!("k{i}")
}

fn info(up: &StoreProc) -> String {
    Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap().info().unwrap()
}

fn write_all(up: &StoreProc, round: usize) {
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap();
    for i in 0..KEYS {
        c.set(key(i).as_bytes(), format!("{round}-{i}").as_bytes(), None)
            .unwrap_or_else(|e| panic!("SET {}: {e}", key(i)));
    }
}

/// Every key reads the value of `round` (a read may be retried while a failover is under way).
fn read_all(up: &StoreProc, round: usize) {
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap();
    for i in 0..KEYS {
        let deadline = Instant::now() + Duration::from_secs(15);
        let value = loop {
            match c.get(key(i).as_bytes()) {
                Ok(v) => break v,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("GET {} retried: {e}", key(i));
                    std::thread::sleep(Duration::from_millis(100));
                    c = Client::connect_timeout(up.addr, Duration::from_secs(5)).unwrap();
                }
                Err(e) => panic!("GET {}: {e}", key(i)),
            }
        };
        assert_eq!(value.as_deref(), Some(format!("{round}-{i}").as_bytes()), "{}", key(i));
    }
}

#[test]
fn the_quorum_store_serves_64_partitions_and_keeps_every_write_through_a_node_kill() {
    let dir = tempfile::tempdir().unwrap();
    let up = StoreProc::start(dir.path(), 0, &["--nodes", "4", "--partitions", "64"]);
    let text = info(&up);
    let partitions: Vec<&str> =
        text.lines().filter(|l| l.starts_with("partition") && l.contains(",members=")).collect();
    assert_eq!(partitions.len(), PARTITIONS, "{text}");
    write_all(&up, 1);
    // Node 0 holds a replica of 48 of the 64 partitions (round robin, RF 3 over 4 nodes).
    signal_pid(up.node_pids[0], libc::SIGKILL);
    read_all(&up, 1);
    write_all(&up, 2);
    read_all(&up, 2);
}

#[test]
fn the_leader_store_fails_over_every_partition_of_a_killed_primary_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "acks = \"in_sync\"\nmin_in_sync = 1\nfailure_detection = \"independent\"\nheartbeat_interval = \"100ms\"\n\
         suspect_after = \"300ms\"\ndead_after = \"300ms\"\nreplica_lag_timeout = \"300ms\"\nreplica_ack_timeout = \"1s\"\n",
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let data = dir.path().join("data");
    let args = ["--replication", "leader", "--nodes", "3", "--partitions", "64", "--policy", policy];
    let up = StoreProc::start(&data, 0, &args);
    let routes = |text: &str| -> Vec<(u64, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("partition_"))
            .map(|l| {
                let field =
                    |name: &str| l.split([':', ',']).find_map(|f| f.strip_prefix(name)).unwrap().to_string();
                (field("epoch=").parse().unwrap(), field("primary="))
            })
            .collect()
    };
    let before = routes(&info(&up));
    assert_eq!(before.len(), PARTITIONS);
    let primaried = before.iter().filter(|(_, p)| p == "0").count();
    assert!(primaried >= 21, "node 0 is the first primary of a third of the partitions: {before:?}");
    write_all(&up, 1);
    signal_pid(up.node_pids[0], libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let now = routes(&info(&up));
        if now.iter().all(|(_, p)| p != "0") {
            break now;
        }
        assert!(Instant::now() < deadline, "node 0 still primary somewhere: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let promoted = after.iter().filter(|(epoch, _)| *epoch == 1).count();
    assert_eq!(promoted, primaried, "every partition node 0 led moved to epoch 1: {after:?}");
    read_all(&up, 1);
    write_all(&up, 2);
    read_all(&up, 2);
}
