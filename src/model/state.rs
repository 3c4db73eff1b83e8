//! The world's state: every actor's state, the messages in flight, the environment and the
//! ghost variables the properties read. No absolute clock: only remaining ticks and ages.

use crate::config::OpKind;
use crate::policy::detector::Health;
use crate::policy::{NodeId, Version, CLIENT_COUNT_MAX, NODE_COUNT_MAX, SHARD_COUNT_MAX};
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

/// A client operation: (client index, index of the op in that client's workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId {
    pub client: u8,
    pub seq: u8,
}

/// Who sends and receives messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Node(NodeId),
    Coordinator,
    Client(u8),
}

/// Messages, named by who does what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    /// Client -> coordinator: attempt `attempt` of operation `op`.
    Request {
        op: OpId,
        attempt: u8,
        kind: OpKind,
        shard: u8,
        value: u8,
    },
    /// Coordinator -> client. `value` is the read's result.
    Response {
        op: OpId,
        attempt: u8,
        ok: bool,
        value: u8,
    },
    /// Coordinator -> replica: store `value` at `version` (the write of `op`).
    Replicate {
        op: OpId,
        attempt: u8,
        shard: u8,
        version: Version,
        value: u8,
    },
    ReplicateAck {
        op: OpId,
        attempt: u8,
        shard: u8,
    },
    ReadReq {
        op: OpId,
        attempt: u8,
        shard: u8,
    },
    ReadReply {
        op: OpId,
        attempt: u8,
        shard: u8,
        version: Version,
        value: u8,
    },
    /// Coordinator -> source replica: send your copy of `shard` to `to` (catch-up copy).
    CopyRequest {
        shard: u8,
        to: NodeId,
    },
    /// Source -> replacement.
    CopyData {
        shard: u8,
        from: NodeId,
        version: Version,
        value: u8,
    },
    /// Replacement -> coordinator: the copy from `from` is applied; it now holds `version`.
    CopyAck {
        shard: u8,
        from: NodeId,
        version: Version,
    },
    Ping,
    Pong,
}

/// A message in flight. It may be delivered once `earliest_ticks` is 0 and must be by the time
/// `latest_ticks` would go below 0: `Tick` is disabled while a message has `latest_ticks == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Envelope {
    pub earliest_ticks: u8,
    pub latest_ticks: u8,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub msg: Msg,
    /// Ghost: the sending node's fault epoch at send time (0 for non-nodes).
    pub sender_epoch: u8,
}

/// A stored value of one shard on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Stored {
    pub version: Version,
    pub value: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    pub up: bool,
    /// Durable: survives crash and restart.
    pub shards: PerShard<Stored>,
}

/// A replica joining a shard's replica set in place of an evicted one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Join {
    pub evicted: NodeId,
    pub replacement: NodeId,
    /// Bit i set: the copy from node i reached the replacement.
    pub copied_from: u8,
    /// The newest version the replacement reported holding.
    pub replacement_version: Version,
    pub is_move: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardView {
    /// The replica set, sorted by node id.
    pub members: PerNode<NodeId>,
    pub join: Option<Join>,
    pub next_version: Version,
    /// The newest version the coordinator acknowledged to a client.
    pub acked_version: Version,
    /// Rebalancing: ticks until the shard may move again, and the cooldown its last move got.
    pub cooldown_ticks: u8,
    pub cooldown_len_ticks: u8,
}

/// A membership update waiting in the coordinator's bounded queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MembershipUpdate {
    pub shard: u8,
    /// The replica leaving: evicted as dead, or the source of a rebalancing move.
    pub evicted: NodeId,
    pub replacement: NodeId,
    /// A rebalancing move: the leaving replica is healthy and copies its data too.
    pub is_move: bool,
}

