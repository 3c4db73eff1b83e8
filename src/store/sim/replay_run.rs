//! `store sim --replay` (and `store run --replay`): one counterexample of the model played on
//! the store (`replay` plans and follows it), and the report: the trace beside what the store
//! sent, where it left the trace, and whether it shows the trace's violation.

use super::*;

/// What the store did in a lasso's passes of its loop (`passes`, from tick 0) that keeps
/// it from meeting `name`, a liveness property, as the loop does in the model: a replica set
/// changed in every pass (`converges`), or an operation begun before the first pass was still
/// not done when the trace ended (`ops_complete`); and what followed past the trace, where
/// the schedule is no longer the trace's. `None` if not in every pass.
fn in_every_pass(
    run: &SeedRun,
    name: PropertyName,
    passes: &[std::ops::Range<Duration>],
) -> Option<(String, String)> {
    let ms = |d: Duration| d.as_millis() as u64;
    let (first, last) = (passes.first()?, passes.last()?);
    let trace_end_ms = ms(last.end);
    match name {
        PropertyName::Converges => {
            let changes = |range: std::ops::Range<u64>| run::changes_within(&run.outcome, range);
            if passes.iter().any(|pass| changes(ms(pass.start)..ms(pass.end)).is_empty()) {
                return None;
            }
            let shown: Vec<String> = changes(ms(last.start)..trace_end_ms)
                .iter()
                .map(|(at, what)| format!("{what} at {at} ms"))
                .collect();
            let after = changes(trace_end_ms..u64::MAX);
            let after = match after.last() {
                None => "no replica set changed".to_string(),
                Some((at, _)) => format!("{} more changes, the last at {at} ms", after.len()),
            };
            Some((format!("a replica set changed in every pass (in the last: {})", shown.join(", ")), after))
        }
        PropertyName::OpsComplete => {
            let (from_ns, to_ns) = (first.start.as_nanos() as u64, last.end.as_nanos() as u64);
            let ops = &run.history.history;
            // Still on at the trace's end: returned after it, or not at all but retried to
            // the run's end or followed by its client's next operation only after it (an
            // operation given up leaves no time of its own).
            let on_at_end = |op: &Op| match op.outcome {
                Outcome::Ok { return_ns, .. } => return_ns > to_ns,
                _ => {
                    let next = ops.iter().filter(|o| o.client == op.client && o.call_ns > op.call_ns);
                    op.cut_off || next.map(|o| o.call_ns).min().is_some_and(|call_ns| call_ns > to_ns)
                }
            };
            let outstanding: Vec<&Op> =
                ops.iter().filter(|op| op.call_ns < from_ns && on_at_end(op)).collect();
            if outstanding.is_empty() {
                return None;
            }
            let named = |op: &Op| format!("client {} {}", op.client, op.key);
            let during: Vec<String> = outstanding
                .iter()
                .map(|op| format!("{} since {} ms", named(op), op.call_ns / 1_000_000))
                .collect();
            let after: Vec<String> = outstanding
                .iter()
                .map(|op| match op.outcome {
                    Outcome::Ok { return_ns, .. } => {
                        format!("{} completed at {} ms", named(op), return_ns / 1_000_000)
                    }
                    _ if op.cut_off => format!("{} still retried when the load ended", named(op)),
                    _ => format!("{} ended without success", named(op)),
                })
                .collect();
            Some((
                format!("an operation outstanding through every pass ({})", during.join(", ")),
                after.join(", "),
            ))
        }
        _ => None,
    }
}

/// What a replay asks the model's side for (`ReplayPlanner`).
pub struct ReplayQuery<'a> {
    pub model: &'a Path,
    pub policy: Option<&'a Path>,
    /// The variant (or policy file) as `store sim` names it.
    pub label: &'a str,
    pub scenario: &'a Scenario,
    /// `--replay`'s argument: a property, or a `check --format json` report.
    pub replay: &'a str,
}

/// A counterexample to replay, as the model's side plans it.
pub struct Replay {
    pub property: PropertyName,
    /// Its steps (a lasso's loop counted as often as it is played).
    pub steps: usize,
    /// A lasso: its loop's first and last step, and how often it is played.
    pub looped: Option<(usize, usize, usize)>,
    pub plan: Plan,
}

/// Finds and plans the counterexample a replay asks for. The store does not explore models
/// itself (it sits beside the checker, not above it): the CLI hands it one, as it hands
/// `store run` a [`run::ModelChecker`].
pub type ReplayPlanner<'a> = &'a dyn Fn(&ReplayQuery) -> Result<Replay, String>;

