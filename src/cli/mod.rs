//! The command line: argument definitions and the commands they run. `main.rs` only parses
//! and maps the outcome to an exit code.

use crate::check::{self, report, PolicyChoice, RunOptions};
use crate::config::{self, ConfigError, Scenario};
use crate::engine;
use crate::model::{World, WorldConfig};
use clap::{Parser, Subcommand, ValueEnum};

mod bench;
mod check_diff;
mod conform;
mod explore;
mod man;
mod replay;
mod simulate;

use bench::{bench, bench_distributed, bench_repl};
use check_diff::{check_command, diff_command, estimate_command};
use conform::{conform, conform_store_trace, conform_trace};
use explore::{explore, world_config};
use man::man;
use simulate::simulate;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// replicheck: check the replication policies of a key-value store against every behaviour of
/// a small model, before you roll them out.
#[derive(Parser, Debug)]
#[command(name = "replicheck", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Commands that only write reports: when their reader goes away (`| head`) they end as
    /// Unix filters do, of SIGPIPE, rather than panicking on the failed write. The servers
    /// (`store`, `explore`) and the benchmarks, which drive a store, keep Rust's default, under
    /// which a peer that closed its socket is an error the code handles.
    pub fn dies_quietly_on_closed_output(&self) -> bool {
        !matches!(
            self.command,
            Command::Store { .. }
                | Command::Explore { .. }
                | Command::Bench { .. }
                | Command::BenchOne { .. }
                | Command::BenchRepl { .. }
        )
    }
}

