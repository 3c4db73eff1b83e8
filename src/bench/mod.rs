//! Benchmark models: specs shared with other checkers (`../shared/bench/`), ported to
//! `stateright::Model` and explored by replicheck's own engine, so its speed can be compared
//! with theirs on exactly the same state space.

pub mod repl;

use crate::check::engine::{self, Limits};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

/// One safety-only exploration of the `Repl` benchmark (`Durable`), measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub threads: usize,
    pub unique_states: u64,
    pub transitions: u64,
    pub max_depth: u32,
    pub complete: bool,
    /// `Durable` holds on every explored state.
    pub durable_holds: bool,
    pub elapsed: Duration,
    /// Peak resident memory during the run, when the platform tells (see [`reset_peak_memory`]).
    pub peak_memory_bytes: Option<u64>,
    /// Whether the peak was reset before the run (else it is the process's peak so far).
    pub peak_is_this_run: bool,
    /// `Durable` plus the fair-cycle check, in one exploration that records the labelled graph:
    /// "under WF on every Flush and Ack, `Ack(k2)` cannot stay enabled forever".
    pub with_cycles: Duration,
    pub wf_holds: bool,
    /// The same with the fairness on `Ack(k2)` dropped: must be violated.
    pub wf_dropped_violated: bool,
}

impl Measurement {
    pub fn states_per_second(&self) -> f64 {
        self.unique_states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn bytes_per_state(&self) -> Option<f64> {
        Some(self.peak_memory_bytes? as f64 / self.unique_states.max(1) as f64)
    }
}

/// Reset the process's peak resident memory (`VmHWM`) to its current size, so the next
/// `engine::peak_memory_bytes` is the peak of what runs after (Linux: `clear_refs` mode 5).
pub fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Explore the whole `Repl` space checking `Durable` only, with `threads` workers.
pub fn measure_repl(model: &repl::Repl, threads: usize) -> Measurement {
    let peak_is_this_run = reset_peak_memory();
    let properties = [repl::Repl::durable_property()];
    let e = engine::explore(model, &properties, &Limits { threads, ..Limits::default() });
    let durable_only_peak = engine::peak_memory_bytes();
    measure_cycles(model, threads, e, durable_only_peak, peak_is_this_run)
}

/// Time `Durable` plus the fair-cycle queries in a second, labelled exploration. The peak
/// memory reported stays that of the safety-only run.
fn measure_cycles(
    model: &repl::Repl,
    threads: usize,
    e: engine::Exploration,
    peak_memory_bytes: Option<u64>,
    peak_is_this_run: bool,
) -> Measurement {
    use crate::check::cycles::{self, CycleQuery};
    let start = std::time::Instant::now();
    let labeler: engine::EdgeLabeler<repl::Repl> = &repl::Repl::fairness_label;
    let properties = [repl::Repl::durable_property()];
    let live =
        engine::explore_labelled(model, &properties, &Limits { threads, ..Limits::default() }, Some(labeler));
    let graph = live.graph.as_ref().expect("labelled exploration keeps its graph");
    let ack_k2 = repl::Repl::ack_class_bit(1);
    let wf = CycleQuery { fair: 0xFF, every_state_enabled: ack_k2, ..CycleQuery::default() };
    let wf_holds = live.complete() && cycles::find(graph, wf).is_none();
    let dropped = CycleQuery { fair: !ack_k2, every_state_enabled: ack_k2, ..CycleQuery::default() };
    let wf_dropped_violated = cycles::find(graph, dropped).is_some();
    let with_cycles = start.elapsed();
    Measurement {
        with_cycles,
        wf_holds,
        wf_dropped_violated,
        threads,
        unique_states: e.unique_states,
        transitions: e.transitions,
        max_depth: e.max_depth,
        complete: e.complete(),
        durable_holds: e.discoveries[0].is_none(),
        elapsed: e.elapsed,
        peak_memory_bytes,
        peak_is_this_run,
    }
}

/// The median run (by exploration time) of several measurements with the same settings.
pub fn median(mut runs: Vec<Measurement>) -> Option<Measurement> {
    runs.sort_by_key(|m| m.elapsed);
    let mid = runs.len().checked_sub(1)? / 2;
    Some(runs.swap_remove(mid))
}

/// The `replicheck bench-repl` report: the space explored, then one row per thread count.
pub fn repl_report(model: &repl::Repl, rows: &[Measurement], runs: usize) -> String {
    let mut out = String::new();
    let ack = match model.ack {
        repl::AckEnumeration::PerValue => "Ack(k) per value v",
        repl::AckEnumeration::PerWitness => "Ack(k) per witness (v, Q), as TLC",
    };
    let _ = writeln!(
        out,
        "Repl.tla: Nodes = {{n1, n2, n3}}, Keys = {{k1, k2}}, MaxVer = {}, Buggy = {}; {ack}; \
         Durable alone, and Durable + fair-cycle check; median of {runs} run(s), each in a fresh process",
        model.max_ver,
        if model.buggy { "TRUE" } else { "FALSE" },
    );
    if let Some(m) = rows.first() {
        let verdict = match (m.complete, m.durable_holds) {
            (_, false) => "Durable VIOLATED",
            (true, true) => "Durable holds",
            (false, true) => "incomplete",
        };
        let _ = writeln!(
            out,
            "distinct states {}, transitions {} (TLC's states generated: {}), max depth {} \
             (TLC: {}), {verdict}",
            m.unique_states,
            m.transitions,
            m.transitions + 1,
            m.max_depth,
            m.max_depth + 1
        );
    }
    let _ = writeln!(
        out,
        "{:>7} {:>9} {:>12} {:>10} {:>12} {:>14} {:>6}",
        "threads", "Durable", "states/s", "peak MiB", "bytes/state", "Durable+WF", "ratio"
    );
    for m in rows {
        let mib = m.peak_memory_bytes.map_or("?".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0));
        let per_state = m.bytes_per_state().map_or("?".to_string(), |b| format!("{b:.0}"));
        let _ = writeln!(
            out,
            "{:>7} {:>8.2}s {:>12.0} {:>10} {:>12} {:>13.2}s {:>6.2}{}{}",
            m.threads,
            m.elapsed.as_secs_f64(),
            m.states_per_second(),
            mib,
            per_state,
            m.with_cycles.as_secs_f64(),
            m.with_cycles.as_secs_f64() / m.elapsed.as_secs_f64().max(1e-9),
            match (m.wf_holds, m.wf_dropped_violated) {
                (true, true) => "",
                _ => "  (WF VERDICTS WRONG)",
            },
            if m.peak_is_this_run { "" } else { "  (peak: whole process)" }
        );
    }
    out
}
