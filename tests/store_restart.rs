//! `store up` stopped and started again on the same data directory: the coordinator's
//! membership comes back as it was (issue 13), signals stop the whole cluster, and a busy
//! data directory names the process holding it.

#[path = "support/store_proc.rs"]
mod store_proc;

use replicheck::store::coordinator::resp::{Client, Reply};
use std::process::Command;
use std::time::{Duration, Instant};
use store_proc::{signal_pid, wait_gone, StoreProc};

fn info(up: &StoreProc) -> String {
    Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap().info().unwrap()
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
    // The write finds node 1 dead: node 3 replaces it, after a catch-up copy. On a loaded
    // machine node 1's reply to the first write may arrive after this one left, and a node
    // heard from since is slow, not failed: write again until a write finds it silent.
    assert_eq!(set(&up, "z", "1"), Reply::Simple("OK".into()));
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let replaced = Instant::now() + Duration::from_secs(4);
        while Instant::now() < replaced && !info(&up).contains("members:0,2,3\r\n") {
            std::thread::sleep(Duration::from_millis(50));
        }
        if info(&up).contains("members:0,2,3\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "node 3 never replaced node 1:\n{}", info(&up));
        set(&up, "z", "1");
    }
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
    assert!(info.contains("members:0,2,3\r\n"), "the membership is restored:\n{info}");
    assert!(info.contains("membership_epoch:1\r\n"), "one replacement:\n{info}");
    // Node 0 down as well: a read quorum of the restored members still meets node 3, which has
    // z = 2; the initial members 0,1,2 would answer from nodes 1 and 2 (z = 0 and z = 1).
    signal_pid(up.node_pids[0], libc::SIGKILL);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    assert_eq!(c.get(b"z").unwrap().as_deref(), Some(&b"2"[..]), "the first GET z after the restart");
    let state = std::fs::read_to_string(data.join("coordinator-state")).unwrap();
    assert!(state.contains("member 3 joined 1\n"), "{state}");
    assert!(info_number(&info, "next_version") >= floor, "numbered from the saved floor:\n{info}");
}

/// A catch-up under way is not persisted (the restarted coordinator's detector starts it
/// again). A state file of the older format that saved one is refused, naming the file and the
/// line, and changes nothing.
#[test]
fn a_catch_up_saved_by_the_older_format_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = StoreProc::start(&data, 0, &["--nodes", "4"]);
    up.signal(libc::SIGTERM);
    assert!(up.wait_exit(Duration::from_secs(20)).success());
    let path = data.join("coordinator-state");
    let state = std::fs::read_to_string(&path).unwrap();
    let older = state
        .replace("state v2", "state v1")
        .replace("member 1 joined 0\n", "member 3 joined 1 catching_up eviction\n");
    assert_ne!(state, older, "{state}");
    std::fs::write(&path, &older).unwrap();
    let out = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--port", "0", "--nodes", "4", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{} line", path.display()))
            && stderr.contains("a catch-up under way saved by an older replicheck"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), older, "the file is left as it was");
}

/// SIGTERM and SIGHUP stop every node; a node killed meanwhile is reaped at once; a
/// SIGKILLed `store up` takes its nodes with it; a second `store up` on a directory in use is
/// refused naming the holder's pid, and one after a stop starts.
#[test]
fn signals_stop_the_whole_cluster_and_a_busy_data_dir_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Port 0 (the kernel picks): a port picked ahead of time can be taken, in between, by
    // another test's outgoing connection. The last run's port is reused at the end.
    let mut port = 0;
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGKILL] {
        let mut up = StoreProc::start(&data, 0, &["--nodes", "3"]);
        port = up.addr.port();
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