/// A request the coordinator is working on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoordOp {
    pub op: OpId,
    pub attempt: u8,
    pub kind: OpKind,
    pub shard: u8,
    pub version: Version,
    pub value: u8,
    /// Members asked (bit per node); only their answers count toward the quorum.
    pub asked: u8,
    pub answered: u8,
    pub responded: bool,
    /// Best read reply so far.
    pub best: Stored,
    /// Ticks until the ack deadline (`replica_ack_timeout`) fires.
    pub deadline_ticks: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoordState {
    pub shards: PerShard<ShardView>,
    pub health: PerNode<Health>,
    /// Independent detection: ticks since the node was last heard from (saturating).
    pub silence_ticks: PerNode<u8>,
    pub heartbeat_ticks: u8,
    pub ops: Vec<CoordOp>,
    /// Idempotency tokens: the version each write operation was sequenced at.
    pub tokens: Vec<(OpId, Version)>,
    pub queue: Vec<MembershipUpdate>,
    /// Ticks until the head of the queue is applied.
    pub queue_ticks: u8,
    /// Ticks until the rebalancer runs (when enabled).
    pub rebalance_ticks: u8,
    /// Writes the modelled clients offered to each partition this tick (kept only when the
    /// scenario has partition capacities; background load is in the config).
    pub partition_load: PerShard<u8>,
    /// Writes placed on each backend this tick (kept only when backends have capacities).
    pub backend_load: PerNode<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientPhase {
    /// Between operations (or before the first): the next one starts somewhere in the
    /// client's think-time window.
    Idle { earliest_ticks: u8, latest_ticks: u8 },
    /// An attempt is outstanding; the request timeout fires in `timeout_ticks`.
    Waiting { attempt: u8, timeout_ticks: u8 },
    /// Backing off before attempt `attempt + 1`, in the jitter window.
    Backoff { attempt: u8, earliest_ticks: u8, latest_ticks: u8 },
    /// Every operation returned, or the client gave up on one.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientState {
    pub next_op: u8,
    pub phase: ClientPhase,
    pub retries_used: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnvState {
    pub faults_left: u8,
    /// Bit z: zone z is cut off from every other zone.
    pub partitioned: u8,
    /// Bit i: degradation i of the fault menu is active.
    pub degraded: u8,
}

/// Where load first exceeded capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapacityUnit {
    Partition(u8),
    Backend(crate::policy::NodeId),
}

/// The first time a partition or backend was offered more writes in a tick than it can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CapacityBreach {
    pub unit: CapacityUnit,
    /// Writes offered in that tick, background included.
    pub offered: u16,
    pub capacity: u16,
}

/// Ghost variables: bookkeeping for the properties, never read by the actors.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Ghost {
    /// Highest version acknowledged to a client, per shard.
    pub acked_version: PerShard<Version>,
    /// Per shard, the clients' register history.
    /// Shared between states until an operation is invoked or returns: most steps copy a
    /// pointer, not the history.
    pub history: std::sync::Arc<PerShard<super::history::History>>,
    /// Whether every history so far has a linearization. Re-checked when an operation
    /// returns (the only event that can break it), not on every state.
    pub linearizable: bool,
    /// The first version each write operation was stored at.
    pub effects: Vec<(OpId, Version)>,
    pub duplicate_effect: bool,
    /// Per node: a fault (crash, or cut from the coordinator) since the coordinator last heard
    /// from it in its current epoch.
    pub faulted_since_heard: PerNode<bool>,
    pub fault_epoch: PerNode<u8>,
    pub healthy_evicted: Option<NodeId>,
    pub churn_exceeded: bool,
    /// Ages in ticks of the membership changes inside the churn window (when one is set).
    pub change_ages: Vec<u8>,
    pub capacity_breach: Option<CapacityBreach>,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct WorldState {
    pub nodes: PerNode<NodeState>,
    pub coord: CoordState,
    pub clients: PerClient<ClientState>,
    /// Messages in flight, kept sorted so equal states hash equally.
    pub net: Vec<Envelope>,
    pub env: EnvState,
    pub ghost: Ghost,
}
