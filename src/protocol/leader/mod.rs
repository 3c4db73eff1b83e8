//! The leader family: a primary per shard orders the writes and replicates them to followers;
//! a failover manager detects a dead primary and promotes a follower in a new epoch.
//!
//! # Who holds what
//!
//! - **Replicas** ([`Replica`], one per storage node) hold, per shard they replicate, the data
//!   (through [`Storage`]: one register per shard in the model, keys in the store), the
//!   position of the newest entry they hold ([`Pos`]: the epoch of the primary that wrote it
//!   and its version), the newest epoch they know, their role in it, and as primary the
//!   in-sync set the manager confirmed. That much is durable ([`ReplicaDurable`]). A primary
//!   also keeps in memory each follower's progress, its lag timer, the in-sync change it
//!   proposed, and the writes waiting for their acks.
//! - **The failover manager** ([`Manager`], coordinator 0, `Endpoint::LEADER`) is also the
//!   request router. Durable ([`ManagerDurable`]): per shard the epoch, its primary and the
//!   confirmed in-sync set. In memory: the failure detector's view of each node, the requests
//!   it routed, which replicas acked the current epoch's roles, and failovers under way.
//!
//! Durable state is written before any send of the step that changed it: a driver persists
//! [`Replica::durable`] and [`Manager::durable`] after each step that changed them, and data
//! written through [`Storage`] before the step's sends leave.
//!
//! # Writes
//!
//! A client sends `Msg::Request` to the manager, which forwards it to the shard's primary with
//! its epoch ([`LeaderMsg::Write`]). The primary refuses it (not primary; a stale epoch when
//! fencing; fewer in-sync replicas than `min_in_sync`), or stores it at the next version, sends
//! [`LeaderMsg::Append`] to every follower, and acknowledges it per `acks`
//! ([`policy::leader::write_acked`], rules in `policy::leader`): at once (`leader`), when every
//! replica holds it (`all`), or when every member of the in-sync set (with any pending change)
//! holds it (`in_sync`). The manager relays the outcome to the client.
//!
//! A follower applies an append only if its newest entry is the append's predecessor (so its
//! log is always a prefix of its primary's), and answers [`LeaderMsg::Appended`] with its new
//! position. Otherwise it answers [`LeaderMsg::Behind`], and the primary sends its whole state
//! ([`LeaderMsg::CatchUp`]), which the follower adopts, dropping any entry its primary does not
//! have (the unacknowledged tail of a deposed primary).
//!
//! # The in-sync set
//!
//! The primary is always in it. A follower lags once it has been behind the primary (not
//! holding every entry the primary holds) for `replica_lag_timeout` without catching up in
//! between, and stops lagging when it catches up. The primary proposes the set "itself and every
//! follower not lagging" to the manager ([`LeaderMsg::InSyncPropose`], one change at a time,
//! sent again on the manager's next sign of life until confirmed); the manager persists it and
//! confirms. Until then acks wait for the old set and the proposed one together, so every
//! acknowledged write is on every replica the manager may promote cleanly.
//!
//! # Epochs and fencing
//!
//! Every promotion starts a new epoch. The manager persists the new epoch and view before it
//! tells anyone. A replica learns an epoch from the manager ([`LeaderMsg::Promote`],
//! [`LeaderMsg::Follow`]), from the primary of that epoch (an append or catch-up from a newer
//! epoch makes it that primary's follower), or, as a deposed primary, from a follower's
//! [`LeaderMsg::Stale`]. With `fencing = true` a replica refuses a write,
//! append or catch-up from an older epoch than its own ([`LeaderMsg::Stale`] tells a deposed
//! primary, which steps down), and the manager refuses a result produced in an older epoch
//! than its view (the client is told the request failed). With `fencing = false` both are
//! accepted, which is how a deposed primary that never heard of the promotion gets its late
//! writes acknowledged.
//!
//! # Failover
//!
//! 1. The detector (`policy::detector`, the quorum family's: coupled to request deadlines, or
//!    independent heartbeats judged at rounds or continuously) judges the primary dead.
//! 2. The manager asks every other replica for its position ([`LeaderMsg::Query`]).
//! 3. Once `failover_delay` has passed and every replica answered (or the query's deadline,
//!    `replica_ack_timeout`, passed), it chooses ([`policy::leader::choose_promotion`]): an
//!    in-sync replica before others (others only with `unclean_election`), the most caught-up,
//!    the old primary's zone first (only that zone without `failover_cross_zone`). Hearing
//!    from the primary before then calls the failover off. No candidate: no promotion, the
//!    shard stays with its dead primary until the next judgement tries again.
//! 4. It counts the epoch up, persists epoch, primary and in-sync set, and sends `Promote` to
//!    the new primary and `Follow` to every other replica; a replica that has not acked its
//!    role is sent it again whenever the manager hears from it.
//! 5. A replica told to follow a new primary asks for its state (`Behind`) and adopts the
//!    `CatchUp`, so its log becomes the new primary's (a restarted primary, which nobody
//!    tells, sends its state to every follower itself).
//!
//! # What the properties observe
//!
//! [`LeaderEvent::WriteAccepted`] (a primary took a write in an epoch: `single_primary` asks
//! that one node per shard and epoch does), [`LeaderEvent::WriteAcked`] (the manager
//! acknowledged a write stored at a version by the primary of an epoch: no ack of an older
//! epoch may follow one of a newer), [`LeaderEvent::Promoted`] (clean or not) and
//! [`LeaderEvent::StaleRefused`]. A write's identity in the data is its [`Pos`]: two writes
//! of different epochs may share a version.
//!
//! # What a driver does
//!
//! Both machines are sans-I/O, generic over [`Data`]: a driver builds them from a resolved
//! config ([`Replica::new`], [`Manager::new`]), delivers each message to `on_msg`, fires each
//! timer [`Replica::due`] / [`Manager::due`] lists with `on_timer`, and lets time pass with
//! `tick` only when `no_timer_due` (every timer is a count of remaining ticks). A crash keeps
//! what `durable()` returned; a restart is [`Replica::restart`] / [`Manager::recover`]. Every
//! step's sends and events go to an [`Io`]. Epochs are only compared and counted up by one
//! (the manager's, which is the newest of its shard), so a driver may rename all of a state's
//! epochs by one order-preserving map that keeps 0, the first epoch and an empty log's
//! (`for_each_epoch` on each machine and message lists them; the timed world renames them to
//! their ranks so that endless promotions revisit states).

