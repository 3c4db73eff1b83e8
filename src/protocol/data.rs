//! What the machines carry, as types a driver chooses: the model's are a few bytes so states
//! stay small and hashable; the store's are keys and values of any length and 64-bit versions.
//! The machines are generic over [`Data`] instead of being written twice. A stored value
//! ([`Stored`]) and the model's operation ([`OpId`]) are here too: messages (`msg`) carry
//! data, and data knows no message.

use crate::policy::CLIENT_OPS_MAX;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::hash::Hash;

/// The types one deployment of the protocol runs with.
pub trait Data: Clone + Copy + Debug + Default + PartialEq + Eq + Hash + PartialOrd + Ord + 'static {
    /// A client operation's identity; a retry is the same op with a higher attempt.
    type Op: Copy + Debug + Eq + Hash + Ord + Serialize + DeserializeOwned;
    /// A key within a shard (the model has one key per shard: `()`).
    type Key: Clone + Debug + Default + Eq + Hash + Ord + Serialize + DeserializeOwned;
    /// What a write writes and a read returns.
    type Value: Clone + Debug + Default + Eq + Hash + Ord + Serialize + DeserializeOwned;
    /// A write's version: per shard, handed out by the coordinator; 0 is the initial value.
    type Version: Copy
        + Debug
        + Default
        + Eq
        + Hash
        + Ord
        + Into<u64>
        + TryFrom<u64>
        + Serialize
        + DeserializeOwned;
    /// A leader-family epoch (`protocol::leader`): counted up by one at each promotion; 0 is
    /// the first.
    type Epoch: Copy
        + Debug
        + Default
        + Eq
        + Hash
        + Ord
        + Into<u64>
        + TryFrom<u64>
        + Serialize
        + DeserializeOwned;
    /// What a client sends with a write so that a retry is recognised (idempotency tokens).
    type Token: Clone + Debug + Default + Eq + Hash + Ord + Serialize + DeserializeOwned;
    /// What the coordinator remembers a token by.
    type TokenId: Clone + Debug + Eq + Hash + Ord;
    /// A shard's contents as a catch-up copy carries them.
    type Snapshot: Clone + Debug + Default + Eq + Hash + Ord + Serialize + DeserializeOwned;
    /// What a machine keeps per shard: the model's fixed capacity (`SHARD_COUNT_MAX`, inline,
    /// so a state clones without allocating), the store's as many as its partitions.
    type Shards<T: Clone + Debug + Eq + Hash>: Clone
        + Debug
        + Default
        + Eq
        + Hash
        + std::ops::Deref<Target = [T]>
        + std::ops::DerefMut
        + FromIterator<T>;

    /// The client an operation's response goes to.
    fn client(op: Self::Op) -> u8;

    /// The identity a write's version is remembered by, if it carries a token.
    fn token_id(op: Self::Op, key: &Self::Key, token: &Self::Token) -> Option<Self::TokenId>;

    /// The version after `v`.
    fn next_version(v: Self::Version) -> Self::Version {
        let n: u64 = v.into();
        Self::Version::try_from(n + 1).unwrap_or_else(|_| panic!("version {n} is the last one"))
    }

    /// The epoch after `e`.
    fn next_epoch(e: Self::Epoch) -> Self::Epoch {
        let n: u64 = e.into();
        Self::Epoch::try_from(n + 1).unwrap_or_else(|_| panic!("epoch {n} is the last one"))
    }
}

/// A client operation: (client index, index of the op in that client's workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId {
    pub client: u8,
    pub seq: u8,
}

impl OpId {
    /// The value a write operation writes: unique per operation, never 0 (the initial value).
    pub fn write_value(self) -> u8 {
        1 + self.client * CLIENT_OPS_MAX as u8 + self.seq
    }
}

/// A stored value: of one shard on one node in the model, of one key in the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Stored<D: Data = ModelData> {
    pub version: D::Version,
    pub value: D::Value,
}

impl Copy for Stored<ModelData> {}

/// The model's data: one value per shard, a byte each for versions and values; every write
/// carries its op as its token (whether the coordinator keeps it is the policy's business).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelData;

impl Data for ModelData {
    type Op = OpId;
    type Key = ();
    type Value = u8;
    type Version = crate::policy::Version;
    /// A byte, as versions: the world keeps epochs small by renumbering them (the machines
    /// only compare epochs and count them up).
    type Epoch = u8;
    type Token = ();
    type TokenId = OpId;
    type Snapshot = Stored<ModelData>;
    type Shards<T: Clone + Debug + Eq + Hash> = super::PerShard<T>;

    fn client(op: OpId) -> u8 {
        op.client
    }

    fn token_id(op: OpId, _key: &(), _token: &()) -> Option<OpId> {
        Some(op)
    }
}
