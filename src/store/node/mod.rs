//! A storage node: its own OS process (so that SIGKILL is real), serving the wire protocol
//! from durable storage. `replicheck store node --id N --listen ADDR --data-dir DIR`.
//!
//! The node's room: this server, its durable storage (`storage`: redb with group commit) and
//! the wire protocol it serves (`wire`: the frames the coordinator's links and peers speak).
//! It uses nothing else of the store: the coordinator depends on the node, never the reverse.

pub mod log;
pub mod sink;
pub mod storage;
pub mod wire;

use sink::FrameSink;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use storage::{Committer, Storage, BATCH_WRITES_MAX};
use tokio::net::{TcpListener, TcpStream};
use wire::{Frame, FrameReader, NodeReply, NodeRequest, SCAN_ENTRIES_MAX};

/// Reply bytes queued on one connection at most before the node stops reading its requests
/// (a coordinator that does not read its replies).
const REPLY_BYTES_QUEUED_MAX: usize = 8 << 20;

/// Run a node until killed. Prints `listening ADDR` on stdout once it accepts connections,
/// which is how a parent that passed port 0 learns the port.
pub fn run(node_id: u8, listen: SocketAddr, data_dir: &Path) -> Result<(), String> {
    let storage = Storage::open(data_dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = bind_with_retry(listen).await?;
        let local = listener.local_addr().map_err(|e| format!("listener: {e}"))?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening {local}")
            .and_then(|_| stdout.flush())
            .map_err(|e| format!("stdout: {e}"))?;
        loop {
            let (stream, _) = listener.accept().await.map_err(|e| format!("accept: {e}"))?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve_connection(node_id, storage.clone(), stream));
        }
    })
}

