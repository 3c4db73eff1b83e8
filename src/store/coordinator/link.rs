//! The coordinator's connection to one node: one TCP connection carrying many requests at
//! once, matched to replies by id. A broken connection fails every request waiting on it and
//! is re-dialled by the next request.
//!
//! Every connection starts with a hello naming the node and the cluster the link expects
//! (`NodeRequest::Hello`): a node's address can belong to another process once the node died
//! (the kernel hands its port to the next program that asks, perhaps a node of another
//! cluster on the same host), and a coordinator that wrote to or read from that process would
//! mix two clusters' data. A refused hello is an unreachable node, and says why.
//!
//! Every frame the node sends is proof of life, whether or not a request still waits for it:
//! a reply after its request's deadline is not given to the caller (it gave up), but it still
//! reaches the link's listener (`on_heard`) and its round trip is measured, as the models
//! count any message, however late, as hearing from the node.

use crate::store::node::sink::FrameSink;
use crate::store::node::wire::{self, Frame, NodeReply, NodeRequest};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Mutex as AsyncMutex};
use tokio::time::Instant;

/// Unanswered requests that no caller waits for are kept (for their round trip) up to this
/// many per connection, the oldest forgotten first: a link cut off for long would otherwise
/// grow without bound.
const UNANSWERED_KEPT_MAX: usize = 10_000;

/// A request on the wire: when it was sent, and who waits for its reply.
struct Sent {
    at: Instant,
    waiter: Waiter,
}

enum Waiter {
    /// Called with the reply on the link's reader task if it comes by `deadline`; dropped
    /// uncalled if it does not (the reply is late), or if the connection breaks first.
    Callback { deadline: Instant, done: OnReply },
    /// Sent without waiting (a heartbeat's ping).
    Nobody,
}

type Pending = Arc<Mutex<BTreeMap<u64, Sent>>>;

/// What `NodeLink::submit` calls with a reply that came in time.
pub type OnReply = Box<dyn FnOnce(NodeReply) + Send>;

/// Called for every frame the node sends.
type Listener = Box<dyn Fn() + Send + Sync>;

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

/// What the link measured since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames received from the node.
    pub replies: u64,
    /// Replies that came after their request's deadline (the caller had given up).
    pub late_replies: u64,
    /// The longest round trip of a reply: from its request being queued to its frame read.
    pub max_round_trip_ms: u64,
    /// The longest time without a frame from the node: between two frames, or from the
    /// link's creation to the first, or from the last frame to now.
    pub max_silence_ms: u64,
}

/// Where a shell's requests to one node go: its TCP link (the store), or a simulated link
/// (`store sim`, which runs the same shell on a simulated network and clock).
pub trait NodeChannel: Send + Sync {
    /// Send `request`; `done` is called with the reply if it comes by `deadline`, and dropped
    /// uncalled if it does not (a lost message: late, or the node unreachable).
    fn post(self: Arc<Self>, request: NodeRequest, traffic: Traffic, deadline: Instant, done: OnReply);
    fn stats(&self) -> LinkStats;
    /// Where the node is, as INFO shows it.
    fn place(&self) -> String;
}

/// Whose message a request is: the protocol machine's (a message the model has too), or the
/// shell's own, which the model does not send: a catch-up copy's scans and writes (of the
/// copy from `source`), the startup probe. A replay (`store sim --replay`) times them as the
/// model's trace times the machine's messages and the copy's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traffic {
    Machine,
    Copy { source: crate::policy::NodeId },
    Probe,
}

impl NodeChannel for NodeLink {
    fn post(self: Arc<Self>, request: NodeRequest, _traffic: Traffic, deadline: Instant, done: OnReply) {
        NodeLink::submit(&self, request, deadline, done);
    }

    fn stats(&self) -> LinkStats {
        NodeLink::stats(self)
    }

    fn place(&self) -> String {
        self.addr().to_string()
    }
}

