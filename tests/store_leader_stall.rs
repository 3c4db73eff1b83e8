//! A leader-family coordinator that cannot save its state (its filesystem full when a
//! failover must be saved): every request is answered with the cause at once, and once the
//! file can be written again the coordinator restarts from it by itself, fails over and
//! serves; nothing acknowledged is lost.
//!
//! As tests/store_state_stall.rs: the data directory is a 1 MiB tmpfs in a private mount
//! namespace with each node's directory on a tmpfs of its own; skipped where namespaces or
//! mounts are not allowed, unless REPLICHECK_REQUIRE_MOUNT is set.

#[path = "support/store_proc.rs"]
mod store_proc;

#[path = "support/info.rs"]
mod info;
use info::info_line;

use replicheck::store::coordinator::resp::{Client, Reply};
use std::io::Write;
use std::time::{Duration, Instant};

const WRAPPER: &str = r#"#!/bin/sh
dir="$1"; shift
mount -t tmpfs -o size=1m tmpfs "$dir" || exit 97
for n in 0 1 2; do
  mkdir "$dir/node-$n" && mount -t tmpfs -o size=64m tmpfs "$dir/node-$n" || exit 97
done
exec "$@"
"#;

const POLICY: &str = r#"
replication = "leader"
acks = "in_sync"
min_in_sync = 2
replica_lag_timeout = "500ms"
failure_detection = "independent"
heartbeat_interval = "50ms"
suspect_after = "150ms"
dead_after = "300ms"
replica_ack_timeout = "1s"
"#;

#[test]
fn a_leader_coordinator_that_cannot_save_a_failover_answers_with_the_cause_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let Some(up) = store_proc::start_in_private_mounts(
        dir.path(),
        WRAPPER,
        &[data.as_os_str()],
        &[
            "--nodes".as_ref(),
            "3".as_ref(),
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
    for i in 0..20 {
        c.set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes(), None).unwrap();
    }
    assert!(info_line(&mut c, "partition_s0").starts_with("epoch=0,primary=0"));
    // Fill the coordinator's filesystem, then kill the primary: the promotion must be saved
    // before anyone hears of it, and cannot be.
    let filler = seen.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    while file.write_all(&[0u8; 4096]).is_ok() {}
    drop(file);
    store_proc::signal_pid(up.node_pids[0], libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(20);
    let failure = loop {
        let asked = Instant::now();
        let reply = c.call(&[b"SET", b"during", b"stall"]).unwrap();
        assert!(asked.elapsed() < Duration::from_secs(5), "a SET took {:?}", asked.elapsed());
        match reply {
            Reply::Error(e) if e.contains("coordinator stalled") => break e,
            _ => {
                assert!(Instant::now() < deadline, "the coordinator never stalled: {reply:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(failure.to_lowercase().contains("no space left on device"), "{failure}");
    assert!(info_line(&mut c, "state_file").contains("cannot save its state"));
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        match c.call(&[b"SET", b"after", b"space"]).unwrap() {
            Reply::Simple(ok) if ok == "OK" => break,
            other => assert!(freed.elapsed() < Duration::from_secs(20), "still failing: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(info_line(&mut c, "state_file"), "ok");
    assert!(info_line(&mut c, "stall_restarts").parse::<u64>().unwrap() >= 1);
    let route = info_line(&mut c, "partition_s0");
    assert!(route.starts_with("epoch=1,") && !route.contains("primary=0"), "{route}");
    for i in 0..20 {
        assert_eq!(c.get(format!("k{i}").as_bytes()).unwrap(), Some(format!("v{i}").into_bytes()), "k{i}");
    }
    assert_eq!(c.get(b"after").unwrap(), Some(b"space".to_vec()));
}
