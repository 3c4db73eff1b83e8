//! The leader family's transport: each machine's sends, as length-prefixed JSON frames over
//! TCP (a big-endian `u32` length, then the frame). A sender dials its receiver; the first frame
//! says which cluster, who sends and to whom, and the receiver closes a connection meant for
//! another process (a port taken again after a process died). A message to an endpoint that
//! cannot be reached is dropped, with everything queued behind it, as a crash drops the
//! messages in flight in the models: the protocol sends again what it needs (roles, in-sync
//! proposals, catch-ups), and a request whose answer is lost fails at its deadline.

use super::LeaderData;
use crate::protocol::{Endpoint, Msg};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

pub type LeaderMsg = Msg<LeaderData>;

/// Largest frame: a catch-up carries a partition's keys whole.
pub const FRAME_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Messages waiting for one destination at most; more are dropped (a slow receiver loses
/// messages as a lossy link does, and the protocol copes).
const QUEUED_MAX: usize = 4096;
/// Bytes of queued messages written with one syscall at most.
const BATCH_BYTES_MAX: usize = 1024 * 1024;
const DIAL_TIMEOUT_MS: u64 = 250;

/// The first frame of every connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Hello {
    cluster_id: u64,
    from: Endpoint,
    to: Endpoint,
}

/// Where a machine's sends go: the TCP mesh between processes, or `store sim`'s network.
/// A send never blocks and may lose the message, as the models' network may.
pub trait LeaderLink: Send + Sync {
    fn send(&self, to: Endpoint, msg: LeaderMsg);
}

/// One process's outgoing links, one per destination, each dialled when first needed.
pub struct Mesh {
    me: Endpoint,
    cluster_id: u64,
    addrs: Arc<dyn Fn(Endpoint) -> Option<SocketAddr> + Send + Sync>,
    links: Mutex<HashMap<Endpoint, mpsc::Sender<LeaderMsg>>>,
}

impl Mesh {
    pub fn new(
        me: Endpoint,
        cluster_id: u64,
        addrs: impl Fn(Endpoint) -> Option<SocketAddr> + Send + Sync + 'static,
    ) -> Mesh {
        Mesh { me, cluster_id, addrs: Arc::new(addrs), links: Mutex::new(HashMap::new()) }
    }
}

impl LeaderLink for Mesh {
    /// Put `msg` on the way to `to` (from a tokio runtime); dropped if `to` has no address or
    /// its queue is full.
    fn send(&self, to: Endpoint, msg: LeaderMsg) {
        let mut links = self.links.lock().expect("no panic holds the links");
        let link = links.entry(to).or_insert_with(|| {
            let (tx, rx) = mpsc::channel(QUEUED_MAX);
            let hello = Hello { cluster_id: self.cluster_id, from: self.me, to };
            tokio::spawn(run_link(hello, (self.addrs)(to), rx));
            tx
        });
        let _ = link.try_send(msg);
    }
}

