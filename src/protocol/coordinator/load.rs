//! Load the coordinator learns from outside: the background writes on each partition, and
//! the nodes' compaction debt.
//!
//! The coordinator keeps no clock and no memory of how long a burst has lasted. Traffic from
//! clients outside the model (a promotion's cohort) is an input: the router sees it as load,
//! and a driver reports what it sees now. The model's environment ends a burst at a moment the
//! checker chooses and reports the background after it; the store has no way to end a burst
//! and keeps the configured background.

use super::{Coordinator, Data, Endpoint, Io, Msg};
use crate::config::Resolved;

impl<D: Data> Coordinator<D> {
    /// The background writes per tick the router sees on each partition changed.
    pub fn on_background(&mut self, background: &[u16]) {
        assert_eq!(background.len(), self.background.len(), "one background per partition");
        self.background.clear();
        self.background.extend(background.iter().copied());
    }
}

impl<D: Data> Coordinator<D> {
    /// A node reported its compaction debt: the rebalancer's next round reads it.
    pub(super) fn on_load_report(&mut self, n: crate::policy::NodeId, debt_pct: u8) {
        assert!(debt_pct <= 100, "debt is a percentage");
        self.debt_pct[usize::from(n)] = debt_pct;
    }

    /// Each rebalancer round, when debt is node state, asks every node for its debt; the round
    /// decides on what it knows now, and the answers serve the next one.
    pub(super) fn ask_loads(&mut self, cfg: &Resolved, io: &mut impl Io<D>) {
        if !cfg.compaction.dynamic() {
            return;
        }
        for n in 0..cfg.nodes.len() as crate::policy::NodeId {
            io.send(Endpoint::Node(n), Msg::LoadQuery);
        }
    }
}
