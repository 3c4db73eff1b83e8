//! What INFO reports beside the machine's own state: the counters and observations the shell
//! keeps as the machine steps, read by the server's INFO, and how INFO spells a config's names.

use std::sync::atomic::AtomicU64;
use tokio::time::Instant;

/// What INFO shows; monotone counters.
#[derive(Default)]
pub struct Counters {
    pub writes_acked: AtomicU64,
    pub writes_failed: AtomicU64,
    pub reads_ok: AtomicU64,
    pub reads_failed: AtomicU64,
    pub read_repairs: AtomicU64,
    pub evictions: AtomicU64,
    pub catchups_completed: AtomicU64,
    /// Joins abandoned at `join_timeout`.
    pub joins_abandoned: AtomicU64,
    pub keys_copied: AtomicU64,
    pub membership_changes: AtomicU64,
    pub moves: AtomicU64,
    /// Writes refused because their partition or backend was at capacity, or no backend had
    /// room (the error reply clients retry).
    pub writes_throttled: AtomicU64,
    /// Offers above a capacity: each write that found its partition or backend full, and
    /// each partition or backend that background load alone puts over its capacity.
    pub capacity_breaches: AtomicU64,
    /// Live policy reloads (`CONFIG SET policy`, a rollout step of `store run`).
    pub policy_reloads: AtomicU64,
    /// Times the clock task woke (it sleeps until a timer may be due, at most 1 s).
    pub clock_wakes: AtomicU64,
}

/// What INFO shows beside the machine's own state.
pub struct Observed {
    pub last_heard: Vec<Instant>,
    pub late_replies: Vec<u64>,
    /// Most writes offered in one window, per partition and per backend (background included).
    pub partition_peak: Vec<u16>,
    pub backend_peak: Vec<u16>,
    /// Most units of control-plane work ever queued (`coordinator.work_per_tick`, as
    /// `store run` plays a model's; always 0 where the load is not modelled).
    pub backlog_work_peak: u16,
    pub first_breach: Option<String>,
    pub last_suppressed: Option<String>,
    pub membership_epoch: u64,
    /// Nodes this coordinator evicted as dead and has not taken back since (INFO's
    /// `role=evicted`); a restarted coordinator starts with none.
    pub evicted: Vec<bool>,
    /// Each node's last failure reply (a storage error) and when it came: a request that then
    /// fails names it instead of "no reply".
    pub node_errors: Vec<Option<(String, Instant)>>,
}

/// An enum as the policy files and INFO spell it (`coupled`, `no_replacement`).
pub fn config_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(serde_json::Value::Object(map)) if map.len() == 1 => {
            let (k, v) = map.into_iter().next().expect("one entry");
            format!("{k} {v}")
        }
        other => format!("{other:?}"),
    }
}
