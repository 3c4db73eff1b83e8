//! `replicheck history`: check recorded client histories for linearizability, and time the
//! checker on the reference histories.

use super::kv::{self, Kv};
use super::register::Register;
use super::{check, overall, parse, Budget, Operation, SeqModel, Verdict};
use crate::config::ConfigError;
use clap::{Subcommand, ValueEnum};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// Check histories for linearizability, per key. Exit 0 if all are linearizable, 1 if any
    /// is not, 2 if a file cannot be read or parsed, 3 if the search budget ran out.
    Check {
        /// History files (see --format).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The history format (default: recognised from the first line).
        #[arg(long, value_enum)]
        format: Option<HistoryFormat>,
        /// One JSON document on stdout instead of a line per file.
        #[arg(long)]
        json: bool,
        /// Search steps allowed per key before giving up (verdict unknown, exit 3).
        #[arg(long, default_value_t = Budget::STEPS_MAX_DEFAULT)]
        steps_max: u64,
        /// Threads checking the keys of one file.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Time the checker on every history of DIR's subdirectories that have a `verdicts.tsv`
    /// (`FILE<TAB>yes|no`), and compare each verdict with it. Exit 1 on any disagreement.
    Bench {
        /// A directory of history directories, each with its verdicts.tsv.
        #[arg(default_value = "../shared/histories")]
        dir: PathBuf,
        /// Timed runs per file; the median is reported.
        #[arg(long, default_value_t = 21)]
        runs: usize,
        /// Threads checking the keys of one file.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum HistoryFormat {
    /// Jepsen etcd register logs (`INFO jepsen.util - 3 :invoke :write 4`).
    JepsenEtcd,
    /// Key-value EDN maps, one per line (`{:process 0, :type :invoke, :f :get, :key "1", ...}`).
    Kv,
}

impl HistoryFormat {
    fn name(self) -> &'static str {
        match self {
            HistoryFormat::JepsenEtcd => "jepsen-etcd",
            HistoryFormat::Kv => "kv",
        }
    }

    /// Recognise the format from the first non-blank line.
    fn detect(path: &Path, text: &str) -> Result<HistoryFormat, ConfigError> {
        let Some((index, first)) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()) else {
            return Err(ConfigError::new(path, "empty history; pass --format to check it as empty"));
        };
        if first.trim_start().starts_with('{') {
            Ok(HistoryFormat::Kv)
        } else if first.contains("jepsen.util") {
            Ok(HistoryFormat::JepsenEtcd)
        } else {
            Err(ConfigError::new(
                path,
                format!(
                    "line {}: cannot tell the history format from `{}`; pass --format jepsen-etcd or --format kv",
                    index + 1,
                    first.trim()
                ),
            ))
        }
    }
}

/// The outcome for one file.
struct Checked {
    ops: usize,
    keys: usize,
    verdict: Verdict,
    /// The key whose verdict `verdict` is, for a keyed format.
    key: Option<String>,
    /// The operation a `NotLinearizable` verdict names, described.
    unplaced: Option<String>,
    elapsed: Duration,
}

/// How a file's times read: log line numbers or nanoseconds.
#[derive(Clone, Copy)]
enum Clock {
    Lines,
    Nanoseconds,
}

fn describe<I: Debug, O: Debug>(index: usize, op: &Operation<I, O>, clock: Clock) -> String {
    let output = match &op.output {
        Some(o) => format!("{o:?}"),
        None => "unknown".to_owned(),
    };
    let called = match clock {
        Clock::Lines => format!("invoked on line {}", op.call_ns),
        Clock::Nanoseconds => format!("invoked at {} ns", op.call_ns),
    };
    format!("op {index} (process {}, {called}): {:?} -> {output}", op.client, op.input)
}