/// Restore SIGPIPE's default action (Rust's runtime ignores it).
pub fn die_quietly_on_closed_output() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Junit,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check models: every variant against its declared verdicts, or a policy that must make
    /// every property hold.
    Check {
        /// Model files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Check this policy file instead of the declared variants; every property must hold.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Check only the variants of this name: over several models, every model's variant
        /// of that name (models without one are skipped; an error if none has it).
        #[arg(long, conflicts_with = "policy")]
        variant: Option<String>,
        /// Set a policy key over each run's policy (`dead_after=2s`), or how long a fault of the
        /// menu lasts (`faults.partition[b].duration=500ms..2s`); repeatable. A run with a
        /// setting is a what-if: every property must hold, as with --policy.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        sim: SimArgs,
        /// Check only shard I of N (I from 0): the runs whose index is I modulo N, or with
        /// --simulate the walks whose number is. `replicheck merge` combines the shards' JSON
        /// reports into one.
        #[arg(long, value_name = "I/N", value_parser = check::shard::Shard::parse)]
        shard: Option<check::shard::Shard>,
        #[command(flatten)]
        dist: DistArgs,
        /// No progress line, lint findings or per-run "ok" lines on stderr (the report,
        /// failures and errors are still printed).
        #[arg(long, short)]
        quiet: bool,
        /// Instead of checking: measure what drives each run's state count on smaller scopes of
        /// the model (fault budget, each client's operations, latency, think-time and
        /// fault-duration ranges), each knob raised alone from a base and turned down alone from
        /// the model as written (if no single change finishes: in pairs, and each alone again
        /// under 4x the cap); each probe capped at --max-states (default 1000000). Lists the changes that finish, with their counts
        /// and any verdict they change; nothing is extrapolated. Exit 0 once measured
        /// (docs/writing-a-model.md).
        #[arg(long, conflicts_with_all = ["simulate", "shard", "workers", "processes"])]
        estimate: bool,
    },
    /// Check a config change: the same models under a base and a candidate policy, side by
    /// side. Exit 1 if the candidate breaks a property the base keeps.
    Diff {
        /// Model files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The policy in production now.
        #[arg(long)]
        base: PathBuf,
        /// The proposed policy.
        #[arg(long)]
        candidate: PathBuf,
        #[command(flatten)]
        rollout: check::diff::RolloutArgs,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        #[command(flatten)]
        run: RunArgs,
        /// No progress line on stderr (the report and errors are still printed).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Vary one or two policy knobs over a range and check the model at each point: per
    /// property, the verdict at every value, the safe region and the boundary, with the
    /// counterexample at its unsafe side.
    Sweep(check::sweep_cmd::SweepArgs),
    /// Static rules over a policy, before any exploration: each finding names its rule, what
    /// the policy risks and where the rule comes from. Exit 1 on an error, 3 when the exploration
    /// behind the report was cut short and found none, 0 with warnings only.
    Lint {
        /// A policy file (policy keys only, as for `check --policy`).
        policy: PathBuf,
        /// A model: lint its [policy] with the file on top, run the rules that compare timeouts
        /// with its links and fault menu, and explore the model under the policy: an error is a
        /// violation the checker found, anything less certain a warning.
        #[arg(long)]
        model: Option<PathBuf>,
        /// Only the static rules, no exploration: every finding is then a warning.
        #[arg(long = "static", requires = "model")]
        static_only: bool,
        #[command(flatten)]
        run: RunArgs,
        #[arg(long, value_enum, default_value = "human")]
        format: crate::lint::Format,
        /// No progress line while the model is explored.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Serve the stateright explorer for one model and policy.
    Explore {
        model: PathBuf,
        #[arg(long, conflicts_with = "policy")]
        variant: Option<String>,
        #[arg(long)]
        policy: Option<PathBuf>,
        /// With --policy: explore its rollout over this policy (what `diff --rollout` checks).
        #[arg(long, requires = "policy")]
        rollout_from: Option<PathBuf>,
        /// With --rollout-from: each coordinator may also go back.
        #[arg(long, requires = "rollout_from")]
        rollback: bool,
        /// Set a policy key over the variant or policy (`dead_after=2s`), or how long a fault
        /// of the menu lasts (`faults.partition[b].duration=500ms..2s`); repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE", conflicts_with = "rollout_from")]
        set: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:3000")]
        addr: String,
        /// Stop the explorer (exit 3) once its exploration ("Run to completion") takes
        /// resident memory past this size, e.g. "16G" or "512M" (default: 80% of the
        /// machine's memory); `check` explores the same world within a bound and reports.
        #[arg(long, value_name = "SIZE", value_parser = engine::memory::parse_size)]
        memory_max: Option<u64>,
    },
    /// Combine the JSON reports of a sharded check (`check --shard I/N --format json`, one
    /// file per shard) into the report of the whole check, on stdout; the exit code is the
    /// merged report's.
    Merge {
        /// One JSON report per shard, in any order.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
    },
    /// List the models of a directory, one line each.
    Models {
        #[arg(default_value = "models")]
        dir: PathBuf,
    },
    /// Measure the Repl benchmark and every variant of the library: states, transitions, time
    /// for safety only and with the cycle analysis, their ratio, peak memory, bytes per state
    /// and states/s, with 1 and 2 threads; each measurement in a fresh process.
    Bench {
        #[arg(default_value = "models")]
        paths: Vec<PathBuf>,
        /// Thread counts to measure (each 1 to 1024).
        #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = check::args::threads_parser())]
        threads: Vec<usize>,
        /// Runs per measurement; the median (by time) is printed.
        #[arg(long, default_value = "1")]
        runs: usize,
        /// Leave out the Repl benchmark (the port of the `Repl.tla` TLA+ spec, `bench-repl`).
        #[arg(long)]
        skip_repl: bool,
        /// Instead: time and peak memory of each process of a distributed check of one model
        /// (the one path given) on loopback, with each --processes count, against the
        /// one-process engine.
        #[arg(long)]
        distributed: bool,
        /// With --distributed: the variant to check (default: the model's first).
        #[arg(long, requires = "distributed")]
        variant: Option<String>,
        /// With --distributed: the process counts to measure (each 1 to 1024).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = check::args::threads_parser())]
        processes: Vec<usize>,
    },
    /// Write a verification certificate per model variant under --out (what was checked, at
    /// which scope, with what result), or with --verify re-run every certificate and exit 1
    /// naming each that no longer matches.
    Prove {
        /// Model files or directories of them.
        #[arg(default_value = "models")]
        paths: Vec<PathBuf>,
        /// Re-run the certificates instead of writing them: exit 0 if all match, 1 naming each
        /// that does not (verdict, state count, model, policy or policy code changed; missing
        /// or stale certificate).
        #[arg(long)]
        verify: bool,
        /// The certificate directory: one file per variant, OUT/MODEL/VARIANT.toml.
        #[arg(long, default_value = "proofs")]
        out: PathBuf,
        /// Worker threads, 1 to 1024 (default: all cores; results do not depend on it).
        #[arg(long, value_parser = check::args::threads_parser())]
        threads: Option<usize>,
        /// Stop a run, incomplete (exit 3; its certificate records verdicts as unknown),
        /// before it would take resident memory past this size, e.g. "16G" or "512M"
        /// (default: 80% of the machine's memory).
        #[arg(long, value_name = "SIZE", value_parser = engine::memory::parse_size)]
        memory_max: Option<u64>,
        /// No progress line or per-certificate lines on stderr (the report and errors are
        /// still printed).
        #[arg(long, short)]
        quiet: bool,
    },
    /// The concrete store: a local cluster that runs the same policy code.
    Store {
        #[command(subcommand)]
        command: crate::store::cli::StoreCommand,
    },
    /// Without --model: replay a store's decision log through the policy code (exit 0 when
    /// every logged output is the one `src/policy` computes from the logged inputs, 1 naming
    /// the first line that is not; protocol event lines are counted, not replayed). With --model: validate a trace against the model (exit 0
    /// when every step is one the model allows from the state the trace reached, 1 naming the
    /// first step that is not and what the model allowed instead). A store's trace (`store run
    /// --trace`, `store sim --trace`) is checked for its environment instead: every request's or
    /// message's fate within the model's latencies and losses (exit 1 naming the first that is
    /// not). 2 if a line is malformed.
    Conform {
        /// A decision log or, with --model, a trace (JSON lines).
        log: PathBuf,
        /// The model whose behaviours the trace must be one of.
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long, requires = "model", conflicts_with = "policy")]
        variant: Option<String>,
        #[arg(long, requires = "model")]
        policy: Option<PathBuf>,
    },
    /// (internal) One bench measurement in a fresh process, printed as JSON.
    #[command(hide = true)]
    BenchOne {
        model: PathBuf,
        variant: String,
        threads: usize,
        /// Check the safety properties only (no edges, no cycle analysis), to measure what
        /// liveness costs.
        #[arg(long)]
        safety_only: bool,
        /// The reduction to measure.
        #[arg(long, default_value = "por")]
        reduce: crate::model::Reduction,
    },
    /// Measure the Repl benchmark (a port of the `Repl.tla` TLA+ spec, whose state counts other
    /// checkers publish): `Durable` over its 2,427,180 states with replicheck's engine, each run
    /// in a fresh process.
    BenchRepl {
        /// Thread counts to measure (each 1 to 1024).
        #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = check::args::threads_parser())]
        threads: Vec<usize>,
        /// Enumerate `Ack(k)` once per witness (v, Q), as TLC does (default: once per v).
        #[arg(long)]
        per_witness: bool,
        /// Runs per thread count; the median is printed.
        #[arg(long, default_value = "1")]
        runs: usize,
        /// Identify states up to permutations of the nodes (checks `Durable` only).
        #[arg(long)]
        symmetry: bool,
        /// (internal) Run one measurement in this process and print it as JSON.
        #[arg(long, hide = true)]
        one: bool,
    },
    /// Recorded client histories: check them for linearizability, per key.
    History {
        #[command(subcommand)]
        command: crate::lincheck::cli::HistoryCommand,
    },
    /// Print a shell completion script on stdout, e.g. `replicheck completions bash >
    /// ~/.local/share/bash-completion/completions/replicheck` (see the README).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout: `replicheck man > replicheck.1`, or one command's
    /// page: `replicheck man check > replicheck-check.1`.
    Man {
        /// A command, or a command and its subcommand (`store up`, `history check`; default:
        /// the page of replicheck itself, listing every command).
        command: Vec<String>,
    },
}

