//! Every epoch a machine or message holds, for a driver that renames them.
//!
//! The machines only compare epochs (equal, older, newer) and count the manager's current one
//! up by one, and the manager's current epoch of a shard is the newest of that shard anywhere
//! (only the manager makes epochs, and it persists each before telling anyone). So renaming
//! every epoch of a state by one order-preserving map (the timed world maps them to their
//! ranks, to keep a state space finite across promotions) gives a state whose future is the
//! renamed future of the original. These visitors list every field that holds an epoch, the
//! epochs inside [`Pos`]itions included: a renaming that missed one would compare a renamed
//! epoch with an original one.

use super::{LeaderMsg, Manager, Pos, Replica, ReplicaDurable};
use crate::protocol::Data;

fn pos<D: Data>(p: &mut Pos<D>, f: &mut impl FnMut(&mut D::Epoch)) {
    f(&mut p.epoch);
}

impl<D: Data> Replica<D> {
    /// Call `f` on every epoch the replica holds.
    pub fn for_each_epoch(&mut self, f: &mut impl FnMut(&mut D::Epoch)) {
        for s in self.shards.iter_mut().flatten() {
            f(&mut s.epoch);
            pos::<D>(&mut s.last, f);
            for p in s.followers.iter_mut() {
                pos::<D>(&mut p.acked, f);
            }
        }
    }
}

impl<D: Data> ReplicaDurable<D> {
    /// Call `f` on every epoch a crashed replica kept.
    pub fn for_each_epoch(&mut self, f: &mut impl FnMut(&mut D::Epoch)) {
        for s in self.shards.iter_mut().flatten() {
            f(&mut s.epoch);
            pos::<D>(&mut s.last, f);
        }
    }
}

impl<D: Data> Manager<D> {
    /// Call `f` on every epoch the manager holds.
    pub fn for_each_epoch(&mut self, f: &mut impl FnMut(&mut D::Epoch)) {
        for r in self.shards.iter_mut() {
            f(&mut r.epoch);
            for (_, p) in r.failover.iter_mut().flat_map(|fo| fo.answers.iter_mut()) {
                pos::<D>(p, f);
            }
        }
    }
}

impl<D: Data> LeaderMsg<D> {
    /// Call `f` on every epoch the message carries.
    pub fn for_each_epoch(&mut self, f: &mut impl FnMut(&mut D::Epoch)) {
        match self {
            LeaderMsg::Append { epoch, prev: p, .. }
            | LeaderMsg::CatchUp { epoch, last: p, .. }
            | LeaderMsg::Appended { epoch, pos: p, .. }
            | LeaderMsg::Position { epoch, pos: p, .. } => {
                f(epoch);
                pos::<D>(p, f);
            }
            LeaderMsg::Write { epoch, .. }
            | LeaderMsg::Read { epoch, .. }
            | LeaderMsg::WriteDone { epoch, .. }
            | LeaderMsg::ReadDone { epoch, .. }
            | LeaderMsg::Refused { epoch, .. }
            | LeaderMsg::Behind { epoch, .. }
            | LeaderMsg::Stale { epoch, .. }
            | LeaderMsg::Promote { epoch, .. }
            | LeaderMsg::Follow { epoch, .. }
            | LeaderMsg::RoleAck { epoch, .. }
            | LeaderMsg::InSyncPropose { epoch, .. }
            | LeaderMsg::InSyncConfirmed { epoch, .. }
            | LeaderMsg::Query { epoch, .. } => f(epoch),
        }
    }
}
