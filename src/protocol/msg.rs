//! Who talks to whom, and what they say.

use super::data::{Data, ModelData};
use crate::config::OpKind;
use crate::policy::NodeId;
use serde::{Deserialize, Serialize};

/// Who sends and receives messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Node(NodeId),
    /// Coordinator i; 0 leads membership (and is the only one most models have).
    Coordinator(u8),
    Client(u8),
}

impl Endpoint {
    /// The membership leader: the coordinator that orders every membership change.
    pub const LEADER: Endpoint = Endpoint::Coordinator(0);

    /// The endpoint in two bytes, kind then number: one to one.
    pub fn packed(self) -> u16 {
        let (kind, n) = match self {
            Endpoint::Node(n) => (0u16, n),
            Endpoint::Coordinator(c) => (1, c),
            Endpoint::Client(c) => (2, c),
        };
        kind << 8 | u16::from(n)
    }
}

/// One write of the packed form instead of a discriminant and a byte: endpoints are hashed in
/// every message of every state the checker looks up.
impl std::hash::Hash for Endpoint {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u16(self.packed());
    }
}

/// A replica set change under way, as the membership leader tells the other coordinators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JoinView {
    pub evicted: NodeId,
    pub replacement: NodeId,
    pub is_move: bool,
    /// The replacement is caught up: reads go to the new replica set; writes still reach both.
    pub swapping: bool,
}

/// Whether a field holds its default (skipped when serialized: the model's keys and tokens are
/// `()`, and its traces do not spell them).
fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

/// Messages, named by who does what.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", bound = "")]
pub enum Msg<D: Data = ModelData> {
    /// Client -> coordinator: attempt `attempt` of operation `op`.
    Request {
        op: D::Op,
        attempt: u8,
        kind: OpKind,
        shard: u8,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
        value: D::Value,
        #[serde(default, skip_serializing_if = "is_default")]
        token: D::Token,
    },
    /// Coordinator -> client. `value` is the read's result.
    Response {
        op: D::Op,
        attempt: u8,
        ok: bool,
        value: D::Value,
    },
    /// Coordinator -> replica: store `value` at `version` (the write of `op`, or a read's
    /// write-back).
    Replicate {
        op: D::Op,
        attempt: u8,
        shard: u8,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
        version: D::Version,
        value: D::Value,
    },
    ReplicateAck {
        op: D::Op,
        attempt: u8,
        shard: u8,
    },
    /// Replica -> coordinator: it could not do its part of request `op` (the store's node
    /// whose storage failed; no model's node refuses). Proof of life, and no answer.
    Refused {
        op: D::Op,
        attempt: u8,
        shard: u8,
    },
    ReadReq {
        op: D::Op,
        attempt: u8,
        shard: u8,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
    },
    ReadReply {
        op: D::Op,
        attempt: u8,
        shard: u8,
        version: D::Version,
        value: D::Value,
    },
    /// Coordinator -> source replica: send your copy of `shard` to `to` (catch-up copy).
    CopyRequest {
        shard: u8,
        to: NodeId,
    },
    /// Source -> replacement: the source's whole copy of `shard`.
    CopyData {
        shard: u8,
        from: NodeId,
        data: D::Snapshot,
    },
    /// Replacement -> coordinator: the copy from `from` is applied.
    CopyAck {
        shard: u8,
        from: NodeId,
    },
    Ping,
    Pong,
    /// Leader -> coordinator: shard `shard`'s replica set (a bit per node) and the change under
    /// way, as of `epoch`.
    View {
        shard: u8,
        epoch: u8,
        members: u8,
        join: Option<JoinView>,
    },
    /// Coordinator -> leader: it runs view `epoch` of `shard` (and, for a join's first view,
    /// every write it began before has ended).
    ViewAck {
        shard: u8,
        epoch: u8,
    },
    /// Coordinator -> leader: its detector and eviction policy want `evicted` replaced by
    /// `replacement`; the leader orders it, or drops it when the shard changes already.
    Propose {
        shard: u8,
        evicted: NodeId,
        replacement: NodeId,
    },
    /// Coordinator -> node: how much compaction debt do you carry? (asked each rebalancer
    /// round when debt is node state)
    LoadQuery,
    /// Node -> coordinator: the node's compaction debt now.
    LoadReport {
        compaction_debt_pct: u8,
    },
    /// The leader family's messages (`protocol::leader`); the quorum family never sends one.
    Leader(super::leader::LeaderMsg<D>),
}

impl Copy for Msg<ModelData> {}
