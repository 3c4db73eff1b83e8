//! `check --estimate`: what drives a model's state count, measured on smaller scopes of the
//! same model, and the changes of scope that finish.
//!
//! A scope is the model with some of its knobs turned down: the fault budget (to one fault),
//! each client's operations (to one), the latency and think-time ranges and the fault
//! durations (collapsed to their shortest). Each knob is measured two ways: raised alone from
//! the base (every knob at its floor), which ranks what drives the count; and turned down
//! alone from the model as written, step by step until a probe finishes (if none did: pairs of
//! knobs one step down, and each knob alone again under a wider cap), which gives the nearest
//! smaller models and their exact counts
//! (or, where every property is violated, the count at which the check stops, as `check`
//! would). Every probe is capped, and a cut probe is reported as "more than". Nothing is
//! extrapolated: the knobs interact (a latency range matters only while the fault that slows
//! the link is in force), and a product of factors measured apart was off by up to 38x on the
//! library, mostly low, which is the wrong side for a bound.

use super::{run, Found, Job, RunOptions};
use crate::config::setting::window_text;
use crate::config::{ConfigError, LatencyTicks, Scenario};
use crate::engine::Cut;
use crate::policy::detector::FailureDetection;
use serde::Serialize;

/// States per probe when `--max-states` is not given: about a second or two each.
pub const PROBE_STATES_DEFAULT: u64 = 1_000_000;

/// When no knob turned down alone finishes under the cap, each is probed once more under this
/// many times the cap: a single change is the smallest one, and one just past the cap (the
/// natural model's latency ranges at 2.2M states against a 1M cap) fits memory easily.
pub const SECOND_LOOK_FACTOR: u64 = 4;

/// One knob of a model's scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScopeKnob {
    /// `faults.budget`, from 1.
    Budget,
    /// The operations of client `i` (the first `v` of its list), from 1.
    ClientOps(usize),
    /// Every zone-to-zone and degraded latency range: 0 collapsed to its low end, 1 as written.
    LatencyRanges,
    /// Every client's think-time range, as [`ScopeKnob::LatencyRanges`].
    ThinkTimes,
    /// Every fault duration window, as [`ScopeKnob::LatencyRanges`].
    FaultDurations,
}

impl ScopeKnob {
    /// The knobs this model has that can turn down, with (floor, as written).
    fn of(s: &Scenario) -> Vec<(ScopeKnob, u32, u32)> {
        let mut knobs = Vec::new();
        // From one fault: with none, the fault menu's ranges and durations would never show.
        if s.faults.budget > 1 {
            knobs.push((ScopeKnob::Budget, 1, u32::from(s.faults.budget)));
        }
        for (i, c) in s.clients.iter().enumerate() {
            if c.ops.len() > 1 {
                knobs.push((ScopeKnob::ClientOps(i), 1, c.ops.len() as u32));
            }
        }
        for k in [ScopeKnob::LatencyRanges, ScopeKnob::ThinkTimes, ScopeKnob::FaultDurations] {
            if k.ranges_of(&mut s.clone()).iter().any(|(_, r)| r.hi > r.lo) {
                knobs.push((k, 0, 1));
            }
        }
        knobs
    }