/// `--replay PROPERTY|FILE`: a counterexample of the model, played on the store (`replay`).
pub(super) fn run_replay(
    req: &SimRequest,
    replay: &str,
    planner: ReplayPlanner,
    out: &mut String,
    speed: &mut String,
) -> Result<SimSummary, StoreError> {
    let input = StoreError::Input;
    if req.load == LoadShape::Continuous {
        return Err(input("--replay plays the model's load: not with --load continuous".into()));
    }
    let mut setup = setup(req)?;
    let query = ReplayQuery {
        model: &req.model,
        policy: req.policy.as_deref(),
        label: &setup.label,
        scenario: &setup.scenario,
        replay,
    };
    let Replay { property: name, steps, looped, plan } = planner(&query).map_err(input)?;
    let ms_per_tick = setup.ms_per_tick;
    // Steps of one tick are a millisecond apart, after the timers due at the tick's start.
    let needed_ms = u64::from(plan.most_steps_in_a_tick()) + 2;
    if ms_per_tick < needed_ms {
        return Err(input(format!(
            "--time-scale {ms_per_tick}: the trace takes {} steps in one tick, which a replay plays a millisecond apart: at least {needed_ms} ms per tick",
            needed_ms - 2
        )));
    }
    let plan_ms = plan.end(ms_per_tick).as_millis() as u64;
    // After the trace: the heal, the clients' last attempts, the catch-ups, then the reads.
    setup.duration_ms = setup.duration_ms.max(plan_ms + 5 * setup.request_timeout_ms.max(1000));
    let _ = writeln!(
        out,
        "store sim {} / {}: replaying the model's counterexample for {name}: {} steps, {:.3} s of model time (1 tick = {ms_per_tick} ms){}",
        setup.scenario.name,
        setup.label,
        looped.map_or(steps, |(_, to, _)| to),
        plan.steps.last().map_or(0, |s| s.1.tick * ms_per_tick) as f64 / 1000.0,
        looped.map_or(String::new(), |(from, to, plays)| format!(
            "; its loop (steps {from} to {to}) played {plays} times ({steps} steps in all)"
        )),
    );
    setup.replay = Some(plan);
    let seed = req.first_seed;
    let started = std::time::Instant::now();
    let run = seed::run_seed(&setup, seed).map_err(StoreError::Runtime)?;
    let replayed = run.replayed.as_ref().expect("a replay records its messages");
    let replayed = replayed.lock().unwrap_or_else(|p| p.into_inner());
    let _ = writeln!(
        out,
        "  {:>4} {:>11}  {:<70} the store",
        "step", "time", "the model's trace (time passing left out)"
    );
    replayed.side_by_side(out, ms_per_tick);
    if let Some(cannot) = replayed.cannot_follow() {
        let _ = writeln!(out, "a step the store cannot take as the trace does: {cannot}");
    }
    match replayed.first_departure() {
        Some((_, what)) => {
            let _ = writeln!(out, "where the store left the trace: {what}");
        }
        None => {
            let _ = writeln!(
                out,
                "the store followed the trace: it sent every message the trace sent, in the same ticks, and no other"
            );
        }
    }
    let shown = run.verdicts.iter().find(|(p, _)| *p == name).map(|(_, f)| *f);
    // The model judges this property on states: the store's state at the trace's end.
    let unseen = match (&run.held, name) {
        (Some(held), PropertyName::AckedWritesPersist) => replay::acked_but_unseen(
            &replayed.plan,
            held,
            &run.acked,
            plan_ms * 1_000_000,
            setup.policy.read_quorum,
        ),
        _ => None,
    };
    // A lasso's liveness violation, in its loop: the loop repeats for ever in the model, and
    // the store, under the trace's schedule, did the loop's part in each pass.
    let in_loop = in_every_pass(&run, name, &replayed.plan.passes(ms_per_tick));
    let reproduced = shown == Some(Found::Violated) || unseen.is_some() || in_loop.is_some();
    let o = &run.outcome;
    let verdict = match shown {
        Some(Found::Violated) => format!("{name} violated, as in the trace: {}", why(o, name)),
        Some(_) => format!("{name} not violated in the store's run"),
        None => format!("{name} is not judged by the store (the model's alone)"),
    };
    let _ = writeln!(out, "the store: {verdict}");
    if let Some(unseen) = unseen {
        let _ = writeln!(
            out,
            "the store's state when the trace ends violates {name} as the model judges it: {unseen}"
        );
    }
    if let Some((in_loop, after)) = &in_loop {
        let passes = replayed.plan.passes(ms_per_tick).len();
        let _ = writeln!(out, "the store in the loop's {passes} passes, as in the model's loop: {in_loop}");
        let _ = writeln!(out, "  past the trace, where the schedule is the store's own again: {after}");
    }
    for (p, found) in &run.verdicts {
        if *p != name && *found == Found::Violated {
            let why = why(o, *p);
            let _ = writeln!(
                out,
                "  also violated: {}{}{why}",
                p.as_str(),
                if why.is_empty() { "" } else { ": " }
            );
        }
    }
    if let Some(why) = &run.unavailable {
        let _ = writeln!(out, "  {why}");
    }
    match &o.trace_verdict {
        Some(TraceVerdict::Diverges { line, why }) => {
            let _ = writeln!(
                out,
                "the store's trace against the model's environment: diverges at line {line}: {why}"
            );
        }
        Some(_) => {
            let _ = writeln!(out, "the store's trace against the model's environment: conforms");
        }
        None => {}
    }
    keep(out, req, &run)?;
    let _ = writeln!(
        out,
        "{}",
        match (reproduced, shown) {
            (true, _) if in_loop.is_some() && shown != Some(Found::Violated) => {
                "reproduced in the loop's passes: under the trace's schedule the store does what the model's loop does, pass after pass"
            }
            (true, _) => "reproduced: the store shows the model's violation",
            (false, None) => "not judged: the store's checks do not judge this property",
            (false, Some(_)) => "not reproduced: the store does not show the model's violation",
        }
    );
    let _ = writeln!(
        speed,
        "replay: {:.1} simulated s in {:.1} s of wall time",
        run.simulated_ms as f64 / 1000.0,
        started.elapsed().as_secs_f64()
    );
    Ok(SimSummary { seeds: 1, first_failing: (!reproduced).then_some(seed), simulated_ms: run.simulated_ms })
}