/// How `check` and `diff` explore.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Worker threads, 1 to 1024 (default: all cores).
    #[arg(long, value_parser = check::args::threads_parser())]
    pub threads: Option<usize>,
    /// Stop after this many distinct states, at least 1 (the run is then incomplete, exit 3).
    #[arg(long, value_parser = check::args::parse_max_states)]
    pub max_states: Option<u64>,
    /// Explorer address (HOST:PORT) used in counterexample links.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:3000", value_parser = check::args::parse_addr)]
    pub addr: String,
    /// Stop, incomplete (exit 3) with a partial report, before exploring would take resident
    /// memory past this size, e.g. "16G" or "512M" (default: 80% of the machine's memory).
    #[arg(long, value_name = "SIZE", value_parser = engine::memory::parse_size)]
    pub memory_max: Option<u64>,
    /// State-space reduction: `por` (partial-order reduction within a tick, silence regions
    /// for rounds-judged detection, and heartbeats answered at their window's start where no
    /// violation is expected; the same verdicts, fewer states; docs/reductions.md) or `none`
    /// (every interleaving, every counter, every arrival tick). Certificates of
    /// `prove` always record the unreduced counts, and a distributed check (`--workers`,
    /// `--processes`) has no partial-order reduction, only silence regions (its report says
    /// so).
    #[arg(long, value_name = "none|por", default_value = "por")]
    pub reduce: crate::model::Reduction,
}

