//! One node, killed: every write it acked is there when it restarts.
//!
//! The cluster tests kill nodes under load and check what clients read, but a quorum read
//! masks a node that lost a write another replica kept. Here the node is asked directly:
//! writes acked since its last durable commit of redb live only in its write-ahead log, and
//! a SIGKILL leaves them there alone.

use replicheck::store::coordinator::link::NodeLink;
use replicheck::store::node::wire::{NodeReply, NodeRequest};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

struct Node(Child, std::net::SocketAddr);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(data: &Path) -> Node {
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(["store", "node", "--id", "0", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
    Node(child, addr)
}

#[test]
fn a_killed_node_keeps_every_write_it_acked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node-0");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut acked: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut version = 0;
    // One write at a time: each is a group of its own, so 113 groups leave the last 14 (past
    // the durable commits at every 33rd) in the log alone; then 4 at once, grouped.
    for (round, (writes, at_once)) in [(113u64, 1usize), (300, 4), (57, 1)].into_iter().enumerate() {
        let mut node = start(&data);
        let link = std::sync::Arc::new(NodeLink::new(node.1, 1, 0));
        rt.block_on(async {
            for (key, version) in &acked {
                let deadline = Instant::now() + Duration::from_secs(10);
                let read = link.request(NodeRequest::Read { key: key.clone() }, deadline).await;
                match read {
                    Ok(NodeReply::Value { version: stored, value }) => {
                        assert_eq!(
                            stored,
                            *version,
                            "round {round}: {:?} after the kill",
                            String::from_utf8_lossy(key)
                        );
                        assert_eq!(value, Some(format!("v{version}").into_bytes()));
                    }
                    other => panic!("round {round}: {other:?}"),
                }
            }
            let mut batch = Vec::new();
            for _ in 0..writes {
                version += 1;
                let key = format!("k{}", version % 150).into_bytes();
                batch.push((key, version));
                if batch.len() == at_once {
                    let sends: Vec<_> = batch
                        .iter()
                        .map(|(key, version)| {
                            let request = NodeRequest::Replicate {
                                key: key.clone(),
                                version: *version,
                                value: Some(format!("v{version}").into_bytes()),
                            };
                            let link = std::sync::Arc::clone(&link);
                            tokio::spawn(async move {
                                link.request(request, Instant::now() + Duration::from_secs(10)).await
                            })
                        })
                        .collect();
                    for send in sends {
                        let reply = send.await.unwrap();
                        assert!(matches!(reply, Ok(NodeReply::Stored { .. })), "{reply:?}");
                    }
                    for (key, version) in batch.drain(..) {
                        acked.retain(|(k, _)| *k != key);
                        acked.push((key, version));
                    }
                }
            }
        });
        // Killed the moment the last ack arrived.
        node.0.kill().unwrap();
        node.0.wait().unwrap();
    }
    assert_eq!(acked.len(), 150);
    // And once more after the last round.
    let node = start(&data);
    let link = NodeLink::new(node.1, 1, 0);
    rt.block_on(async {
        for (key, version) in &acked {
            let read = link
                .request(NodeRequest::Read { key: key.clone() }, Instant::now() + Duration::from_secs(10));
            assert!(matches!(read.await, Ok(NodeReply::Value { version: v, .. }) if v == *version));
        }
    });
}
