//! A leader-family node's commits, written on a thread of their own while the node steps on.
//!
//! The node stages each batch of steps' writes ([`Staged`]) with the messages those steps
//! sent, and queues them here. The thread takes whatever is queued when it is free, writes it
//! in one transaction (group commit), then sends the queued messages in order: nothing leaves
//! before what its step changed is durable, and commits are written in the order they were
//! staged. Sending from this thread, not from the node's task, keeps a wake-up of that task
//! off every write's path.

use super::mesh::{LeaderLink, LeaderMsg};
use super::node::BATCH_STEPS_MAX;
use super::replica_db::Staged;
use crate::protocol::Endpoint;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// A batch of steps: what they changed (if anything) and what they sent.
pub(super) struct Batch {
    pub staged: Option<Staged>,
    pub sends: Vec<(Endpoint, LeaderMsg)>,
    /// How many steps (messages and timers) it holds: at least one.
    pub steps: usize,
}

/// What the thread tells the node.
struct Shared {
    /// Steps queued or being written, not yet sent.
    unwritten_steps: AtomicUsize,
    /// Why the thread stopped writing, if it did (then nothing more is sent).
    failed: Mutex<Option<String>>,
    /// Told when the steps not yet written fall below `BATCH_STEPS_MAX` (the node may take
    /// messages again), and when the thread fails: not after every group, which would wake
    /// the node's task on every write's path.
    written: tokio::sync::Notify,
}

pub(super) struct Committer {
    queue: Option<mpsc::Sender<Batch>>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Start the thread; called within the node's runtime.
    pub(super) fn start(name: String, link: Arc<dyn LeaderLink>) -> Result<Committer, String> {
        let (queue, batches) = mpsc::channel::<Batch>();
        let shared = Arc::new(Shared {
            unwritten_steps: AtomicUsize::new(0),
            failed: Mutex::new(None),
            written: tokio::sync::Notify::new(),
        });
        let theirs = Arc::clone(&shared);
        // Sending may start a link's task: the thread works in the node's runtime.
        let runtime = tokio::runtime::Handle::current();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _runtime = runtime.enter();
                write_batches(&batches, &*link, &theirs)
            })
            .map_err(|e| format!("cannot start the commit thread: {e}"))?;
        Ok(Committer { queue: Some(queue), shared, thread: Some(thread) })
    }

    /// Queue a batch; its sends leave once it is written.
    pub(super) fn queue(&self, batch: Batch) {
        assert!(batch.steps > 0, "a batch holds at least one step");
        self.shared.unwritten_steps.fetch_add(batch.steps, Ordering::AcqRel);
        // A thread that stopped has said why (`failed`); the node reads it at its next wake-up.
        let _ = self.queue.as_ref().expect("queued before the end").send(batch);
    }

    /// Steps queued and not yet written and sent: 0 once everything queued has left.
    pub(super) fn unwritten_steps(&self) -> usize {
        self.shared.unwritten_steps.load(Ordering::Acquire)
    }

    /// Wait until the steps not yet written fall below `BATCH_STEPS_MAX`, or the thread failed.
    pub(super) async fn written(&self) {
        self.shared.written.notified().await;
    }

    /// Why the thread stopped writing, if it did.
    pub(super) fn failed(&self) -> Option<String> {
        self.shared.failed.lock().expect("no panic holds it").clone()
    }

    /// Write and send everything queued, then stop the thread.
    pub(super) async fn finish(mut self) -> Result<(), String> {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let joined = tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(|e| format!("the commit thread's joiner: {e}"))?;
            if let Err(panic) = joined {
                std::panic::resume_unwind(panic);
            }
        }
        self.failed().map_or(Ok(()), Err)
    }
}

fn write_batches(batches: &mpsc::Receiver<Batch>, link: &dyn LeaderLink, shared: &Shared) {
    /// A panic while writing stops the node as a failed write does.
    struct OnPanic<'a>(&'a Shared);
    impl Drop for OnPanic<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                if let Ok(mut failed) = self.0.failed.lock() {
                    failed.get_or_insert_with(|| "the commit thread panicked".into());
                }
                self.0.written.notify_one();
            }
        }
    }
    let _guard = OnPanic(shared);
    while let Ok(first) = batches.recv() {
        let mut group = vec![first];
        group.extend(batches.try_iter());
        let staged: Vec<Staged> = group.iter_mut().filter_map(|b| b.staged.take()).collect();
        if let Err(e) = Staged::write_all(&staged) {
            *shared.failed.lock().expect("no panic holds it") = Some(e);
            shared.written.notify_one();
            return;
        }
        let mut steps = 0;
        for batch in group {
            steps += batch.steps;
            for (dst, msg) in batch.sends {
                link.send(dst, msg);
            }
        }
        let before = shared.unwritten_steps.fetch_sub(steps, Ordering::AcqRel);
        if before >= BATCH_STEPS_MAX && before - steps < BATCH_STEPS_MAX {
            shared.written.notify_one();
        }
    }
}