mod epochs;
mod manager;
mod replica;

pub use manager::{Failover, Forwarded, Manager, ManagerDurable, ManagerTimer, RouteDurable, ShardRoute};
pub use replica::{
    Pending, Progress, Replica, ReplicaDurable, ReplicaShard, ReplicaTimer, Role, ShardDurable,
    PENDING_WRITES_MAX,
};

use super::data::Stored;
use super::data::{Data, ModelData};
use super::{Event, Io, Msg};
use crate::config::Resolved;
use crate::policy::leader::{bit, Blocked, LeaderPolicy, NodeSet, Position};
use crate::policy::NodeId;
use serde::{Deserialize, Serialize};

/// A place in a shard's log, in a deployment's types.
pub type Pos<D> = Position<<D as Data>::Epoch, <D as Data>::Version>;

/// Whether a field holds its default (skipped when serialized: the model's keys are `()`).
fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

/// Why a replica did not take a write or serve a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// It is not the shard's primary in the request's epoch (it has not learned its promotion
    /// yet, or was deposed), or a follower asked for a read `read_from` does not allow.
    NotPrimary,
    /// Fencing: the request's epoch is older than the replica's.
    StaleEpoch,
    /// `acks = "in_sync"`: the in-sync set is smaller than `min_in_sync`.
    NotEnoughInSync,
    /// The primary had the write waiting for acks when it learned it was deposed.
    Deposed,
    /// The primary has `PENDING_WRITES_MAX` writes of the shard waiting for acks.
    Busy,
}

