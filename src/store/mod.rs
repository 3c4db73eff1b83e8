//! The concrete store: storage nodes, the coordinator, clients, the fault-injecting proxy, and
//! the decision log through which every policy decision is made.

pub mod decision;
pub mod proxy;