fn frame(bytes: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(bytes.len()).expect("a frame is under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

fn encode<T: Serialize>(body: &T, out: &mut Vec<u8>) {
    frame(&serde_json::to_vec(body).expect("messages serialize"), out);
}

/// A connection to a receiver, and whether the receiver closed it: a receiver never writes, so
/// anything readable is its end. Knowing it before writing keeps the first message after a
/// receiver's restart, or after a link is cut and healed, from going into a dead socket.
struct Conn {
    writer: tokio::net::tcp::OwnedWriteHalf,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl Conn {
    fn open(&self) -> bool {
        !self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Deliver `rx`'s messages to `hello.to` at `addr`, dialling again after a failure.
async fn run_link(hello: Hello, addr: Option<SocketAddr>, mut rx: mpsc::Receiver<LeaderMsg>) {
    let mut conn: Option<Conn> = None;
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        let Some(addr) = addr else { continue };
        if !conn.as_ref().is_some_and(Conn::open) {
            conn = dial(addr, hello).await;
            if conn.is_none() {
                // Unreachable: what waits for it now is as lost as a crash loses it.
                while rx.try_recv().is_ok() {}
                continue;
            }
        }
        batch.clear();
        encode(&first, &mut batch);
        while batch.len() < BATCH_BYTES_MAX {
            match rx.try_recv() {
                Ok(msg) => encode(&msg, &mut batch),
                Err(_) => break,
            }
        }
        let c = conn.as_mut().expect("dialled");
        if c.writer.write_all(&batch).await.is_err() {
            conn = None;
        }
    }
}

async fn dial(addr: SocketAddr, hello: Hello) -> Option<Conn> {
    let connect = tokio::time::timeout(Duration::from_millis(DIAL_TIMEOUT_MS), TcpStream::connect(addr));
    let stream = connect.await.ok()?.ok()?;
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut bytes = Vec::new();
    encode(&hello, &mut bytes);
    writer.write_all(&bytes).await.ok()?;
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = Arc::clone(&closed);
    tokio::spawn(async move {
        let mut byte = [0u8; 1];
        let _ = reader.read(&mut byte).await;
        watch.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    Some(Conn { writer, closed })
}

/// Accept connections for `me` and hand every message to `inbox` with its sender, until the
/// listener fails. Connections for another endpoint or cluster are closed unread.
pub async fn listen(
    listener: TcpListener,
    me: Endpoint,
    cluster_id: u64,
    inbox: mpsc::Sender<(Endpoint, LeaderMsg)>,
) {
    let refused_logged = Arc::new(Mutex::new(std::collections::HashSet::new()));
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let (inbox, refused_logged) = (inbox.clone(), Arc::clone(&refused_logged));
        tokio::spawn(async move {
            let (mut reader, _writer) = stream.into_split();
            let Ok(Some(hello)) = read_frame::<Hello>(&mut reader).await else { return };
            if hello.to != me || hello.cluster_id != cluster_id {
                if refused_logged.lock().expect("no panic holds it").insert((hello.from, hello.cluster_id)) {
                    eprintln!(
                        "replicheck store: refused messages from {:?} of cluster {:016x} meant for {:?} of that cluster: this is {me:?} of cluster {cluster_id:016x}",
                        hello.from, hello.cluster_id, hello.to
                    );
                }
                return;
            }
            while let Ok(Some(msg)) = read_frame::<LeaderMsg>(&mut reader).await {
                if inbox.send((hello.from, msg)).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The next frame, `None` at the end of the stream; a malformed frame is an error.
async fn read_frame<T: for<'de> Deserialize<'de>>(
    reader: &mut (impl AsyncReadExt + Unpin),
) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too long"));
    }
    let mut bytes = vec![0u8; len];
    reader.read_exact(&mut bytes).await?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::leader::LeaderMsg as Leader;

    #[test]
    fn messages_reach_their_endpoint_and_a_misdirected_hello_is_closed() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (tx, mut rx) = mpsc::channel(16);
            tokio::spawn(listen(listener, Endpoint::Node(1), 7, tx));
            // Another cluster's sender, and one that expects node 2 there: neither is read.
            for (cluster_id, to) in [(8, Endpoint::Node(1)), (7, Endpoint::Node(2))] {
                let wrong = Mesh::new(Endpoint::Node(0), cluster_id, move |_| Some(addr));
                wrong.send(to, Msg::Ping);
            }
            let mesh = Mesh::new(Endpoint::Node(0), 7, move |e| (e == Endpoint::Node(1)).then_some(addr));
            let append: Leader<LeaderData> = Leader::Behind { shard: 0, epoch: 3 };
            mesh.send(Endpoint::Node(1), Msg::Pong);
            mesh.send(Endpoint::Node(1), Msg::Leader(append.clone()));
            mesh.send(Endpoint::Node(5), Msg::Ping);
            let got = tokio::time::timeout(Duration::from_secs(5), async {
                (rx.recv().await.unwrap(), rx.recv().await.unwrap())
            })
            .await
            .expect("both arrive");
            assert_eq!(got, ((Endpoint::Node(0), Msg::Pong), (Endpoint::Node(0), Msg::Leader(append))));
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(rx.try_recv().is_err(), "nothing from the misdirected senders");
        });
    }
}
