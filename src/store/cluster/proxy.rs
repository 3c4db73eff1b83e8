//! A fault-injecting TCP relay for one link (coordinator -> node), in-process.
//!
//! The coordinator connects to the proxy's address instead of the node's; every connection is
//! relayed to the upstream address. With no faults the proxy is a plain relay. Faults are set
//! at any time through a cloneable [`ProxyHandle`] and apply to bytes read after the change:
//!
//! - latency: every chunk read from either side is delivered after a delay drawn uniformly
//!   from `[lo_ms, hi_ms]`, but never before the chunk read before it in the same direction
//!   (TCP keeps order; so does the proxy);
//! - drop: each chunk is lost with probability `drop_permille / 1000`; a connection that
//!   lost a chunk is cut, because the frames after a gap can no longer be parsed (in TCP a lost
//!   segment is retransmitted; what a peer sees of a lossy link is a connection that breaks);
//! - partition: bytes in both directions are discarded, with no error to either side (as a
//!   real partition, the sender only notices by a timeout); new connections are accepted and
//!   go nowhere. Healing cuts every connection that lived through the partition, since its
//!   streams lost bytes; peers reconnect;
//! - cut: close every open connection now (both sides see the connection end).
//!
//! Each connection costs four threads (a reader and a delayed writer per direction): fine for
//! the handful of links of a test cluster, and it keeps delays exact without a runtime.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Largest chunk read at once; a chunk is the unit of delay and of loss.
const CHUNK_BYTES_MAX: usize = 64 * 1024;
/// Upper limit for an injected one-way delay, so a typo cannot hang a link for hours.
pub const LATENCY_MS_MAX: u64 = 60_000;
/// How long the proxy waits for the upstream's connect before giving up on a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The faults of one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Faults {
    /// One-way delay range per chunk, in milliseconds; (0, 0) relays at once.
    pub latency_lo_ms: u64,
    pub latency_hi_ms: u64,
    /// Chance, in thousandths, that a chunk is lost (and its connection cut).
    pub drop_permille: u16,
    pub partitioned: bool,
}

/// What went through the proxy so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProxyStats {
    pub connections_accepted: u64,
    pub chunks_forwarded: u64,
    pub bytes_forwarded: u64,
    /// Chunks lost to `drop_permille`.
    pub chunks_dropped: u64,
    /// Chunks discarded while partitioned.
    pub chunks_partitioned: u64,
    /// Connections closed by the proxy (drop, heal, cut, upstream unreachable).
    pub connections_cut: u64,
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    chunks_forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    chunks_dropped: AtomicU64,
    chunks_partitioned: AtomicU64,
    connections_cut: AtomicU64,
}

/// Both sockets of one relayed connection (the upstream one is absent when it was accepted
/// during a partition), kept so the proxy can cut it.
struct Conn {
    downstream: TcpStream,
    upstream: Option<TcpStream>,
}

impl Conn {
    fn cut(&self) {
        let _ = self.downstream.shutdown(Shutdown::Both);
        if let Some(up) = &self.upstream {
            let _ = up.shutdown(Shutdown::Both);
        }
    }
}

struct Shared {
    faults: Mutex<Faults>,
    upstream: Mutex<SocketAddr>,
    conns: Mutex<BTreeMap<u64, Conn>>,
    next_conn: AtomicU64,
    rng: Mutex<StdRng>,
    counters: Counters,
    stopped: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays consistent across a panicking relay thread.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn cut(&self, id: u64) {
        if let Some(conn) = lock(&self.conns).remove(&id) {
            conn.cut();
            self.counters.connections_cut.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn cut_all(&self) -> usize {
        let conns = std::mem::take(&mut *lock(&self.conns));
        for conn in conns.values() {
            conn.cut();
        }
        self.counters.connections_cut.fetch_add(conns.len() as u64, Ordering::Relaxed);
        conns.len()
    }
}

/// Controls one proxy's faults; clones control the same proxy.
#[derive(Clone)]
pub struct ProxyHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyHandle").field("faults", &self.faults()).finish()
    }
}

impl ProxyHandle {
    pub fn faults(&self) -> Faults {
        *lock(&self.shared.faults)
    }

