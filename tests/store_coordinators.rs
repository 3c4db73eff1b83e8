//! Several coordinators on the real store, and the rollout played on it: the followers
//! propose evictions to the leader over TCP and learn each change from it (the membership
//! protocol the models check), a live policy reload (`CONFIG SET policy`), and `store run`
//! stepping a model's rollout variant coordinator by coordinator.

#[path = "support/bin.rs"]
mod bin;
#[path = "support/info.rs"]
mod info;

use bin::{replicheck, stderr, stdout};
use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::resp::{Client, Reply};
use std::path::PathBuf;
use std::time::Duration;

/// Four nodes (RF 3, node 3 a spare) and `coordinators` coordinators in one zone.
fn start(dir: &tempfile::TempDir, policy_toml: &str, coordinators: usize) -> Cluster {
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy_toml).unwrap();
    let policy = store_policy(Some(&policy_path), Some(3), 4).expect("policy loads");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        4,
        policy,
        dir.path().join("data"),
    );
    config.coordinator_zones = vec![0; coordinators];
    Cluster::start(config).expect("cluster starts")
}

/// Poll coordinator `c`'s INFO until `predicate` holds; panics with it after `limit`.
fn wait_for_info(
    cluster: &Cluster,
    c: u8,
    limit: Duration,
    what: &str,
    predicate: impl Fn(&str) -> bool,
) -> String {
    info::wait_for_info(
        limit,
        &format!("{what} at coordinator {c}"),
        || cluster.coordinator_of(c).info(),
        predicate,
    )
}

/// Coupled detection: only a coordinator that sends requests finds a node dead.
const COUPLED: &str = r#"
replica_ack_timeout = "300ms"
"#;

#[test]
fn a_followers_proposal_is_ordered_by_the_leader_and_learned_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(&dir, COUPLED, 2);
    let mut follower = Client::connect(cluster.client_addr_of(1)).unwrap();
    for i in 0..50u32 {
        follower.set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes(), None).unwrap();
    }
    // Only the follower's writes reach node 1: the leader, idle, never misses a deadline.
    cluster.kill(1).unwrap();
    for i in 0..5u32 {
        let _ = follower.call(&[b"SET", format!("k{i}").as_bytes(), b"after"]);
    }
    // The leader ordered the follower's proposal and completed the change...
    let leader = wait_for_info(&cluster, 0, Duration::from_secs(15), "replacement", |info| {
        info.contains("members:0,2,3\r\n") && info.contains("catchups_completed:1")
    });
    assert!(leader.contains("evictions:1\r\n") && leader.contains("coordinator:0 of 2,leader"), "{leader}");
    // ...and the follower learned it from the views, without deciding anything itself.
    let learned = wait_for_info(&cluster, 1, Duration::from_secs(5), "the new replica set", |info| {
        info.contains("members:0,2,3\r\n")
    });
    assert!(
        learned.contains("coordinator:1 of 2,follower") && learned.contains("evictions:0\r\n"),
        "{learned}"
    );
    // It shows the change as the leader does: node 1 evicted, node 3 a member.
    for info in [&leader, &learned] {
        let node1 = info.lines().find(|l| l.starts_with("node1:")).unwrap();
        assert!(node1.contains("role=evicted"), "{node1}\n{info}");
    }
    // Writes through either coordinator are read back through the other.
    let mut leader_client = Client::connect(cluster.client_addr_of(0)).unwrap();
    for i in 0..50u32 {
        let (writer, reader) = if i % 2 == 0 {
            (&mut leader_client, &mut follower)
        } else {
            (&mut follower, &mut leader_client)
        };
        let value = format!("w{i}");
        writer.set(format!("k{i}").as_bytes(), value.as_bytes(), None).unwrap();
        assert_eq!(reader.get(format!("k{i}").as_bytes()).unwrap(), Some(value.into_bytes()), "key k{i}");
    }
}

