//! Client connections: RESP in, replies out, under limits that keep a client that does not
//! read its replies, sends slowly or holds a connection open from costing the coordinator
//! unbounded memory or connections.
//!
//! - A connection's replies are written as they are made, never gathered for a whole pipeline:
//!   when the client does not read them its socket fills and the coordinator stops reading
//!   its requests (at most one reply and `REPLY_FLUSH_BYTES` wait per connection).
//! - Every connection's unexecuted request bytes count against one bound
//!   (`request_bytes_max`); the connection that would pass it is answered with an error.
//! - At most `connections_max` connections; one more is answered with Redis's error.
//! - A connection idle (no byte read, no reply taken) for `idle_timeout_ms` is closed.
//! - A connection closed after an error reply is drained for a moment first, so that a client
//!   still sending (a value over the limit) reads the error instead of a reset.

use super::resp;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Client connections read at most this much ahead of the command being executed.
pub const CLIENT_BUFFER_SLACK_BYTES: usize = 64 * 1024;
/// Replies waiting in the coordinator beyond the socket's own buffer, per connection.
const REPLY_FLUSH_BYTES: usize = 64 * 1024;
/// How long a connection closed after an error is drained of what the client still sends.
const LINGER_MS: u64 = 1_000;
/// Default limit on a value (and on any argument of a client command).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 1024 * 1024;
/// The smallest `value_bytes_max`: every argument is bounded by it, command names included.
pub const VALUE_BYTES_MAX_MIN: usize = 64;

pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 300_000;
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;

/// What client connections may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Largest argument (a value, a key, a command name), in bytes.
    pub value_bytes_max: usize,
    /// Open client connections at most.
    pub connections_max: usize,
    /// A connection that neither sends nor takes a reply for this long is closed (0: never).
    pub idle_timeout_ms: u64,
    /// Request bytes read but not yet executed, over all connections.
    pub request_bytes_max: usize,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            idle_timeout_ms: IDLE_TIMEOUT_MS_DEFAULT,
            request_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
        }
    }
}

impl ClientLimits {
    /// Limits that cannot serve a client are refused, naming the flag.
    pub fn check(&self) -> Result<(), String> {
        if self.value_bytes_max < VALUE_BYTES_MAX_MIN {
            return Err(format!(
                "--value-bytes-max {}: must be at least {VALUE_BYTES_MAX_MIN} (it bounds every argument, command names included)",
                self.value_bytes_max
            ));
        }
        if self.connections_max == 0 {
            return Err("--connections-max 0: must be at least 1".into());
        }
        let one_request = self.value_bytes_max + CLIENT_BUFFER_SLACK_BYTES;
        if self.request_bytes_max < one_request {
            return Err(format!(
                "--request-bytes-max {}: must hold one request of the largest value ({one_request} bytes: --value-bytes-max {} plus {CLIENT_BUFFER_SLACK_BYTES} bytes of read-ahead)",
                self.request_bytes_max, self.value_bytes_max
            ));
        }
        Ok(())
    }
}

/// What INFO's `# Clients` section shows.
#[derive(Default)]
pub struct ClientStats {
    pub connected: AtomicUsize,
    /// Request bytes read and not yet executed, over all connections.
    pub request_bytes: AtomicUsize,
    /// Connections refused at `connections_max`.
    pub rejected: AtomicU64,
    /// Connections closed after `idle_timeout_ms`.
    pub closed_idle: AtomicU64,
    /// Connections answered "busy" at `request_bytes_max`.
    pub refused_busy: AtomicU64,
}

/// A connection's share of `ClientStats` (returned when it ends).
struct Held<'a> {
    stats: &'a ClientStats,
    request_bytes: usize,
}

