//! A full disk (issue 35): a write that cannot be stored fails with the cause, naming the
//! node, and the nodes recover by themselves once space returns; nothing acknowledged is lost.
//!
//! The store runs in a private mount namespace on a small tmpfs (`unshare -m`, as root); the
//! test fills and frees that filesystem through `/proc/PID/root`. Where namespaces or mounts
//! are not allowed the test skips, unless REPLICHECK_REQUIRE_MOUNT is set.

#[path = "support/store_proc.rs"]
mod store_proc;

use replicheck::store::coordinator::resp::{Client, Reply};
use std::io::Write;
use std::time::{Duration, Instant};

const WRAPPER: &str =
    "#!/bin/sh\nmount -t tmpfs -o size=\"$1\" tmpfs \"$2\" || exit 97\nshift 2\nexec \"$@\"\n";
const ACKED_KEYS: usize = 20;

fn set(c: &mut Client, key: &str, value: &[u8]) -> Reply {
    c.call(&[b"SET", key.as_bytes(), value]).unwrap()
}

#[test]
fn a_full_disk_fails_writes_with_the_cause_and_the_store_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let data = mnt.join("data");
    let Some(up) = store_proc::start_in_private_mounts(
        dir.path(),
        WRAPPER,
        &["16m".as_ref(), mnt.as_os_str()],
        &["--nodes".as_ref(), "3".as_ref(), "--data-dir".as_ref(), data.as_os_str()],
    ) else {
        return;
    };
    // The store's view of the small filesystem.
    let seen = store_proc::seen_by(up.pid(), &mnt);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    for i in 0..ACKED_KEYS {
        assert_eq!(set(&mut c, &format!("k{i}"), format!("v{i}").as_bytes()), Reply::Simple("OK".into()));
    }

    // Fill it.
    let filler = seen.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while file.write_all(&chunk).is_ok() {}
    drop(file);

    // Writes now fail, each saying why.
    let big = vec![b'x'; 8 * 1024];
    let mut failure = None;
    for i in 0..400 {
        match set(&mut c, &format!("big{i}"), &big) {
            Reply::Simple(_) => continue,
            Reply::Error(e) => {
                failure = Some(e);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let failure = failure.expect("a write fails on a full disk");
    assert!(failure.contains("write quorum not reached"), "{failure}");
    // Refused at once, not left to the ack deadline, and no refusing node is taken for dead.
    assert!(failure.contains("too few of the others can answer"), "{failure}");
    assert!(!c.info().unwrap().contains("health=dead"), "a node with a full disk is alive");
    assert!(
        failure.contains("node 0: storage: no space left on device")
            || failure.contains("node 1: storage: no space left on device")
            || failure.contains("node 2: storage: no space left on device"),
        "the error names the node and the cause: {failure}"
    );

    // Space returns: writes succeed again without a restart.
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        match set(&mut c, "after", b"space") {
            Reply::Simple(ok) if ok == "OK" => break,
            other => assert!(
                freed.elapsed() < Duration::from_secs(20),
                "writes still fail after space returned: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..ACKED_KEYS {
        assert_eq!(c.get(format!("k{i}").as_bytes()).unwrap(), Some(format!("v{i}").into_bytes()), "k{i}");
    }
    assert_eq!(c.get(b"after").unwrap(), Some(b"space".to_vec()));
}
