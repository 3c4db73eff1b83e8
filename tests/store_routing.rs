//! Partitions and write routing in a real cluster: each partition has its own replica set,
//! a partition or ingest backend over its capacity throttles, and placement follows the
//! policy (`placement`, `upload_planner`, `write_shard_suffixes`), every decision through
//! `policy::routing` and logged so that `conform` replays it.

use replicheck::policy::routing;
use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::layout::Layout;
use replicheck::store::coordinator::resp::{Client, ClientError};
use replicheck::store::decision::{conform, Conformance};
use std::path::PathBuf;

/// A window long enough that a test's writes all fall in one.
const WINDOW_MS: u64 = 60_000;

fn start(dir: &tempfile::TempDir, nodes: usize, policy_toml: &str, layout: Layout) -> (Cluster, PathBuf) {
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy_toml).unwrap();
    let policy = store_policy(Some(&policy_path), None, nodes).expect("policy loads");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        nodes,
        policy,
        dir.path().join("data"),
    );
    config.layout = layout;
    let log = dir.path().join("decisions.jsonl");
    config.decision_log = Some(log.clone());
    (Cluster::start(config).expect("cluster starts"), log)
}

const ONE_REPLICA: &str = r#"
replication_factor = 1
write_quorum = 1
read_quorum = 1
replica_ack_timeout = "400ms"
eviction_enabled = false
"#;

fn throttled(result: Result<(), ClientError>) -> String {
    match result {
        Err(ClientError::Server(text)) if text.contains("throttled") => text,
        other => panic!("expected a throttled error, got {other:?}"),
    }
}

fn info_number(info: &str, name: &str) -> u64 {
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .parse()
        .unwrap()
}

fn conforms(log: &std::path::Path, cluster: &Cluster) {
    cluster.decision_log().flush().unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    assert!(matches!(conform(&text), Ok(Conformance::Conforms { .. })), "{:?}", conform(&text));
}

