//! The world's state: every actor's state, the messages in flight, the environment and the
//! ghost variables the properties read. No absolute clock: only remaining ticks and ages.

use super::shared::Shared;
use crate::config::MenuFault;
use crate::policy::{NodeId, Version};
use crate::protocol::{
    CapacityBreach, Coordinator, Endpoint, Msg, OpId, PerClient, PerNode, PerShard, Stored,
};
use arrayvec::ArrayVec;

/// A message in flight. It may be delivered once `earliest_ticks` is 0 and must be by the time
/// `latest_ticks` would go below 0: `Tick` is disabled while a message has `latest_ticks == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Envelope {
    pub earliest_ticks: u8,
    pub latest_ticks: u8,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub msg: Msg,
    /// Ghost: the sending node's fault epoch at send time (0 for non-nodes).
    pub sender_epoch: u8,
    /// Arrival slack (`model::slack`): for a pong sent at once for a ping whose arrival tick
    /// is still open, the ticks it may yet arrive in (this one included) while the link's
    /// latency may change. 0 for every other message.
    pub slack_ticks: u8,
}

/// Everything but the message in one word: every state's fingerprint hashes every envelope.
impl std::hash::Hash for Envelope {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [src_hi, src_lo] = self.src.packed().to_be_bytes();
        let [dst_hi, dst_lo] = self.dst.packed().to_be_bytes();
        let bytes = [
            self.earliest_ticks,
            self.latest_ticks,
            src_hi,
            src_lo,
            dst_hi,
            dst_lo,
            self.sender_epoch,
            self.slack_ticks,
        ];
        state.write_u64(u64::from_le_bytes(bytes));
        self.msg.hash(state);
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    pub up: bool,
    /// Durable: survives crash and restart.
    pub shards: PerShard<Stored>,
    /// Compaction debt, in percent: part of the disk, so it survives a crash. Constant (the
    /// configured `compaction_debt_pct`) unless debt is node state (`compaction_debt_drain`).
    pub debt_pct: u8,
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
    /// The partition its key lands on: fixed by its `key_hash`, or chosen by the checker at
    /// the start (`key_hash = "any"`).
    pub partition: u8,
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
    /// Bit p: shard p's burst (`burst_ends = true`) is over. Not a fault: it uses no budget,
    /// and it never starts again.
    pub bursts_ended: u8,
    /// The faults in force that end by themselves (a menu entry with a `duration`), each with
    /// the ticks left before it may and must end; sorted. Each fault spends budget, so there
    /// are at most as many as the budget.
    pub ending: ArrayVec<Ending, { crate::config::FAULT_BUDGET_MAX as usize }>,
}

/// A fault in force that ends by itself: it may end once `earliest_ticks` is 0 and must by
/// the time `latest_ticks` would go below 0 (`Tick` is disabled at 0), as a message in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ending {
    pub fault: MenuFault,
    pub earliest_ticks: u8,
    pub latest_ticks: u8,
}

/// Ghost variables: bookkeeping for the properties, never read by the actors.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// Per node, a bit per coordinator: a fault (crash, or cut from that coordinator) since
    /// that coordinator last heard from it in its current epoch.
    pub faulted_since_heard: PerNode<u8>,
    pub fault_epoch: PerNode<u8>,
    pub healthy_evicted: Option<NodeId>,
    pub churn_exceeded: bool,
    /// Ages in ticks of the membership changes inside the churn window (when one is set).
    pub change_ages: Vec<u8>,
    pub capacity_breach: Option<CapacityBreach>,
}

/// The nodes and the coordinators are [`Shared`]: a step of one actor leaves the others'
/// state shared with its parent, so the frontier and the level's candidates hold a pointer
/// where most steps change nothing, and a part is hashed once, not in every successor. `Eq`
/// is the contents', and a part hashes as its contents' hash, so equal states have equal
/// fingerprints and state counts are those of the plain structure.
/// The coordinators after the membership leader.
pub type Peers = arrayvec::ArrayVec<Shared<Coordinator>, { crate::config::COORDINATOR_COUNT_MAX - 1 }>;

/// Where a coordinator is in a rollout: the stage whose policy it runs, and whether it has
/// started back towards the first (a rollback: it never goes forward again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stage {
    pub index: u8,
    pub back: bool,
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct WorldState {
    pub nodes: Shared<PerNode<NodeState>>,
    /// The membership leader (the only coordinator of most models).
    pub coord: Shared<Coordinator>,
    /// The other coordinators, coordinator 1 first.
    pub peers: Peers,
    /// With a rollout: each coordinator's stage (empty without one).
    pub stages: arrayvec::ArrayVec<Stage, { crate::config::COORDINATOR_COUNT_MAX }>,
    pub clients: PerClient<ClientState>,
    /// Messages in flight, kept sorted so equal states hash equally.
    pub net: Vec<Envelope>,
    /// With `replication = "leader"`: the leader family's machines (the failover manager runs
    /// as coordinator 0, and `coord` is the quorum coordinator as configured, never stepped).
    pub leader: Option<Shared<super::leader::LeaderActors>>,
    pub env: EnvState,
    /// Shared as the nodes and the coordinators are: most steps change no ghost
    /// variable, and a copy per state cost 104 bytes inline and two vectors on the heap.
    pub ghost: Shared<Ghost>,
}

impl WorldState {
    /// Coordinator `c` (0 is the leader).
    pub fn coordinator(&self, c: u8) -> &Coordinator {
        if c == 0 {
            &self.coord
        } else {
            &self.peers[usize::from(c) - 1]
        }
    }

    /// Coordinator `c`, to change it (unshared first).
    pub fn coordinator_mut(&mut self, c: u8) -> &mut Coordinator {
        Shared::make_mut(self.coordinator_part(c))
    }

    /// Coordinator `c`'s part, shared or not.
    pub fn coordinator_part(&mut self, c: u8) -> &mut Shared<Coordinator> {
        if c == 0 {
            &mut self.coord
        } else {
            &mut self.peers[usize::from(c) - 1]
        }
    }

    /// The ghost variables, to change them (unshared first).
    pub fn ghost_mut(&mut self) -> &mut Ghost {
        Shared::make_mut(&mut self.ghost)
    }

    /// Every coordinator, the leader first.
    pub fn coordinators(&self) -> impl Iterator<Item = &Coordinator> {
        std::iter::once(&*self.coord).chain(self.peers.iter().map(|p| &**p))
    }

    /// How many [`Shared`] parts this state hashes, each on its own (the collision bound counts
    /// them): its nodes, each coordinator, its ghost variables, the leader family's machines.
    pub fn parts_hashed(&self) -> u64 {
        3 + self.peers.len() as u64 + u64::from(self.leader.is_some())
    }

    /// The rollout stage coordinator `c` is on (0 without a rollout).
    pub fn stage(&self, c: u8) -> u8 {
        self.stages.get(usize::from(c)).map_or(0, |s| s.index)
    }
}