#[test]
fn a_change_waits_for_every_coordinator_and_completes_once_the_link_heals() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(&dir, COUPLED, 2);
    let mut leader = Client::connect(cluster.client_addr_of(0)).unwrap();
    leader.set(b"k", b"v", None).unwrap();
    // The leader cannot reach the follower: it publishes the join and must wait for its ack.
    let cut = cluster.peer_proxy(0, 1).expect("a link between the coordinators");
    cut.set_partitioned(true);
    cluster.kill(1).unwrap();
    let _ = leader.call(&[b"SET", b"k", b"v2"]);
    let waiting = wait_for_info(&cluster, 0, Duration::from_secs(10), "a change under way", |info| {
        info.contains("evictions_in_progress:1")
    });
    assert!(waiting.contains("members:0,1,2\r\n"), "{waiting}");
    std::thread::sleep(Duration::from_millis(1_500));
    let still = cluster.coordinator_of(0).info();
    assert!(still.contains("members:0,1,2\r\n") && still.contains("catchups_completed:0"), "{still}");
    // Healed, the leader's re-sent view is acked and the change runs to the end on both.
    cut.set_partitioned(false);
    wait_for_info(&cluster, 0, Duration::from_secs(15), "the change completed", |info| {
        info.contains("members:0,2,3\r\n") && info.contains("catchups_completed:1")
    });
    wait_for_info(&cluster, 1, Duration::from_secs(5), "the new replica set", |info| {
        info.contains("members:0,2,3\r\n")
    });
}

#[test]
fn config_set_policy_reloads_one_coordinator_and_refuses_what_a_reload_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = start(&dir, COUPLED, 2);
    let mut c1 = Client::connect(cluster.client_addr_of(1)).unwrap();
    let stricter = dir.path().join("stricter.toml");
    std::fs::write(&stricter, "replication_factor = 3\nwrite_quorum = 3\nreplica_ack_timeout = \"900ms\"\n")
        .unwrap();
    let reply = c1.call(&[b"CONFIG", b"SET", b"policy", stricter.to_str().unwrap().as_bytes()]).unwrap();
    assert_eq!(reply, Reply::Simple("OK".into()));
    let info = cluster.coordinator_of(1).info();
    assert!(info.contains("write_quorum:3\r\n") && info.contains("replica_ack_timeout_ms:900\r\n"), "{info}");
    assert!(info.contains("policy_reloads:1\r\n"), "{info}");
    // The other coordinator keeps its policy: a rollout reaches one coordinator at a time.
    let other = cluster.coordinator_of(0).info();
    assert!(other.contains("write_quorum:2\r\n") && other.contains("policy_reloads:0\r\n"), "{other}");
    c1.set(b"k", b"v", None).unwrap();
    assert_eq!(c1.get(b"k").unwrap(), Some(b"v".to_vec()));

    let wider = dir.path().join("wider.toml");
    std::fs::write(&wider, "replication_factor = 4\nwrite_quorum = 3\nread_quorum = 2\n").unwrap();
    let missing = dir.path().join("missing.toml");
    let bad_key = dir.path().join("bad.toml");
    std::fs::write(&bad_key, "write_quorum = \"two\"\n").unwrap();
    for (file, want) in
        [(&wider, "replication_factor"), (&missing, "missing.toml"), (&bad_key, "write_quorum")]
    {
        let reply = c1.call(&[b"CONFIG", b"SET", b"policy", file.to_str().unwrap().as_bytes()]).unwrap();
        let Reply::Error(text) = reply else { panic!("{} was accepted: {reply:?}", file.display()) };
        assert!(text.contains("policy not reloaded") && text.contains(want), "{text}");
    }
    // Only a .toml file is read, and a reply never quotes the file it read.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "root:s3cr3t-hash:19000\n").unwrap();
    let leaky = dir.path().join("leaky.toml");
    std::fs::write(&leaky, "root:s3cr3t-hash:19000\n").unwrap();
    let quorum5 = dir.path().join("quorum5.toml");
    std::fs::write(&quorum5, "write_quorum = 5\n").unwrap();
    for (file, want) in [(&secret, "not a policy file"), (&leaky, "line 1"), (&quorum5, "write_quorum")] {
        let reply = c1.call(&[b"CONFIG", b"SET", b"policy", file.to_str().unwrap().as_bytes()]).unwrap();
        let Reply::Error(text) = reply else { panic!("{} was accepted: {reply:?}", file.display()) };
        assert!(text.contains(want) && !text.contains("s3cr3t"), "{text}");
        assert_eq!(text.matches(file.to_str().unwrap()).count(), 1, "the path once: {text}");
    }
    let after = cluster.coordinator_of(1).info();
    assert!(after.contains("write_quorum:3\r\n") && after.contains("policy_reloads:1\r\n"), "{after}");
    let reply = c1.call(&[b"CONFIG", b"SET", b"maxmemory", b"1"]).unwrap();
    assert!(matches!(reply, Reply::Error(ref e) if e.contains("CONFIG SET policy FILE")), "{reply:?}");
}

