//! `replicheck sweep`: its arguments and the command, from the model file to the report.

use super::shard::Shard;
use super::sweep::{self, SearchOptions};
use super::{sweep_explain, sweep_render, RunOptions};
use crate::config::{self, ConfigError, Scenario, SourcedPolicy};
use std::io::IsTerminal;
use std::path::Path;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepFormat {
    Text,
    Json,
}

/// Arguments of `replicheck sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The model file.
    pub model: PathBuf,
    /// A policy key and its values: KEY=LO..HI (durations step by the model's tick, rates by
    /// one write per tick, integers by 1) or KEY=A,B,C. Once for a line, twice for a grid.
    #[arg(
        long = "vary",
        value_name = "KEY=RANGE",
        required_unless_present = "from",
        conflicts_with = "from"
    )]
    pub vary: Vec<String>,
    /// Explain a config change: the base policy file (the one in production). With --to, the
    /// knobs that differ are walked one at a time: the smallest move from the base that
    /// already breaks a regressed property, and the nearest safe candidate.
    #[arg(long, value_name = "BASE.toml", requires = "to", conflicts_with_all = ["variant", "policy", "svg", "shard"])]
    pub from: Option<PathBuf>,
    /// The candidate policy file (the proposed change), with --from.
    #[arg(long, value_name = "CANDIDATE.toml", requires = "from")]
    pub to: Option<PathBuf>,
    /// Vary this variant's policy (default: the model's [policy]).
    #[arg(long, conflicts_with = "policy")]
    pub variant: Option<String>,
    /// Vary this policy file, applied over the model's [policy] (alias: --base).
    #[arg(long, alias = "base")]
    pub policy: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: SweepFormat,
    /// Write a picture of the verdicts (SVG): a strip per property for one knob, a heat map
    /// per property for two.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
    /// Values checked along the first knob besides its ends before bisection starts (more
    /// samples catch a verdict that is not monotone).
    #[arg(long, default_value = "3")]
    pub samples: usize,
    /// Check every point: no bisection, nothing inferred.
    #[arg(long)]
    pub exhaustive: bool,
    /// Check only the points whose index is I modulo N (I from 0; points are numbered with
    /// the first knob varying fastest). Implies --exhaustive over those points.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Worker threads, 1 to 1024 (default: all cores).
    #[arg(long, value_parser = super::args::threads_parser())]
    pub threads: Option<usize>,
    /// Stop each point's exploration after this many distinct states, at least 1 (its
    /// verdicts are then incomplete, exit 3).
    #[arg(long, value_parser = super::args::parse_max_states)]
    pub max_states: Option<u64>,
    /// Explorer address (HOST:PORT) used in counterexample links.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:3000", value_parser = super::args::parse_addr)]
    pub addr: String,
    /// Stop a point's exploration, incomplete (exit 3), before it would take resident memory
    /// past this size, e.g. "16G" or "512M" (default: 80% of the machine's memory).
    #[arg(long, value_name = "SIZE", value_parser = crate::engine::memory::parse_size)]
    pub memory_max: Option<u64>,
    /// No progress line or per-point lines on stderr (the report and errors are still
    /// printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// How the sweep explores: a progress line on a terminal unless --quiet.
fn run_options(args: &SweepArgs, interactive: bool) -> RunOptions {
    RunOptions {
        threads: args.threads.unwrap_or(RunOptions::default().threads),
        max_states: args.max_states,
        progress: if interactive { Some(super::terminal::update) } else { None },
        explorer_addr: args.addr.clone(),
        stop: None,
        memory_max_bytes: args.memory_max.or_else(crate::engine::memory::default_limit_bytes),
        ..RunOptions::default()
    }
}

