//! `conform`: trace validation of a model trace or a store trace, and decision-log replay.

use super::*;

/// `conform TRACE --model M`: trace validation; the first step outside the model is printed
/// with what the model allowed instead.
pub(super) fn conform_trace(path: &std::path::Path, world: &World) -> Result<ExitCode, ConfigError> {
    use crate::check::trace::{self, Conformance};
    let text = config::read_file(path)?;
    let steps = trace::parse(&text).map_err(|(line, e)| {
        ConfigError::new(path, format!("{}:{line}: not a trace step: {e}", path.display()))
    })?;
    match trace::validate(world, &steps) {
        Conformance::Conforms { steps, ticks, states } => {
            println!(
                "{}: {steps} steps over {ticks} ticks, every one a step of model {} ({states} model state(s) fit the whole trace)",
                path.display(),
                world.cfg.model_name
            );
            Ok(0)
        }
        Conformance::Diverges { index, why, allowed, state } => {
            println!(
                "{}: step {} is not a behaviour of model {}",
                path.display(),
                index + 1,
                world.cfg.model_name
            );
            println!("  observed: {}", trace::describe(&steps[index]));
            println!("  why:      {why}");
            println!("  the model allowed instead:");
            for a in &allowed {
                println!("    {a}");
            }
            println!("  in the state the trace had reached:");
            for line in state.lines() {
                println!("    {line}");
            }
            Ok(1)
        }
    }
}

/// `conform TRACE --model M` on a trace `store run` or `store sim` wrote: every request's (or
/// message's) fate against the model's latencies and faults (`store::trace`).
pub(super) fn conform_store_trace(
    path: &std::path::Path,
    text: &str,
    scenario: &Scenario,
) -> Result<ExitCode, ConfigError> {
    use crate::store::trace::{self, TraceVerdict};
    let verdict = trace::validate(scenario, text)
        .map_err(|e| ConfigError::new(path, format!("{}: {e}", path.display())))?;
    println!("{}: {}", path.display(), trace::describe(&verdict, &scenario.name));
    Ok(if matches!(verdict, TraceVerdict::Conforms { .. }) { 0 } else { 1 })
}

/// `conform`: replay a decision log's decisions (its protocol event lines are counted, not
/// replayed); the first mismatch is printed in full.
pub(super) fn conform(path: &std::path::Path) -> Result<ExitCode, ConfigError> {
    use crate::store::decision::{self, Conformance};
    let text = config::read_file(path)?;
    let outcome = decision::conform(&text)
        .map_err(|bad| ConfigError::new(path, format!("{}:{}: {}", path.display(), bad.line, bad.message)))?;
    match outcome {
        Conformance::Conforms { decisions, events } => {
            println!(
                "{}: {decisions} decisions, every one as src/policy decides; {events} protocol events \
                 (the checked coordinator's own steps, not replayed)",
                path.display()
            );
            Ok(0)
        }
        Conformance::Mismatch { line, logged, recomputed } => {
            println!("{}:{line}: {} does not conform", path.display(), logged.name());
            println!("  inputs:     {}", logged.inputs_json());
            println!("  logged:     {}", logged.output_json());
            println!("  recomputed: {}", recomputed.output_json());
            Ok(1)
        }
    }
}