/// A restarted node (or coordinator) binds the address it had before its crash; the port can
/// stay briefly busy.
pub async fn bind_with_retry(listen: SocketAddr) -> Result<TcpListener, String> {
    let mut last_error = String::new();
    for _ in 0..50 {
        match TcpListener::bind(listen).await {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = e.to_string(),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(format!("cannot listen on {listen}: {last_error}"))
}

async fn serve_connection(node_id: u8, storage: Storage, stream: TcpStream) {
    let (mut reader, mut writer) = stream.into_split();
    // The caller first says whom it expects: anyone who dialled this address for another
    // node (its port was free, this node took it) is refused before it reads or writes.
    let (id, refusal) = match wire::read_frame::<NodeRequest, _>(&mut reader).await {
        Ok(Some(Frame { id, body: NodeRequest::Hello { cluster_id, node_id: expected } })) => {
            (id, refusal(node_id, storage.cluster_id(), expected, cluster_id))
        }
        Ok(Some(frame)) => (frame.id, Some("a connection to a node starts with a hello".to_string())),
        _ => return,
    };
    let body = match refusal.clone() {
        None => NodeReply::Alive { node_id, max_version: storage.max_version() },
        Some(message) => NodeReply::Failed { message },
    };
    if wire::write_frame(&mut writer, &Frame { id, body }).await.is_err() || refusal.is_some() {
        return;
    }
    let sink = FrameSink::start(writer);
    let mut frames = FrameReader::new(reader);
    let mut commits = Commits::default();
    let _ = serve_requests(node_id, &storage, &mut frames, &sink, &mut commits).await;
    // Writes of other connections may wait for this committer, and ours for their replies.
    commits.finish().await;
    sink.close();
}

/// This connection's part in group commit: the committer it was elected, until it starts it,
/// and the commit it started, while that runs.
#[derive(Default)]
struct Commits {
    elected: Option<Committer>,
    running: Option<tokio::task::JoinHandle<()>>,
    /// Writes this connection queued since its commit started (or since it last had none).
    grouped: usize,
}

impl Commits {
    /// Start the commit this connection was elected for, on a blocking thread: the connection
    /// goes on reading, so a heartbeat or a read is answered while the disk syncs (a node
    /// whose disk is slow is slow, not silent), and its later writes join that commit's next
    /// group.
    fn start(&mut self) {
        if let Some(c) = self.elected.take() {
            self.running = Some(tokio::task::spawn_blocking(move || c.run()));
        }
    }

    /// Start the commit this connection was elected for, if any, and wait until the one
    /// running has committed every queued write. A panic in it is this connection's, as it was
    /// when the commit ran on the connection's own task.
    async fn finish(&mut self) {
        self.start();
        if let Some(running) = self.running.take() {
            if let Err(e) = running.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
    }

    /// Once a full group of this connection's writes waits behind its own commit, stop
    /// reading until that commit has ended (a peer that never pauses must not grow the queue
    /// without bound); a commit that has ended has nothing left of ours. Writes that joined
    /// another connection's commit are that connection's to bound, as before.
    async fn bound(&mut self) {
        if self.grouped >= BATCH_WRITES_MAX {
            self.finish().await;
        }
        if self.running.as_ref().is_some_and(|r| r.is_finished()) {
            self.running = None;
        }
        if self.elected.is_none() && self.running.is_none() {
            self.grouped = 0;
        }
    }
}

/// Answer requests until the connection ends. A write is answered by its committer once
/// durable, everything else at once, during a commit too. A connection elected committer
/// starts the commit once no further request has arrived, so every write that came meanwhile
/// joins it; it never waits on its connection first, as other connections' writes may wait
/// for it.
async fn serve_requests(
    node_id: u8,
    storage: &Storage,
    frames: &mut FrameReader,
    sink: &Arc<FrameSink>,
    commits: &mut Commits,
) -> std::io::Result<()> {
    loop {
        commits.bound().await;
        let Frame { id, body } = match frames.buffered::<NodeRequest>()? {
            Some(frame) => frame,
            None if frames.try_fill()? => continue,
            None if commits.elected.is_some() => {
                commits.start();
                continue;
            }
            None => match frames.next().await? {
                Some(frame) => frame,
                None => return Ok(()),
            },
        };
        if sink.queued_bytes() >= REPLY_BYTES_QUEUED_MAX {
            commits.start();
            sink.until_below(REPLY_BYTES_QUEUED_MAX).await;
        }
        if sink.is_closed() {
            return Ok(());
        }
        match body {
            NodeRequest::Replicate { key, version, value } => {
                let reply_to = Arc::clone(sink);
                let done = Box::new(move |outcome| {
                    let body = match outcome {
                        Ok(version) => NodeReply::Stored { version },
                        Err(message) => NodeReply::Failed { message },
                    };
                    let _ = reply_to.send(&wire::encode_frame(&Frame { id, body }));
                });
                if let Some(elected) = storage.submit(key, version, value, done) {
                    commits.elected = Some(elected);
                }
                commits.grouped += 1;
            }
            request => {
                let body = handle(node_id, storage, request);
                if sink.send(&wire::encode_frame(&Frame { id, body })).is_err() {
                    return Ok(());
                }
            }
        }
    }
}

/// Why this node (`me`, stamped with `stamped`) is not whom a hello expects, if it is not. A
/// database never stamped (a node run by hand) answers for any cluster.
fn refusal(me: u8, stamped: Option<u64>, expected: u8, cluster_id: u64) -> Option<String> {
    let cluster_differs = stamped.is_some_and(|id| id != cluster_id);
    (expected != me || cluster_differs).then(|| {
        let mine = stamped.map_or("an unstamped database".to_string(), |id| format!("cluster {id:016x}"));
        format!("this is node {me} of {mine}, not node {expected} of cluster {cluster_id:016x}")
    })
}

/// Answer a request that writes nothing.
pub(crate) fn handle(node_id: u8, storage: &Storage, request: NodeRequest) -> NodeReply {
    let result = match request {
        NodeRequest::Replicate { .. } => Err("a write goes to a committer".to_string()),
        NodeRequest::Read { key } => {
            storage.read(&key).map(|(version, value)| NodeReply::Value { version, value })
        }
        NodeRequest::Heartbeat => Ok(NodeReply::Alive { node_id, max_version: storage.max_version() }),
        NodeRequest::Scan { after, limit } => storage
            .scan(after.as_deref(), limit.min(SCAN_ENTRIES_MAX) as usize)
            .map(|entries| NodeReply::Entries { entries }),
        NodeRequest::Hello { .. } => Err("a hello comes once, first".to_string()),
    };
    result.unwrap_or_else(|message| NodeReply::Failed { message })
}

#[cfg(test)]
mod tests {
    use super::refusal;
    use super::storage::Storage;
    use super::wire::{self, Frame, NodeReply, NodeRequest};
    use std::time::Duration;

    async fn next_reply(reader: &mut tokio::net::tcp::OwnedReadHalf) -> Frame<NodeReply> {
        wire::read_frame::<NodeReply, _>(reader).await.unwrap().expect("the node closed the connection")
    }

    /// A write whose commit cannot finish (the disk stalls) does not hold up the heartbeat
    /// and the read sent after it on the same connection: a slow disk is not a silent node.
    /// The write is answered once the disk is back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_heartbeat_and_a_read_are_answered_while_a_commit_stalls() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = storage.clone();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            super::serve_connection(1, served, stream).await;
        });
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        let send = |id, body: NodeRequest| Frame { id, body };
        let reply = |id, body: NodeReply| Frame { id, body };
        wire::write_frame(&mut writer, &send(0, NodeRequest::Hello { cluster_id: 7, node_id: 1 }))
            .await
            .unwrap();
        let hello = wire::read_frame::<NodeReply, _>(&mut reader).await.unwrap().unwrap();
        assert!(matches!(hello.body, NodeReply::Alive { node_id: 1, .. }), "{hello:?}");

        // The disk stalls on a thread of its own (a lock held across the awaits below would
        // hold up the test's own thread).
        let (stalled, release) = std::sync::mpsc::channel::<()>();
        let (held, holding) = std::sync::mpsc::channel::<()>();
        let disk = storage.clone();
        let stall = std::thread::spawn(move || {
            let _guard = disk.stall_commits();
            held.send(()).unwrap();
            let _ = release.recv();
        });
        holding.recv().unwrap();
        let write = NodeRequest::Replicate { key: b"k".to_vec(), version: 1, value: Some(b"v".to_vec()) };
        wire::write_frame(&mut writer, &send(1, write)).await.unwrap();
        // The write alone first, so that its commit has started (and stalled) before the
        // others arrive: were all three read at once, they would be answered before any commit.
        tokio::time::sleep(Duration::from_millis(300)).await;
        wire::write_frame(&mut writer, &send(2, NodeRequest::Heartbeat)).await.unwrap();
        wire::write_frame(&mut writer, &send(3, NodeRequest::Read { key: b"k".to_vec() })).await.unwrap();
        let within = Duration::from_secs(5);
        let heartbeat =
            tokio::time::timeout(within, next_reply(&mut reader)).await.expect("the heartbeat waited");
        assert_eq!(heartbeat, reply(2, NodeReply::Alive { node_id: 1, max_version: 0 }));
        let read = tokio::time::timeout(within, next_reply(&mut reader)).await.expect("the read waited");
        // Not durable yet, so not read.
        assert_eq!(read, reply(3, NodeReply::Value { version: 0, value: None }));

        drop(stalled);
        stall.join().unwrap();
        let written =
            tokio::time::timeout(within, next_reply(&mut reader)).await.expect("the write never ended");
        assert_eq!(written, reply(1, NodeReply::Stored { version: 1 }));
    }

    #[test]
    fn a_hello_for_another_node_or_cluster_is_refused() {
        assert_eq!(refusal(1, Some(0xab), 1, 0xab), None);
        let other_node = refusal(2, Some(0xab), 1, 0xab).expect("another node");
        assert_eq!(
            other_node,
            "this is node 2 of cluster 00000000000000ab, not node 1 of cluster 00000000000000ab"
        );
        let other_cluster = refusal(1, Some(0xcd), 1, 0xab).expect("another cluster");
        assert!(other_cluster.contains("of cluster 00000000000000cd, not node 1"), "{other_cluster}");
        // A node run by hand on a database no cluster stamped answers for any cluster.
        assert_eq!(refusal(1, None, 1, 0xab), None);
        assert!(refusal(1, None, 0, 0xab).unwrap().contains("node 1 of an unstamped database"));
    }
}