/// Send `request` (the shell's own traffic) on `channel` and wait for its reply until
/// `deadline`: a refusal is the node's error, no reply by then is `Deadline`.
pub async fn request_on(
    channel: &Arc<dyn NodeChannel>,
    request: NodeRequest,
    traffic: Traffic,
    deadline: Instant,
) -> Result<NodeReply, LinkError> {
    let (tx, reply) = oneshot::channel();
    Arc::clone(channel).post(request, traffic, deadline, Box::new(move |reply| drop(tx.send(reply))));
    match tokio::time::timeout_at(deadline, reply).await {
        Ok(Ok(NodeReply::Failed { message })) => Err(LinkError::Node(message)),
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(_)) if Instant::now() < deadline => Err(LinkError::Unreachable("no reply will come".into())),
        Ok(Err(_)) | Err(_) => Err(LinkError::Deadline),
    }
}

/// What a link measured of its node's frames (the TCP link's reader tasks, a simulated
/// link's deliveries), read by `stats`.
pub(crate) struct Measured {
    created: Instant,
    last_frame: Option<Instant>,
    replies: u64,
    late_replies: u64,
    max_round_trip_ms: u64,
    max_gap_ms: u64,
}

impl Measured {
    pub(crate) fn new(created: Instant) -> Measured {
        Measured {
            created,
            last_frame: None,
            replies: 0,
            late_replies: 0,
            max_round_trip_ms: 0,
            max_gap_ms: 0,
        }
    }

    pub(crate) fn stats(&self) -> LinkStats {
        let since = self.last_frame.unwrap_or(self.created);
        LinkStats {
            replies: self.replies,
            late_replies: self.late_replies,
            max_round_trip_ms: self.max_round_trip_ms,
            max_silence_ms: self.max_gap_ms.max(ms(since.elapsed())),
        }
    }

    /// A frame from the node at `now`: the reply to a request sent at `.0`, late if `.1`.
    pub(crate) fn heard(&mut self, now: Instant, round_trip: Option<(Instant, bool)>) {
        let since = self.last_frame.unwrap_or(self.created);
        self.max_gap_ms = self.max_gap_ms.max(ms(now.duration_since(since)));
        self.last_frame = Some(now);
        self.replies += 1;
        if let Some((sent_at, late)) = round_trip {
            self.max_round_trip_ms = self.max_round_trip_ms.max(ms(now.duration_since(sent_at)));
            self.late_replies += u64::from(late);
        }
    }
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a connection's reader task shares with the link.
struct Shared {
    listener: OnceLock<Listener>,
    measured: Mutex<Measured>,
}

struct Connection {
    /// Whole frames only: a request cancelled by its deadline never leaves half a frame.
    sink: Arc<FrameSink>,
    pending: Pending,
    /// Set when the connection broke; the next request re-dials.
    broken: Arc<AtomicBool>,
}

/// Where a coordinator finds its nodes, and the cluster they must belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddrs {
    /// The data directory's cluster id (`DIR/cluster-id`), stamped into every node's database.
    pub cluster_id: u64,
    /// Where node `n` is dialled (the node, or the proxy in front of it), by node number.
    pub addrs: Vec<SocketAddr>,
}

impl NodeAddrs {
    /// One link per node, each expecting that node of this cluster.
    pub fn links(&self) -> Vec<Arc<NodeLink>> {
        let ids = 0..=u8::MAX;
        self.addrs
            .iter()
            .zip(ids)
            .map(|(&addr, n)| Arc::new(NodeLink::new(addr, self.cluster_id, n)))
            .collect()
    }
}

pub struct NodeLink {
    /// Where the coordinator dials: the node itself, or the proxy in front of it.
    addr: Mutex<SocketAddr>,
    /// Who must answer there: the hello every connection starts with.
    cluster_id: u64,
    node_id: u8,
    /// A refused hello was logged (reset by the next accepted one): logged once, not per dial.
    refusal_logged: AtomicBool,
    next_id: AtomicU64,
    connection: AsyncMutex<Option<Connection>>,
    shared: Arc<Shared>,
}