    /// A range knob's ranges in `s`, each with what it is (`degraded a<->c`); none for the
    /// counted knobs. The one list of what each range knob collapses.
    fn ranges_of(self, s: &mut Scenario) -> Vec<(String, &mut LatencyTicks)> {
        let Scenario { zones, nodes, latency, clients, faults, .. } = s;
        let zone = |z: usize| zones[z].as_str();
        let mut out: Vec<(String, &mut LatencyTicks)> = Vec::new();
        match self {
            ScopeKnob::LatencyRanges => {
                for (a, row) in latency.iter_mut().enumerate() {
                    for (b, r) in row.iter_mut().enumerate() {
                        let (lo, hi) = (a.min(b), a.max(b));
                        out.push((format!("latency {}<->{}", zone(lo), zone(hi)), r));
                    }
                }
                for d in faults.degrade.iter_mut() {
                    let what = format!("degraded {}<->{}", zone(d.zones.0.into()), zone(d.zones.1.into()));
                    out.push((what, &mut d.latency));
                }
            }
            ScopeKnob::ThinkTimes => {
                out.extend(
                    clients.iter_mut().map(|c| (format!("{} think time", c.name), &mut c.think_ticks)),
                );
            }
            ScopeKnob::FaultDurations => {
                for (n, d) in faults.crash.iter().zip(faults.crash_duration.iter_mut()) {
                    out.extend(
                        d.as_mut().map(|d| (format!("crash {} lasts", nodes[usize::from(*n)].name), d)),
                    );
                }
                for (z, d) in faults.partition.iter().zip(faults.partition_duration.iter_mut()) {
                    out.extend(d.as_mut().map(|d| (format!("cut of {} lasts", zone((*z).into())), d)));
                }
                for d in faults.degrade.iter_mut() {
                    let what =
                        format!("degraded {}<->{} lasts", zone(d.zones.0.into()), zone(d.zones.1.into()));
                    out.extend(d.duration.as_mut().map(|r| (what, r)));
                }
            }
            ScopeKnob::Budget | ScopeKnob::ClientOps(_) => {}
        }
        out
    }

    fn name(self, s: &Scenario) -> String {
        match self {
            ScopeKnob::Budget => "faults.budget".into(),
            ScopeKnob::ClientOps(i) => format!("clients.{}.ops", s.clients[i].name),
            ScopeKnob::LatencyRanges => "latency ranges".into(),
            ScopeKnob::ThinkTimes => "think times".into(),
            ScopeKnob::FaultDurations => "fault durations".into(),
        }
    }

    /// For a range knob, each range it collapses, as written and at its shortest (a symmetric
    /// zone pair once).
    fn ranges(self, s: &Scenario) -> Vec<String> {
        let ms = |t: crate::policy::Ticks| crate::config::duration::format_ms(u64::from(t) * s.tick_ms);
        let mut out: Vec<String> = Vec::new();
        for (what, r) in self.ranges_of(&mut s.clone()) {
            let text = format!("{what} {} -> {}", window_text(*r, s.tick_ms), ms(r.lo));
            if r.hi > r.lo && !out.contains(&text) {
                out.push(text);
            }
        }
        out
    }

    /// `name = value` as the report prints a setting of this knob.
    fn setting(self, s: &Scenario, value: u32, full: u32) -> String {
        let written = if value == full { " (as written)" } else { "" };
        match self {
            ScopeKnob::Budget | ScopeKnob::ClientOps(_) => format!("{} = {value}{written}", self.name(s)),
            _ if value == full => format!("{} as written", self.name(s)),
            _ => format!("{} at their shortest", self.name(s)),
        }
    }

    /// Set this knob of `s` to `value`, taken from the model as `written` (a range knob: 0 each
    /// range at its low end, 1 as written).
    fn set(self, s: &mut Scenario, written: &Scenario, value: u32) {
        match self {
            ScopeKnob::Budget => s.faults.budget = u8::try_from(value).expect("a budget from the model"),
            ScopeKnob::ClientOps(i) => s.clients[i].ops = written.clients[i].ops[..value as usize].to_vec(),
            _ => {
                let mut from = written.clone();
                for ((_, r), (_, w)) in self.ranges_of(s).into_iter().zip(self.ranges_of(&mut from)) {
                    *r = if value == 0 { LatencyTicks { lo: w.lo, hi: w.lo } } else { *w };
                }
            }
        }
    }
}