/// `check --workers/--processes`: distributed exploration on timely dataflow workers
/// (docs/distributed.md). Any of these flags makes the check distributed.
#[derive(clap::Args, Debug, Clone)]
pub struct DistArgs {
    /// Timely workers (threads) in this process, 1 to 1024; each owns a part of the seen set.
    #[arg(long, value_name = "W", value_parser = check::args::threads_parser(), conflicts_with = "threads")]
    pub workers: Option<usize>,
    /// Processes in the run (each started with the same arguments but its own --process).
    #[arg(long, value_name = "P", value_parser = check::args::threads_parser(), conflicts_with = "threads")]
    pub processes: Option<usize>,
    /// This process's number, 0 to P-1; process 0 prints the report.
    #[arg(long, value_name = "I", requires = "processes")]
    pub process: Option<usize>,
    /// One host:port per line, in process order (as timely's --hostfile); process I listens
    /// on line I's port.
    #[arg(long, value_name = "FILE", requires = "processes")]
    pub hostfile: Option<PathBuf>,
    /// Every worker runs the first BFS levels itself until the frontier has this many states
    /// per worker, then keeps the ones it owns (default 2048; results do not depend on it).
    #[arg(long, value_name = "N", value_parser = check::args::parse_max_states)]
    pub shared_frontier: Option<u64>,
}

impl DistArgs {
    fn distributed(&self) -> bool {
        self.workers.is_some() || self.processes.is_some() || self.shared_frontier.is_some()
    }

    fn cluster(&self) -> Result<check::distributed::Cluster, ConfigError> {
        let mut cluster = check::distributed::Cluster::new(
            self.workers.unwrap_or(1),
            self.processes.unwrap_or(1),
            self.process.unwrap_or(0),
            self.hostfile.as_deref(),
        )?;
        if let Some(n) = self.shared_frontier {
            cluster.shared_frontier_per_worker = usize::try_from(n).unwrap_or(usize::MAX);
        }
        Ok(cluster)
    }
}