#[test]
fn each_partition_is_stored_on_its_own_replicas() {
    let dir = tempfile::tempdir().unwrap();
    // s0 on node 0, s1 on node 1, s2 on node 2.
    let (mut cluster, log) = start(&dir, 3, ONE_REPLICA, Layout::round_robin(3, 3, 1));
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    for (key, value) in [("s0:a", "1"), ("s1:b", "2"), ("s2:c", "3")] {
        c.set(key.as_bytes(), value.as_bytes(), None).unwrap();
    }
    let info = cluster.info();
    assert!(info.contains("partition1:name=s1,members=1\r\n"), "{info}");

    cluster.kill(1).unwrap();
    // Partitions s0 and s2 do not need node 1; s1 has no replica left.
    assert_eq!(c.get(b"s0:a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(c.get(b"s2:c").unwrap(), Some(b"3".to_vec()));
    assert!(matches!(c.get(b"s1:b"), Err(ClientError::Server(e)) if e.contains("read quorum not reached")));
    assert!(matches!(c.set(b"s1:d", b"4", None), Err(ClientError::Server(e)) if e.contains("write quorum")));
    c.set(b"s0:e", b"5", None).unwrap();

    cluster.restart(1).unwrap();
    let mut back = None;
    for _ in 0..50 {
        if let Ok(v) = c.get(b"s1:b") {
            back = v;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(back, Some(b"2".to_vec()), "node 1 kept s1's data");
    conforms(&log, &cluster);
}

#[test]
fn a_partition_over_capacity_throttles_and_suffixes_spread_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{ONE_REPLICA}write_shard_suffixes = 2\n");
    let mut layout = Layout::round_robin(2, 1, 1);
    layout.window_ms = WINDOW_MS;
    layout.partition_write_capacity_per_window = Some(2);
    let (cluster, log) = start(&dir, 1, &policy, layout);
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    // Keys of prefix s0 whose suffix is 0 stay on s0; suffix 1 moves them to s1.
    let key_with_suffix = |suffix: u8| -> Vec<u8> {
        (0..)
            .map(|i| format!("s0:{i}"))
            .find(|k| routing::write_suffix(routing::key_hash(k.as_bytes()), 2) == suffix)
            .unwrap()
            .into_bytes()
    };
    let (on_s0, on_s1) = (key_with_suffix(0), key_with_suffix(1));
    for _ in 0..2 {
        c.set(&on_s0, b"x", None).unwrap();
        c.set(&on_s1, b"y", None).unwrap();
    }
    let why = throttled(c.set(&on_s0, b"z", None));
    assert!(why.contains("partition s0 was offered 3 writes"), "{why}");
    // Reads are not throttled, and the throttled write had no effect.
    assert_eq!(c.get(&on_s0).unwrap(), Some(b"x".to_vec()));
    let info = cluster.info();
    assert_eq!(info_number(&info, "capacity_breaches"), 1, "{info}");
    assert_eq!(info_number(&info, "writes_throttled"), 1, "{info}");
    assert!(info.contains("partition0_load:name=s0,background_per_window=0,peak_offered=3"), "{info}");
    assert!(info.contains("first_capacity_breach:partition s0 offered 3 > capacity 2"), "{info}");
    conforms(&log, &cluster);
}

/// Three ingest backends of capacity 2 per window: what each placement does with 7 writes.
fn place_seven_writes(placement_toml: &str) -> (Vec<bool>, String) {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("{ONE_REPLICA}{placement_toml}");
    let mut layout = Layout::round_robin(1, 3, 1);
    layout.window_ms = WINDOW_MS;
    layout.node_write_capacity_per_window = vec![Some(2); 3];
    let (cluster, log) = start(&dir, 3, &policy, layout);
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    let admitted = (0..7).map(|i| c.set(format!("s0:{i}").as_bytes(), b"v", None).is_ok()).collect();
    conforms(&log, &cluster);
    (admitted, cluster.info())
}

#[test]
fn sorted_placement_overloads_the_first_backend_and_capacity_aware_spreads() {
    let (admitted, info) = place_seven_writes("placement = \"sorted\"\n");
    assert_eq!(admitted, [true, true, false, false, false, false, false], "{info}");
    assert_eq!(info_number(&info, "capacity_breaches"), 5, "{info}");
    assert!(
        info.contains("backend0_load:capacity_per_window=2,base_load_per_window=0,peak_offered=7"),
        "{info}"
    );
    assert!(
        info.contains("backend1_load:capacity_per_window=2,base_load_per_window=0,peak_offered=0"),
        "{info}"
    );

    // Spill past 80%: one write each, then fill the most headroom; the seventh is shed
    // rather than overload anyone.
    let (admitted, info) = place_seven_writes("placement = \"capacity_aware\"\nspill_threshold = 0.8\n");
    assert_eq!(admitted, [true, true, true, true, true, true, false], "{info}");
    assert_eq!(info_number(&info, "capacity_breaches"), 0, "{info}");
    for n in 0..3 {
        assert!(info.contains(&format!(
            "backend{n}_load:capacity_per_window=2,base_load_per_window=0,peak_offered=2"
        )));
    }

    // The upload planner packs the smallest backend whatever placement says.
    let (admitted, info) =
        place_seven_writes("placement = \"capacity_aware\"\nupload_planner = \"smallest_first\"\n");
    assert_eq!(admitted, [true, true, false, false, false, false, false], "{info}");
    assert!(info_number(&info, "capacity_breaches") > 0, "{info}");
}

#[test]
fn a_backend_over_capacity_by_base_load_alone_is_a_breach_without_any_write() {
    // The models' background breach: node 0's base load exceeds its capacity in every window,
    // so capacity is not respected even though capacity-aware placement never offers it a
    // write (every write goes to node 1).
    let dir = tempfile::tempdir().unwrap();
    let mut layout = Layout::round_robin(1, 2, 1);
    layout.window_ms = WINDOW_MS;
    layout.node_write_capacity_per_window = vec![Some(2), Some(5)];
    layout.node_base_load_per_window = vec![3, 0];
    let (cluster, log) = start(&dir, 2, ONE_REPLICA, layout);
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    c.set(b"s0:1", b"v", None).expect("placed on node 1, which has room");
    let info = cluster.info();
    assert_eq!(info_number(&info, "capacity_breaches"), 1, "{info}");
    assert!(
        info.contains("first_capacity_breach:backend node 0 by base load offered 3 > capacity 2"),
        "{info}"
    );
    assert!(
        info.contains("backend1_load:capacity_per_window=5,base_load_per_window=0,peak_offered=1"),
        "{info}"
    );
    conforms(&log, &cluster);
}
