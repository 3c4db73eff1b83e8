//! replicheck: a model checker for the replication policies of distributed key-value stores.
//!
//! The crate is built in layers; a module uses only the layers below it, and
//! `tests/layers.rs` fails on any `use crate::` that points up or sideways:
//!
//! | layer | module | what lives there | where a change goes |
//! |---|---|---|---|
//! | 0 | [`policy`] | pure decision functions: detector, eviction, rebalancer, routing, quorums, retries | a new rule or knob's arithmetic |
//! | 1 | [`config`] | scenario and policy TOML, validation, errors; [`config::Resolved`] in ticks | a new key (and its check; docs/reference.md lists it, tested against the parser) |
//! | 2 | [`protocol`] | the coordinator and storage node as sans-I/O machines calling `policy` | what a message, timer or restart does |
//! | 3 | [`model`] | the timed world running the machines under latency and faults; properties | a new fault, property or ghost variable |
//! | – | [`engine`] | BFS, seen set, cycle analysis, generic over any `stateright::Model` | exploration speed, reductions |
//! | – | [`lincheck`] | linearizability of recorded histories (the store's, Jepsen's) | history formats, checker speed |
//! | 4 | [`check`], [`lint`] | runs of models and variants, reports, diff, sweep, simulation, proofs; static rules | a report format, a lint rule |
//! | 4 | [`explorer`] | `replicheck explore`: stateright's explorer with per-state property status, loops, readable states | what the explorer shows |
//! | 4 | [`store`] | the concrete store: tokio, sockets, redb, proxies, `store run` | a store command or I/O |
//! | 5 | [`bench`], [`cli`] | benchmarks; the command line (`main.rs` only maps exit codes) | a new command or flag |
//!
//! "What was checked is what runs": the model and the store call the same `policy`
//! functions, and both run the `protocol` coordinator machine (the store through
//! `store::coordinator::shell`, which adds only sockets, clocks and the state file; see README, "The
//! concrete store").

pub mod bench;
pub mod check;
pub mod cli;
pub mod config;
pub mod engine;
pub mod explorer;
pub mod lincheck;
pub mod lint;
pub mod model;
pub mod policy;
pub mod protocol;
pub mod store;
