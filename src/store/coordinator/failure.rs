//! What a client is told when its request fails: the machine's `Failure`, in the words of
//! the store's operator (partitions and nodes by name, each silent or failing node, whether a
//! write's outcome is unknown).

use super::layout::Layout;
use super::machine::StoreData;
use crate::config::{OpKind, Resolved};
use crate::policy::routing::WriteRoute;
use crate::policy::NodeId;
use crate::protocol::{Coordinator, Failure};
use std::time::Duration;
use tokio::time::Instant;

/// Why a request failed, for its client; a throttled write's counts are read from the
/// machine in the step that refused it.
pub fn failure_text(
    layout: &Layout,
    cfg: &Resolved,
    kind: OpKind,
    shard: u8,
    why: Failure,
    machine: &Coordinator<StoreData>,
    node_errors: &[Option<(String, Instant)>],
) -> String {
    let timeout = cfg.policy.replica_ack_timeout_ticks;
    let window_ms = layout.window_ms;
    let offered = |unit: String, offered: u16, capacity: Option<u16>| {
        let capacity = capacity.map_or("unlimited".to_string(), |c| c.to_string());
        format!("throttled: {unit} was offered {offered} writes in this {window_ms} ms window, capacity {capacity}")
    };
    match why {
        Failure::Throttled(WriteRoute::PartitionThrottled) => {
            let p = usize::from(shard);
            offered(
                format!("partition {}", layout.shards[p].name),
                machine.background[p].saturating_add(machine.partition_load[p]),
                cfg.partition_capacity_per_tick,
            )
        }
        Failure::Throttled(WriteRoute::BackendThrottled { backend }) => {
            let b = usize::from(backend);
            offered(
                format!("ingest backend node {backend}"),
                cfg.nodes[b].base_load_per_tick.saturating_add(machine.backend_load[b]),
                cfg.nodes[b].write_capacity_per_tick,
            )
        }
        Failure::Throttled(WriteRoute::Shed) => {
            "throttled: no ingest backend has room in this window (write shed)".into()
        }
        Failure::Throttled(WriteRoute::Admitted { .. }) => {
            unreachable!("an admitted write is not refused")
        }
        Failure::Refused { answered, needed, refused, missing, repairing } => {
            let (what, answers) = what_failed(kind, repairing);
            let causes: Vec<String> = (0..8)
                .filter(|n| refused & (1 << n) != 0)
                .map(|n| {
                    let why = node_errors.get(n).and_then(|e| e.as_ref()).map_or("refused", |(why, _)| why);
                    node_cause(layout, n, why)
                })
                .collect();
            // Those that acked, or have yet to answer, may have applied the write.
            let unknown = if kind == OpKind::Write && !repairing && (answered > 0 || missing != 0) {
                "; outcome unknown: the write may still have been applied"
            } else {
                ""
            };
            format!(
                "{what} quorum not reached: {answered} of {needed} {answers}, too few of the others can answer ({}){unknown}",
                causes.join("; ")
            )
        }
        Failure::Deadline { answered, needed, missing, repairing } => {
            // A failure reply since this request was sent is why that node did not ack; the
            // deadline fires one ack timeout after the send, give or take a clock tick.
            let recent = Duration::from_millis(2 * u64::from(timeout));
            let failed_now = |n: usize| match node_errors.get(n) {
                Some(Some((why, at))) if at.elapsed() <= recent => Some(why.clone()),
                _ => None,
            };
            let (mut silent, mut failed) = (Vec::new(), Vec::new());
            for n in (0..8).filter(|n| missing & (1 << n) != 0) {
                match failed_now(n) {
                    Some(why) => failed.push(node_cause(layout, n, &why)),
                    None => silent.push(layout.node(n as NodeId)),
                }
            }
            let (what, answers) = what_failed(kind, repairing);
            // Members that did not answer may still apply the write: the client must not
            // take the error for "not written".
            let unknown = if kind == OpKind::Write && !repairing {
                "; outcome unknown: the write may still have been applied"
            } else {
                ""
            };
            let mut causes = failed;
            if !silent.is_empty() {
                causes.push(format!("no reply before the deadline from {}", silent.join(", ")));
            }
            format!(
                "{what} quorum not reached: {answered} of {needed} {answers} within replica_ack_timeout {timeout} ms ({}){unknown}",
                causes.join("; ")
            )
        }
    }
}

/// What failed and what it counts: a write's acks, a read's replies, a read repair's acks.
fn what_failed(kind: OpKind, repairing: bool) -> (&'static str, &'static str) {
    match (kind, repairing) {
        (_, true) => ("read repair failed: write", "acks"),
        (OpKind::Write, false) => ("write", "acks"),
        (OpKind::Read, false) => ("read", "replies"),
    }
}

/// `node 1: storage: no space left on device`.
fn node_cause(layout: &Layout, n: usize, why: &str) -> String {
    format!("{}: {why}", layout.node(n as NodeId))
}
