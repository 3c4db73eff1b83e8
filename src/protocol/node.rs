//! The storage node: durable versioned values per shard. It answers whoever asks; membership
//! is the coordinator's business. Everything it holds is durable: a crash loses nothing the
//! node stored, only the messages in flight.

use super::{Endpoint, Event, Io, Msg, Stored};
use crate::policy::NodeId;

/// Node `me` receives `msg` from `src`; `data` is its durable value of every shard.
pub fn on_msg(me: NodeId, data: &mut [Stored], src: Endpoint, msg: Msg, io: &mut impl Io) {
    match msg {
        Msg::Replicate { op, attempt, shard, version, value, .. } => {
            store(&mut data[usize::from(shard)], Stored { version, value });
            io.event(Event::WriteApplied { op, version });
            io.send(src, Msg::ReplicateAck { op, attempt, shard });
        }
        Msg::ReadReq { op, attempt, shard, .. } => {
            let Stored { version, value } = data[usize::from(shard)];
            io.send(src, Msg::ReadReply { op, attempt, shard, version, value });
        }
        Msg::CopyRequest { shard, to } => {
            let copy = data[usize::from(shard)];
            io.send(Endpoint::Node(to), Msg::CopyData { shard, from: me, data: copy });
        }
        Msg::CopyData { shard, from, data: copy } => {
            store(&mut data[usize::from(shard)], copy);
            // Copies are the membership leader's business.
            io.send(Endpoint::LEADER, Msg::CopyAck { shard, from });
        }
        Msg::Ping => io.send(src, Msg::Pong),
        // Compaction debt is answered for by `compaction::on_node_msg`, which drivers with
        // growing debt call as well.
        Msg::LoadQuery => {}
        Msg::Request { .. }
        | Msg::Response { .. }
        | Msg::ReplicateAck { .. }
        | Msg::Refused { .. }
        | Msg::ReadReply { .. }
        | Msg::CopyAck { .. }
        | Msg::Pong
        | Msg::View { .. }
        | Msg::ViewAck { .. }
        | Msg::Propose { .. }
        | Msg::LoadReport { .. }
        | Msg::Leader(_) => unreachable!("a node is never sent {msg:?}"),
    }
}

/// Last-writer-wins by version: an older version never overwrites a newer one.
fn store(slot: &mut Stored, incoming: Stored) {
    if incoming.version > slot.version {
        *slot = incoming;
    }
}