/// The leader family's messages, named by who does what. (Heartbeats are the shared
/// `Msg::Ping` and `Msg::Pong`.)
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", bound = "")]
pub enum LeaderMsg<D: Data = ModelData> {
    /// Manager -> primary: a client's write, routed in the manager's `epoch`.
    Write {
        op: D::Op,
        attempt: u8,
        shard: u8,
        epoch: D::Epoch,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
        value: D::Value,
    },
    /// Manager -> replica: a client's read.
    Read {
        op: D::Op,
        attempt: u8,
        shard: u8,
        epoch: D::Epoch,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
    },
    /// Primary -> manager: the write is acknowledged at `version` by a primary of `epoch`.
    WriteDone { op: D::Op, attempt: u8, epoch: D::Epoch, version: D::Version },
    /// Replica -> manager: the read's answer, from a replica at `epoch`.
    ReadDone { op: D::Op, attempt: u8, epoch: D::Epoch, version: D::Version, value: D::Value },
    /// Replica -> manager: the write or read was refused (or a pending write given up).
    Refused { op: D::Op, attempt: u8, epoch: D::Epoch, why: Refusal },
    /// Primary -> follower: the entry after `prev` is `(epoch, version)`.
    Append {
        shard: u8,
        epoch: D::Epoch,
        prev: Pos<D>,
        version: D::Version,
        #[serde(default, skip_serializing_if = "is_default")]
        key: D::Key,
        value: D::Value,
    },
    /// Primary -> follower: adopt my whole state, whose newest entry is `last`.
    CatchUp { shard: u8, epoch: D::Epoch, last: Pos<D>, data: D::Snapshot },
    /// Follower -> primary: I hold your log up to `pos`.
    Appended { shard: u8, epoch: D::Epoch, pos: Pos<D> },
    /// Follower -> primary: your append does not follow my newest entry: catch me up.
    Behind { shard: u8, epoch: D::Epoch },
    /// Replica -> sender (fencing): your epoch is older than mine, `epoch`.
    Stale { shard: u8, epoch: D::Epoch },
    /// Manager -> replica: you are the primary of `epoch`, with this in-sync set.
    Promote { shard: u8, epoch: D::Epoch, in_sync: NodeSet },
    /// Manager -> replica: you follow `primary` in `epoch`.
    Follow { shard: u8, epoch: D::Epoch, primary: NodeId },
    /// Replica -> manager: I took the role you gave me in `epoch`.
    RoleAck { shard: u8, epoch: D::Epoch },
    /// Primary -> manager: make the in-sync set this, as change `seq` of the epoch (one after
    /// the last one confirmed; numbers wrap and compare equal or not).
    InSyncPropose { shard: u8, epoch: D::Epoch, seq: u8, in_sync: NodeSet },
    /// Manager -> primary: change `seq` is persisted: the in-sync set is this.
    InSyncConfirmed { shard: u8, epoch: D::Epoch, seq: u8, in_sync: NodeSet },
    /// Manager -> replica: a failover: what is your newest entry?
    Query { shard: u8, epoch: D::Epoch },
    /// Replica -> manager: my newest entry, and the epoch I know.
    Position { shard: u8, epoch: D::Epoch, pos: Pos<D> },
}

impl Copy for LeaderMsg<ModelData> {}

impl<D: Data> From<LeaderMsg<D>> for Msg<D> {
    fn from(m: LeaderMsg<D>) -> Msg<D> {
        Msg::Leader(m)
    }
}

/// Why a routed request failed, as the manager tells the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaderFailure {
    /// The replica refused it.
    Refused(Refusal),
    /// No answer before `replica_ack_timeout`.
    Deadline,
    /// Fencing: the answer came from an epoch older than the manager's view.
    StaleResult,
}