/// `check --simulate`: random walks instead of exhaustive exploration.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Random walks under the same timed semantics and fault budget instead of exhaustive
    /// exploration, for models too big to exhaust: a violation found is real and printed as a
    /// replayable trace; none found proves nothing. Exit 1 if a declared "holds" is violated,
    /// 3 if a declared violation is not found, else 0.
    #[arg(long)]
    pub simulate: bool,
    /// Walks per variant (with --simulate).
    #[arg(long, default_value = "1000", requires = "simulate", value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Steps per walk, at most (with --simulate).
    #[arg(long, default_value = "200", requires = "simulate", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub depth: u32,
    /// The seed: the same seed walks the same way (with --simulate).
    #[arg(long, default_value = "0", requires = "simulate")]
    pub seed: u64,
    /// Start no walk after this long, e.g. "10m" (with --simulate).
    #[arg(long = "for", value_name = "DURATION", requires = "simulate", value_parser = parse_time_limit)]
    pub time_limit: Option<std::time::Duration>,
    /// Give each walk its own random subset of the fault menu and budget (swarm
    /// verification), reaching corners uniform choice rarely does (with --simulate).
    #[arg(long, requires = "simulate")]
    pub swarm: bool,
}

fn parse_time_limit(s: &str) -> Result<std::time::Duration, String> {
    let d = config::Dur::parse(s)?;
    if d.ms == 0 {
        return Err("must be positive".into());
    }
    Ok(std::time::Duration::from_millis(d.ms))
}

/// What a command ended with, for the exit code.
pub type ExitCode = u8;

/// Exit code: bad input (an unreadable file, an unknown key, an invalid value or flag).
pub const EXIT_BAD_INPUT: ExitCode = 2;
/// Exit code: a failure at run time that is not the input's fault (a busy port or data
/// directory, a process that would not start or died, I/O).
pub const EXIT_RUNTIME: ExitCode = 4;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Input(#[from] ConfigError),
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Input(_) => EXIT_BAD_INPUT,
            Error::Runtime(_) => EXIT_RUNTIME,
        }
    }
}

impl From<check::distributed::Failure> for Error {
    fn from(e: check::distributed::Failure) -> Error {
        match e {
            check::distributed::Failure::Input(e) => Error::Input(e),
            check::distributed::Failure::Runtime(m) => Error::Runtime(m),
        }
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Error {
        match e {
            crate::store::StoreError::Input(m) => {
                Error::Input(ConfigError::new(std::path::Path::new("store"), m))
            }
            crate::store::StoreError::File(e) => Error::Input(e),
            crate::store::StoreError::Runtime(m) => Error::Runtime(format!("store: {m}")),
        }
    }
}

/// How `check`, `diff` and `prove` explore: all cores unless told, a progress line only on a
/// terminal, and (for `check` and `diff`) a stop on SIGINT/SIGTERM.
fn run_options(run: RunArgs, progress: bool, interruptible: bool) -> RunOptions {
    RunOptions {
        threads: run.threads.unwrap_or(RunOptions::default().threads),
        max_states: run.max_states,
        progress: if progress { Some(crate::check::terminal::update) } else { None },
        explorer_addr: run.addr,
        stop: interruptible.then_some(&crate::check::terminal::STOP),
        memory_max_bytes: run.memory_max.or_else(engine::memory::default_limit_bytes),
        reduction: run.reduce,
    }
}

/// `[i/n] model / variant`: the progress line's label for one run.
fn run_label(i: usize, n: usize, model: &str, variant: &str) -> String {
    format!("[{}/{n}] {model} / {variant}", i + 1)
}

fn policy_choice(policy: Option<PathBuf>, variant: Option<String>) -> Result<PolicyChoice, ConfigError> {
    Ok(match policy {
        Some(path) => PolicyChoice::File { policy: Box::new(config::load_policy(&path)?), path },
        None => PolicyChoice::Variants(variant),
    })
}

pub fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Check { paths, policy, variant, set, format, run, sim, shard, dist, quiet, estimate } => {
            if estimate {
                return estimate_command(paths, (policy, variant, set), format, run);
            }
            check_command(paths, (policy, variant, set), format, run, sim, shard, dist, quiet)
        }
        Command::Store { command } => {
            // `store run` stops early on SIGINT/SIGTERM and reports what ran; `store up`
            // handles its own signals (it stops the cluster).
            let interrupt = if matches!(command, crate::store::cli::StoreCommand::Run { .. }) {
                crate::check::terminal::stop_on_interrupt_saying(
                    "replicheck store run: interrupted: stopping the load, healing the store and checking what ran \
                     (interrupt again to quit at once, leaving its temporary directory)",
                )
                .map_err(|m| ConfigError::new(std::path::Path::new("store run"), m))?;
                Some(&crate::check::terminal::STOP)
            } else {
                None
            };
            Ok(crate::store::cli::run(command, &model_verdicts, &replay::plan_replay, interrupt)?)
        }
        Command::Explore { model, variant, policy, rollout_from, rollback, set, addr, memory_max } => {
            let rollout = rollout_from.map(|from| (from, rollback));
            let memory_max_bytes = memory_max.or_else(engine::memory::default_limit_bytes);
            explore(&model, variant, policy.as_deref(), rollout, &set, &addr, memory_max_bytes)
        }
        other => Ok(run_command(other)?),
    }
}

