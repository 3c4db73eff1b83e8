//! The protocol: the coordinator and the storage node as sans-I/O state machines, one module
//! per replication family: the quorum family (`coordinator`, `node`) and the leader family
//! (`leader`: a primary per shard, followers, failover, epochs).
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

pub mod compaction;
pub mod coordinator;
pub mod data;
pub mod leader;
pub mod msg;
pub mod node;

pub use coordinator::{CapacityBreach, CapacityUnit, Coordinator, MembershipUpdate};
pub use data::{Data, ModelData, OpId, Stored};
pub use msg::{Endpoint, JoinView, Msg};

use crate::policy::{NodeId, CLIENT_COUNT_MAX, NODE_COUNT_MAX, SHARD_COUNT_MAX};
use arrayvec::ArrayVec;
use smallvec::SmallVec;

/// Fixed-capacity vectors for what every state has: cloning a state allocates only for the
/// messages and requests in flight.
pub type PerNode<T> = ArrayVec<T, NODE_COUNT_MAX>;
pub type PerClient<T> = ArrayVec<T, CLIENT_COUNT_MAX>;
/// The model's per-shard vectors ([`ModelData`]'s [`Data::Shards`]); the machines keep their
/// shards in `D::Shards`, which the store makes a `Vec` (its partitions outnumber a model's).
pub type PerShard<T> = ArrayVec<T, SHARD_COUNT_MAX>;

/// `n` copies of `value` (a `PerNode`, `PerShard` or `PerClient`; a fixed-capacity one
/// panics beyond its capacity).
pub fn filled<T: Clone, C: FromIterator<T>>(value: T, n: usize) -> C {
    std::iter::repeat_n(value, n).collect()
}

/// What a machine did that a trace records and the model's properties observe. No machine
/// acts on its own events.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event<D: Data = ModelData> {
    /// A write was acknowledged to its client at `version`.
    WriteAcked { shard: u8, version: D::Version },
    /// A coordinator's detector and eviction policy decided to evict a member (the leader
    /// orders it, unless the shard changes already).
    ChangeProposed(MembershipUpdate),
    /// The coordinator took on a membership change (an eviction or a move); it may still be
    /// rejected by a full queue.
    ChangeRequested(MembershipUpdate),
    /// The membership queue was full: the change is lost and the replica stays dead to it.
    ChangeRejected(MembershipUpdate),
    /// A partition or backend was offered more writes in a tick than its capacity.
    CapacityBreached(CapacityBreach),
    /// A storage node stored the write of `op` at `version` (it may already have held it).
    WriteApplied { op: D::Op, version: D::Version },
    /// A request failed: its client is told so, and this says why.
    RequestFailed { op: D::Op, why: Failure },
    /// A read found its newest value on fewer than a write quorum and writes it back first.
    ReadRepairStarted { op: D::Op, shard: u8 },
    /// The head of the membership queue was applied: its replacement joins as a learner.
    ChangeStarted(MembershipUpdate),
    /// The replacement caught up and took the leaving replica's place.
    ChangeCompleted(MembershipUpdate),
    /// The join did not complete within `join_timeout`: the leaving replica stays and the
    /// replacement is dropped.
    ChangeAbandoned(MembershipUpdate),
    /// Another coordinator than the leader: the leader's view ended a change, which this one
    /// now runs (it decided nothing; what it shows must match the leader's).
    ChangeLearned(MembershipUpdate),
    /// The failure detector declared `node` dead: after `silence_ticks` of silence
    /// (independent detection), or (`None`) for a missed ack deadline (coupled).
    DeclaredDead { node: NodeId, silence_ticks: Option<u16> },
    /// The eviction policy left a dead member in place.
    EvictionSuppressed { shard: u8, node: NodeId, why: crate::policy::eviction::Suppressed },
    /// What the leader family's machines did (`protocol::leader`); the quorum family has none.
    Leader(leader::LeaderEvent<D>),
}

impl Copy for Event<ModelData> {}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Routing refused the write (`routing::route_write`): a partition or backend at capacity.
    Throttled(crate::policy::routing::WriteRoute),
    /// The ack deadline fired first: `answered` of the `needed` answers had come; `missing`
    /// has a bit for each node asked that had not answered.
    Deadline { answered: u8, needed: u8, missing: u8, repairing: bool },
    /// Too few of the nodes asked could still answer: `refused` has a bit for each that
    /// refused (its storage failed), `missing` for each yet to answer; told at once.
    Refused { answered: u8, needed: u8, refused: u8, missing: u8, repairing: bool },
}

/// What a machine does to the world. Sends leave from the machine the `Io` was made for.
pub trait Io<D: Data = ModelData> {
    /// Put `msg` on the wire to `dst` (the driver decides when, or whether, it arrives).
    fn send(&mut self, dst: Endpoint, msg: Msg<D>);
    /// Record what happened; a machine never reads its events back.
    fn event(&mut self, event: Event<D>);
}

/// Sends and events one step keeps inline: the heartbeat round pings every node, a request
/// reaches every member and a learner, evictions are considered per shard. A model's steps
/// stay within them; the store's, with more partitions, may spill to the heap.
pub const STEP_SENDS_INLINE: usize = 32;
pub const STEP_EVENTS_INLINE: usize = 16;

/// An [`Io`] that keeps one step's outputs in order, for a driver to apply afterwards (when
/// applying them needs the state the machine was borrowing).
#[derive(Debug)]
pub struct Outbox<D: Data = ModelData> {
    pub sends: SmallVec<[(Endpoint, Msg<D>); STEP_SENDS_INLINE]>,
    pub events: SmallVec<[Event<D>; STEP_EVENTS_INLINE]>,
}

impl<D: Data> Default for Outbox<D> {
    fn default() -> Self {
        Outbox { sends: SmallVec::new(), events: SmallVec::new() }
    }
}

impl<D: Data> Io<D> for Outbox<D> {
    fn send(&mut self, dst: Endpoint, msg: Msg<D>) {
        self.sends.push((dst, msg));
    }

    fn event(&mut self, event: Event<D>) {
        self.events.push(event);
    }
}