impl NodeLink {
    /// A link to node `node_id` of cluster `cluster_id` at `addr`.
    pub fn new(addr: SocketAddr, cluster_id: u64, node_id: u8) -> NodeLink {
        let measured = Measured::new(Instant::now());
        NodeLink {
            addr: Mutex::new(addr),
            cluster_id,
            node_id,
            refusal_logged: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            connection: AsyncMutex::new(None),
            shared: Arc::new(Shared { listener: OnceLock::new(), measured: Mutex::new(measured) }),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        *self.addr.lock().expect("addr lock")
    }

    /// Call `heard` for every frame the node sends from now on, answered in time or not (the
    /// failure detector's proof of life). Set once; `false` if a listener was already set.
    pub fn on_heard(&self, heard: impl Fn() + Send + Sync + 'static) -> bool {
        self.shared.listener.set(Box::new(heard)).is_ok()
    }

    pub fn stats(&self) -> LinkStats {
        self.shared.measured.lock().expect("measured lock").stats()
    }

    /// Send `request` and wait for its reply until `deadline`. A reply after the deadline is
    /// not returned, but still reaches the listener.
    pub async fn request(&self, request: NodeRequest, deadline: Instant) -> Result<NodeReply, LinkError> {
        let (tx, reply) = oneshot::channel();
        let waiter = Waiter::Callback { deadline, done: Box::new(move |reply| drop(tx.send(reply))) };
        match tokio::time::timeout_at(deadline, self.send(request, waiter)).await {
            Ok(sent) => sent?,
            Err(_) => return Err(LinkError::Deadline),
        };
        match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(NodeReply::Failed { message })) => Err(LinkError::Node(message)),
            Ok(Ok(reply)) => Ok(reply),
            // Dropped uncalled: late (the reader saw the deadline pass first), or the
            // connection broke.
            Ok(Err(_)) if Instant::now() >= deadline => Err(LinkError::Deadline),
            Ok(Err(_)) => Err(LinkError::Unreachable("connection closed".into())),
            Err(_) => Err(LinkError::Deadline),
        }
    }

    /// Send `request` without waiting for its reply (a heartbeat's ping): the reply, whenever
    /// it comes, only reaches the listener.
    pub async fn send_only(&self, request: NodeRequest) -> Result<(), LinkError> {
        self.send(request, Waiter::Nobody).await
    }

    /// Send `request` and call `done` with its reply on the link's reader task if it comes
    /// by `deadline` (the shell's replies become steps there, without a hand-off). On a
    /// connection already open it is written at once; otherwise a task dials first. A reply
    /// that does not come in time is dropped uncalled, like a lost one.
    pub fn submit(self: &Arc<Self>, request: NodeRequest, deadline: Instant, done: OnReply) {
        let waiter = Waiter::Callback { deadline, done };
        if let Ok(guard) = self.connection.try_lock() {
            if let Some(connection) = guard.as_ref().filter(|c| !c.broken.load(Ordering::SeqCst)) {
                let _ = self.write(connection, request, waiter);
                return;
            }
        }
        let link = Arc::clone(self);
        tokio::spawn(async move {
            let _ = tokio::time::timeout_at(deadline, link.send(request, waiter)).await;
        });
    }

    async fn send(&self, request: NodeRequest, waiter: Waiter) -> Result<(), LinkError> {
        let mut guard = self.connection.lock().await;
        if guard.as_ref().is_none_or(|c| c.broken.load(Ordering::SeqCst)) {
            *guard = Some(self.dial().await?);
        }
        self.write(guard.as_ref().expect("just dialled"), request, waiter)
    }

    fn write(&self, connection: &Connection, request: NodeRequest, waiter: Waiter) -> Result<(), LinkError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = wire::encode_frame(&Frame { id, body: request });
        {
            let mut pending = connection.pending.lock().expect("pending lock");
            pending.insert(id, Sent { at: Instant::now(), waiter });
            forget_oldest_unanswered(&mut pending, Instant::now());
        }
        if connection.sink.send(&bytes).is_err() {
            connection.broken.store(true, Ordering::SeqCst);
            connection.pending.lock().expect("pending lock").remove(&id);
            return Err(LinkError::Unreachable("connection closed".into()));
        }
        Ok(())
    }

    async fn dial(&self) -> Result<Connection, LinkError> {
        let addr = self.addr();
        let mut stream = TcpStream::connect(addr).await.map_err(|e| LinkError::Unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        match self.hello(&mut stream).await {
            Ok(()) => {}
            Err(HelloFailed::Broken(why)) => return Err(LinkError::Unreachable(why)),
            Err(HelloFailed::NotTheNode(why)) => {
                if !self.refusal_logged.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "replicheck store: {addr}, where node {} is dialled, is not that node: {why}; nothing is sent there until it is",
                        self.node_id
                    );
                }
                return Err(LinkError::Unreachable(format!("not node {}: {why}", self.node_id)));
            }
        }
        self.refusal_logged.store(false, Ordering::SeqCst);
        let (reader, writer) = stream.into_split();
        let mut reader = wire::FrameReader::new(reader);
        let pending: Pending = Arc::default();
        let broken = Arc::new(AtomicBool::new(false));
        let sink = FrameSink::start(writer);
        let (task_pending, task_broken, task_sink, shared) =
            (Arc::clone(&pending), Arc::clone(&broken), Arc::clone(&sink), Arc::clone(&self.shared));
        tokio::spawn(async move {
            while let Ok(Some(frame)) = reader.next::<NodeReply>().await {
                let now = Instant::now();
                let sent = task_pending.lock().expect("pending lock").remove(&frame.id);
                let round_trip = sent.as_ref().map(|s| (s.at, s.waiter.gave_up(now)));
                shared.measured.lock().expect("measured lock").heard(now, round_trip);
                // Proof of life before the waiter sees the reply, as a message is heard when
                // it is delivered.
                if let Some(heard) = shared.listener.get() {
                    heard();
                }
                match sent.map(|s| s.waiter) {
                    Some(Waiter::Callback { deadline, done }) if now <= deadline => done(frame.body),
                    _ => {}
                }
            }
            task_broken.store(true, Ordering::SeqCst);
            task_sink.close();
            // Dropping the senders fails every request still waiting on this connection.
            task_pending.lock().expect("pending lock").clear();
        });
        Ok(Connection { sink, pending, broken })
    }
}