/// Every command but `store` and `explore`, whose failures are all about the input.
fn run_command(command: Command) -> Result<ExitCode, ConfigError> {
    match command {
        Command::Check { .. } => unreachable!("`run` runs check (its failures may be at run time)"),
        Command::Diff { paths, base, candidate, rollout, format, run, quiet } => {
            diff_command(paths, (base, candidate), rollout, format, run, quiet)
        }
        Command::Sweep(args) => check::sweep_cmd::command(args),
        Command::Merge { reports } => {
            let mut docs = Vec::new();
            for path in reports {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| ConfigError::new(&path, format!("cannot read: {e}")))?;
                let doc: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| ConfigError::new(&path, format!("not a JSON report: {e}")))?;
                docs.push((path, doc));
            }
            let (merged, code) = check::merge::merge(&docs)?;
            println!("{}", serde_json::to_string_pretty(&merged).expect("reports serialize"));
            Ok(code)
        }
        Command::Lint { policy, model, static_only, run, format, quiet } => {
            let mut linted = crate::lint::lint_file(&policy, model.as_deref())?;
            if model.is_some() && !static_only {
                let progress =
                    !quiet && format == crate::lint::Format::Human && std::io::stderr().is_terminal();
                crate::check::confirm::confirm_lint(&mut linted, &run_options(run, progress, false))?;
            }
            print!("{}", linted.render(format));
            Ok(linted.exit_code())
        }
        Command::Explore { .. } => unreachable!("run() takes explore"),
        Command::Models { dir } => {
            let mut bad = 0;
            for (file, s) in check::describe_models(&dir)? {
                let s = match s {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("replicheck: error: {e}");
                        bad += 1;
                        continue;
                    }
                };
                let variants: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
                println!(
                    "{:<40} {} [variants: {}]",
                    file.display(),
                    s.description.lines().next().unwrap_or(""),
                    variants.join(", ")
                );
            }
            if bad > 0 {
                eprintln!("{bad} model file(s) in {} do not load", dir.display());
                return Ok(EXIT_BAD_INPUT);
            }
            Ok(0)
        }
        Command::Bench { paths, distributed: true, variant, processes, .. } => {
            bench_distributed(&paths, variant, &processes)
        }
        Command::Bench { paths, threads, runs, skip_repl, .. } => bench(&paths, &threads, runs, skip_repl),
        Command::BenchRepl { threads, per_witness, runs, symmetry, one } => {
            bench_repl(&threads, per_witness, runs, symmetry, one)
        }
        Command::History { command } => history(command),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "replicheck", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { command } => man(&command),
        Command::Prove { paths, verify, out, threads, memory_max, quiet } => {
            let interactive = std::io::stderr().is_terminal() && !quiet;
            let run = RunArgs {
                threads,
                max_states: None,
                addr: RunOptions::default().explorer_addr,
                memory_max,
                reduce: crate::model::Reduction::None,
            };
            let opts = run_options(run, interactive, false);
            if interactive {
                crate::check::terminal::start(
                    if verify { "prove --verify".into() } else { "prove".into() },
                    None,
                );
            }
            let mut on_run = |line: &str| {
                if !quiet {
                    crate::check::terminal::line(line);
                }
            };
            let outcome = if verify {
                check::proofs::verify(&paths, &out, &opts, &mut on_run).map(|r| (r.human(), r.exit_code()))
            } else {
                check::proofs::prove(&paths, &out, &opts, &mut on_run).map(|r| (r.human(), r.exit_code()))
            };
            crate::check::terminal::clear();
            let (report, code) = outcome?;
            print!("{report}");
            Ok(code)
        }
        Command::Store { .. } => unreachable!("run() takes the store commands"),
        Command::Conform { log, model: None, .. } => conform(&log),
        Command::Conform { log, model: Some(model), variant, policy } => {
            let (scenario, cfg) = world_config(&model, variant, policy.as_deref(), &[])?;
            let text = config::read_file(&log)?;
            if crate::store::trace::is_store_trace(&text) {
                return conform_store_trace(&log, &text, &scenario);
            }
            conform_trace(&log, &World::new(cfg))
        }
        Command::BenchOne { model, variant, threads, safety_only, reduce } => {
            let scenario = Scenario::load(&model)?;
            let mut jobs = check::plan(std::slice::from_ref(&model), &PolicyChoice::Variants(Some(variant)))?;
            if safety_only {
                jobs[0].scenario.properties.retain(|p| !p.is_liveness());
            }
            let opts = RunOptions { threads, reduction: reduce, ..RunOptions::default() };
            let start = Instant::now();
            let r = check::run(&jobs[0], &opts)?;
            let doc = serde_json::json!({
                "model": scenario.name,
                "variant": r.variant,
                "threads": threads,
                "unique_states": r.unique_states,
                "transitions": r.transitions,
                "complete": r.complete,
                "reduction": r.reduction,
                "silence_regions": r.silence_regions,
                "arrival_slack": r.arrival_slack,
                "wall_ms": start.elapsed().as_millis() as u64,
                "explore_ms": r.elapsed_ms,
                "states_per_second": r.states_per_second,
                "peak_memory_bytes": engine::peak_memory_bytes(),
            });
            println!("{doc}");
            Ok(0)
        }
    }
}

/// Every property's verdict for one model under a policy file or a variant (`store run
/// --model-verdicts check`).
fn model_verdicts(
    model: &std::path::Path,
    policy: Option<&std::path::Path>,
    variant: &str,
) -> Result<Vec<(config::PropertyName, check::Found)>, ConfigError> {
    // `store run`'s SIGINT/SIGTERM stops this exploration too: its verdicts are then unknown.
    let options = RunOptions { stop: Some(&crate::check::terminal::STOP), ..RunOptions::default() };
    let result = check::run_one(model, policy, variant, &options)?;
    Ok(result.properties.iter().map(|p| (p.name, p.found)).collect())
}

/// `history check` and `history bench`; the checker and its CLI live in `lincheck`.
fn history(command: crate::lincheck::cli::HistoryCommand) -> Result<ExitCode, ConfigError> {
    crate::lincheck::cli::run(command)
}
