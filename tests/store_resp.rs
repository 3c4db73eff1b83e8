//! The RESP front end of a real cluster: the supported commands, and bad input answered with an
//! error while the server keeps serving.

use replicheck::store::cli::store_policy;
use replicheck::store::cluster::{Cluster, ClusterConfig};
use replicheck::store::coordinator::resp::{Client, Reply};
use std::path::PathBuf;

#[path = "support/local_cluster.rs"]
mod local_cluster;
use local_cluster::local_config;

fn cluster(dir: &tempfile::TempDir, value_bytes_max: usize) -> Cluster {
    let policy = store_policy(None, None, 3).expect("default policy");
    let mut config = ClusterConfig::local(
        PathBuf::from(env!("CARGO_BIN_EXE_replicheck")),
        3,
        policy,
        dir.path().to_path_buf(),
    );
    config.clients.value_bytes_max = value_bytes_max;
    Cluster::start(config).expect("cluster starts")
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Some(text.as_bytes().to_vec()))
}

fn is_error(reply: &Reply, fragment: &str) -> bool {
    matches!(reply, Reply::Error(text) if text.contains(fragment))
}

#[test]
fn commands_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(&dir, 1024);
    let mut c = Client::connect(cluster.client_addr()).unwrap();

    assert_eq!(c.call(&[b"PING"]).unwrap(), Reply::Simple("PONG".into()));
    assert_eq!(c.call(&[b"ping", b"hi"]).unwrap(), bulk("hi"));
    assert_eq!(c.call(&[b"GET", b"k"]).unwrap(), Reply::Bulk(None));
    assert_eq!(c.call(&[b"SET", b"k", b"v1"]).unwrap(), ok());
    assert_eq!(c.call(&[b"GET", b"k"]).unwrap(), bulk("v1"));
    // Binary-safe keys and values.
    assert_eq!(c.call(&[b"SET", b"\x00\r\n", b"\xff\r\n\x00"]).unwrap(), ok());
    assert_eq!(c.call(&[b"GET", b"\x00\r\n"]).unwrap(), Reply::Bulk(Some(b"\xff\r\n\x00".to_vec())));
    assert_eq!(c.call(&[b"DEL", b"k", b"never"]).unwrap(), Reply::Integer(1));
    assert_eq!(c.call(&[b"GET", b"k"]).unwrap(), Reply::Bulk(None));

    // The token SET: a retry with the same token reuses the first attempt's version, so it
    // cannot overwrite a newer write made in between.
    assert_eq!(c.call(&[b"SET", b"t", b"first", b"TOKEN", b"tok-1"]).unwrap(), ok());
    assert_eq!(c.call(&[b"SET", b"t", b"second"]).unwrap(), ok());
    let retry = c.call(&[b"SET", b"t", b"first", b"TOKEN", b"tok-1"]).unwrap();
    assert_eq!(retry, ok());
    // The default policy has idempotency_tokens = false: every attempt is a new write.
    assert_eq!(c.call(&[b"GET", b"t"]).unwrap(), bulk("first"));
    assert!(is_error(&c.call(&[b"SET", b"t", b"v", b"EX", b"10"]).unwrap(), "syntax error"));

    let info = match c.call(&[b"INFO"]).unwrap() {
        Reply::Bulk(Some(bytes)) => String::from_utf8(bytes).unwrap(),
        other => panic!("INFO replied {other:?}"),
    };
    assert!(info.contains("write_quorum:2"), "{info}");
    assert!(info.contains("members:0,1,2"), "{info}");
    assert!(info.contains("evictions:0"), "{info}");
    let acked: u64 =
        info.lines().find_map(|l| l.strip_prefix("writes_acked:")).unwrap().trim().parse().unwrap();
    assert!(acked >= 5, "{info}");

    // Unknown commands and wrong arity: an error, and the connection keeps serving.
    assert!(is_error(&c.call(&[b"FLUSHALL"]).unwrap(), "unknown command 'FLUSHALL'"));
    assert!(is_error(&c.call(&[b"GET"]).unwrap(), "wrong number of arguments for 'get'"));
    assert_eq!(c.call(&[b"PING"]).unwrap(), Reply::Simple("PONG".into()));

    // An oversized value: an error naming the limit; that connection closes, the server serves.
    let mut big = Client::connect(cluster.client_addr()).unwrap();
    let value = vec![b'x'; 1025];
    let reply = big.call(&[b"SET", b"big", &value]).unwrap();
    assert!(is_error(&reply, "1025 bytes exceeds the limit of 1024 bytes"), "{reply:?}");
    assert_eq!(c.call(&[b"GET", b"big"]).unwrap(), Reply::Bulk(None));
    assert_eq!(c.call(&[b"SET", b"fits", &vec![b'y'; 1024]]).unwrap(), ok());

    // Malformed RESP: a protocol error on that connection; the others go on.
    let mut bad = Client::connect(cluster.client_addr()).unwrap();
    bad.send_raw(b"*2\r\n$3\r\nGET\r\n:12\r\n").unwrap();
    assert!(is_error(&bad.read_reply().unwrap(), "Protocol error"));
    let mut bad = Client::connect(cluster.client_addr()).unwrap();
    bad.send_raw(b"*1\r\n$4\r\nPINGxx\r\n").unwrap();
    assert!(is_error(&bad.read_reply().unwrap(), "Protocol error"));
    // Inline commands, as typed into telnet.
    let mut inline = Client::connect(cluster.client_addr()).unwrap();
    inline.send_raw(b"SET inline yes\r\nGET inline\r\n").unwrap();
    assert_eq!(inline.read_reply().unwrap(), ok());
    assert_eq!(inline.read_reply().unwrap(), bulk("yes"));

    assert_eq!(c.call(&[b"GET", b"fits"]).unwrap(), Reply::Bulk(Some(vec![b'y'; 1024])));
}