fn checked<M: SeqModel>(
    ops: &[Operation<M::Input, M::Output>],
    clock: Clock,
    per_key: Vec<(Option<String>, Verdict)>,
    elapsed: Duration,
) -> Checked
where
    M::Input: Debug,
    M::Output: Debug,
{
    let keys = per_key.len();
    let (key, verdict) = overall(&per_key).cloned().unwrap_or((None, Verdict::Linearizable));
    let unplaced = match &verdict {
        Verdict::NotLinearizable { unplaced_op, .. } => {
            Some(describe(*unplaced_op, &ops[*unplaced_op], clock))
        }
        _ => None,
    };
    Checked { ops: ops.len(), keys, verdict, key, unplaced, elapsed }
}

/// Parse `text` and check it; the time covers the check only.
fn check_text(
    path: &Path,
    text: &str,
    format: HistoryFormat,
    budget: Budget,
    threads: usize,
) -> Result<Checked, ConfigError> {
    let parse_error = |e: parse::ParseError| ConfigError::new(path, e.to_string());
    match format {
        HistoryFormat::JepsenEtcd => {
            let ops = parse::jepsen_etcd(text).map_err(parse_error)?;
            let started = Instant::now();
            // One register: a single key.
            let verdict = check(&Register, &ops, budget);
            let elapsed = started.elapsed();
            let per_key = if ops.is_empty() { vec![] } else { vec![(None, verdict)] };
            Ok(checked::<Register>(&ops, Clock::Lines, per_key, elapsed))
        }
        HistoryFormat::Kv => {
            let (ops, timed) = parse::kv_edn_timed(text).map_err(parse_error)?;
            let clock = if timed { Clock::Nanoseconds } else { Clock::Lines };
            let started = Instant::now();
            let per_key = kv::check_per_key(&ops, budget, threads);
            let elapsed = started.elapsed();
            let per_key = per_key.into_iter().map(|(k, v)| (Some(k), v)).collect();
            Ok(checked::<Kv>(&ops, clock, per_key, elapsed))
        }
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::new(path, format!("cannot read: {e}")))
}

fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Linearizable => "linearizable",
        Verdict::NotLinearizable { .. } => "not_linearizable",
        Verdict::Unknown { .. } => "unknown",
    }
}

/// 1 if any history is not linearizable, else 3 if any search ran out of budget, else 0.
fn exit_code<'a>(verdicts: impl Iterator<Item = &'a Verdict> + Clone) -> u8 {
    if verdicts.clone().any(|v| matches!(v, Verdict::NotLinearizable { .. })) {
        1
    } else if verdicts.into_iter().any(|v| matches!(v, Verdict::Unknown { .. })) {
        3
    } else {
        0
    }
}

pub fn run(command: HistoryCommand) -> Result<u8, ConfigError> {
    match command {
        HistoryCommand::Check { files, format, json, steps_max, threads } => {
            check_files(&files, format, json, Budget::steps(steps_max), threads)
        }
        HistoryCommand::Bench { dir, runs, threads } => bench(&dir, runs.max(1), threads),
    }
}

