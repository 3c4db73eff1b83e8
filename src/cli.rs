//! The command line: argument definitions and the commands they run. `main.rs` only parses
//! and maps the outcome to an exit code.

use crate::check::{self, report, PolicyChoice, RunOptions};
use crate::config::{self, ConfigError, Scenario};
use crate::engine;
use crate::model::{World, WorldConfig};
use clap::{Parser, Subcommand, ValueEnum};
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
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        sim: SimArgs,
        /// No progress line, lint findings or per-run "ok" lines on stderr (the report,
        /// failures and errors are still printed).
        #[arg(long, short)]
        quiet: bool,
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
    /// the policy risks and where the rule comes from. Exit 1 on an error, 0 with warnings only.
    Lint {
        /// A policy file (policy keys only, as for `check --policy`).
        policy: PathBuf,
        /// A model: lint its [policy] with the file on top, and also run the rules that compare
        /// timeouts with its links and fault menu.
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "human")]
        format: crate::lint::Format,
    },
    /// Serve the stateright explorer for one model and policy.
    Explore {
        model: PathBuf,
        #[arg(long, conflicts_with = "policy")]
        variant: Option<String>,
        #[arg(long)]
        policy: Option<PathBuf>,
        #[arg(long, default_value = "127.0.0.1:3000")]
        addr: String,
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
    /// first step that is not and what the model allowed instead). 2 if a line is malformed.
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
        /// A command (default: the page of replicheck itself, listing every command).
        command: Option<String>,
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

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Error {
        match e {
            crate::store::StoreError::Input(m) => {
                Error::Input(ConfigError::new(std::path::Path::new("store"), m))
            }
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
        Command::Store { command } => Ok(crate::store::cli::run(command, &model_verdicts)?),
        Command::Explore { model, variant, policy, addr } => {
            explore(&model, variant, policy.as_deref(), &addr)
        }
        other => Ok(run_command(other)?),
    }
}

/// `check --simulate`: walk every job, then print the report.
fn simulate(
    jobs: &[check::Job],
    sim: &SimArgs,
    format: Format,
    quiet: bool,
    addr: String,
) -> Result<ExitCode, ConfigError> {
    use check::simulate::{self, SimOptions};
    if format == Format::Junit {
        return Err(ConfigError::new(
            Path::new("--format"),
            "junit is not produced for --simulate (a walk proves no \"holds\"): use human or json",
        ));
    }
    let opts = SimOptions {
        runs: sim.runs,
        depth_steps: sim.depth,
        seed: sim.seed,
        time_limit: sim.time_limit,
        swarm: sim.swarm,
        explorer_addr: addr,
    };
    let mut results = Vec::new();
    for job in jobs {
        let r = simulate::simulate(job, &opts)?;
        if format == Format::Human && !quiet {
            eprintln!("simulated: {} / {} ({} walks, {} steps)", r.model, r.variant, r.runs, r.steps);
        }
        results.push(r);
    }
    let code = simulate::exit_code(&results);
    match format {
        Format::Human => print!("{}", simulate::human(&results)),
        Format::Json => {
            let doc = serde_json::json!({ "exit_code": code, "simulations": results });
            println!("{}", serde_json::to_string_pretty(&doc).expect("reports serialize"));
        }
        Format::Junit => unreachable!("refused above"),
    }
    Ok(code)
}

/// `man [COMMAND]`: the roff page of replicheck or of one of its commands, on stdout.
fn man(command: Option<&str>) -> Result<ExitCode, ConfigError> {
    let top = <Cli as clap::CommandFactory>::command();
    let page = match command {
        None => top,
        Some(name) => {
            let names: Vec<&str> =
                top.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).collect();
            let sub = top.find_subcommand(name).filter(|c| !c.is_hide_set()).ok_or_else(|| {
                ConfigError::new(
                    Path::new("man"),
                    format!("no command \"{name}\" (commands: {})", names.join(", ")),
                )
            })?;
            sub.clone()
                .name(format!("replicheck-{name}"))
                .version(top.get_version().unwrap_or_default().to_string())
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut roff)
        .map_err(|e| ConfigError::new(Path::new("man"), format!("cannot render the man page: {e}")))?;
    use std::io::Write;
    std::io::stdout()
        .write_all(&roff)
        .map_err(|e| ConfigError::new(Path::new("man"), format!("cannot write the man page: {e}")))?;
    Ok(0)
}

/// `explore`: serve the stateright explorer until interrupted, behind replicheck's front (see
/// `explorer`). The address is checked first: a malformed one is bad input, one in use a
/// runtime failure.
fn explore(
    model: &std::path::Path,
    variant: Option<String>,
    policy: Option<&std::path::Path>,
    addr: &str,
) -> Result<ExitCode, Error> {
    let (scenario, cfg) = world_config(model, variant.clone(), policy)?;
    let variant_name = match (policy, variant) {
        (Some(p), _) => format!("policy {}", p.display()),
        (None, Some(v)) => v,
        (None, None) => scenario.variants[0].name.clone(),
    };
    let socket: std::net::SocketAddr = addr.parse().map_err(|e| {
        ConfigError::new(std::path::Path::new("--addr"), format!("\"{addr}\" is not HOST:PORT ({e})"))
    })?;
    let front = crate::explorer::server::bind(socket)
        .map_err(|e| Error::Runtime(format!("explore: cannot listen on {addr}: {e}")))?;
    eprintln!("explorer for {} (variant {variant_name}) at http://{addr}/ (Ctrl-C to stop)", scenario.name);
    front.serve(World::new(cfg), variant_name).map_err(Error::Runtime)?;
    Ok(0)
}

/// Every command but `store` and `explore`, whose failures are all about the input.
fn run_command(command: Command) -> Result<ExitCode, ConfigError> {
    match command {
        Command::Check { paths, policy, variant, format, run, sim, quiet } => {
            let files = check::model_files(&paths)?;
            let only = variant.clone();
            let jobs = check::plan(&files, &policy_choice(policy, variant)?)?;
            if sim.simulate {
                return simulate(&jobs, &sim, format, quiet, run.addr);
            }
            let chatty = format == Format::Human && !quiet;
            let interactive = std::io::stderr().is_terminal() && chatty;
            crate::check::terminal::stop_on_interrupt()
                .map_err(|m| ConfigError::new(Path::new("check"), m))?;
            let opts = run_options(run, interactive, true);
            if chatty {
                if let Some(name) = &only {
                    let without =
                        files.iter().filter(|f| !jobs.iter().any(|j| &j.scenario.path == *f)).count();
                    if without > 0 {
                        eprintln!(
                            "{without} of {} model(s) have no variant \"{name}\": skipped",
                            files.len()
                        );
                    }
                }
                // Static rules first, above the results; they do not change the exit code.
                for job in &jobs {
                    for line in crate::lint::job_lines(&job.scenario, &job.variant, &job.policy) {
                        eprintln!("{line}");
                    }
                }
            }
            let mut results = Vec::new();
            for (i, job) in jobs.iter().enumerate() {
                if crate::check::terminal::interrupted() {
                    break;
                }
                if interactive {
                    let expected = check::proofs::recorded_states(Path::new("proofs"), job);
                    crate::check::terminal::start(
                        run_label(i, jobs.len(), &job.scenario.name, &job.variant),
                        expected,
                    );
                }
                let r = check::run(job, &opts)?;
                crate::check::terminal::clear();
                // One line per run as it finishes, the full report at the end.
                let verdict = if r.as_expected() {
                    "ok"
                } else if check::exit_code(std::slice::from_ref(&r)) == 3 {
                    "INCOMPLETE"
                } else {
                    "FAIL"
                };
                if format == Format::Human && (verdict != "ok" || !quiet) {
                    eprintln!(
                        "{verdict}: {} / {} ({} states, {:.2}s)",
                        r.model,
                        r.variant,
                        r.unique_states,
                        r.elapsed_ms as f64 / 1000.0
                    );
                }
                results.push(r);
            }
            let not_run = jobs.len() - results.len();
            let mut code = check::exit_code(&results);
            if crate::check::terminal::interrupted() && code == 0 {
                // The runs not started (or cut short) leave the check incomplete.
                code = 3;
            }
            match format {
                Format::Human => {
                    print!("{}", report::human(&results));
                    if crate::check::terminal::interrupted() {
                        println!(
                            "interrupted: {not_run} of {} runs not started (exit 3 unless a verdict failed)",
                            jobs.len()
                        );
                    }
                }
                Format::Json => println!("{}", report::json(&results, code, not_run)),
                Format::Junit => print!("{}", report::junit(&results, &jobs[results.len()..])),
            }
            Ok(code)
        }
        Command::Diff { paths, base, candidate, format, run, quiet } => {
            let files = check::model_files(&paths)?;
            let base_choice = policy_choice(Some(base.clone()), None)?;
            let candidate_choice = policy_choice(Some(candidate.clone()), None)?;
            let interactive = std::io::stderr().is_terminal() && format == Format::Human && !quiet;
            crate::check::terminal::stop_on_interrupt()
                .map_err(|m| ConfigError::new(Path::new("diff"), m))?;
            let opts = run_options(run, interactive, true);
            let mut on_run = |i: usize, n: usize, model: &str, side: &str| {
                if interactive {
                    crate::check::terminal::start(run_label(i, n, model, side), None);
                }
            };
            let diffs = check::diff::diff(&files, &base_choice, &candidate_choice, &opts, &mut on_run)?;
            crate::check::terminal::clear();
            let mut code = check::diff::exit_code(&diffs);
            if crate::check::terminal::interrupted() && code == 0 {
                code = 3;
            }
            match format {
                Format::Json => println!("{}", check::diff::json(&diffs, code)),
                Format::Junit => print!("{}", check::diff::junit(&diffs)),
                Format::Human => {
                    print!(
                        "{}",
                        check::diff::human(
                            &diffs,
                            &base.display().to_string(),
                            &candidate.display().to_string()
                        )
                    );
                    if crate::check::terminal::interrupted() {
                        println!("interrupted: the verdicts of the runs cut short are unknown (exit 3 unless a regression was found)");
                    }
                }
            }
            Ok(code)
        }
        Command::Sweep(args) => check::sweep_cmd::command(args),
        Command::Lint { policy, model, format } => {
            let linted = crate::lint::lint_file(&policy, model.as_deref())?;
            print!("{}", linted.render(format));
            Ok(linted.report.exit_code())
        }
        Command::Explore { .. } => unreachable!("run() takes explore"),
        Command::Models { dir } => {
            for (file, s) in check::describe_models(&dir)? {
                let variants: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
                println!(
                    "{:<40} {} [variants: {}]",
                    file.display(),
                    s.description.lines().next().unwrap_or(""),
                    variants.join(", ")
                );
            }
            Ok(0)
        }
        Command::Bench { paths, threads, runs, skip_repl } => bench(&paths, &threads, runs, skip_repl),
        Command::BenchRepl { threads, per_witness, runs, symmetry, one } => {
            bench_repl(&threads, per_witness, runs, symmetry, one)
        }
        Command::History { command } => history(command),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "replicheck", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { command } => man(command.as_deref()),
        Command::Prove { paths, verify, out, threads, quiet } => {
            let interactive = std::io::stderr().is_terminal() && !quiet;
            let run = RunArgs {
                threads,
                max_states: None,
                addr: RunOptions::default().explorer_addr,
                memory_max: None,
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
            let (scenario, cfg) = world_config(&model, variant, policy.as_deref())?;
            let text = config::read_file(&log)?;
            if crate::store::trace::is_store_trace(&text) {
                return conform_store_trace(&log, &text, &scenario);
            }
            conform_trace(&log, &World::new(cfg))
        }
        Command::BenchOne { model, variant, threads, safety_only } => {
            let scenario = Scenario::load(&model)?;
            let mut jobs = check::plan(std::slice::from_ref(&model), &PolicyChoice::Variants(Some(variant)))?;
            if safety_only {
                jobs[0].scenario.properties.retain(|p| !p.is_liveness());
            }
            let opts = RunOptions { threads, ..RunOptions::default() };
            let start = Instant::now();
            let r = check::run(&jobs[0], &opts)?;
            let doc = serde_json::json!({
                "model": scenario.name,
                "variant": r.variant,
                "threads": threads,
                "unique_states": r.unique_states,
                "transitions": r.transitions,
                "complete": r.complete,
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
) -> Result<Vec<(config::PropertyName, check::Found)>, String> {
    let choice = match policy {
        Some(path) => PolicyChoice::File {
            path: path.to_path_buf(),
            policy: Box::new(config::load_policy(path).map_err(|e| e.to_string())?),
        },
        None => PolicyChoice::Variants(Some(variant.to_string())),
    };
    let jobs = check::plan(&[model.to_path_buf()], &choice).map_err(|e| e.to_string())?;
    let job = jobs.first().ok_or("no model check to run")?;
    let result = check::run(job, &RunOptions::default()).map_err(|e| e.to_string())?;
    Ok(result.properties.iter().map(|p| (p.name, p.found)).collect())
}

/// The world of `model` under `--variant` (the first, by default) or `--policy`.
fn world_config(
    model: &std::path::Path,
    variant: Option<String>,
    policy: Option<&std::path::Path>,
) -> Result<(Scenario, WorldConfig), ConfigError> {
    let scenario = Scenario::load(model)?;
    let sourced = match policy {
        Some(path) => scenario.base_policy.then(&config::load_policy(path)?),
        None => {
            let name = variant.unwrap_or_else(|| scenario.variants[0].name.clone());
            let known: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
            scenario
                .variant(&name)
                .ok_or_else(|| {
                    ConfigError::new(model, format!("no variant \"{name}\" (variants: {})", known.join(", ")))
                })?
                .policy
                .clone()
        }
    };
    let cfg = WorldConfig::new(&scenario, &sourced).map_err(|m| ConfigError::new(model, m))?;
    Ok((scenario, cfg))
}

/// `conform TRACE --model M`: trace validation; the first step outside the model is printed
/// with what the model allowed instead.
fn conform_trace(path: &std::path::Path, world: &World) -> Result<ExitCode, ConfigError> {
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

/// `conform TRACE --model M` on a trace `store run` wrote: every request's fate against the
/// model's latencies and faults (`store::trace`).
fn conform_store_trace(
    path: &std::path::Path,
    text: &str,
    scenario: &Scenario,
) -> Result<ExitCode, ConfigError> {
    use crate::store::trace::{self, TraceVerdict};
    let ms_per_tick = text
        .lines()
        .next()
        .and_then(|l| serde_json::from_str::<trace::TraceLine>(l).ok())
        .and_then(|l| match l {
            trace::TraceLine::StoreTrace { ms_per_tick } => Some(ms_per_tick),
            _ => None,
        })
        .unwrap_or(scenario.tick_ms);
    let slack = crate::store::run::trace_slack_ms(ms_per_tick);
    let verdict = trace::validate(scenario, text, slack)
        .map_err(|e| ConfigError::new(path, format!("{}: {e}", path.display())))?;
    println!("{}: {}", path.display(), trace::describe(&verdict, &scenario.name));
    Ok(if matches!(verdict, TraceVerdict::Conforms { .. }) { 0 } else { 1 })
}

/// `conform`: replay a decision log's decisions (its protocol event lines are counted, not
/// replayed); the first mismatch is printed in full.
fn conform(path: &std::path::Path) -> Result<ExitCode, ConfigError> {
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

/// `history check` and `history bench`; the checker and its CLI live in `lincheck`.
fn history(command: crate::lincheck::cli::HistoryCommand) -> Result<ExitCode, ConfigError> {
    crate::lincheck::cli::run(command)
}

/// Each measurement runs in its own process so peak memory is that run's alone.
fn bench(
    paths: &[PathBuf],
    threads: &[usize],
    runs: usize,
    skip_repl: bool,
) -> Result<ExitCode, ConfigError> {
    let files = check::model_files(paths)?;
    let jobs = check::plan(&files, &PolicyChoice::Variants(None))?;
    let exe =
        std::env::current_exe().map_err(|e| ConfigError::new(&PathBuf::from("replicheck"), e.to_string()))?;
    let runs = runs.max(1);
    // The median of `runs` fresh processes, by wall time.
    let median = |path: &PathBuf, args: &[String]| -> Result<serde_json::Value, ConfigError> {
        let mut measured = Vec::new();
        for _ in 0..runs {
            let out = std::process::Command::new(&exe)
                .args(args)
                .output()
                .map_err(|e| ConfigError::new(path, format!("bench run failed: {e}")))?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| ConfigError::new(path, format!("bench run gave no result: {e}")))?;
            measured.push(v);
        }
        measured.sort_by_key(|v| v["wall_ms"].as_u64().unwrap_or(0));
        Ok(measured.swap_remove((measured.len() - 1) / 2))
    };
    let secs = |v: &serde_json::Value| v["wall_ms"].as_u64().unwrap_or(0) as f64 / 1000.0;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "median of {runs} run(s) per cell; safety: safety properties only; +cycles: with the cycle analysis"
    );
    println!(
        "{:<25} {:<19} {:>3} {:>9} {:>11} {:>8} {:>8} {:>6} {:>10} {:>9} {:>5} {:>9}",
        "model",
        "variant",
        "thr",
        "states",
        "transitions",
        "safety",
        "+cycles",
        "ratio",
        "states/s",
        "safe MiB",
        "B/st",
        "+cyc MiB"
    );
    let row = |model: &str, variant: &str, t: usize, safety: &serde_json::Value, full: &serde_json::Value| {
        let states = full["unique_states"].as_u64().unwrap_or(0);
        let safe_peak = safety["peak_memory_bytes"].as_u64().unwrap_or(0);
        let full_peak = full["peak_memory_bytes"].as_u64().unwrap_or(0);
        println!(
            "{:<25} {:<19} {:>3} {:>9} {:>11} {:>7.2}s {:>7.2}s {:>6.2} {:>10.0} {:>9.1} {:>5} {:>9.1}{}",
            model,
            variant,
            t,
            states,
            full["transitions"],
            secs(safety),
            secs(full),
            secs(full) / secs(safety).max(0.001),
            states as f64 / secs(safety).max(0.001),
            mib(safe_peak),
            safe_peak / safety["unique_states"].as_u64().unwrap_or(0).max(1),
            mib(full_peak),
            if full["complete"].as_bool() == Some(true) { "" } else { "  (stopped early: all decided)" }
        );
    };
    if !skip_repl {
        let path = PathBuf::from("bench-repl");
        for &t in threads {
            let m = median(&path, &["bench-repl".into(), "--one".into(), "--threads".into(), t.to_string()])?;
            let ms = |d: &serde_json::Value| {
                d["secs"].as_u64().unwrap_or(0) * 1000 + d["nanos"].as_u64().unwrap_or(0) / 1_000_000
            };
            let safety = serde_json::json!({
                "wall_ms": ms(&m["elapsed"]),
                "unique_states": m["unique_states"],
                "peak_memory_bytes": m["peak_memory_bytes"],
            });
            let full = serde_json::json!({
                "wall_ms": ms(&m["with_cycles"]),
                "unique_states": m["unique_states"],
                "transitions": m["transitions"],
                "peak_memory_bytes": m["peak_with_cycles_bytes"],
                "complete": m["complete"],
            });
            row("Repl.tla (bench)", "Durable + WF", t, &safety, &full);
        }
    }
    for job in &jobs {
        for &t in threads {
            let args = |safety_only: bool| {
                let mut a = vec![
                    "bench-one".to_string(),
                    job.scenario.path.display().to_string(),
                    job.variant.clone(),
                    t.to_string(),
                ];
                if safety_only {
                    a.push("--safety-only".into());
                }
                a
            };
            let safety = median(&job.scenario.path, &args(true))?;
            let full = median(&job.scenario.path, &args(false))?;
            row(&job.scenario.name, &job.variant, t, &safety, &full);
        }
    }
    Ok(0)
}

/// `bench-repl`: each measurement in a fresh process (`--one`), so peak memory is that run's.
fn bench_repl(
    threads: &[usize],
    per_witness: bool,
    runs: usize,
    symmetry: bool,
    one: bool,
) -> Result<ExitCode, ConfigError> {
    use crate::bench::{self, repl};
    let ack = if per_witness { repl::AckEnumeration::PerWitness } else { repl::AckEnumeration::PerValue };
    let model = repl::Repl { ack, ..repl::Repl::benchmark() };
    let fail = |m: String| ConfigError::new(&PathBuf::from("bench-repl"), m);
    if one {
        let m = bench::measure_repl(&model, threads.first().copied().unwrap_or(1), symmetry);
        println!("{}", serde_json::to_string(&m).map_err(|e| fail(e.to_string()))?);
        return Ok(0);
    }
    let exe = std::env::current_exe().map_err(|e| fail(e.to_string()))?;
    let mut rows = Vec::new();
    for &t in threads {
        let mut measured = Vec::new();
        for _ in 0..runs.max(1) {
            let mut cmd = std::process::Command::new(&exe);
            cmd.args(["bench-repl", "--one", "--threads", &t.to_string()]);
            if per_witness {
                cmd.arg("--per-witness");
            }
            if symmetry {
                cmd.arg("--symmetry");
            }
            let out = cmd.output().map_err(|e| fail(format!("bench run failed: {e}")))?;
            let m: bench::Measurement = serde_json::from_slice(&out.stdout)
                .map_err(|e| fail(format!("bench run gave no result: {e}")))?;
            measured.push(m);
        }
        rows.extend(bench::median(measured));
    }
    print!("{}", bench::repl_report(&model, &rows, runs.max(1)));
    Ok(0)
}
