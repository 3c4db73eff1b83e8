//! Failure detection and eviction on a real cluster: 4 nodes, replication factor 3, so node 3
//! is a spare. A killed member is detected by heartbeat silence, evicted, replaced by the
//! spare, which gets a catch-up copy before it counts toward quorums; the correlated-failure
//! breaker stops evictions when too many nodes look dead.

#[path = "support/info.rs"]
mod info;

use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::link::NodeLink;
use replicheck::store::coordinator::resp::{Client, Reply};
use replicheck::store::node::wire::{NodeReply, NodeRequest};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn start(dir: &tempfile::TempDir, policy_toml: &str) -> Cluster {
    start_zoned(dir, policy_toml, &[0; 4])
}

/// A cluster of `node_zones.len()` nodes, node `i` in zone `node_zones[i]`, RF 3.
fn start_zoned(dir: &tempfile::TempDir, policy_toml: &str, node_zones: &[u8]) -> Cluster {
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy_toml).unwrap();
    let policy = store_policy(Some(&policy_path), Some(3), node_zones.len()).expect("policy loads");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        node_zones.len(),
        policy,
        dir.path().join("data"),
    );
    config.node_zones = node_zones.to_vec();
    Cluster::start(config).expect("cluster starts")
}

/// Poll INFO until `predicate` holds; panics with the last INFO after `limit`.
fn wait_for_info(cluster: &Cluster, limit: Duration, what: &str, predicate: impl Fn(&str) -> bool) -> String {
    info::wait_for_info(limit, what, || cluster.info(), predicate)
}

const FAST_DETECTION: &str = r#"
failure_detection = "independent"
heartbeat_interval = "50ms"
suspect_after = "150ms"
dead_after = "300ms"
replica_ack_timeout = "300ms"
"#;

#[test]
fn a_dead_member_is_replaced_by_the_spare_after_a_catch_up_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(&dir, FAST_DETECTION);
    assert!(cluster.info().contains("members:0,1,2\r\n"));
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    for i in 0..300u32 {
        let reply = c.call(&[b"SET", format!("k{i}").as_bytes(), format!("v{i}").as_bytes()]).unwrap();
        assert_eq!(reply, Reply::Simple("OK".into()));
    }
    cluster.kill(1).unwrap();
    let info = wait_for_info(&cluster, Duration::from_secs(10), "replacement caught up", |info| {
        info.contains("members:0,2,3\r\n") && info.contains("catchups_completed:1")
    });
    assert!(info.contains("evictions:1\r\n"), "{info}");
    // INFO says what became of each node: the dead one was evicted, the spare is a member.
    assert!(info.contains("node1:addr=") && info.contains(",role=evicted,health=dead,"), "{info}");
    assert!(info.contains(",role=member,") && !info.contains(",role=spare,"), "{info}");
    // The replacement holds every key on its own disk, before any read could repair it.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let link = NodeLink::new(cluster.node_addr(3), cluster.cluster_id(), 3);
    for i in 0..300u32 {
        let read = NodeRequest::Read { key: format!("k{i}").into_bytes() };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        match runtime.block_on(link.request(read, deadline)).unwrap() {
            NodeReply::Value { version, value } => {
                assert!(version > 0);
                assert_eq!(value, Some(format!("v{i}").into_bytes()), "node 3, key k{i}");
            }
            other => panic!("node 3 answered {other:?}"),
        }
    }
    // Node 3 now holds everything: with node 0 down too, quorums come from nodes 2 and 3.
    cluster.kill(0).unwrap();
    for i in 0..300u32 {
        let reply = c.call(&[b"GET", format!("k{i}").as_bytes()]).unwrap();
        assert_eq!(reply, Reply::Bulk(Some(format!("v{i}").into_bytes())), "key k{i}");
    }
}

#[test]
fn the_replacement_is_the_spare_in_the_evicted_members_zone() {
    let dir = tempfile::tempdir().unwrap();
    // Members 0,1,2 in zones 0,1,2; spares 3 (zone 0) and 4 (zone 1). Without zones the
    // lowest spare, node 3, would replace node 1; with them, node 4 keeps zone 1 covered.
    let mut cluster = start_zoned(&dir, FAST_DETECTION, &[0, 1, 2, 0, 1]);
    assert!(cluster.info().contains("members:0,1,2\r\n"));
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    assert_eq!(c.call(&[b"SET", b"k", b"v"]).unwrap(), Reply::Simple("OK".into()));
    cluster.kill(1).unwrap();
    let info = wait_for_info(&cluster, Duration::from_secs(10), "replacement caught up", |info| {
        info.contains("catchups_completed:1")
    });
    assert!(info.contains("members:0,2,4\r\n"), "node 4 shares node 1's zone:\n{info}");
    assert!(info.contains("evictions:1\r\n"), "{info}");
}

#[test]
fn a_cluster_config_with_a_zone_per_node_missing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let policy = store_policy(None, Some(3), 4).expect("default policy");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        4,
        policy,
        dir.path().join("data"),
    );
    config.node_zones = vec![0, 1, 2];
    match Cluster::start(config) {
        Err(e) => assert!(
            matches!(&e, replicheck::store::StoreError::Input(m) if m.contains("node_zones has 3 entries for --nodes 4")),
            "{e}"
        ),
        Ok(_) => panic!("a cluster started with 3 zones for 4 nodes"),
    }
}

