//! A data directory whose parts do not belong together is refused before any node serves it
//! (issue 35): a missing `coordinator-state` beside node data, a version floor that would
//! wrap, a node database emptied or gone; `--rebuild-node` recreates such a node from its
//! partitions' other replicas.

#[path = "support/store_proc.rs"]
mod store_proc;

use replicheck::store::coordinator::resp::{Client, Reply};
use replicheck::store::node::storage::Storage;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use store_proc::StoreProc;

const KEYS: usize = 60;

/// `store up` that is expected to refuse: its exit code and stderr.
fn refused(data: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--port", "0", "--nodes", "3", "--data-dir"])
        .arg(data)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), stderr)
}

/// SET `key` to `value`, which must be acknowledged.
fn set_ok(c: &mut Client, key: &str, value: &str) {
    let reply = c.call(&[b"SET", key.as_bytes(), value.as_bytes()]).unwrap();
    assert_eq!(reply, Reply::Simple("OK".into()), "SET {key} {value}");
}

fn stop(mut up: StoreProc) {
    up.signal(libc::SIGTERM);
    assert!(up.wait_exit(Duration::from_secs(20)).success());
}

/// Node `n`'s copy of every key, read from its database with the cluster stopped.
fn node_values(data: &Path, n: usize) -> Vec<Option<Vec<u8>>> {
    let storage = Storage::open(&data.join(format!("node-{n}"))).unwrap();
    (0..KEYS).map(|i| storage.read(format!("k{i}").as_bytes()).unwrap().1).collect()
}

#[test]
fn a_data_directory_that_lost_a_part_is_refused_and_a_wiped_node_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up = StoreProc::start(&data, 0, &["--nodes", "3"]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    for i in 0..KEYS {
        set_ok(&mut c, &format!("k{i}"), &format!("v{i}"));
    }
    drop(c);
    stop(up);

    // The coordinator's state gone while the nodes hold data.
    let state = data.join("coordinator-state");
    let saved = std::fs::read_to_string(&state).unwrap();
    std::fs::remove_file(&state).unwrap();
    let (code, stderr) = refused(&data, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{} is missing, but", state.display())), "{stderr}");
    assert!(stderr.contains("node-0/node.redb holds data (versions up to"), "{stderr}");

    // A version floor that would wrap.
    let floor = saved.lines().find(|l| l.starts_with("version_floor ")).unwrap();
    std::fs::write(&state, saved.replace(floor, "version_floor 18446744073709551000")).unwrap();
    let (code, stderr) = refused(&data, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("version_floor 18446744073709551000 is above"), "{stderr}");
    std::fs::write(&state, &saved).unwrap();

    // Node 2's write-ahead log gone: what it acknowledged since its last durable commit may
    // be gone with it, so it is refused like a lost database.
    let log2 = data.join("node-2").join("node.log");
    let kept_log = std::fs::read(&log2).unwrap();
    std::fs::remove_file(&log2).unwrap();
    let (code, stderr) = refused(&data, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("lost its write-ahead log (node.log is missing)"), "{stderr}");
    assert!(stderr.contains("start with --rebuild-node 2"), "{stderr}");
    std::fs::write(&log2, kept_log).unwrap();

    // Node 1's database emptied: refused, and a healthy node may not be "rebuilt".
    let db1 = data.join("node-1").join("node.redb");
    std::fs::write(&db1, b"").unwrap();
    let (code, stderr) = refused(&data, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{} is empty (0 bytes)", db1.display())), "{stderr}");
    assert!(stderr.contains("start with --rebuild-node 1"), "{stderr}");
    let (code, stderr) = refused(&data, &["--rebuild-node", "1", "--rebuild-node", "2"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--rebuild-node 2: ") && stderr.contains("holds this cluster's data"),
        "{stderr}"
    );
    assert_eq!(std::fs::metadata(&db1).unwrap().len(), 0, "a refused start changes nothing");

    // Rebuilt: node 1 holds every acknowledged value again, and the cluster serves.
    let up = StoreProc::start(&data, 0, &["--nodes", "3", "--rebuild-node", "1"]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    assert_eq!(c.get(b"k7").unwrap().as_deref(), Some(&b"v7"[..]));
    drop(c);
    stop(up);
    let expected: Vec<Option<Vec<u8>>> = (0..KEYS).map(|i| Some(format!("v{i}").into_bytes())).collect();
    assert_eq!(node_values(&data, 1), expected, "node 1 was rebuilt with every key");
    // Stamped now: it starts without the flag.
    stop(StoreProc::start(&data, 0, &["--nodes", "3"]));
}

/// Two stores on one host: once a node of cluster A died, its port may be handed to a node of
/// cluster B, where A's coordinator dials node 1 again. A neither writes there nor reads from
/// there (every connection starts with a hello naming the node and the cluster), so B's data
/// stays B's and A's reads stay A's.
#[test]
fn a_node_address_taken_by_another_clusters_node_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    // Cluster B writes `shared` often: its version there is far above A's.
    let data_b = dir.path().join("b");
    let up = StoreProc::start(&data_b, 0, &["--nodes", "3"]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    for i in 0..50 {
        set_ok(&mut c, "shared", &format!("b{i}"));
    }
    drop(c);
    stop(up);

    let data_a = dir.path().join("a");
    let up = StoreProc::start(&data_a, 0, &["--nodes", "3"]);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    set_ok(&mut c, "shared", "a");
    store_proc::signal_pid(up.node_pids[1], libc::SIGKILL);
    // B's node 1 on the address A's node 1 had.
    let mut impostor = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["store", "node", "--id", "1", "--listen", &up.node_addrs[1].to_string(), "--data-dir"])
            .arg(data_b.join("node-1"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(impostor.0.stdout.take().unwrap()), &mut line)
        .unwrap();
    assert!(line.starts_with("listening "), "{line:?}");
    // Heartbeats dial it meanwhile; writes and reads go on with nodes 0 and 2.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..20 {
        let key = format!("only-a{i}");
        set_ok(&mut c, &key, "x");
        assert_eq!(c.call(&[b"GET", b"shared"]).unwrap(), Reply::Bulk(Some(b"a".to_vec())), "A's own value");
    }
    drop(c);
    drop(impostor);
    stop(up);

    let b_node = Storage::open(&data_b.join("node-1")).unwrap();
    assert_eq!(b_node.read(b"shared").unwrap().1, Some(b"b49".to_vec()), "B's value untouched");
    for i in 0..20 {
        assert_eq!(
            b_node.read(format!("only-a{i}").as_bytes()).unwrap().1,
            None,
            "A wrote only-a{i} into B's node"
        );
    }
}

/// A process of the test's own, never left running (a failed assertion included).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
