//! Pure policy functions: the decisions a replicated store makes.
//!
//! Nothing here does I/O, reads a clock or draws a random number: every input, including the
//! current time, is an argument. The model's actors and the concrete store call these same
//! functions, so what is checked is what runs.

pub mod coordinator_load;
pub mod detector;
pub mod eviction;
pub mod leader;
pub mod quorum;
pub mod rebalancer;
pub mod recovery;
pub mod retry;
pub mod routing;

/// Index of a storage node in a scenario (0-based, in the order the scenario lists them).
pub type NodeId = u8;

/// A whole number of model ticks. Names of values in ticks end in `_ticks`.
pub type Ticks = u32;

/// A replica's version counter for one shard. 0 is the initial (empty) value.
pub type Version = u8;

/// Hard limits: everything in a scenario has a maximum, so every state space is finite and
/// every input is bounded before it reaches the model.
pub const NODE_COUNT_MAX: usize = 8;
pub const REPLICATION_FACTOR_MAX: u8 = 5;
pub const ZONE_COUNT_MAX: usize = 4;
pub const SHARD_COUNT_MAX: usize = 4;
pub const CLIENT_COUNT_MAX: usize = 4;
pub const CLIENT_OPS_MAX: usize = 4;
pub const MAX_ATTEMPTS_MAX: u8 = 8;
pub const TICKS_MAX: Ticks = 250;
const _: () = assert!(REPLICATION_FACTOR_MAX as usize <= NODE_COUNT_MAX);