#[test]
fn the_breaker_stops_evictions_when_too_many_nodes_look_dead() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{FAST_DETECTION}max_dead_fraction = 0.25\n");
    let mut cluster = start(&dir, &policy);
    cluster.kill(1).unwrap();
    cluster.kill(2).unwrap();
    let info = wait_for_info(&cluster, Duration::from_secs(10), "suppressed eviction", |info| {
        info.contains("last_eviction_suppressed:") && info.contains("circuit_breaker")
    });
    assert!(info.contains("evictions:0\r\n"), "two of four nodes dead is over 25%: no eviction\n{info}");
    assert!(info.contains("members:0,1,2\r\n"), "{info}");
}

#[test]
fn a_partitioned_quorum_fails_writes_at_the_ack_deadline_and_heals() {
    let dir = tempfile::tempdir().unwrap();
    // Coupled detection, eviction off: only the deadline is under test here.
    let cluster = start(&dir, "replica_ack_timeout = \"300ms\"\neviction_enabled = false\n");
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    assert_eq!(c.call(&[b"SET", b"k", b"before"]).unwrap(), Reply::Simple("OK".into()));
    cluster.proxy(1).set_partitioned(true);
    // One member cut off: the other two still make the write quorum.
    assert_eq!(c.call(&[b"SET", b"k", b"during"]).unwrap(), Reply::Simple("OK".into()));
    cluster.proxy(2).set_partitioned(true);
    match c.call(&[b"SET", b"k", b"lost"]).unwrap() {
        Reply::Error(text) => {
            assert!(
                text.contains("write quorum not reached: 1 of 2 acks within replica_ack_timeout 300 ms"),
                "{text}"
            );
            assert!(text.contains("no reply before the deadline from node 1, node 2"), "{text}");
            assert!(text.ends_with("; outcome unknown: the write may still have been applied"), "{text}");
        }
        other => panic!("a write with one reachable member was acked: {other:?}"),
    }
    assert!(cluster.info().contains("health=dead"), "coupled detection takes the miss as death");
    cluster.proxy(1).set_partitioned(false);
    cluster.proxy(2).set_partitioned(false);
    // Healing cuts the connections that lived through the partition; a write racing with the
    // coordinator noticing may still fail, as a client retrying would see.
    let healed = (0..20).any(|_| {
        let ok = c.call(&[b"SET", b"k", b"after"]).unwrap() == Reply::Simple("OK".into());
        if !ok {
            std::thread::sleep(Duration::from_millis(50));
        }
        ok
    });
    assert!(healed, "writes succeed again after the heal");
    assert_eq!(c.call(&[b"GET", b"k"]).unwrap(), Reply::Bulk(Some(b"after".to_vec())));
}

/// Independent detection; node 1's link is slower than both the ack deadline and the
/// heartbeat interval, but its round trip (300-500 ms) is well within `dead_after`.
const SLOW_REPLICA_DETECTION: &str = r#"
failure_detection = "independent"
heartbeat_interval = "100ms"
suspect_after = "800ms"
dead_after = "1200ms"
replica_ack_timeout = "150ms"
"#;

#[test]
fn a_replica_slower_than_the_ack_deadline_is_heard_and_never_declared_dead() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("decisions.jsonl");
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, SLOW_REPLICA_DETECTION).unwrap();
    let policy = store_policy(Some(&policy_path), Some(3), 4).expect("policy loads");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        4,
        policy,
        dir.path().join("data"),
    );
    config.decision_log = Some(log_path.clone());
    let cluster = Cluster::start(config).expect("cluster starts");
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    // A first write on fresh nodes (their first fsync) may miss 150 ms on a loaded machine:
    // not what this test is about.
    let warm = Instant::now();
    while c.call(&[b"SET", b"warm", b"v"]).unwrap() != Reply::Simple("OK".into()) {
        assert!(warm.elapsed() < Duration::from_secs(20), "no write succeeds on the fresh cluster");
    }
    // Every reply and pong of node 1 comes after the 150 ms deadline and after the next ping.
    cluster.proxy(1).set_latency_ms(150, 250).unwrap();
    let start = Instant::now();
    let mut writes = 0;
    // Three seconds: more than twice dead_after, so a detector that did not count late
    // replies and pongs would have declared node 1 dead and evicted it by then.
    while start.elapsed() < Duration::from_secs(3) {
        let reply = c.call(&[b"SET", format!("k{writes}").as_bytes(), b"v"]).unwrap();
        assert_eq!(reply, Reply::Simple("OK".into()), "nodes 0 and 2 make the write quorum");
        writes += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = cluster.info();
    assert!(info.contains("evictions:0\r\n"), "{info}");
    assert!(info.contains("members:0,1,2\r\n"), "{info}");
    let node1 = info.lines().find(|l| l.starts_with("node1:")).expect("node 1's line").to_string();
    let field = |name: &str| -> u64 {
        let start = node1.find(&format!("{name}=")).unwrap_or_else(|| panic!("no {name}: {node1}"));
        node1[start + name.len() + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    // Its write acks came too late for the writes, yet reached the detector.
    assert!(field("late_replies") >= 10, "{writes} writes: {node1}");
    assert!(field("max_round_trip_ms") >= 300, "{node1}");
    assert!(field("max_silence_ms") < 1200, "never silent for dead_after: {node1}");
    assert!(node1.contains("health=alive"), "{node1}");
    cluster.decision_log().flush().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let deaths: Vec<&str> = log.lines().filter(|l| l.contains("declared_dead")).collect();
    assert!(deaths.is_empty(), "node 1 was only slow: {deaths:?}");
}