/// Run the sweep and print its report; the exit code: 0 done, 3 a point was cut short by a
/// limit.
pub fn command(args: SweepArgs) -> Result<u8, ConfigError> {
    let scenario = Scenario::load(&args.model)?;
    if let (Some(from), Some(to)) = (&args.from, &args.to) {
        return explain_command(&args, scenario, from, to);
    }
    let shard = args
        .shard
        .as_deref()
        .map(Shard::parse)
        .transpose()
        .map_err(|m| ConfigError::new(std::path::Path::new("--shard"), m))?;
    let (base_label, base) = base_policy(&scenario, args.variant.as_deref(), args.policy.as_deref())?;
    let plan = sweep::plan(scenario, base_label, base, &args.vary)?;
    let interactive = std::io::stderr().is_terminal() && args.format == SweepFormat::Text && !args.quiet;
    let opts = run_options(&args, interactive);
    if interactive {
        super::terminal::start(format!("sweep {}", args.model.display()), None);
    }
    let search = SearchOptions { samples: args.samples, exhaustive: args.exhaustive, shard };
    let mut on_point = |plan: &sweep::Plan, r: &super::RunResult, point: usize, count: usize| {
        if !args.quiet {
            super::terminal::line(&sweep_render::point_line(plan, r, point, count));
        }
    };
    let outcome = sweep::run(&plan, &search, &opts, &mut on_point);
    super::terminal::clear();
    let outcome = outcome?;
    let code = sweep::exit_code(&outcome);
    if let Some(path) = &args.svg {
        std::fs::write(path, sweep_render::svg(&plan, &outcome))
            .map_err(|e| ConfigError::new(path, format!("cannot write the picture: {e}")))?;
        eprintln!("picture written to {}", path.display());
    }
    match args.format {
        SweepFormat::Text => print!("{}", sweep_render::human(&plan, &outcome, shard)),
        SweepFormat::Json => println!("{}", sweep_render::json(&plan, &outcome, shard, code)),
    }
    Ok(code)
}

/// `sweep --from BASE --to CANDIDATE`: exit 1 on a regression (as `diff`), else 3 if a
/// point was cut short, else 0.
fn explain_command(
    args: &SweepArgs,
    scenario: Scenario,
    from: &std::path::Path,
    to: &std::path::Path,
) -> Result<u8, ConfigError> {
    let interactive = std::io::stderr().is_terminal() && args.format == SweepFormat::Text && !args.quiet;
    let opts = run_options(args, interactive);
    if interactive {
        super::terminal::start(format!("sweep {}", args.model.display()), None);
    }
    let search = SearchOptions { samples: args.samples, exhaustive: args.exhaustive, shard: None };
    let mut on_point = |c: &sweep_explain::Checked, count: usize| {
        if !args.quiet {
            super::terminal::line(&sweep_explain::point_line(c, count));
        }
    };
    let e = sweep_explain::explain(scenario, from, to, &search, &opts, &mut on_point);
    super::terminal::clear();
    let e = e?;
    let code = sweep_explain::exit_code(&e);
    match args.format {
        SweepFormat::Text => print!("{}", sweep_explain::human(&e)),
        SweepFormat::Json => println!("{}", sweep_explain::json(&e, code)),
    }
    Ok(code)
}

/// The base policy a sweep varies: a variant's, a `--policy` file over the scenario's, or
/// the scenario's own `[policy]`.
pub fn base_policy(
    scenario: &Scenario,
    variant: Option<&str>,
    policy: Option<&Path>,
) -> Result<(String, SourcedPolicy), ConfigError> {
    if let Some(path) = policy {
        let file = config::load_policy(path)?;
        return Ok((format!("policy {}", path.display()), scenario.base_policy.then(&file)));
    }
    if let Some(name) = variant {
        let known: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
        let v = scenario.variant(name).ok_or_else(|| {
            ConfigError::new(
                &scenario.path,
                format!(
                    "--variant \"{name}\": no such variant (variants: {}){}",
                    known.join(", "),
                    config::nearest(name, known.iter().copied())
                        .map(|n| format!("; did you mean `{n}`?"))
                        .unwrap_or_default()
                ),
            )
        })?;
        return Ok((format!("variant {name}"), v.policy.clone()));
    }
    Ok(("[policy]".to_string(), scenario.base_policy.clone()))
}