    /// Delay every chunk read from now on by a uniform draw from `[lo_ms, hi_ms]`.
    pub fn set_latency_ms(&self, lo_ms: u64, hi_ms: u64) -> Result<(), String> {
        if lo_ms > hi_ms {
            return Err(format!("latency range {lo_ms}..{hi_ms} ms: lo exceeds hi"));
        }
        if hi_ms > LATENCY_MS_MAX {
            return Err(format!("latency {hi_ms} ms exceeds the proxy's limit of {LATENCY_MS_MAX} ms"));
        }
        let mut faults = lock(&self.shared.faults);
        faults.latency_lo_ms = lo_ms;
        faults.latency_hi_ms = hi_ms;
        Ok(())
    }

    /// Lose each chunk with probability `drop_permille / 1000`, cutting its connection.
    pub fn set_drop_permille(&self, drop_permille: u16) -> Result<(), String> {
        if drop_permille > 1000 {
            return Err(format!("drop_permille {drop_permille} exceeds 1000"));
        }
        lock(&self.shared.faults).drop_permille = drop_permille;
        Ok(())
    }

    /// Partition the link (discard everything) or heal it (cut what lived through it).
    pub fn set_partitioned(&self, partitioned: bool) {
        let was = std::mem::replace(&mut lock(&self.shared.faults).partitioned, partitioned);
        if was && !partitioned {
            self.shared.cut_all();
        }
    }

    /// Back to a plain relay. Connections that lived through a partition are cut.
    pub fn clear(&self) {
        self.set_partitioned(false);
        *lock(&self.shared.faults) = Faults::default();
    }

    /// Close every open connection now; returns how many.
    pub fn cut_all(&self) -> usize {
        self.shared.cut_all()
    }

    /// Relay new connections to `upstream` (a node restarted on another port).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *lock(&self.shared.upstream) = upstream;
    }

    pub fn open_connections(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        ProxyStats {
            connections_accepted: c.connections_accepted.load(Ordering::Relaxed),
            chunks_forwarded: c.chunks_forwarded.load(Ordering::Relaxed),
            bytes_forwarded: c.bytes_forwarded.load(Ordering::Relaxed),
            chunks_dropped: c.chunks_dropped.load(Ordering::Relaxed),
            chunks_partitioned: c.chunks_partitioned.load(Ordering::Relaxed),
            connections_cut: c.connections_cut.load(Ordering::Relaxed),
        }
    }
}

/// A running proxy; stops (and cuts its connections) when dropped.
pub struct Proxy {
    addr: SocketAddr,
    handle: ProxyHandle,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listen on an ephemeral port of 127.0.0.1 and relay to `upstream`.
    pub fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        Proxy::start_seeded(upstream, rand::random())
    }

    /// As `start`, with the random draws (delays, losses) from `seed`.
    pub fn start_seeded(upstream: SocketAddr, seed: u64) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            faults: Mutex::new(Faults::default()),
            upstream: Mutex::new(upstream),
            conns: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU64::new(0),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            counters: Counters::default(),
            stopped: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name(format!("proxy-{addr}"))
            .spawn(move || accept_loop(listener, accepting))?;
        Ok(Proxy { addr, handle: ProxyHandle { shared }, acceptor: Some(acceptor) })
    }

    /// Where to connect instead of the upstream.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn handle(&self) -> ProxyHandle {
        self.handle.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.handle.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the acceptor blocked in accept(); it sees `stopped` and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.handle.shared.cut_all();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(downstream) = stream else { continue };
        shared.counters.connections_accepted.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::clone(&shared);
        // Connecting upstream can take a while (a dead node); do it off the accept loop.
        let _ = thread::Builder::new().name("proxy-conn".into()).spawn(move || relay(downstream, shared));
    }
}

