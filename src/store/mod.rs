//! The concrete store: storage nodes as OS processes, a coordinator serving RESP, replication
//! with the quorums, deadlines, failure detection and eviction of `src/policy`; clients, the
//! fault-injecting proxy, the decision log (the clients' retry decisions, replayed by
//! `replicheck conform`, and the coordinator's protocol events), and the checking of the
//! client histories it records.
//!
//! Its rooms, each using only the ones below it:
//!
//! | room | what lives there |
//! |---|---|
//! | [`sim`] | `store sim`: the store's code (shell, machines, storage, `run`'s clients and checks) on a simulated network and paused clock, seed by seed |
//! | [`run`] | `store run`: a model's environment played on a cluster (rig, measure, report, rollout), and the clients' load generator ([`run::client`]), whose choices and records `sim` shares |
//! | [`cluster`] | a local cluster: the node processes and the coordinator, the fault-injecting proxies, the data directory's lock and layout |
//! | [`coordinator`] | the coordinator: its RESP server, the shell driving `protocol::Coordinator`, the store's protocol data, layout, state file, node links, peers, fleet meter |
//! | [`node`] | a storage node: its process, redb storage with group commit, the wire protocol it serves |
//!
//! Beside them: [`cli`] and [`bench`](mod@bench) are commands over the rooms (`store ...` and
//! `store bench`, which drives a [`cluster`] directly and needs none of `run`), and [`decision`]
//! and [`trace`] are the two records the store keeps for the checker: written in the lower
//! rooms (the client's retries and the shell's steps; the shell's sends and deliveries), read
//! by `store run` and `replicheck conform`, so they sit under every room that uses them.

pub mod bench;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod coordinator;
pub mod decision;
pub mod leader;
pub mod node;
pub mod run;
pub mod sim;
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
