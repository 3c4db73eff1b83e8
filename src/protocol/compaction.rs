//! Compaction debt as node state: it grows with every write a node applies and drains with
//! time, and the coordinator learns it from the node's load reports.
//!
//! Opt-in (`compaction_debt_per_write_pct` and `compaction_debt_drain` in a scenario):
//! without them a node's debt is its configured `compaction_debt_pct` for ever, no node is
//! asked for it and nothing here runs. The debt is a percentage, 0 to 100 (saturating both
//! ways), so a state holds at most 101 values of it per node; it is part of the node's disk,
//! so it survives a crash. A node compacts only while it is up.

use super::{Endpoint, Io, Msg};
use crate::config::CompactionSpec;

/// The debt after applying one write.
pub fn debt_after_write(spec: &CompactionSpec, debt_pct: u8) -> u8 {
    debt_pct.saturating_add(spec.debt_per_write_pct).min(100)
}

/// The debt after one tick of compaction.
pub fn debt_after_tick(spec: &CompactionSpec, debt_pct: u8) -> u8 {
    debt_pct.saturating_sub(spec.debt_drain_pct_per_tick)
}

/// Node side of a message: writes applied grow the debt (whether or not they are newer than
/// what the node holds: the node writes them all, compaction sorts them out), and a load
/// query is answered with the debt now. Drivers call it alongside `node::on_msg`, and only
/// when debt is node state ([`CompactionSpec::dynamic`]).
pub fn on_node_msg<D: super::Data>(
    spec: &CompactionSpec,
    debt_pct: &mut u8,
    src: Endpoint,
    msg: &Msg<D>,
    io: &mut impl Io<D>,
) {
    assert!(spec.dynamic(), "static debt is never asked for");
    match msg {
        Msg::Replicate { .. } | Msg::CopyData { .. } => *debt_pct = debt_after_write(spec, *debt_pct),
        Msg::LoadQuery => io.send(src, Msg::LoadReport { compaction_debt_pct: *debt_pct }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: CompactionSpec = CompactionSpec { debt_per_write_pct: 30, debt_drain_pct_per_tick: 20 };

    #[test]
    fn debt_saturates_at_100_and_at_0() {
        assert_eq!(debt_after_write(&SPEC, 60), 90);
        assert_eq!(debt_after_write(&SPEC, 90), 100);
        assert_eq!(debt_after_write(&SPEC, 100), 100);
        assert_eq!(debt_after_tick(&SPEC, 30), 10);
        assert_eq!(debt_after_tick(&SPEC, 10), 0);
        assert_eq!(debt_after_tick(&SPEC, 0), 0);
    }
}