/// One capped exploration of a scope.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// The scope: "as written", "base", or the knob changed (`faults.budget = 1`).
    pub scope: String,
    /// The knobs this probe set away from the model as written, or raised from the base (none
    /// for those two themselves).
    pub settings: Vec<Setting>,
    pub states: u64,
    /// Whether `states` is the scope's whole count: exploration completed.
    pub complete: bool,
    /// Whether a check of this scope ends: it completed, or it stopped because every property
    /// was violated (as `check` stops; then `states` is only what it explored by then).
    pub finished: bool,
    /// Why it stopped early, when it did (the cap, or the memory bound).
    pub stopped: Option<String>,
    /// Whether what stopped it was the state cap (a wider cap may let it finish).
    #[serde(skip)]
    pub cut_by_cap: bool,
    pub elapsed_ms: u64,
    /// The properties whose verdict in this scope is not the one the variant expects
    /// ("linearizable: expected violated, found holds"): a smaller model that finishes may
    /// have lost the behaviour the question is about.
    pub verdicts_differ: Vec<String>,
}

/// A knob of a probe and its value (ranges: 0 at their shortest, 1 as written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub knob: String,
    pub value: u32,
}

/// A knob measured two ways: raised alone from the base, and turned down alone from the
/// model as written.
#[derive(Clone, Debug, Serialize)]
pub struct Driver {
    pub knob: String,
    /// For a range knob, the ranges it collapses (`degraded a<->c 300ms..700ms -> 300ms`).
    pub ranges: Vec<String>,
    /// Its floor and its value as written (ranges: 0 collapsed, 1 as written).
    pub floor: u32,
    pub written: u32,
    /// The base with only this knob raised, per value above the floor.
    pub alone: Vec<Probe>,
    /// Its factor alone: the last of `alone` over the base; a lower bound if that probe did not
    /// complete, and `None` if the base did not (a cut base's count is no denominator).
    pub factor_alone: Option<f64>,
    /// The model as written with only this knob turned down, from one step down until a
    /// probe finishes.
    pub turned_down: Vec<Probe>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Estimate {
    pub model: String,
    pub variant: String,
    pub probe_states_max: u64,
    /// The model as written, capped like every probe: when it finishes nothing is estimated.
    pub as_written: Probe,
    /// Every knob at its floor.
    pub base: Option<Probe>,
    /// Biggest factor alone first.
    pub drivers: Vec<Driver>,
    /// When no single knob turned down finishes: the model as written with each pair of knobs
    /// turned down one step (ranges to their shortest).
    pub pairs: Vec<Probe>,
    /// When no single knob turned down finishes: each one's furthest turn down again, capped at
    /// `second_look_states_max` ([`SECOND_LOOK_FACTOR`] times the cap).
    pub second_look: Vec<Probe>,
    pub second_look_states_max: Option<u64>,
    /// Turned-down scopes that finished within their probe's cap (the second look's is
    /// wider; measured, so known to fit), nearest to the model as written (the most states)
    /// first.
    pub changes_that_finish: Vec<Probe>,
    /// Ticks between heartbeat rounds, when failure detection sends them: each round gives
    /// every node a message, so a fault can land in every round.
    pub heartbeat_every_ticks: Option<u32>,
    /// With heartbeats: how the detector's silence counters count as states.
    pub silence: Option<String>,
}

/// How the detector's silence counters count as states (docs/reductions.md, "Silence regions").
fn silence_note(cfg: &crate::model::WorldConfig) -> String {
    let p = &cfg.policy;
    let (every, suspect, dead) = (p.heartbeat_interval_ticks, p.suspect_after_ticks, p.dead_after_ticks);
    if p.health_check == crate::policy::detector::HealthCheck::Continuous {
        return "checked continuously, so every tick of silence is a state of its own (health_check = \"rounds\" counts silence by region)".into();
    }
    if !crate::model::silence::applies(cfg) {
        return "the rollout's stages judge silence differently, so every tick of silence is a state of its own".into();
    }
    if suspect % every.max(1) == 0 && dead % every.max(1) == 0 {
        format!("judged at rounds and counted by region; suspect_after ({suspect}) and dead_after ({dead}) are whole rounds of {every} tick(s), which merges the most")
    } else {
        format!("judged at rounds and counted by region; suspect_after ({suspect}) or dead_after ({dead}) is not a whole number of rounds of {every} tick(s), so the rounds tell more silences apart")
    }
}

/// Explore one scope; with `opts.progress`, on a progress line of its own.
fn probe(
    job: &Job,
    scenario: Scenario,
    scope: String,
    settings: Vec<Setting>,
    opts: &RunOptions,
) -> Result<Probe, ConfigError> {
    if opts.progress.is_some() {
        super::terminal::start(format!("estimate {} / {}: {scope}", job.scenario.name, job.variant), None);
    }
    let job = Job { scenario, ..job.clone() };
    let r = run(&job, opts);
    super::terminal::clear();
    let r = r?;
    let complete = r.complete;
    let finished = complete || matches!(r.cut, Some(Cut::AllDecided));
    let verdicts_differ = r
        .properties
        .iter()
        .filter(|p| p.found != Found::Unknown && !p.as_expected())
        .map(|p| format!("{}: expected {}, found {}", p.name, p.expected, p.found))
        .collect();
    Ok(Probe {
        scope,
        settings,
        states: r.unique_states,
        complete,
        finished,
        stopped: match r.cut {
            _ if complete => None,
            Some(Cut::MemoryLimit { limit_bytes, .. }) => Some(format!(
                "stopped at the memory bound of {} (--memory-max)",
                crate::engine::memory::describe(limit_bytes)
            )),
            Some(Cut::StateLimit(_)) => Some("cut at --max-states".into()),
            _ => r.stopped,
        },
        cut_by_cap: !complete && matches!(r.cut, Some(Cut::StateLimit(_))),
        elapsed_ms: r.elapsed_ms,
        verdicts_differ,
    })
}

/// Probe `from` with each (knob, value, value as written) of `set` applied, named by them.
fn probe_with(
    job: &Job,
    from: &Scenario,
    written: &Scenario,
    set: &[(ScopeKnob, u32, u32)],
    opts: &RunOptions,
) -> Result<Probe, ConfigError> {
    let mut s = from.clone();
    for &(k, v, _) in set {
        k.set(&mut s, written, v);
    }
    let scope = set.iter().map(|&(k, v, full)| k.setting(written, v, full)).collect::<Vec<_>>().join(" and ");
    let settings = set.iter().map(|&(k, v, _)| Setting { knob: k.name(written), value: v }).collect();
    probe(job, s, scope, settings, opts)
}

/// Measure `job`'s scopes, each capped at `opts.max_states` (default
/// [`PROBE_STATES_DEFAULT`]); with `opts.progress`, each on a progress line.
pub fn estimate(job: &Job, opts: &RunOptions) -> Result<Estimate, ConfigError> {
    let cap = opts.max_states.unwrap_or(PROBE_STATES_DEFAULT);
    let opts = RunOptions { max_states: Some(cap), ..opts.clone() };
    let written = job.scenario.clone();
    let cfg = crate::model::WorldConfig::new(&written, &job.policy)
        .map_err(|m| ConfigError::new(&written.path, m))?;
    let heartbeat_every_ticks = (cfg.policy.failure_detection == FailureDetection::Independent)
        .then_some(cfg.policy.heartbeat_interval_ticks);
    let silence = heartbeat_every_ticks.map(|_| silence_note(&cfg));
    let as_written = probe(job, written.clone(), "as written".into(), Vec::new(), &opts)?;
    let mut out = Estimate {
        model: job.scenario.name.clone(),
        variant: job.variant.clone(),
        probe_states_max: cap,
        as_written: as_written.clone(),
        base: None,
        drivers: Vec::new(),
        pairs: Vec::new(),
        second_look: Vec::new(),
        second_look_states_max: None,
        changes_that_finish: Vec::new(),
        heartbeat_every_ticks,
        silence,
    };
    if as_written.finished {
        return Ok(out);
    }
    let knobs = ScopeKnob::of(&written);
    let mut base_scope = written.clone();
    for &(k, floor, _) in &knobs {
        k.set(&mut base_scope, &written, floor);
    }
    let base = probe(job, base_scope.clone(), "base (every knob at its floor)".into(), Vec::new(), &opts)?;
    let base_states = base.states.max(1) as f64;
    // Each knob with what was measured of it.
    let mut measured = Vec::with_capacity(knobs.len());
    for &(k, floor, full) in &knobs {
        let mut d = Driver {
            knob: k.name(&written),
            ranges: k.ranges(&written),
            floor,
            written: full,
            alone: Vec::new(),
            factor_alone: None,
            turned_down: Vec::new(),
        };
        let at = |from: &Scenario, v: u32| probe_with(job, from, &written, &[(k, v, full)], &opts);
        for v in floor + 1..=full {
            let p = at(&base_scope, v)?;
            let cut = !p.complete;
            d.factor_alone = base.complete.then(|| p.states as f64 / base_states);
            d.alone.push(p);
            if cut {
                break;
            }
        }
        for v in (floor..full).rev() {
            let p = at(&written, v)?;
            let finished = p.finished;
            d.turned_down.push(p);
            if finished {
                break;
            }
        }
        measured.push(((k, floor, full), d));
    }
    out.base = Some(base);
    // Biggest factor alone first (the report's order, and the second look's).
    measured
        .sort_by(|(_, a), (_, b)| b.factor_alone.unwrap_or(0.0).total_cmp(&a.factor_alone.unwrap_or(0.0)));
    let single_finished = measured.iter().any(|(_, d)| d.turned_down.iter().any(|p| p.finished));
    if !single_finished {
        for (i, &(k, _, k_full)) in knobs.iter().enumerate() {
            for &(l, _, l_full) in &knobs[i + 1..] {
                let both = [(k, k_full - 1, k_full), (l, l_full - 1, l_full)];
                out.pairs.push(probe_with(job, &written, &written, &both, &opts)?);
            }
        }
        let wider = cap.saturating_mul(SECOND_LOOK_FACTOR);
        let wider_opts = RunOptions { max_states: Some(wider), ..opts.clone() };
        // Knobs whose floor was cut by the cap (a probe stopped by the memory bound would only
        // stop there again).
        for &((k, floor, full), ref d) in &measured {
            let floor_probe = d.turned_down.last().expect("turned down at least once");
            if floor_probe.cut_by_cap {
                out.second_look.push(probe_with(job, &written, &written, &[(k, floor, full)], &wider_opts)?);
            }
        }
        if !out.second_look.is_empty() {
            out.second_look_states_max = Some(wider);
        }
    }
    out.drivers = measured.into_iter().map(|(_, d)| d).collect();
    let turned_down = out.drivers.iter().flat_map(|d| &d.turned_down);
    let measured = turned_down.chain(&out.pairs).chain(&out.second_look);
    out.changes_that_finish = measured.filter(|p| p.finished).cloned().collect();
    out.changes_that_finish.sort_by_key(|p| std::cmp::Reverse(p.states));
    Ok(out)
}

/// The human report.
pub fn human(e: &Estimate) -> String {
    use std::fmt::Write as _;
    let count = |p: &Probe| match (p.complete, p.finished) {
        (true, _) => thousands(p.states),
        (false, true) => format!("{} (all violated: stopped)", thousands(p.states)),
        (false, false) => format!("> {}", thousands(p.states)),
    };
    let differ = |out: &mut String, p: &Probe| {
        for d in &p.verdicts_differ {
            let _ = writeln!(out, "        but {d}");
        }
    };
    let mut out = format!("estimate: {} / {}\n", e.model, e.variant);
    let _ = writeln!(
        out,
        "  each probe stops at the first BFS level past {} states (--max-states)",
        thousands(e.probe_states_max)
    );
    let written = &e.as_written;
    if written.finished {
        let how =
            if written.complete { "explored completely" } else { "every property violated, the check ends" };
        let _ = writeln!(
            out,
            "  as written: {} states ({how}, {} ms): nothing to estimate",
            thousands(written.states),
            written.elapsed_ms
        );
        return out;
    }
    let why = written.stopped.as_deref().unwrap_or("stopped early");
    let _ = writeln!(out, "  as written: more than {} states ({why})", thousands(written.states));
    if let Some(base) = &e.base {
        let _ = writeln!(
            out,
            "\n  what each knob does alone, from the base ({} states, every knob at its floor):",
            count(base)
        );
        if !base.complete {
            out.push_str("    (the base did not complete: its count is no denominator, so no factors)\n");
        }
        for d in &e.drivers {
            let last = d.alone.last().expect("a knob has a value above its floor");
            let factor = match d.factor_alone {
                None => String::new(),
                Some(f) if last.complete => format!("x{f:.1}"),
                Some(f) => format!("more than x{f:.1}"),
            };
            let _ = writeln!(out, "    {:<44} {:>14} states  {factor}", last.scope, count(last));
            for r in &d.ranges {
                let _ = writeln!(out, "        {r}");
            }
        }
        out.push_str("\n  the model as written with one knob turned down:\n");
        for d in &e.drivers {
            for p in &d.turned_down {
                let _ = writeln!(out, "    {:<44} {:>14} states", p.scope, count(p));
                differ(&mut out, p);
            }
        }
    }
    if !e.pairs.is_empty() {
        out.push_str("\n  none finished alone: the model as written with two knobs turned down one step:\n");
        for p in &e.pairs {
            let _ = writeln!(out, "    {:<66} {:>12} states", p.scope, count(p));
            differ(&mut out, p);
        }
    }
    if let Some(wider) = e.second_look_states_max {
        let _ =
            writeln!(out, "\n  and each change alone once more, stopping past {} states:", thousands(wider));
        for p in &e.second_look {
            let _ = writeln!(out, "    {:<44} {:>14} states", p.scope, count(p));
            differ(&mut out, p);
        }
    }
    if let Some(every) = e.heartbeat_every_ticks {
        let _ = writeln!(
            out,
            "\n  heartbeats: heartbeat_interval is {every} tick(s); every node gets a message each round, so a fault can land in every round"
        );
        if let Some(silence) = &e.silence {
            let _ = writeln!(out, "  silence: {silence}");
        }
    }
    out.push('\n');
    if e.changes_that_finish.is_empty() {
        out.push_str("  nothing finished: a cut probe may still fit the memory bound with a larger\n");
        out.push_str("  --max-states (each probe then takes longer)\n");
    } else {
        out.push_str("  changes that finish (measured), nearest to the model as written first:\n");
        for p in &e.changes_that_finish {
            let _ = writeln!(out, "    {} ({} states, {} ms)", p.scope, count(p), p.elapsed_ms);
            differ(&mut out, p);
        }
    }
    out
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECT: &str = r#"expect = { no_healthy_eviction = "holds", churn_bounded = "holds", converges = "holds", dead_replaced = "holds" }"#;

    fn note(policy: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/detector-timing.toml");
        let text = std::fs::read_to_string(&path).expect("the library model");
        let text = text.replacen(
            "[variants.rounds]",
            &format!("[variants.probe]\npolicy = {{ {policy} }}\n{EXPECT}\n\n[variants.rounds]"),
            1,
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("detector.toml");
        std::fs::write(&file, text).expect("written");
        let scenario = crate::config::Scenario::load(&file).expect("loads");
        let variant = scenario.variants.iter().find(|v| v.name == "probe").expect("the probe variant");
        let cfg = crate::model::WorldConfig::new(&scenario, &variant.policy).expect("resolves");
        silence_note(&cfg)
    }

    #[test]
    fn the_silence_note_says_how_silence_counts() {
        let aligned = note(
            r#"health_check = "rounds", heartbeat_interval = "500ms", suspect_after = "1s", dead_after = "3s""#,
        );
        assert!(aligned.contains("whole rounds of 5 tick(s), which merges the most"), "{aligned}");
        let off = note(
            r#"health_check = "rounds", heartbeat_interval = "500ms", suspect_after = "1200ms", dead_after = "3s""#,
        );
        assert!(
            off.contains("suspect_after (12) or dead_after (30) is not a whole number of rounds"),
            "{off}"
        );
        let continuous = note(r#"health_check = "continuous""#);
        assert!(continuous.starts_with("checked continuously"), "{continuous}");
    }
}
