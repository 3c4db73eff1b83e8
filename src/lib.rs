//! replicheck: a model checker for the replication policies of distributed key-value stores.
//!
//! Dependency direction: `policy` <- `model` <- `check` <- `cli`. `policy` knows nothing of
//! stateright; the model's actors and the concrete store call the same policy functions.

pub mod bench;
pub mod check;
pub mod cli;
pub mod config;
pub mod lint;
pub mod model;
pub mod policy;
pub mod protocol;
pub mod store;