impl Held<'_> {
    /// Now holding `bytes` unexecuted request bytes; `false` if that passes `max` over all.
    fn hold(&mut self, bytes: usize, max: usize) -> bool {
        if bytes > self.request_bytes {
            let more = bytes - self.request_bytes;
            let before = self.stats.request_bytes.fetch_add(more, Ordering::SeqCst);
            self.request_bytes = bytes;
            before + more <= max
        } else {
            self.stats.request_bytes.fetch_sub(self.request_bytes - bytes, Ordering::SeqCst);
            self.request_bytes = bytes;
            true
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.stats.request_bytes.fetch_sub(self.request_bytes, Ordering::SeqCst);
        self.stats.connected.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a connection ends.
enum End {
    /// The client closed it, or the socket failed.
    Gone,
    /// After an error reply (already written): drain, then close.
    AfterError,
    /// QUIT, answered.
    Quit,
}

/// What answers RESP clients: the quorum family's coordinator or the leader family's manager.
/// The connection handling (limits, pipelining, idle and busy answers) is this file's, once.
pub trait RespService: Send + Sync + Sized + 'static {
    fn limits(&self) -> &ClientLimits;
    fn client_stats(&self) -> &ClientStats;
    /// Becomes `true` when the service crashes: its listener and connections close.
    fn stopped(&self) -> tokio::sync::watch::Receiver<bool>;
    /// Execute one command (`args` is not empty): its reply, and whether the connection ends.
    fn execute(self: Arc<Self>, args: Vec<Vec<u8>>) -> impl Future<Output = (Vec<u8>, bool)> + Send;
}

/// Accept clients until the listener fails or the service crashes.
pub async fn serve<S: RespService>(service: Arc<S>, listener: TcpListener) {
    let mut stopped = service.stopped();
    loop {
        let stream = tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => return,
            },
        };
        let _ = stream.set_nodelay(true);
        let stats = service.client_stats();
        if stats.connected.fetch_add(1, Ordering::SeqCst) >= service.limits().connections_max {
            stats.connected.fetch_sub(1, Ordering::SeqCst);
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            // Redis's words; written without waiting: a full socket just loses them.
            let _ = stream.try_write(&resp::error("max number of clients reached"));
            continue;
        }
        let (service, mut stopped) = (Arc::clone(&service), service.stopped());
        tokio::spawn(async move {
            // A crash drops the connection wherever the command was.
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => {}
                _ = serve_client(service, stream) => {}
            }
        });
    }
}

