//! What client connections may cost the store (issue 35): a client that does not read its
//! replies, many half-sent large values, too many connections, idle connections, a value
//! over the limit, and limits that could not serve anyone.

#[path = "support/info.rs"]
mod info;
#[path = "support/store_proc.rs"]
mod store_proc;

use replicheck::store::coordinator::resp::{Client, Reply};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use store_proc::StoreProc;

const MIB: usize = 1024 * 1024;

/// The store process's peak resident memory (VmHWM), in bytes.
fn peak_rss_bytes(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

fn info_field(c: &mut Client, field: &str) -> u64 {
    info::info_line(c, field).parse().unwrap()
}

/// Wait until INFO's `field` reaches `at_least`.
fn wait_for(c: &mut Client, field: &str, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(c, field) < at_least {
        assert!(Instant::now() < deadline, "INFO {field} stays below {at_least}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_error(reply: &Reply, fragment: &str) -> bool {
    matches!(reply, Reply::Error(text) if text.contains(fragment))
}

#[test]
fn replies_a_client_does_not_read_wait_in_its_socket_not_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let up = StoreProc::start(&dir.path().join("data"), 0, &["--value-bytes-max", &(2 * MIB).to_string()]);
    let mut c = Client::connect(up.addr).unwrap();
    let value = vec![b'v'; MIB];
    assert_eq!(c.call(&[b"SET", b"big", &value]).unwrap(), Reply::Simple("OK".into()));
    let before = peak_rss_bytes(up.pid());

    // 300 GETs of a 1 MiB value in one go, no reply read: 300 MiB if the store kept them.
    const GETS: usize = 300;
    let mut pipe = TcpStream::connect(up.addr).unwrap();
    pipe.write_all(&b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(GETS)).unwrap();
    // The store has read the whole pipeline (it is small) and answers what its socket takes.
    std::thread::sleep(Duration::from_millis(1500));
    let grown = peak_rss_bytes(up.pid()).saturating_sub(before);
    assert!(grown < 64 * MIB, "the store grew by {} MiB for replies nobody reads", grown / MIB);
    // Other clients are served meanwhile.
    assert_eq!(c.call(&[b"PING"]).unwrap(), Reply::Simple("PONG".into()));

    // Read now: every reply arrives, in order.
    let mut reader = std::io::BufReader::new(pipe);
    for i in 0..GETS {
        let reply = replicheck::store::coordinator::resp::read_reply(&mut reader).unwrap();
        assert_eq!(reply, Reply::Bulk(Some(value.clone())), "reply {i}");
    }
}

#[test]
fn half_sent_values_are_bounded_over_all_connections() {
    let dir = tempfile::tempdir().unwrap();
    let up = StoreProc::start(
        &dir.path().join("data"),
        0,
        &["--value-bytes-max", &MIB.to_string(), "--request-bytes-max", &(3 * MIB).to_string()],
    );
    let mut c = Client::connect(up.addr).unwrap();
    // Each connection sends all but the last byte of a 1 MiB SET and waits.
    let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${MIB}\r\n");
    let mut partial = header.into_bytes();
    partial.extend(vec![b'x'; MIB - 1]);
    let mut conns = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(up.addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        // A refused connection may be closed while this is still being written.
        let _ = s.write_all(&partial);
        conns.push(s);
    }
    wait_for(&mut c, "clients_refused_busy", 1);
    let held = info_field(&mut c, "client_request_bytes");
    assert!(held <= (3 * MIB) as u64, "{held} bytes held over a bound of {}", 3 * MIB);
    // The refused ones were told why; the others, completed, are executed.
    let (mut told, mut stored) = (0, 0);
    for s in &mut conns {
        // A held one has nothing to read yet; a refused one has its error (or soon will).
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut buf = [0u8; 256];
        let early = s.read(&mut buf).ok();
        let text = match early {
            Some(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            None => {
                // Complete it: a held request is executed; a refused one answers its error.
                let _ = s.write_all(b"x\r\n");
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let n = s.read(&mut buf).unwrap_or(0);
                String::from_utf8_lossy(&buf[..n]).into_owned()
            }
        };
        if text.starts_with("+OK") {
            stored += 1;
        } else {
            assert!(text.is_empty() || text.contains("busy: client requests in memory exceed"), "{text}");
            told += usize::from(!text.is_empty());
        }
    }
    assert!(told >= 1, "no refused connection read its error");
    assert!(stored >= 2, "{stored} of the half-sent values fit in 3 MiB");
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut c, "client_request_bytes") > 0 {
        assert!(Instant::now() < deadline, "request bytes are not returned when connections close");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.get(b"k").unwrap().map(|v| v.len()), Some(MIB));
}

#[test]
fn connections_past_the_maximum_are_refused_and_idle_ones_closed() {
    let dir = tempfile::tempdir().unwrap();
    let up = StoreProc::start(
        &dir.path().join("data"),
        0,
        &["--connections-max", "3", "--idle-timeout", "1500ms"],
    );
    let mut c = Client::connect(up.addr).unwrap();
    let mut kept = vec![Client::connect(up.addr).unwrap(), Client::connect(up.addr).unwrap()];
    for k in &mut kept {
        k.ping().unwrap();
    }
    let mut fourth = Client::connect(up.addr).unwrap();
    fourth.set_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(is_error(&fourth.read_reply().unwrap(), "max number of clients reached"));
    assert_eq!(info_field(&mut c, "rejected_connections"), 1);

    // Idle: the two kept connections send nothing and are closed; `c` keeps talking.
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        c.ping().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    for k in &mut kept {
        assert!(k.ping().is_err(), "an idle connection is still open");
    }
    assert_eq!(info_field(&mut c, "clients_closed_idle"), 2);
    assert_eq!(info_field(&mut c, "connected_clients"), 1);
    // Their places are free again.
    Client::connect(up.addr).unwrap().ping().unwrap();
}

#[test]
fn a_value_over_the_limit_is_answered_before_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let up = StoreProc::start(&dir.path().join("data"), 0, &["--value-bytes-max", "100000"]);
    // 32 MiB: the store refuses it at its header, while the client is still sending.
    let mut c = Client::connect(up.addr).unwrap();
    let reply = c.call(&[b"SET", b"k", &vec![b'x'; 32 * MIB]]).expect("the error reply, not a reset");
    assert!(is_error(&reply, "exceeds the limit of 100000 bytes"), "{reply:?}");
    // A key is an argument too, and is called one.
    let mut c = Client::connect(up.addr).unwrap();
    let reply = c.call(&[b"GET", &vec![b'k'; 100_001]]).unwrap();
    assert!(is_error(&reply, "argument of 100001 bytes exceeds"), "{reply:?}");
}

#[test]
fn limits_that_could_serve_no_client_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, says) in [
        ("--value-bytes-max", "0", "--value-bytes-max 0: must be at least 64"),
        ("--connections-max", "0", "--connections-max 0: must be at least 1"),
        ("--request-bytes-max", "1000", "--request-bytes-max 1000: must hold one request"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_replicheck"))
            .args(["store", "up", "--port", "0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args([flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}
