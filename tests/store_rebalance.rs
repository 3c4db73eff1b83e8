//! The rebalancer on a real cluster, shaped like models/rebalancer-compaction.toml's incident:
//! two nodes, one replica, node 0 at 70% disk + the hot keyspace shard's 10% (over a 78%
//! watermark), node 1 at 40% disk with 60% compaction debt (slow with a hot shard above 50%).
//! Disk-only scoring moves the shard back and forth; compaction-aware scoring never moves it.
//! Every acknowledged write stays readable through the moves (catch-up copy from the node the
//! shard leaves).

use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::layout::LoadFacts;
use replicheck::store::coordinator::resp::{Client, Reply};
use replicheck::store::decision::{self, EventLine};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const INCIDENT: &str = r#"
replication_factor = 1
write_quorum = 1
read_quorum = 1
replica_ack_timeout = "100ms"
eviction_enabled = false
rebalance_enabled = true
rebalance_interval = "300ms"
disk_high_watermark = 78
scoring = "disk"
move_cooldown = "0ms"
cooldown_backoff = 1
"#;

const FIXED: &str = r#"
replication_factor = 1
write_quorum = 1
read_quorum = 1
replica_ack_timeout = "100ms"
eviction_enabled = false
rebalance_enabled = true
rebalance_interval = "300ms"
disk_high_watermark = 78
scoring = "disk_and_compaction"
compaction_debt_max = 30
move_cooldown = "600ms"
cooldown_backoff = 2
cooldown_max = "2400ms"
"#;

fn start(dir: &tempfile::TempDir, policy_toml: &str) -> (Cluster, PathBuf) {
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy_toml).unwrap();
    let policy = store_policy(Some(&policy_path), None, 2).expect("policy loads");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        2,
        policy,
        dir.path().join("data"),
    );
    config.load = LoadFacts {
        node_disk_used_pct: vec![70, 40],
        node_compaction_debt_pct: vec![0, 60],
        slow_compaction_debt_pct: 50,
    };
    config.layout.shards[0].size_pct = 10;
    config.layout.shards[0].hot = true;
    let log_path = dir.path().join("decisions.jsonl");
    config.decision_log = Some(log_path.clone());
    (Cluster::start(config).expect("cluster starts"), log_path)
}

fn info_counter(info: &str, name: &str) -> u64 {
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .trim()
        .parse()
        .unwrap()
}

/// What a key may read as: its last acknowledged value, or the value of any write after it
/// that failed (a failed write may still have reached a replica: its outcome is unknown).
#[derive(Default)]
struct Expected {
    acked: BTreeMap<String, String>,
    unknown_after_ack: BTreeMap<String, Vec<String>>,
}

/// Write keys for `duration`, one SET at a time, each with a value never used before.
fn write_for(cluster: &Cluster, duration: Duration, next: &mut u32, expected: &mut Expected) {
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    let start = Instant::now();
    while start.elapsed() < duration {
        let key = format!("k{}", *next % 50);
        let value = format!("v{next}");
        *next += 1;
        match c.call(&[b"SET", key.as_bytes(), value.as_bytes()]).unwrap() {
            Reply::Simple(ok) if ok == "OK" => {
                expected.unknown_after_ack.remove(&key);
                expected.acked.insert(key, value);
            }
            // No caught-up replica while the only one is being copied: the write fails.
            Reply::Error(_) => {
                expected.unknown_after_ack.entry(key).or_default().push(value);
                std::thread::sleep(Duration::from_millis(10));
            }
            other => panic!("SET answered {other:?}"),
        }
    }
}

/// Every acknowledged write reads back (or a later write whose outcome is unknown); a read
/// may fail while a move is catching up, so it is retried for a while.
fn assert_readable(cluster: &Cluster, expected: &Expected) {
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    for (key, value) in &expected.acked {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match c.call(&[b"GET", key.as_bytes()]).unwrap() {
                Reply::Bulk(Some(got)) => {
                    let got = String::from_utf8_lossy(&got).into_owned();
                    let later = expected.unknown_after_ack.get(key).cloned().unwrap_or_default();
                    assert!(
                        got == *value || later.contains(&got),
                        "key {key}: read {got}, last acked {value}, unknown later writes {later:?}"
                    );
                    break;
                }
                Reply::Error(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                other => panic!("GET {key} answered {other:?}\n{}", cluster.info()),
            }
        }
    }
}

/// The membership changes the coordinator requested, from the protocol event lines of the
/// decision log (whose decision lines replay through src/policy first): (shard, from, to,
/// is a move).
fn requested_changes(cluster: &Cluster, log_path: &std::path::Path) -> Vec<(u8, u8, u8, bool)> {
    cluster.decision_log().flush().unwrap();
    let text = std::fs::read_to_string(log_path).unwrap();
    let conformance = decision::conform(&text);
    assert!(conformance.is_ok(), "the decision log replays: {:?}", conformance.err());
    text.lines()
        .filter_map(|l| serde_json::from_str::<EventLine>(l).ok())
        .filter_map(|l| {
            let fields = l.event.strip_prefix("change_requested ")?.to_string();
            let field = |name: &str| -> String {
                fields
                    .split(' ')
                    .find_map(|f| f.strip_prefix(&format!("{name}=")))
                    .unwrap_or_else(|| panic!("no {name} in {fields}"))
                    .to_string()
            };
            Some((
                field("shard").parse().unwrap(),
                field("evicted").parse().unwrap(),
                field("replacement").parse().unwrap(),
                field("move") == "true",
            ))
        })
        .collect()
}

#[test]
fn disk_only_scoring_moves_the_hot_shard_back_and_forth_without_losing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, log_path) = start(&dir, INCIDENT);
    assert!(cluster.info().contains("members:0\r\n"));
    let started = Instant::now();
    let (mut next, mut expected) = (0, Expected::default());
    while info_counter(&cluster.info(), "moves") < 3 {
        assert!(started.elapsed() < Duration::from_secs(8), "fewer than 3 moves in 8 s:\n{}", cluster.info());
        write_for(&cluster, Duration::from_millis(200), &mut next, &mut expected);
    }
    assert!(!expected.acked.is_empty(), "some writes were acknowledged between moves");
    assert_readable(&cluster, &expected);

    let moves = requested_changes(&cluster, &log_path);
    assert!(moves.len() >= 3, "{moves:?}");
    // Out of node 0 because it is over the watermark, back out of node 1 because it is slow.
    for (i, m) in moves.iter().enumerate() {
        let (from, to) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
        assert_eq!(*m, (0, from, to, true), "move {i} of {moves:?}");
    }
    let info = cluster.info();
    assert_eq!(info_counter(&info, "moves") as usize, moves.len(), "{info}");
}

#[test]
fn compaction_aware_scoring_never_moves_the_hot_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, log_path) = start(&dir, FIXED);
    let (mut next, mut expected) = (0, Expected::default());
    write_for(&cluster, Duration::from_millis(1500), &mut next, &mut expected);
    // Nothing moves, so nothing fails.
    assert!(expected.unknown_after_ack.is_empty() && expected.acked.len() == 50);
    assert_readable(&cluster, &expected);
    let info = cluster.info();
    assert_eq!(info_counter(&info, "moves"), 0, "{info}");
    assert!(info.contains("members:0\r\n"), "{info}");
    let changes = requested_changes(&cluster, &log_path);
    assert!(changes.is_empty(), "the fixed policy moved: {changes:?}");
}
