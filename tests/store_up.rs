//! `replicheck store up` as a user runs it: partitions, zones and ingest capacities from the
//! command line, a RESP client, INFO, then Ctrl-C (SIGINT) stops the cluster and its nodes.

#[path = "support/info.rs"]
mod info;

use replicheck::store::coordinator::resp::{read_reply, Client, Reply};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `store up` process, stopped with SIGINT when dropped (so it stops its node processes).
struct StoreUp {
    child: Child,
    addr: SocketAddr,
    /// Kept open: the process prints to it until it stops.
    _stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl StoreUp {
    fn start(args: &[&str]) -> StoreUp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["store", "up", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run replicheck store up");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            assert!(Instant::now() < deadline, "store up did not print its client port");
            let line = lines.next().expect("store up exited early").unwrap();
            if let Some(rest) = line.strip_prefix("client port ") {
                break rest.split(':').next().unwrap().parse::<u16>().unwrap();
            }
        };
        StoreUp { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), _stdout: lines }
    }
}

impl Drop for StoreUp {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn partitions_zones_and_sorted_placement_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("sorted.toml");
    std::fs::write(
        &policy,
        "placement = \"sorted\"\nreplication_factor = 2\nwrite_quorum = 1\nread_quorum = 1\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let up = StoreUp::start(&[
        "--nodes",
        "3",
        "--partitions",
        "3",
        "--zones",
        "a,a,b",
        "--write-capacity",
        "20/s,unlimited,20/s",
        "--base-load",
        "10/s,0/s,0/s",
        "--policy",
        policy.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let mut c = Client::connect(up.addr).unwrap();
    let info = c.info().unwrap();
    assert!(info.contains("partition2:name=s2,members=0;2\r\n"), "{info}");
    assert!(info.contains("backend0_load:capacity_per_window=2,base_load_per_window=1,"), "{info}");
    assert!(info.contains("backend1_load:capacity_per_window=unlimited,"), "{info}");
    assert!(info.contains("placement:sorted"), "{info}");
    let zone_of = |node: usize| -> String {
        let line = info.lines().find(|l| l.starts_with(&format!("node{node}:"))).unwrap();
        line.rsplit(",zone=").next().unwrap().to_string()
    };
    assert_eq!([zone_of(0), zone_of(1), zone_of(2)], ["0", "0", "1"], "{info}");

    // Sorted placement sends every write to node 0 (1 of 2 per window is background load):
    // of 40 pipelined SETs, at most one per 100 ms window gets in.
    let started = Instant::now();
    let mut raw = Vec::new();
    for i in 0..40 {
        let (key, value) = (format!("s1:{i}"), format!("{i}"));
        raw.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n", key.len(), value.len())
                .as_bytes(),
        );
    }
    let mut stream = std::net::TcpStream::connect(up.addr).unwrap();
    stream.write_all(&raw).unwrap();
    let mut reader = BufReader::new(stream);
    let replies: Vec<Reply> = (0..40).map(|_| read_reply(&mut reader).unwrap()).collect();
    // The SETs may straddle one more window boundary than their duration spans.
    let windows = started.elapsed().as_millis() as usize / 100 + 2;
    let ok = replies.iter().filter(|r| **r == Reply::Simple("OK".into())).count();
    let throttled = replies
        .iter()
        .filter(|r| matches!(r, Reply::Error(e) if e.contains("throttled: ingest backend node 0")))
        .count();
    assert_eq!(ok + throttled, 40, "{replies:?}");
    assert!((1..=windows).contains(&ok), "{ok} admitted in {windows} windows");
    let info = c.info().unwrap();
    assert!(info.contains("first_capacity_breach:backend node 0 offered 3 > capacity 2"), "{info}");

    // The layout is kept with the data: a restart with other partitions is refused.
    drop(c);
    drop(up);
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--port", "0", "--nodes", "3", "--partitions", "2", "--data-dir"])
        .arg(&data)
        .args(["--policy", policy.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("written with another layout"));
}

#[test]
fn a_busy_client_port_is_a_runtime_failure_not_bad_input() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--nodes", "3", "--port", &port, "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&format!("cannot listen for clients on 127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `store up --help` gives the node limit `store up` enforces (issue 36).
#[test]
fn help_gives_the_node_limit() {
    let max = replicheck::policy::NODE_COUNT_MAX;
    let out =
        Command::new(env!("CARGO_BIN_EXE_replicheck")).args(["store", "up", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(&format!("Storage nodes, 1 to {max};")), "{text}");
    let over = (max + 1).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "up", "--nodes", &over])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("--nodes {over}: must be 1 to {max}")), "{err}");
}

fn info_count(c: &mut Client, field: &str) -> u64 {
    info::info_line(c, field).parse().unwrap()
}

/// The coordinator's clock sleeps until its next timer may be due instead of ticking every
/// millisecond: idle for 2 s with heartbeats every 200 ms it wakes about at each round (a
/// 1 ms clock: 2,000 times), and a write then still completes within its deadline.
#[test]
fn an_idle_coordinator_wakes_for_its_timers_not_every_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("heartbeats.toml");
    std::fs::write(
        &policy,
        "failure_detection = \"independent\"\nhealth_check = \"continuous\"\nheartbeat_interval = \"200ms\"\nsuspect_after = \"1s\"\ndead_after = \"3s\"\n",
    )
    .unwrap();
    let up = StoreUp::start(&["--nodes", "3", "--policy", policy.to_str().unwrap()]);
    let mut c = Client::connect(up.addr).unwrap();
    let before = info_count(&mut c, "clock_wakes");
    std::thread::sleep(Duration::from_secs(2));
    let woke = info_count(&mut c, "clock_wakes") - before;
    assert!(woke >= 5, "the heartbeat rounds still wake it ({woke} wakes in 2 s)");
    assert!(woke <= 100, "an idle clock woke {woke} times in 2 s");
    assert_eq!(c.call(&[b"SET", b"k", b"v"]).unwrap(), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"GET", b"k"]).unwrap(), Reply::Bulk(Some(b"v".to_vec())));
    assert!(!c.info().unwrap().contains("health=dead"), "no member judged dead meanwhile");
}