/// What the leader family's machines did that a trace records and the properties observe.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaderEvent<D: Data = ModelData> {
    /// A primary took a client write as primary of `epoch` (at most one node per shard and
    /// epoch may: `single_primary`).
    WriteAccepted { shard: u8, node: NodeId, epoch: D::Epoch, version: D::Version, op: D::Op },
    /// The manager acknowledged a write to its client: stored at `version` by the primary
    /// `node` of `epoch` (after a newer epoch acknowledged a write, none of an older one may
    /// be: `single_primary`).
    WriteAcked { shard: u8, node: NodeId, epoch: D::Epoch, version: D::Version },
    /// The manager promoted `new` in place of `old` in `epoch`; `clean`: from the in-sync set.
    Promoted { shard: u8, old: NodeId, new: NodeId, epoch: D::Epoch, clean: bool },
    /// Fencing: `by` refused a message or result of `epoch`, older than its own, `own`.
    StaleRefused { shard: u8, by: super::Endpoint, epoch: D::Epoch, own: D::Epoch },
    /// The detector judged the primary dead: the failover asks the replicas' positions.
    FailoverStarted { shard: u8, primary: NodeId },
    /// The primary was heard from before the failover decided.
    FailoverCalledOff { shard: u8, primary: NodeId },
    /// The failover found nobody to promote: the shard has no primary that takes writes.
    FailoverBlocked { shard: u8, primary: NodeId, why: Blocked },
    /// The manager confirmed a new in-sync set.
    InSyncChanged { shard: u8, epoch: D::Epoch, in_sync: NodeSet },
    /// A routed request failed; its client is told so.
    RequestFailed { op: D::Op, why: LeaderFailure },
}

impl Copy for LeaderEvent<ModelData> {}

/// A replica's data, as its driver keeps it: the model one register per shard, the store its
/// keys. What a step writes is durable before the step's sends leave.
pub trait Storage<D: Data> {
    /// The value of `key` in `shard`.
    fn read(&self, shard: u8, key: &D::Key) -> Stored<D>;
    /// Store `key`'s value in `shard`: the entry after everything it holds of the shard.
    fn write(&mut self, shard: u8, key: &D::Key, stored: Stored<D>);
    /// Everything it holds of `shard`, as a catch-up carries it.
    fn snapshot(&self, shard: u8) -> D::Snapshot;
    /// Replace everything it holds of `shard` with `snapshot`.
    fn restore(&mut self, shard: u8, snapshot: &D::Snapshot);
}

/// The model's data: one register per shard, and a catch-up carries it whole.
impl Storage<ModelData> for [Stored<ModelData>] {
    fn read(&self, shard: u8, _key: &()) -> Stored {
        self[usize::from(shard)]
    }

    fn write(&mut self, shard: u8, _key: &(), stored: Stored) {
        self[usize::from(shard)] = stored;
    }

    fn snapshot(&self, shard: u8) -> Stored {
        self[usize::from(shard)]
    }

    fn restore(&mut self, shard: u8, snapshot: &Stored) {
        self[usize::from(shard)] = *snapshot;
    }
}

/// The leader family's knobs (the machines run only with `replication = "leader"`).
fn leader_policy(cfg: &Resolved) -> &LeaderPolicy {
    cfg.policy.leader.as_ref().expect("the leader family's machines run with replication = \"leader\"")
}

/// The replicas of `shard` (fixed: the leader family replaces no replica).
pub fn replicas(cfg: &Resolved, shard: u8) -> NodeSet {
    cfg.initial_members[usize::from(shard)].iter().fold(0, |m, &n| m | bit(n))
}

/// The primary of `shard` in epoch 0: its first replica (the lowest node id).
pub fn initial_primary(cfg: &Resolved, shard: u8) -> NodeId {
    cfg.initial_members[usize::from(shard)][0]
}

fn leader_event<D: Data>(io: &mut impl Io<D>, e: LeaderEvent<D>) {
    io.event(Event::Leader(e));
}

fn send<D: Data>(io: &mut impl Io<D>, dst: super::Endpoint, m: LeaderMsg<D>) {
    io.send(dst, Msg::Leader(m));
}

#[cfg(test)]
mod tests;