#[test]
fn store_run_plays_the_staged_rollout_and_agrees_with_the_model() {
    let out = replicheck(&[
        "store",
        "run",
        "models/quorum-rollout.toml",
        "--variant",
        "staged",
        "--model-verdicts",
        "declared",
        "--duration",
        "6s",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    // Waves: every coordinator reads first before any writes at W=1.
    let steps: Vec<&str> = text.lines().filter(|l| l.contains("ROLLOUT coordinator")).collect();
    let want = [
        "ca runs stage \"reads-first\"",
        "cb runs stage \"reads-first\"",
        "ca runs stage \"candidate\"",
        "cb runs stage \"candidate\"",
    ];
    assert_eq!(steps.len(), want.len(), "{text}");
    for (line, want) in steps.iter().zip(want) {
        assert!(line.contains(want), "{line} (expected {want})\n{text}");
    }
    for property in ["acked_writes_persist", "linearizable"] {
        let row = text.lines().find(|l| l.starts_with(property)).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            row.split_whitespace().take(3).collect::<Vec<_>>(),
            [property, "holds", "holds"],
            "{text}"
        );
    }
}

/// `store run` of the ack-timeout rollout with the coordinators taking the 500ms timeout in
/// `order`; one client thread, as the model has one writer (several threads playing it would
/// keep every node heard from by each other's late replies: slow, not failed).
fn ack_timeout_rollout(order: &str) -> String {
    let out = replicheck(&[
        "store",
        "run",
        "models/ack-timeout-staged-rollout.toml",
        "--variant",
        "rollout",
        "--rollout-order",
        order,
        "--clients",
        "1",
        "--model-verdicts",
        "declared",
        "--duration",
        "12s",
    ]);
    format!("{}{}", stdout(&out), stderr(&out))
}

fn row<'a>(text: &'a str, property: &str) -> Vec<&'a str> {
    let line = text.lines().find(|l| l.starts_with(property)).unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().take(3).collect()
}

#[test]
fn store_run_finds_the_canarys_healthy_eviction_in_the_mixed_fleet() {
    // cb, which serves the writer, takes the 500ms timeout first while the a<->b link is slow;
    // the leader ca still runs 2s and orders cb's proposal.
    let text = ack_timeout_rollout("cb,ca");
    assert!(text.contains("ROLLOUT coordinator cb runs stage \"after\""), "{text}");
    assert_eq!(row(&text, "no_healthy_eviction"), ["no_healthy_eviction", "violated", "violated"], "{text}");
    assert!(text.contains(": healthy (never crashed or cut off)"), "{text}");
    // The other order reaches cb only after the heal: this run's rollout never evicts. The
    // model, which tries every moment, still finds the violation (the row says why they differ).
    let text = ack_timeout_rollout("ca,cb");
    assert_eq!(row(&text, "no_healthy_eviction"), ["no_healthy_eviction", "holds", "violated"], "{text}");
}

#[test]
fn store_run_refuses_a_rollout_order_that_does_not_name_each_coordinator_once() {
    for (order, want) in [
        ("cb,cz", "--rollout-order cz: no such coordinator (coordinators: ca, cb)"),
        ("cb,cb", "cb is named twice"),
        ("cb", "name every coordinator once"),
    ] {
        let out = replicheck(&[
            "store",
            "run",
            "models/quorum-rollout.toml",
            "--variant",
            "staged",
            "--rollout-order",
            order,
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{order}: {err}");
        assert!(err.contains(want), "{order}: {err}");
    }
    let out = replicheck(&[
        "store",
        "run",
        "models/quorum-rollout.toml",
        "--variant",
        "base",
        "--rollout-order",
        "ca,cb",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not a rollout"), "{}", stderr(&out));
}
