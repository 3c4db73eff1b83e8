//! Who talks to whom, and what they say.

use crate::config::OpKind;
use crate::policy::{NodeId, Version, CLIENT_OPS_MAX};
use serde::{Deserialize, Serialize};

/// A client operation: (client index, index of the op in that client's workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId {
    pub client: u8,
    pub seq: u8,
}

/// Who sends and receives messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Node(NodeId),
    Coordinator,
    Client(u8),
}

/// Messages, named by who does what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

impl OpId {
    /// The value a write operation writes: unique per operation, never 0 (the initial value).
    pub fn write_value(self) -> u8 {
        1 + self.client * CLIENT_OPS_MAX as u8 + self.seq
    }
}

/// A stored value of one shard on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Stored {
    pub version: Version,
    pub value: u8,
}