#[test]
fn acked_writes_survive_a_crash_of_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(&dir, 1024);
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    for i in 0..50u32 {
        let (key, value) = (format!("k{}", i % 7), format!("v{i}"));
        assert_eq!(c.call(&[b"SET", key.as_bytes(), value.as_bytes()]).unwrap(), ok());
    }
    for node in 0..3 {
        cluster.kill(node).unwrap();
    }
    // With every node down, a write cannot reach its quorum: an error, not a hang.
    let reply = c.call(&[b"SET", b"k0", b"lost"]).unwrap();
    assert!(is_error(&reply, "write quorum not reached"), "{reply:?}");
    for node in 0..3 {
        cluster.restart(node).unwrap();
    }
    for k in 0..7u32 {
        let last = (0..50u32).filter(|i| i % 7 == k).max().unwrap();
        let reply = c.call(&[b"GET", format!("k{k}").as_bytes()]).unwrap();
        // "lost" reached no node (all were down), so the last acked value is the answer.
        assert_eq!(reply, bulk(&format!("v{last}")), "key k{k}");
    }
}

#[test]
fn a_token_names_one_write_so_another_value_under_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = local_config(dir.path(), "idempotency_tokens = true\n", 3, dir.path().join("data"));
    let cluster = Cluster::start(config).expect("cluster starts");
    let mut c = Client::connect(cluster.client_addr()).unwrap();
    assert_eq!(c.call(&[b"SET", b"t", b"first", b"TOKEN", b"tok-1"]).unwrap(), ok());
    assert_eq!(c.call(&[b"SET", b"t", b"second"]).unwrap(), ok());
    // The retry (same value) is acked and does not overwrite the newer write.
    assert_eq!(c.call(&[b"SET", b"t", b"first", b"TOKEN", b"tok-1"]).unwrap(), ok());
    assert_eq!(c.call(&[b"GET", b"t"]).unwrap(), bulk("second"));
    // Another value under the same token is refused, not acked and dropped.
    let reply = c.call(&[b"SET", b"t", b"third", b"TOKEN", b"tok-1"]).unwrap();
    assert!(is_error(&reply, "token tok-1 was first used with another value"), "{reply:?}");
    assert_eq!(c.call(&[b"GET", b"t"]).unwrap(), bulk("second"));
    // The same token on another key is another write.
    assert_eq!(c.call(&[b"SET", b"u", b"third", b"TOKEN", b"tok-1"]).unwrap(), ok());
    assert_eq!(c.call(&[b"GET", b"u"]).unwrap(), bulk("third"));
}
