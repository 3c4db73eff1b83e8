//! The protocol: the coordinator and the storage node as sans-I/O state machines.
//!
//! A machine reacts to one input at a time (a message, one of its timers firing, time passing
//! by one tick) and says what follows through [`Io`]: the messages it sends and the [`Event`]s
//! a trace records and the model's properties observe. It reads no clock, opens no socket and
//! draws no random number; every decision goes through `src/policy`. The timed world
//! (`src/model`) runs these machines under every delivery order, latency and fault its
//! scenario allows; the only thing the world adds is the environment and ghost bookkeeping.
//!
//! Time is in ticks: every timer is a count of remaining ticks that the driver decrements
//! with [`coordinator::Coordinator::tick`], and fires when it reaches zero.

pub mod coordinator;
pub mod msg;
pub mod node;

pub use coordinator::{CapacityBreach, CapacityUnit, Coordinator, MembershipUpdate};
pub use msg::{Endpoint, Msg, OpId, Stored};

use crate::policy::{Version, CLIENT_COUNT_MAX, NODE_COUNT_MAX, SHARD_COUNT_MAX};
use arrayvec::ArrayVec;

/// Fixed-capacity vectors for what every state has: cloning a state allocates only for the
/// messages and requests in flight.
pub type PerNode<T> = ArrayVec<T, NODE_COUNT_MAX>;
pub type PerShard<T> = ArrayVec<T, SHARD_COUNT_MAX>;
pub type PerClient<T> = ArrayVec<T, CLIENT_COUNT_MAX>;

/// `n` copies of `value`.
pub fn filled<T: Clone, const N: usize>(value: T, n: usize) -> ArrayVec<T, N> {
    assert!(n <= N);
    std::iter::repeat_n(value, n).collect()
}

/// What a machine did that a trace records and the model's properties observe. No machine
/// acts on its own events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A write was acknowledged to its client at `version`.
    WriteAcked { shard: u8, version: Version },
    /// The coordinator took on a membership change (an eviction or a move); it may still be
    /// rejected by a full queue.
    ChangeRequested(MembershipUpdate),
    /// The membership queue was full: the change is lost and the replica stays dead to it.
    ChangeRejected(MembershipUpdate),
    /// A partition or backend was offered more writes in a tick than its capacity.
    CapacityBreached(CapacityBreach),
    /// A storage node stored the write of `op` at `version` (it may already have held it).
    WriteApplied { op: OpId, version: Version },
}

/// What a machine does to the world. Sends leave from the machine the `Io` was made for.
pub trait Io {
    /// Put `msg` on the wire to `dst` (the driver decides when, or whether, it arrives).
    fn send(&mut self, dst: Endpoint, msg: Msg);
    /// Record what happened; a machine never reads its events back.
    fn event(&mut self, event: Event);
}

/// Sends and events at most one step produces: the heartbeat round pings every node, a
/// request reaches every member and a learner, evictions are considered per shard.
pub const STEP_SENDS_MAX: usize = 16;
pub const STEP_EVENTS_MAX: usize = 16;

/// An [`Io`] that keeps one step's outputs in order, for a driver to apply afterwards (when
/// applying them needs the state the machine was borrowing).
#[derive(Default, Debug)]
pub struct Outbox {
    pub sends: ArrayVec<(Endpoint, Msg), STEP_SENDS_MAX>,
    pub events: ArrayVec<Event, STEP_EVENTS_MAX>,
}

impl Io for Outbox {
    fn send(&mut self, dst: Endpoint, msg: Msg) {
        self.sends.try_push((dst, msg)).expect("a step sends at most STEP_SENDS_MAX messages");
    }

    fn event(&mut self, event: Event) {
        self.events.try_push(event).expect("a step has at most STEP_EVENTS_MAX events");
    }
}