fn check_files(
    files: &[PathBuf],
    format: Option<HistoryFormat>,
    json: bool,
    budget: Budget,
    threads: usize,
) -> Result<u8, ConfigError> {
    let mut results = Vec::new();
    for path in files {
        let text = read(path)?;
        let format = match format {
            Some(f) => f,
            None => HistoryFormat::detect(path, &text)?,
        };
        let c = check_text(path, &text, format, budget, threads)?;
        if !json {
            let ms = c.elapsed.as_secs_f64() * 1e3;
            let verdict = match &c.verdict {
                Verdict::Linearizable => "linearizable".to_owned(),
                Verdict::NotLinearizable { .. } => "NOT linearizable".to_owned(),
                Verdict::Unknown { reason } => format!("UNKNOWN ({reason})"),
            };
            let keys = if c.keys == 1 { "key" } else { "keys" };
            println!("{}: {} ops, {} {keys}, {verdict}, {ms:.3} ms", path.display(), c.ops, c.keys);
            if let (Verdict::NotLinearizable { longest_prefix, .. }, Some(unplaced)) =
                (&c.verdict, &c.unplaced)
            {
                let key = c.key.as_ref().map(|k| format!("key {k:?}: ")).unwrap_or_default();
                println!(
                    "  {key}{unplaced} cannot be linearized (longest linearizable prefix: {} ops)",
                    longest_prefix.len()
                );
            }
        }
        results.push((path.clone(), format, c));
    }
    let code = exit_code(results.iter().map(|(_, _, c)| &c.verdict));
    if json {
        let files: Vec<serde_json::Value> = results
            .iter()
            .map(|(path, format, c)| {
                let mut doc = serde_json::json!({
                    "path": path.display().to_string(),
                    "format": format.name(),
                    "ops": c.ops,
                    "keys": c.keys,
                    "verdict": verdict_word(&c.verdict),
                    "elapsed_ms": c.elapsed.as_secs_f64() * 1e3,
                });
                match &c.verdict {
                    Verdict::NotLinearizable { longest_prefix, unplaced_op } => {
                        doc["key"] = serde_json::json!(c.key);
                        doc["unplaced_op"] = serde_json::json!(unplaced_op);
                        doc["unplaced"] = serde_json::json!(c.unplaced);
                        doc["longest_prefix"] = serde_json::json!(longest_prefix);
                    }
                    Verdict::Unknown { reason } => doc["reason"] = serde_json::json!(reason),
                    Verdict::Linearizable => {}
                }
                doc
            })
            .collect();
        println!("{}", serde_json::json!({ "files": files, "exit_code": code }));
    }
    Ok(code)
}

/// `FILE<TAB>yes|no` lines; `#` starts a comment line.
fn read_verdicts(path: &Path) -> Result<Vec<(String, bool)>, ConfigError> {
    let mut verdicts = Vec::new();
    for (index, line) in read(path)?.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let expected = match line.split('\t').collect::<Vec<_>>()[..] {
            [file, "yes"] => (file.to_owned(), true),
            [file, "no"] => (file.to_owned(), false),
            _ => {
                return Err(ConfigError::new(
                    path,
                    format!("line {}: expected `FILE<TAB>yes|no`, found `{line}`", index + 1),
                ))
            }
        };
        verdicts.push(expected);
    }
    Ok(verdicts)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn bench(dir: &Path, runs: usize, threads: usize) -> Result<u8, ConfigError> {
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ConfigError::new(dir, format!("cannot read directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("verdicts.tsv").is_file())
        .collect();
    subdirs.sort();
    if subdirs.is_empty() {
        return Err(ConfigError::new(dir, "no subdirectory with a verdicts.tsv"));
    }
    println!("median of {runs} runs per file, {threads} thread(s) per file, check only (parsing excluded)");
    let mut disagreements = 0;
    for sub in &subdirs {
        let mut total = Duration::ZERO;
        let mut count = 0;
        for (file, linearizable) in read_verdicts(&sub.join("verdicts.tsv"))? {
            let path = sub.join(&file);
            let text = read(&path)?;
            let format = HistoryFormat::detect(&path, &text)?;
            let mut times = Vec::with_capacity(runs);
            let mut last = None;
            for _ in 0..runs {
                let c = check_text(&path, &text, format, Budget::default(), threads)?;
                times.push(c.elapsed);
                last = Some(c);
            }
            let c = last.expect("runs >= 1");
            let t = median(times);
            total += t;
            count += 1;
            let agrees = c.verdict.is_linearizable() == linearizable;
            if !agrees {
                disagreements += 1;
            }
            println!(
                "  {:<40} {:>4} ops {:>3} keys  {:<16} {:>9.3} ms{}",
                path.display(),
                c.ops,
                c.keys,
                verdict_word(&c.verdict),
                t.as_secs_f64() * 1e3,
                if agrees { "" } else { "  DISAGREES with verdicts.tsv" }
            );
        }
        println!("{}: {count} histories, {:.3} ms in total", sub.display(), total.as_secs_f64() * 1e3);
    }
    Ok(if disagreements == 0 { 0 } else { 1 })
}
