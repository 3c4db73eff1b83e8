//! Benchmark models: specs other checkers publish state counts and timings for, ported to
//! `stateright::Model` and explored by replicheck's own engine, so its speed can be compared
//! with theirs on exactly the same state space.

pub mod repl;

use crate::engine::{self, Limits};
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
    /// Explored up to node permutations (one state per class).
    pub symmetry: bool,
    /// The engine's own accounting of the safety-only run (see [`engine::MemoryUse`]).
    pub memory: MemoryBreakdown,
    /// `Durable` plus the fair-cycle check, in one exploration that records the labelled graph:
    /// "under WF on every Flush and Ack, `Ack(k2)` cannot stay enabled forever". Not run under
    /// symmetry (see [`measure_repl`]).
    pub with_cycles: Option<Duration>,
    pub wf_holds: bool,
    /// The same with the fairness on `Ack(k2)` dropped: must be violated.
    pub wf_dropped_violated: bool,
    /// Peak resident memory of the `Durable` + fair-cycle run (graph and all).
    pub peak_with_cycles_bytes: Option<u64>,
}

/// [`engine::MemoryUse`], serializable.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct MemoryBreakdown {
    pub fingerprints_bytes: u64,
    pub parents_bytes: u64,
    pub seen_bytes: u64,
    pub level_peak_bytes: u64,
}

impl From<engine::MemoryUse> for MemoryBreakdown {
    fn from(m: engine::MemoryUse) -> Self {
        MemoryBreakdown {
            fingerprints_bytes: m.fingerprints_bytes,
            parents_bytes: m.parents_bytes,
            seen_bytes: m.seen_bytes,
            level_peak_bytes: m.level_peak_bytes,
        }
    }
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

/// Explore the whole `Repl` space checking `Durable` only, with `threads` workers, then time
/// `Durable` + the fair-cycle check. With `symmetry`, states are identified up to node
/// permutations and only `Durable` is checked: the fairness classes `Flush(n, k)` are per
/// node, so on the quotient graph a cycle's classes are permuted from one lap to the next,
/// which the per-class weak-fairness analysis does not model.
pub fn measure_repl(model: &repl::Repl, threads: usize, symmetry: bool) -> Measurement {
    let peak_is_this_run = reset_peak_memory();
    let properties = [repl::Repl::durable_property()];
    let limits = Limits { threads, ..Limits::default() };
    let canonical = |s: &repl::ReplState| Some(s.canonical());
    let hooks = engine::Hooks::<repl::Repl> {
        labeler: None,
        canonical: symmetry.then_some(&canonical as _),
        ample: None,
        compact: None,
    };
    let e = engine::explore_with(model, &properties, &limits, hooks);
    let durable_only_peak = engine::peak_memory_bytes();
    if symmetry {
        return Measurement {
            threads,
            unique_states: e.unique_states,
            transitions: e.transitions,
            max_depth: e.max_depth,
            complete: e.complete(),
            durable_holds: e.discoveries[0].is_none(),
            elapsed: e.elapsed,
            peak_memory_bytes: durable_only_peak,
            peak_is_this_run,
            symmetry,
            memory: e.memory.into(),
            with_cycles: None,
            wf_holds: false,
            wf_dropped_violated: false,
            peak_with_cycles_bytes: None,
        };
    }
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
    use crate::engine::cycles::{self, CycleQuery};
    let mut m = Measurement {
        symmetry: false,
        memory: e.memory.into(),
        with_cycles: None,
        wf_holds: false,
        wf_dropped_violated: false,
        threads,
        unique_states: e.unique_states,
        transitions: e.transitions,
        max_depth: e.max_depth,
        complete: e.complete(),
        durable_holds: e.discoveries[0].is_none(),
        elapsed: e.elapsed,
        peak_memory_bytes,
        peak_is_this_run,
        peak_with_cycles_bytes: None,
    };
    // The safety run's tables go before the second run, whose peak is then its own.
    drop(e);
    let own_peak = reset_peak_memory();
    let start = std::time::Instant::now();
    let labeler: engine::EdgeLabeler<repl::Repl> = &repl::Repl::fairness_label;
    let properties = [repl::Repl::durable_property()];
    let live =
        engine::explore_labelled(model, &properties, &Limits { threads, ..Limits::default() }, Some(labeler));
    let graph = live.graph.as_ref().expect("labelled exploration keeps its graph");
    let ack_k2 = repl::Repl::ack_class_bit(1);
    let wf = CycleQuery { fair: 0xFF, every_state_enabled: ack_k2, ..CycleQuery::default() };
    let dropped = CycleQuery { fair: !ack_k2, every_state_enabled: ack_k2, ..CycleQuery::default() };
    // Both queries keep the same edges: one SCC pass answers them.
    let found = cycles::find_all(graph, &[wf, dropped]);
    m.wf_holds = live.complete() && live.discoveries[0].is_none() && found[0].is_none();
    m.wf_dropped_violated = found[1].is_some();
    m.with_cycles = Some(start.elapsed());
    m.peak_with_cycles_bytes = engine::peak_memory_bytes().filter(|_| own_peak);
    m
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
        "Repl.tla: Nodes = {{n1, n2, n3}}, Keys = {{k1, k2}}, MaxVer = {}, Buggy = {}; {ack}; {}; \
         median of {runs} run(s), each in a fresh process",
        model.max_ver,
        if model.buggy { "TRUE" } else { "FALSE" },
        if rows.first().is_some_and(|m| m.symmetry) {
            "symmetry over the nodes (states up to permutation); Durable only"
        } else {
            "Durable alone, and Durable + fair-cycle check"
        },
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
        let (cycles, ratio) = match m.with_cycles {
            Some(c) => (
                format!("{:.2}s", c.as_secs_f64()),
                format!("{:.2}", c.as_secs_f64() / m.elapsed.as_secs_f64().max(1e-9)),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = writeln!(
            out,
            "{:>7} {:>8.2}s {:>12.0} {:>10} {:>12} {:>14} {:>6}{}{}",
            m.threads,
            m.elapsed.as_secs_f64(),
            m.states_per_second(),
            mib,
            per_state,
            cycles,
            ratio,
            match (m.with_cycles.is_some(), m.wf_holds, m.wf_dropped_violated) {
                (false, _, _) | (true, true, true) => "",
                _ => "  (WF VERDICTS WRONG)",
            },
            if m.peak_is_this_run { "" } else { "  (peak: whole process)" }
        );
    }
    if let Some(m) = rows.first() {
        let per_state = |b: u64| b as f64 / m.unique_states.max(1) as f64;
        let b = &m.memory;
        let _ = writeln!(
            out,
            "engine memory per state ({} thread(s), Durable alone): fingerprints {:.1} B, parents {:.1} B, \
             seen table {:.1} B, largest level {:.1} B; total {:.1} B (the rest of the peak is the \
             process and the allocator)",
            m.threads,
            per_state(b.fingerprints_bytes),
            per_state(b.parents_bytes),
            per_state(b.seen_bytes),
            per_state(b.level_peak_bytes),
            per_state(b.fingerprints_bytes + b.parents_bytes + b.seen_bytes + b.level_peak_bytes),
        );
    }
    out
}
