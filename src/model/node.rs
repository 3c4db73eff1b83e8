//! The storage node: durable versioned values per shard. It answers whoever asks; membership
//! is the coordinator's business.

use super::env::send;
use super::{Endpoint, Msg, Stored, WorldConfig, WorldState};
use crate::policy::NodeId;

pub fn on_msg(cfg: &WorldConfig, s: &mut WorldState, n: NodeId, src: Endpoint, msg: Msg) {
    let me = Endpoint::Node(n);
    match msg {
        Msg::Replicate { op, attempt, shard, version, value } => {
            store(s, n, shard, Stored { version, value });
            record_effect(s, op, version);
            send(cfg, s, me, src, Msg::ReplicateAck { op, attempt, shard });
        }
        Msg::ReadReq { op, attempt, shard } => {
            let Stored { version, value } = s.nodes[usize::from(n)].shards[usize::from(shard)];
            send(cfg, s, me, src, Msg::ReadReply { op, attempt, shard, version, value });
        }
        Msg::CopyRequest { shard, to } => {
            let Stored { version, value } = s.nodes[usize::from(n)].shards[usize::from(shard)];
            send(cfg, s, me, Endpoint::Node(to), Msg::CopyData { shard, from: n, version, value });
        }
        Msg::CopyData { shard, from, version, value } => {
            store(s, n, shard, Stored { version, value });
            let version = s.nodes[usize::from(n)].shards[usize::from(shard)].version;
            let ack = Msg::CopyAck { shard, from, version };
            send(cfg, s, me, Endpoint::Coordinator, ack);
        }
        Msg::Ping => send(cfg, s, me, src, Msg::Pong),
        Msg::Request { .. }
        | Msg::Response { .. }
        | Msg::ReplicateAck { .. }
        | Msg::ReadReply { .. }
        | Msg::CopyAck { .. }
        | Msg::Pong => unreachable!("a node is never sent {msg:?}"),
    }
}

/// Last-writer-wins by version: an older version never overwrites a newer one.
fn store(s: &mut WorldState, n: NodeId, shard: u8, incoming: Stored) {
    let slot = &mut s.nodes[usize::from(n)].shards[usize::from(shard)];
    if incoming.version > slot.version {
        *slot = incoming;
    }
}

/// Ghost: a write operation whose effect is stored at two different versions was applied twice.
fn record_effect(s: &mut WorldState, op: super::OpId, version: u8) {
    match s.ghost.effects.iter().find(|(o, _)| *o == op) {
        Some((_, first)) => {
            if *first != version {
                s.ghost.duplicate_effect = true;
            }
        }
        None => {
            s.ghost.effects.push((op, version));
            s.ghost.effects.sort();
        }
    }
}