impl NodeLink {
    /// Say whom this link expects, and wait for that node's answer. The caller's deadline
    /// bounds it, as it bounds the dial.
    async fn hello(&self, stream: &mut TcpStream) -> Result<(), HelloFailed> {
        let hello = NodeRequest::Hello { cluster_id: self.cluster_id, node_id: self.node_id };
        let (mut reader, mut writer) = stream.split();
        let sent = writer.write_all(&wire::encode_frame(&Frame { id: 0, body: hello })).await;
        sent.map_err(|e| HelloFailed::Broken(format!("hello not sent: {e}")))?;
        match wire::read_frame::<NodeReply, _>(&mut reader).await {
            Ok(Some(Frame { body: NodeReply::Alive { node_id, .. }, .. })) if node_id == self.node_id => {
                Ok(())
            }
            Ok(Some(Frame { body: NodeReply::Failed { message }, .. })) => {
                Err(HelloFailed::NotTheNode(message))
            }
            Ok(Some(Frame { body, .. })) => {
                Err(HelloFailed::NotTheNode(format!("it answered the hello with {body:?}")))
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                Err(HelloFailed::NotTheNode(format!("it does not speak the node protocol ({e})")))
            }
            Ok(None) => Err(HelloFailed::Broken("the connection closed at the hello".into())),
            Err(e) => Err(HelloFailed::Broken(format!("the hello got no answer: {e}"))),
        }
    }
}

