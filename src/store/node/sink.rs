//! A connection's outgoing bytes, written from whichever thread has them.
//!
//! On the write path every hand-off between threads costs a wake-up (tens of microseconds on a
//! busy machine, against 30 us for a whole commit on tmpfs): a reply that went from the commit
//! thread through a oneshot, a handler task and a writer task took three. So a frame is
//! written by its sender with a non-blocking `try_write` when nothing is queued before it, and
//! only what the socket does not take at once is queued for the writer task. Frames are whole
//! on the wire: a frame is queued entirely, or its unwritten rest is, under the same lock.

use std::io;
use std::sync::{Arc, Mutex};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

pub struct FrameSink {
    half: OwnedWriteHalf,
    state: Mutex<Queued>,
    /// Wakes the writer task: bytes were queued, or the sink closed.
    queued: Notify,
    /// Wakes senders waiting for the queue to shrink (`until_below`).
    drained: Notify,
}

#[derive(Default)]
struct Queued {
    bytes: Vec<u8>,
    /// How much of `bytes` is already written.
    written: usize,
    /// The connection broke or was closed: nothing more is written.
    closed: bool,
}

impl Queued {
    fn len(&self) -> usize {
        self.bytes.len() - self.written
    }
}

/// The connection is closed: the frame was not sent.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

impl FrameSink {
    /// A sink over `half`, with its writer task started on the current runtime.
    pub fn start(half: OwnedWriteHalf) -> Arc<FrameSink> {
        let sink = Arc::new(FrameSink {
            half,
            state: Mutex::default(),
            queued: Notify::new(),
            drained: Notify::new(),
        });
        tokio::spawn(Arc::clone(&sink).write_queued());
        sink
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.state.lock().expect("sink lock")
    }

    /// Send one frame's bytes: written now as far as the socket takes them, the rest queued.
    pub fn send(&self, frame: &[u8]) -> Result<(), Closed> {
        let mut state = self.lock();
        if state.closed {
            return Err(Closed);
        }
        let mut written = 0;
        if state.len() == 0 {
            while written < frame.len() {
                match self.half.try_write(&frame[written..]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        state.closed = true;
                        drop(state);
                        self.wake_all();
                        return Err(Closed);
                    }
                }
            }
            if written == frame.len() {
                return Ok(());
            }
            state.bytes.clear();
            state.written = 0;
        }
        state.bytes.extend_from_slice(&frame[written..]);
        drop(state);
        self.queued.notify_one();
        Ok(())
    }

    /// Bytes sent but not yet written to the socket.
    pub fn queued_bytes(&self) -> usize {
        self.lock().len()
    }

    /// Wait until fewer than `bound` bytes are queued (or the sink closed): a peer that does
    /// not read its replies stops being read from, instead of growing the queue without bound.
    pub async fn until_below(&self, bound: usize) {
        loop {
            let drained = self.drained.notified();
            {
                let state = self.lock();
                if state.closed || state.len() < bound {
                    return;
                }
            }
            drained.await;
        }
    }

    /// Write nothing more; the writer task ends. Frames still queued are dropped.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn wake_all(&self) {
        self.queued.notify_one();
        self.drained.notify_waiters();
    }

    /// Write what is queued as far as the socket takes it; `true` if some was written.
    fn write_some(&self) -> Result<bool, Closed> {
        let mut state = self.lock();
        if state.closed {
            return Err(Closed);
        }
        let (from, to) = (state.written, state.bytes.len());
        match self.half.try_write(&state.bytes[from..to]) {
            Ok(n) => {
                state.written += n;
                if state.len() == 0 {
                    state.bytes.clear();
                    state.written = 0;
                }
                Ok(n > 0)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(false),
            Err(_) => {
                state.closed = true;
                Err(Closed)
            }
        }
    }

    /// The writer task: writes what senders queued when the socket takes it.
    async fn write_queued(self: Arc<FrameSink>) {
        loop {
            let wake = self.queued.notified();
            let (closed, empty) = {
                let state = self.lock();
                (state.closed, state.len() == 0)
            };
            if closed {
                return;
            }
            if empty {
                wake.await;
                continue;
            }
            if self.half.writable().await.is_err() {
                self.close();
                return;
            }
            match self.write_some() {
                Ok(true) => self.drained.notify_waiters(),
                Ok(false) => {}
                Err(Closed) => {
                    self.wake_all();
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    /// Frames sent from many threads at once, more than the socket buffers while nobody
    /// reads, arrive whole and in each sender's order once the peer reads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_from_many_threads_arrive_whole_and_the_queue_is_bounded_by_the_reader() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dial = tokio::spawn(TcpStream::connect(addr));
        let (mut peer, _) = listener.accept().await.unwrap();
        let (_read_half, write_half) = dial.await.unwrap().unwrap().into_split();
        let sink = FrameSink::start(write_half);
        const SENDERS: u8 = 4;
        const FRAMES: u32 = 2_000;
        const FRAME_BYTES: usize = 1_000;
        let threads: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || {
                    for seq in 0..FRAMES {
                        let mut frame = vec![sender; FRAME_BYTES];
                        frame[1..5].copy_from_slice(&seq.to_be_bytes());
                        sink.send(&frame).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(sink.queued_bytes() > 0, "8 MB is more than a socket buffers unread");
        let mut next = [0u32; SENDERS as usize];
        let mut frame = vec![0u8; FRAME_BYTES];
        for _ in 0..u32::from(SENDERS) * FRAMES {
            peer.read_exact(&mut frame).await.unwrap();
            let sender = frame[0];
            assert!(frame[5..].iter().all(|&b| b == sender), "a frame is never interleaved with another");
            let seq = u32::from_be_bytes(frame[1..5].try_into().unwrap());
            assert_eq!(seq, next[usize::from(sender)], "one sender's frames keep their order");
            next[usize::from(sender)] += 1;
        }
        sink.until_below(1).await;
        assert_eq!(sink.queued_bytes(), 0);
        drop(peer);
        sink.close();
        assert_eq!(sink.send(b"after"), Err(Closed));
    }
}
