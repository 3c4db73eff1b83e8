//! The concrete store: storage nodes as OS processes, a coordinator serving RESP, replication
//! with the quorums, deadlines, failure detection and eviction of `src/policy`; clients, the
//! fault-injecting proxy, the decision log through which every policy decision is made, and
//! the checking of the client histories it records.

pub mod bench;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod coordinator;
pub mod datadir;
pub mod decision;
pub mod layout;
pub mod link;
pub mod node;
pub mod proxy;
pub mod resp;
pub mod run;
pub mod storage;
pub mod wire;