/// Why a connection's hello failed.
enum HelloFailed {
    /// The connection broke (the node may be dying): an unreachable node, nothing more.
    Broken(String),
    /// Something answered that is not the node this link expects.
    NotTheNode(String),
}

impl Waiter {
    /// Whether nobody waits for the reply any more because its deadline passed by `now`.
    fn gave_up(&self, now: Instant) -> bool {
        match self {
            Waiter::Callback { deadline, .. } => now > *deadline,
            Waiter::Nobody => false,
        }
    }

    fn waits(&self, now: Instant) -> bool {
        match self {
            Waiter::Callback { deadline, .. } => now <= *deadline,
            Waiter::Nobody => false,
        }
    }
}

/// Keep at most `UNANSWERED_KEPT_MAX` requests nobody waits for, forgetting the oldest.
fn forget_oldest_unanswered(pending: &mut BTreeMap<u64, Sent>, now: Instant) {
    if pending.len() <= UNANSWERED_KEPT_MAX {
        return;
    }
    let unanswered: Vec<u64> =
        pending.iter().filter(|(_, s)| !s.waiter.waits(now)).map(|(id, _)| *id).collect();
    let excess = pending.len() - UNANSWERED_KEPT_MAX;
    for id in unanswered.into_iter().take(excess) {
        pending.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    /// Node 1 of cluster 7: answers the hello at once and every heartbeat after `delay_ms`.
    async fn slow_node(delay_ms: u64) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (mut reader, writer) = stream.into_split();
            let writer = Arc::new(AsyncMutex::new(writer));
            while let Ok(Some(frame)) = wire::read_frame::<NodeRequest, _>(&mut reader).await {
                let writer = Arc::clone(&writer);
                let hello = matches!(frame.body, NodeRequest::Hello { cluster_id: 7, node_id: 1 });
                tokio::spawn(async move {
                    if !hello {
                        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                    }
                    let reply = Frame { id: frame.id, body: NodeReply::Alive { node_id: 1, max_version: 0 } };
                    let _ = writer.lock().await.write_all(&wire::encode_frame(&reply)).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_reply_after_the_deadline_fails_the_request_but_is_heard() {
        let link = NodeLink::new(slow_node(150).await, 7, 1);
        let heard = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&heard);
        assert!(link.on_heard(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        let deadline = Instant::now() + Duration::from_millis(50);
        assert_eq!(link.request(NodeRequest::Heartbeat, deadline).await, Err(LinkError::Deadline));
        assert_eq!(heard.load(Ordering::SeqCst), 0, "not yet arrived");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(heard.load(Ordering::SeqCst), 1, "the late reply is proof of life");
        let stats = link.stats();
        assert_eq!((stats.replies, stats.late_replies), (1, 1), "{stats:?}");
        assert!(stats.max_round_trip_ms >= 150, "{stats:?}");
        // A ping nobody waits for: its pong is heard whenever it comes, and is not late.
        link.send_only(NodeRequest::Heartbeat).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(heard.load(Ordering::SeqCst), 2);
        assert_eq!((link.stats().replies, link.stats().late_replies), (2, 1));
        // In time: the caller gets the reply, and the node is heard once more.
        let deadline = Instant::now() + Duration::from_secs(2);
        assert!(matches!(link.request(NodeRequest::Heartbeat, deadline).await, Ok(NodeReply::Alive { .. })));
        assert_eq!(heard.load(Ordering::SeqCst), 3);
        assert!(!link.on_heard(|| {}), "one listener");
    }

    /// A reply handed to `submit`'s callback on the reader task: called if it comes by the
    /// deadline, dropped uncalled (and counted late, and heard) if not.
    #[tokio::test]
    async fn a_submitted_request_is_answered_by_callback_only_in_time() {
        let link = Arc::new(NodeLink::new(slow_node(150).await, 7, 1));
        let heard = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&heard);
        assert!(link.on_heard(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        let (tx, mut answered) = mpsc::unbounded_channel();
        let answer = |tx: mpsc::UnboundedSender<&'static str>, what| -> OnReply {
            Box::new(move |reply| {
                assert!(matches!(reply, NodeReply::Alive { .. }), "{reply:?}");
                tx.send(what).unwrap();
            })
        };
        // The first dials (no connection yet); the second is written at once on it.
        link.submit(
            NodeRequest::Heartbeat,
            Instant::now() + Duration::from_millis(50),
            answer(tx.clone(), "late"),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        link.submit(NodeRequest::Heartbeat, Instant::now() + Duration::from_secs(2), answer(tx, "in time"));
        assert_eq!(answered.recv().await, Some("in time"));
        assert_eq!(answered.recv().await, None, "the late reply's callback was dropped uncalled");
        assert_eq!(heard.load(Ordering::SeqCst), 2, "both replies are proof of life");
        assert_eq!((link.stats().replies, link.stats().late_replies), (2, 1));
    }

    /// Another process on a node's old address: whatever it is, the link sends it nothing but
    /// the hello, and the request fails as unreachable with its answer.
    #[tokio::test]
    async fn a_process_that_is_not_the_node_gets_only_the_hello() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.split();
                    while let Ok(Some(frame)) = wire::read_frame::<NodeRequest, _>(&mut reader).await {
                        let _ = seen_tx.send(frame.body);
                        // Node 2 of cluster 8 (a real node refuses; this one even says yes).
                        let reply =
                            Frame { id: frame.id, body: NodeReply::Alive { node_id: 2, max_version: 0 } };
                        let _ = writer.write_all(&wire::encode_frame(&reply)).await;
                    }
                });
            }
        });
        let link = NodeLink::new(addr, 7, 1);
        let deadline = Instant::now() + Duration::from_secs(2);
        let read = NodeRequest::Read { key: b"k".to_vec() };
        match link.request(read.clone(), deadline).await {
            Err(LinkError::Unreachable(why)) => assert!(why.contains("node_id: 2"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Dialled again for the next request, and refused again.
        assert!(matches!(link.request(read, deadline).await, Err(LinkError::Unreachable(_))));
        drop(link);
        let mut bodies = Vec::new();
        while let Ok(Some(body)) = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await {
            bodies.push(body);
        }
        let hello = NodeRequest::Hello { cluster_id: 7, node_id: 1 };
        assert_eq!(bodies, vec![hello.clone(), hello]);
    }

    #[test]
    fn only_the_oldest_unanswered_requests_nobody_waits_for_are_forgotten() {
        let now = Instant::now();
        let mut pending = BTreeMap::new();
        let callback = |deadline| Waiter::Callback { deadline, done: Box::new(|_| {}) };
        pending.insert(0, Sent { at: now, waiter: callback(now + std::time::Duration::from_secs(1)) });
        for id in 1..=UNANSWERED_KEPT_MAX as u64 + 5 {
            pending.insert(id, Sent { at: now, waiter: Waiter::Nobody });
        }
        forget_oldest_unanswered(&mut pending, now);
        assert_eq!(pending.len(), UNANSWERED_KEPT_MAX);
        assert!(pending.contains_key(&0), "a request someone waits for is kept");
        assert!(!pending.contains_key(&6) && pending.contains_key(&7));
        // A callback whose deadline passed waits no more; one still in time does.
        let mut pending = BTreeMap::new();
        pending.insert(0, Sent { at: now, waiter: callback(now + std::time::Duration::from_secs(1)) });
        pending.insert(1, Sent { at: now, waiter: callback(now) });
        for id in 2..=UNANSWERED_KEPT_MAX as u64 {
            pending.insert(id, Sent { at: now, waiter: Waiter::Nobody });
        }
        forget_oldest_unanswered(&mut pending, now + std::time::Duration::from_millis(1));
        assert_eq!(pending.len(), UNANSWERED_KEPT_MAX);
        assert!(pending.contains_key(&0) && !pending.contains_key(&1));
    }
}
