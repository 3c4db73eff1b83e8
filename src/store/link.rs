//! The coordinator's connection to one node: one TCP connection carrying many requests at
//! once, matched to replies by id. A broken connection fails every request waiting on it and
//! is re-dialled by the next request.

use super::wire::{self, Frame, NodeReply, NodeRequest};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio::time::Instant;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<NodeReply>>>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// No reply before the deadline.
    Deadline,
    /// Could not connect, or the connection broke before the reply.
    Unreachable(String),
    /// The node answered with an error (e.g. its disk failed).
    Node(String),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Deadline => write!(f, "no reply before the deadline"),
            LinkError::Unreachable(why) => write!(f, "unreachable: {why}"),
            LinkError::Node(why) => write!(f, "node error: {why}"),
        }
    }
}

struct Connection {
    /// Frames go through a writer task, so a request cancelled by its deadline never leaves
    /// half a frame on the wire.
    outbox: mpsc::UnboundedSender<Vec<u8>>,
    pending: Pending,
    /// Set when the connection broke; the next request re-dials.
    broken: Arc<AtomicBool>,
}

pub struct NodeLink {
    /// Where the coordinator dials: the node itself, or the proxy in front of it.
    addr: Mutex<SocketAddr>,
    next_id: AtomicU64,
    connection: AsyncMutex<Option<Connection>>,
}

impl NodeLink {
    pub fn new(addr: SocketAddr) -> NodeLink {
        NodeLink { addr: Mutex::new(addr), next_id: AtomicU64::new(1), connection: AsyncMutex::new(None) }
    }

    pub fn addr(&self) -> SocketAddr {
        *self.addr.lock().expect("addr lock")
    }

    /// Send `request` and wait for its reply until `deadline`.
    pub async fn request(&self, request: NodeRequest, deadline: Instant) -> Result<NodeReply, LinkError> {
        let (id, pending, reply) = match tokio::time::timeout_at(deadline, self.send(request)).await {
            Ok(sent) => sent?,
            Err(_) => return Err(LinkError::Deadline),
        };
        match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(NodeReply::Failed { message })) => Err(LinkError::Node(message)),
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(LinkError::Unreachable("connection closed".into())),
            Err(_) => {
                pending.lock().expect("pending lock").remove(&id);
                Err(LinkError::Deadline)
            }
        }
    }

    async fn send(
        &self,
        request: NodeRequest,
    ) -> Result<(u64, Pending, oneshot::Receiver<NodeReply>), LinkError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = wire::encode_frame(&Frame { id, body: request });
        let (tx, rx) = oneshot::channel();
        let mut guard = self.connection.lock().await;
        if guard.as_ref().is_none_or(|c| c.broken.load(Ordering::SeqCst)) {
            *guard = Some(self.dial().await?);
        }
        let connection = guard.as_ref().expect("just dialled");
        connection.pending.lock().expect("pending lock").insert(id, tx);
        if connection.outbox.send(bytes).is_err() {
            connection.broken.store(true, Ordering::SeqCst);
            connection.pending.lock().expect("pending lock").remove(&id);
            return Err(LinkError::Unreachable("connection closed".into()));
        }
        Ok((id, Arc::clone(&connection.pending), rx))
    }

    async fn dial(&self) -> Result<Connection, LinkError> {
        let stream =
            TcpStream::connect(self.addr()).await.map_err(|e| LinkError::Unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (mut reader, mut writer) = stream.into_split();
        let pending: Pending = Arc::default();
        let broken = Arc::new(AtomicBool::new(false));
        let (outbox, mut frames) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer_broken = Arc::clone(&broken);
        tokio::spawn(async move {
            while let Some(bytes) = frames.recv().await {
                if writer.write_all(&bytes).await.is_err() {
                    writer_broken.store(true, Ordering::SeqCst);
                    break;
                }
            }
        });
        let (task_pending, task_broken) = (Arc::clone(&pending), Arc::clone(&broken));
        tokio::spawn(async move {
            while let Ok(Some(frame)) = wire::read_frame::<NodeReply, _>(&mut reader).await {
                let waiter = task_pending.lock().expect("pending lock").remove(&frame.id);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(frame.body);
                }
            }
            task_broken.store(true, Ordering::SeqCst);
            // Dropping the senders fails every request still waiting on this connection.
            task_pending.lock().expect("pending lock").clear();
        });
        Ok(Connection { outbox, pending, broken })
    }
}
