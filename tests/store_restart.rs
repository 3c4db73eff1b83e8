//! `store up` stopped and started again on the same data directory: the coordinator's
//! membership comes back as it was (issue 13), signals stop the whole cluster, and a busy
//! data directory names the process holding it.

#[path = "support/store_proc.rs"]
mod store_proc;

use replicheck::store::link::NodeLink;
use replicheck::store::resp::{Client, Reply};
use replicheck::store::wire::{NodeReply, NodeRequest};
use std::process::Command;
use std::time::{Duration, Instant};
use store_proc::{free_port, signal_pid, wait_gone, StoreProc};

fn info(up: &StoreProc) -> String {
    Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap().info().unwrap()
}

/// Poll INFO until it contains `wanted`; panics with the last INFO after `limit`.
fn wait_for_info(up: &StoreProc, wanted: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let info = info(up);
        if info.contains(wanted) {
            return info;
        }
        assert!(Instant::now() < deadline, "no {wanted:?} within {limit:?}:\n{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An INFO field's number (`next_version:17`).
fn info_number(info: &str, field: &str) -> u64 {
    let prefix = format!("{field}:");
    let line = info.lines().find_map(|l| l.strip_prefix(prefix.as_str())).unwrap_or_else(|| panic!("{info}"));
    line.trim().parse().unwrap()
}

fn version_floor(data: &std::path::Path) -> u64 {
    let state = std::fs::read_to_string(data.join("coordinator-state")).unwrap();
    state.lines().find_map(|l| l.strip_prefix("version_floor ")).unwrap().parse().unwrap()
}

fn set(up: &StoreProc, key: &str, value: &str) -> Reply {
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    c.call(&[b"SET", key.as_bytes(), value.as_bytes()]).unwrap()
}

/// Issue 13's reproduction: an acknowledged write read back stale after a coordinator
/// restart, because the eviction that made it acknowledgeable lived only in memory.
#[test]
fn an_acked_write_survives_a_coordinator_restart_after_evictions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up = StoreProc::start(&data, 0, &["--nodes", "4"]);
    assert_eq!(set(&up, "z", "0"), Reply::Simple("OK".into()));
    signal_pid(up.node_pids[1], libc::SIGKILL);
    // The write finds node 1 dead: node 3 replaces it, after a catch-up copy.
    assert_eq!(set(&up, "z", "1"), Reply::Simple("OK".into()));
    wait_for_info(&up, "members:0,3,2\r\n", Duration::from_secs(20));
    signal_pid(up.node_pids[2], libc::SIGKILL);
    // Acked by nodes 0 and 3 only.
    assert_eq!(set(&up, "z", "2"), Reply::Simple("OK".into()));
    let used_below = info_number(&info(&up), "next_version");
    let mut up = up;
    up.signal(libc::SIGINT);
    assert!(up.wait_exit(Duration::from_secs(20)).success());
    // Every version the first coordinator used is below its saved floor.
    let floor = version_floor(&data);
    assert!(floor >= used_below, "version_floor {floor}, versions used below {used_below}");

    let up = StoreProc::start(&data, 0, &["--nodes", "4"]);
    let info = info(&up);
    assert!(info.contains("members:0,3,2\r\n"), "the membership is restored:\n{info}");
    assert!(info.contains("membership_epoch:2\r\n"), "one eviction, one catch-up:\n{info}");
    // Node 0 down as well: a read quorum of the restored members still meets node 3, which has
    // z = 2; the initial members 0,1,2 would answer from nodes 1 and 2 (z = 0 and z = 1).
    signal_pid(up.node_pids[0], libc::SIGKILL);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    assert_eq!(c.get(b"z").unwrap().as_deref(), Some(&b"2"[..]), "the first GET z after the restart");
    let state = std::fs::read_to_string(data.join("coordinator-state")).unwrap();
    assert!(state.contains("member 3 joined 1 caught_up\n"), "{state}");
    assert!(info_number(&info, "next_version") >= floor, "numbered from the saved floor:\n{info}");
}

/// A coordinator that stopped while a replacement was catching up: the next one restores the
/// replacement as not counting toward quorums and copies the partition to it.
#[test]
fn a_member_saved_as_catching_up_resumes_its_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = StoreProc::start(&data, 0, &["--nodes", "4"]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    for i in 0..50 {
        let reply = c.call(&[b"SET", format!("k{i}").as_bytes(), format!("v{i}").as_bytes()]).unwrap();
        assert_eq!(reply, Reply::Simple("OK".into()));
    }
    drop(c);
    up.signal(libc::SIGTERM);
    assert!(up.wait_exit(Duration::from_secs(20)).success());
    // As saved by a coordinator stopped right after it evicted node 1 for node 3 (node 3 holds
    // nothing yet).
    let path = data.join("coordinator-state");
    let state = std::fs::read_to_string(&path).unwrap();
    let evicted = state
        .replace("partition s0 epoch 0", "partition s0 epoch 1")
        .replace("member 1 joined 0 caught_up", "member 3 joined 1 catching_up eviction");
    assert_ne!(state, evicted, "{state}");
    std::fs::write(&path, evicted).unwrap();

    let up = StoreProc::start(&data, 0, &["--nodes", "4"]);
    let info = wait_for_info(&up, "catchups_completed:1\r\n", Duration::from_secs(20));
    assert!(info.contains("members:0,3,2\r\n"), "{info}");
    assert!(info.contains("evictions_in_progress:0\r\n"), "{info}");
    // Node 3 holds every key on its own disk, copied before any read could repair it.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let link = NodeLink::new(up.node_addrs[3]);
    for i in 0..50 {
        let read = NodeRequest::Read { key: format!("k{i}").into_bytes() };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        match runtime.block_on(link.request(read, deadline)).unwrap() {
            NodeReply::Value { value, .. } => assert_eq!(value, Some(format!("v{i}").into_bytes()), "k{i}"),
            other => panic!("node 3 answered {other:?}"),
        }
    }
    let state = std::fs::read_to_string(&path).unwrap();
    assert!(state.contains("member 3 joined 1 caught_up\n"), "{state}");
}

/// SIGTERM and SIGHUP stop every node; a node killed meanwhile is reaped at once; a
/// SIGKILLed `store up` takes its nodes with it; a second `store up` on a directory in use is
/// refused naming the holder's pid, and one after a stop starts.
#[test]
fn signals_stop_the_whole_cluster_and_a_busy_data_dir_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGKILL] {
        let mut up = StoreProc::start(&data, port, &["--nodes", "3"]);
        assert_eq!(up.node_pids.len(), 3);

        let second = Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["store", "up", "--port", "0", "--nodes", "3", "--data-dir"])
            .arg(&data)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&second.stderr);
        // Not a typo in the input: another process holds the directory (exit 4, a runtime failure).
        assert_eq!(second.status.code(), Some(4), "{stderr}");
        let wanted =
            format!("data directory {} is in use by pid {} (replicheck store up)", data.display(), up.pid());
        assert!(stderr.contains(&wanted), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");

        // A node killed from outside does not stay a zombie.
        signal_pid(up.node_pids[2], libc::SIGKILL);
        wait_gone(up.node_pids[2], true, Duration::from_secs(5)).unwrap();

        up.signal(signal);
        let status = up.wait_exit(Duration::from_secs(20));
        if signal != libc::SIGKILL {
            assert!(status.success(), "signal {signal}: {status}");
        }
        for &pid in &up.node_pids[..2] {
            // After a SIGKILL the nodes are orphans: whoever adopts them reaps them.
            wait_gone(pid, signal != libc::SIGKILL, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("signal {signal}: node {e}"));
        }
    }
    // The last run was SIGKILLed: the next one starts on the same directory and port.
    let up = StoreProc::start(&data, port, &["--nodes", "3"]);
    assert!(info(&up).contains("members:0,1,2\r\n"));
}