async fn serve_client<S: RespService>(service: Arc<S>, mut stream: TcpStream) {
    let mut held = Held { stats: service.client_stats(), request_bytes: 0 };
    let end = converse(&service, &mut stream, &mut held).await;
    drop(held);
    match end {
        End::Gone => {}
        End::Quit => {
            let _ = stream.shutdown().await;
        }
        End::AfterError => {
            // Closing with unread bytes resets the connection, and the client (still
            // sending a value over the limit) would never read the error.
            let _ = stream.shutdown().await;
            let mut sink = vec![0u8; 16 * 1024];
            let _ = tokio::time::timeout(Duration::from_millis(LINGER_MS), async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
    }
}

/// Execute commands as they arrive, answering in order, until the connection ends.
async fn converse<S: RespService>(service: &Arc<S>, stream: &mut TcpStream, held: &mut Held<'_>) -> End {
    let limits = service.limits();
    let stats = service.client_stats();
    let idle = (limits.idle_timeout_ms > 0).then(|| Duration::from_millis(limits.idle_timeout_ms));
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut out = Vec::new();
    loop {
        // Execute every complete command in the buffer.
        loop {
            match resp::parse_command(&buf, limits.value_bytes_max) {
                Ok(Some((args, used))) => {
                    buf.drain(..used);
                    held.hold(buf.len(), usize::MAX);
                    if args.is_empty() {
                        continue;
                    }
                    let (reply, quit) = Arc::clone(service).execute(args).await;
                    out.extend_from_slice(&reply);
                    if quit {
                        return match write(stream, &out, idle).await {
                            Ok(()) => End::Quit,
                            Err(end) => ended(stats, end),
                        };
                    }
                    if out.len() >= REPLY_FLUSH_BYTES {
                        if let Err(end) = write(stream, &out, idle).await {
                            return ended(stats, end);
                        }
                        out.clear();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    out.extend_from_slice(&e.reply());
                    return match write(stream, &out, idle).await {
                        Ok(()) => End::AfterError,
                        Err(end) => ended(stats, end),
                    };
                }
            }
        }
        if !out.is_empty() {
            if let Err(end) = write(stream, &out, idle).await {
                return ended(stats, end);
            }
            out.clear();
        }
        debug_assert!(buf.len() <= limits.value_bytes_max + CLIENT_BUFFER_SLACK_BYTES);
        let read = match idle {
            Some(idle) => match tokio::time::timeout(idle, stream.read(&mut chunk)).await {
                Ok(read) => read,
                Err(_) => return ended(stats, Stall::Idle),
            },
            None => stream.read(&mut chunk).await,
        };
        match read {
            Ok(0) | Err(_) => return End::Gone,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if !held.hold(buf.len(), limits.request_bytes_max) {
            held.hold(0, usize::MAX);
            stats.refused_busy.fetch_add(1, Ordering::Relaxed);
            let busy = resp::error(&format!(
                "busy: client requests in memory exceed {} bytes (request_bytes_max); retry later",
                limits.request_bytes_max
            ));
            let _ = write(stream, &busy, idle).await;
            return End::AfterError;
        }
    }
}

fn ended(stats: &ClientStats, stall: Stall) -> End {
    if matches!(stall, Stall::Idle) {
        stats.closed_idle.fetch_add(1, Ordering::Relaxed);
    }
    End::Gone
}

/// Why writing or reading stopped.
enum Stall {
    Idle,
    Failed,
}

/// Write `bytes`, giving up when the client takes none of them for `idle`.
async fn write(stream: &mut TcpStream, bytes: &[u8], idle: Option<Duration>) -> Result<(), Stall> {
    let mut at = 0;
    while at < bytes.len() {
        let written = match idle {
            Some(idle) => {
                tokio::time::timeout(idle, stream.write(&bytes[at..])).await.map_err(|_| Stall::Idle)?
            }
            None => stream.write(&bytes[at..]).await,
        };
        match written {
            Ok(0) | Err(_) => return Err(Stall::Failed),
            Ok(n) => at += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_that_cannot_serve_a_client_are_refused() {
        let ok = ClientLimits::default();
        assert_eq!(ok.check(), Ok(()));
        let zero = ClientLimits { value_bytes_max: 0, ..ok.clone() };
        assert!(zero.check().unwrap_err().contains("--value-bytes-max 0: must be at least 64"));
        let none = ClientLimits { connections_max: 0, ..ok.clone() };
        assert!(none.check().unwrap_err().contains("--connections-max 0"));
        let small = ClientLimits { request_bytes_max: ok.value_bytes_max, ..ok };
        assert!(small.check().unwrap_err().contains("must hold one request of the largest value"));
    }

    #[test]
    fn held_bytes_are_counted_over_all_connections_and_returned() {
        let stats = ClientStats::default();
        stats.connected.fetch_add(2, Ordering::SeqCst);
        let mut a = Held { stats: &stats, request_bytes: 0 };
        let mut b = Held { stats: &stats, request_bytes: 0 };
        assert!(a.hold(600, 1000));
        assert!(!b.hold(500, 1000), "600 + 500 passes 1000");
        assert!(a.hold(100, 1000));
        assert_eq!(stats.request_bytes.load(Ordering::SeqCst), 600);
        drop(a);
        drop(b);
        assert_eq!(stats.request_bytes.load(Ordering::SeqCst), 0);
        assert_eq!(stats.connected.load(Ordering::SeqCst), 0);
    }
}
