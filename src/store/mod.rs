//! The concrete store: storage nodes as OS processes, a coordinator serving RESP, replication
//! with the quorums, deadlines, failure detection and eviction of `src/policy`; clients, the
//! fault-injecting proxy, the decision log (the clients' retry decisions, replayed by
//! `replicheck conform`, and the coordinator's protocol events), and the checking of the
//! client histories it records.

pub mod bench;
pub mod cli;
pub mod cluster;
pub mod coordinator;
pub mod decision;
pub mod node;
pub mod run;
pub mod trace;

/// Why a store command failed. The CLI exits 2 for bad input (a flag, a model or policy file,
/// a data directory of another layout: the user can fix it) and 4 for a runtime failure (a
/// busy port or data directory, a node that would not start, I/O: trying again may work).
/// There is no conversion from a bare message: each call site says which of the two it is.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Input(String),
    /// A model or policy file that does not load, with its path and key.
    #[error(transparent)]
    File(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Runtime(String),
}
