//! A coordinator that cannot save its state (issue 35): it answers every request with the
//! cause instead of hanging, judges no node while it cannot act, and restarts from its state
//! file by itself once the file can be written again; nothing acknowledged is lost and no
//! healthy member is evicted for the silence of its own stall.
//!
//! The data directory is a 1 MiB tmpfs in a private mount namespace (`unshare -m`, as root)
//! with each node's directory on a tmpfs of its own, so filling the first fails only the
//! coordinator's state file. Where namespaces or mounts are not allowed the test skips, unless
//! REPLICHECK_REQUIRE_MOUNT is set.

#[path = "support/store_proc.rs"]
mod store_proc;

#[path = "support/info.rs"]
mod info;
use info::info_line;

use replicheck::store::coordinator::resp::{Client, Reply};
use std::io::Write;
use std::time::{Duration, Instant};

const NODES: usize = 4;
const ACKED_KEYS: usize = 20;
const WRAPPER: &str = r#"#!/bin/sh
dir="$1"; shift
mount -t tmpfs -o size=1m tmpfs "$dir" || exit 97
for n in 0 1 2 3; do
  mkdir "$dir/node-$n" && mount -t tmpfs -o size=64m tmpfs "$dir/node-$n" || exit 97
done
exec "$@"
"#;
const POLICY: &str = r#"
failure_detection = "independent"
heartbeat_interval = "50ms"
suspect_after = "150ms"
dead_after = "300ms"
replica_ack_timeout = "300ms"
"#;

fn set(c: &mut Client, key: &str, value: &str) -> Reply {
    c.call(&[b"SET", key.as_bytes(), value.as_bytes()]).unwrap()
}

#[test]
fn a_coordinator_that_cannot_save_answers_with_the_cause_and_restarts_when_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let nodes = NODES.to_string();
    let Some(up) = store_proc::start_in_private_mounts(
        dir.path(),
        WRAPPER,
        &[data.as_os_str()],
        &[
            "--nodes".as_ref(),
            nodes.as_ref(),
            "--policy".as_ref(),
            policy.as_os_str(),
            "--data-dir".as_ref(),
            data.as_os_str(),
        ],
    ) else {
        return;
    };
    let seen = store_proc::seen_by(up.pid(), &data);
    let mut c = Client::connect_timeout(up.addr, Duration::from_secs(10)).unwrap();
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    for i in 0..ACKED_KEYS {
        assert_eq!(set(&mut c, &format!("k{i}"), &format!("v{i}")), Reply::Simple("OK".into()));
    }
    assert_eq!(info_line(&mut c, "members"), "0,1,2");
    assert_eq!(info_line(&mut c, "state_file"), "ok");

    // Fill the coordinator's filesystem, then kill a member: replacing it is a membership
    // change, which must be saved before it takes effect, and cannot be.
    let filler = seen.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    while file.write_all(&[0u8; 4096]).is_ok() {}
    drop(file);
    store_proc::signal_pid(up.node_pids[0], libc::SIGKILL);

    // Every request is answered, soon, with the cause.
    let deadline = Instant::now() + Duration::from_secs(20);
    let failure = loop {
        let asked = Instant::now();
        let reply = set(&mut c, "during", "stall");
        assert!(asked.elapsed() < Duration::from_secs(5), "a SET took {:?}", asked.elapsed());
        match reply {
            Reply::Error(e) if e.contains("coordinator stalled") => break e,
            _ => {
                assert!(Instant::now() < deadline, "the coordinator never stalled: {reply:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(failure.contains("cannot save its state"), "{failure}");
    assert!(failure.to_lowercase().contains("no space left on device"), "{failure}");
    assert!(info_line(&mut c, "state_file").contains("cannot save its state"));
    // Stalled a while: nothing is judged meanwhile.
    std::thread::sleep(Duration::from_secs(2));

    // Space returns: it restarts from its state file and serves again.
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        match set(&mut c, "after", "space") {
            Reply::Simple(ok) if ok == "OK" => break,
            other => assert!(freed.elapsed() < Duration::from_secs(20), "still failing: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(info_line(&mut c, "stall_restarts").parse::<u64>().unwrap() >= 1);
    assert_eq!(info_line(&mut c, "state_file"), "ok");
    // INFO's counts go on across the restart: the writes acked before the stall still count.
    let acked: u64 = info_line(&mut c, "writes_acked").parse().unwrap();
    assert!(
        acked > ACKED_KEYS as u64,
        "writes_acked {acked} after {ACKED_KEYS} acked before the stall and one after"
    );
    for i in 0..ACKED_KEYS {
        assert_eq!(c.get(format!("k{i}").as_bytes()).unwrap(), Some(format!("v{i}").into_bytes()), "k{i}");
    }
    // The dead member is replaced by the spare now; the healthy ones stay.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let members = info_line(&mut c, "members");
        if members == "1,2,3" {
            break;
        }
        assert!(Instant::now() < deadline, "members are {members}: node 0 not replaced by the spare");
        std::thread::sleep(Duration::from_millis(100));
    }
}