/// Relay one accepted connection until either side ends it or the proxy cuts it.
fn relay(downstream: TcpStream, shared: Arc<Shared>) {
    let _ = downstream.set_nodelay(true);
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let partitioned = lock(&shared.faults).partitioned;
    let upstream = if partitioned {
        // Nothing crosses a partition, not even a connect: hold the connection until healed.
        None
    } else {
        let addr = *lock(&shared.upstream);
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(up) => Some(up),
            Err(_) => {
                // The upstream is down: the peer sees its connection closed, as a refusal.
                let _ = downstream.shutdown(Shutdown::Both);
                shared.counters.connections_cut.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    };
    // Clones: one to read each side, one each in the registry so the proxy can cut them.
    let clone_all = || -> io::Result<(TcpStream, Option<TcpStream>, Conn)> {
        let up_read = upstream.as_ref().map(TcpStream::try_clone).transpose()?;
        let up_cut = upstream.as_ref().map(TcpStream::try_clone).transpose()?;
        Ok((downstream.try_clone()?, up_read, Conn { downstream: downstream.try_clone()?, upstream: up_cut }))
    };
    let Ok((down_read, up_read, conn)) = clone_all() else {
        let _ = downstream.shutdown(Shutdown::Both);
        return;
    };
    lock(&shared.conns).insert(id, conn);
    // The partition ended between the check above and the insert: heal cut nothing of ours.
    if partitioned && !lock(&shared.faults).partitioned {
        shared.cut(id);
        return;
    }
    match (upstream, up_read) {
        (Some(upstream), Some(up_read)) => {
            let _ = upstream.set_nodelay(true);
            let to_up = spawn_direction(down_read, upstream, id, Arc::clone(&shared));
            let to_down = spawn_direction(up_read, downstream, id, Arc::clone(&shared));
            for t in to_up.into_iter().chain(to_down).flatten() {
                let _ = t.join();
            }
        }
        _ => {
            // Accepted during a partition: swallow what the peer sends until healed (cut).
            let mut reader = down_read;
            let mut buf = vec![0u8; CHUNK_BYTES_MAX];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                shared.counters.chunks_partitioned.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    lock(&shared.conns).remove(&id);
}

/// One direction: a reader that stamps each chunk with its delivery time (or loses it), and a
/// writer that delivers chunks in order at those times.
fn spawn_direction(
    mut from: TcpStream,
    to: TcpStream,
    id: u64,
    shared: Arc<Shared>,
) -> [Option<thread::JoinHandle<()>>; 2] {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer_shared = Arc::clone(&shared);
    let writer = thread::Builder::new().name("proxy-write".into()).spawn(move || {
        let mut to = to;
        for (deliver_at, chunk) in rx {
            let now = Instant::now();
            if deliver_at > now {
                thread::sleep(deliver_at - now);
            }
            // Counted before the write, so a peer that saw the bytes also sees them counted.
            writer_shared.counters.chunks_forwarded.fetch_add(1, Ordering::Relaxed);
            writer_shared.counters.bytes_forwarded.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if to.write_all(&chunk).is_err() {
                writer_shared.cut(id);
                return;
            }
        }
        // The reader saw the end of its side: pass the half-close on once all is delivered.
        let _ = to.shutdown(Shutdown::Write);
    });
    let reader = thread::Builder::new().name("proxy-read".into()).spawn(move || {
        let mut buf = vec![0u8; CHUNK_BYTES_MAX];
        // Delivery times never decrease, so chunks arrive in the order they were read.
        let mut last_delivery = Instant::now();
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let faults = *lock(&shared.faults);
            if faults.partitioned {
                shared.counters.chunks_partitioned.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // Draws only where there is something to draw: the seeded sequence then starts with
            // the first fault, whatever the connections exchanged before it.
            let (lost, delay_ms) = {
                let mut rng = lock(&shared.rng);
                let lost = faults.drop_permille > 0 && rng.random_range(0..1000u16) < faults.drop_permille;
                let (lo, hi) = (faults.latency_lo_ms, faults.latency_hi_ms);
                (lost, if lo < hi { rng.random_range(lo..=hi) } else { lo })
            };
            if lost {
                shared.counters.chunks_dropped.fetch_add(1, Ordering::Relaxed);
                shared.cut(id);
                return;
            }
            let deliver_at = (Instant::now() + Duration::from_millis(delay_ms)).max(last_delivery);
            last_delivery = deliver_at;
            if tx.send((deliver_at, buf[..n].to_vec())).is_err() {
                return;
            }
        }
    });
    [writer.ok(), reader.ok()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// An echo server on an ephemeral port: every line comes back. Runs until the test ends.
    fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let _ = io::copy(&mut &stream, &mut writer);
                });
            }
        });
        addr
    }

    fn connect(proxy: &Proxy) -> (TcpStream, io::BufReader<TcpStream>) {
        let stream = TcpStream::connect(proxy.addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let reader = io::BufReader::new(stream.try_clone().unwrap());
        (stream, reader)
    }

    fn round_trip(
        stream: &mut TcpStream,
        reader: &mut io::BufReader<TcpStream>,
        text: &str,
    ) -> io::Result<String> {
        stream.write_all(format!("{text}\n").as_bytes())?;
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        Ok(line.trim_end().to_string())
    }

    #[test]
    fn without_faults_it_is_a_plain_relay() {
        let proxy = Proxy::start_seeded(echo_server(), 1).unwrap();
        let (mut s, mut r) = connect(&proxy);
        for i in 0..50 {
            assert_eq!(round_trip(&mut s, &mut r, &format!("line {i}")).unwrap(), format!("line {i}"));
        }
        let stats = proxy.handle().stats();
        assert_eq!(stats.connections_accepted, 1);
        assert!(stats.chunks_forwarded >= 100, "{stats:?}");
        assert_eq!(stats.chunks_dropped + stats.chunks_partitioned + stats.connections_cut, 0);
    }

    #[test]
    fn latency_delays_each_direction_and_keeps_order() {
        let proxy = Proxy::start_seeded(echo_server(), 2).unwrap();
        let handle = proxy.handle();
        handle.set_latency_ms(15, 20).unwrap();
        let (mut s, mut r) = connect(&proxy);
        let start = Instant::now();
        assert_eq!(round_trip(&mut s, &mut r, "ping").unwrap(), "ping");
        // Out and back: at least twice the lower bound.
        assert!(start.elapsed() >= Duration::from_millis(30), "{:?}", start.elapsed());
        // A wide jitter range must not reorder: 40 writes, each its own chunk.
        handle.set_latency_ms(0, 10).unwrap();
        for i in 0..40 {
            s.write_all(format!("{i}\n").as_bytes()).unwrap();
            thread::sleep(Duration::from_millis(1));
        }
        for i in 0..40 {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert_eq!(line.trim_end(), i.to_string());
        }
        assert!(handle.set_latency_ms(5, 4).is_err());
        assert!(handle.set_latency_ms(0, LATENCY_MS_MAX + 1).is_err());
    }

    #[test]
    fn a_partition_discards_silently_and_healing_cuts() {
        let proxy = Proxy::start_seeded(echo_server(), 3).unwrap();
        let handle = proxy.handle();
        let (mut s, mut r) = connect(&proxy);
        assert_eq!(round_trip(&mut s, &mut r, "before").unwrap(), "before");
        handle.set_partitioned(true);
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let lost = round_trip(&mut s, &mut r, "during").unwrap_err();
        assert!(matches!(lost.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut), "{lost:?}");
        // A connection opened during the partition goes nowhere either.
        let (mut s2, mut r2) = connect(&proxy);
        s2.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        assert!(round_trip(&mut s2, &mut r2, "new").is_err());
        handle.set_partitioned(false);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Both lived through the partition: cut, so the peer knows to reconnect.
        let mut rest = String::new();
        assert_eq!(r.read_line(&mut rest).unwrap_or(0), 0, "{rest}");
        let (mut s3, mut r3) = connect(&proxy);
        assert_eq!(round_trip(&mut s3, &mut r3, "after").unwrap(), "after");
        let stats = handle.stats();
        assert!(stats.chunks_partitioned >= 2, "{stats:?}");
        assert!(stats.connections_cut >= 2, "{stats:?}");
    }

    #[test]
    fn drop_loses_a_chunk_and_cuts_its_connection() {
        let proxy = Proxy::start_seeded(echo_server(), 4).unwrap();
        let handle = proxy.handle();
        handle.set_drop_permille(1000).unwrap();
        let (mut s, mut r) = connect(&proxy);
        assert!(round_trip(&mut s, &mut r, "lost").is_err());
        assert_eq!(handle.stats().chunks_dropped, 1);
        handle.set_drop_permille(0).unwrap();
        let (mut s, mut r) = connect(&proxy);
        assert_eq!(round_trip(&mut s, &mut r, "kept").unwrap(), "kept");
        assert!(handle.set_drop_permille(1001).is_err());
    }

    #[test]
    fn cut_all_closes_open_connections_and_an_unreachable_upstream_refuses() {
        let proxy = Proxy::start_seeded(echo_server(), 5).unwrap();
        let handle = proxy.handle();
        let (mut s, mut r) = connect(&proxy);
        assert_eq!(round_trip(&mut s, &mut r, "x").unwrap(), "x");
        assert_eq!(handle.cut_all(), 1);
        assert!(round_trip(&mut s, &mut r, "y").is_err());
        // A port nobody listens on (bound, then closed).
        let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        handle.set_upstream(dead);
        let (mut s, mut r) = connect(&proxy);
        assert!(round_trip(&mut s, &mut r, "z").is_err());
    }
}
