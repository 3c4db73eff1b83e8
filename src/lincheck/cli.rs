//! `replicheck history`: check recorded client histories for linearizability, and time the
//! checker on the reference histories.

use super::register::Register;
use super::report::{check_kv, checked, Checked, Clock};
use super::{generate, parse, Budget, Options, Partition, Verdict};
use crate::config::ConfigError;
use clap::{Subcommand, ValueEnum};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        /// Decide every key (by default the first key found not linearizable ends the file's
        /// check, and the keys still undecided are left so).
        #[arg(long)]
        every_key: bool,
        /// Memory bound of the search's caches, all keys of a file together, in MiB; past it
        /// the verdict is unknown (exit 3).
        #[arg(long, default_value_t = Budget::CACHE_BYTES_MAX_DEFAULT >> 20)]
        cache_mib_max: u64,
        /// Write a picture of the history to this HTML file (one file checked only): each
        /// client's operations on a time axis per key, the longest linearizable prefix and the
        /// operation that cannot be linearized.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Time the checker on every history of DIR's subdirectories that have a `verdicts.tsv`
    /// (`FILE<TAB>yes|no`), and compare each verdict with it. Exit 1 on any disagreement.
    Bench {
        /// A directory of history directories, each with its verdicts.tsv (e.g. Porcupine's
        /// test data laid out as `jepsen-etcd/` and `kv/`).
        dir: PathBuf,
        /// Timed runs per file; the median is reported.
        #[arg(long, default_value_t = 21)]
        runs: usize,
        /// Threads checking the keys of one file.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Leave out the generated histories (`history generate`'s bench set).
        #[arg(long)]
        no_generated: bool,
    },
    /// Write a seeded hard key-value history (kv format) whose verdict is known by
    /// construction: many clients, overlapping operations, crashed clients with open
    /// operations and, with --stale-read, one late stale read that makes it not linearizable.
    Generate {
        /// Where to write it (EDN with :time).
        #[arg(short, long)]
        output: PathBuf,
        /// `kv` (maps of gets, puts and appends on `--keys` keys) or `cas-register` (Knossos's
        /// reads, writes and cas on one register starting at 0; `--keys` and `--hot-percent`
        /// do not apply).
        #[arg(long, value_enum, default_value = "kv")]
        format: GeneratedFormat,
        #[arg(long, default_value_t = 40)]
        clients: usize,
        #[arg(long, default_value_t = 2000)]
        ops: usize,
        #[arg(long, default_value_t = 1)]
        keys: usize,
        /// Percent of the operations on the hot key k0 (0: keys alike).
        #[arg(long, default_value_t = 0)]
        hot_percent: u64,
        /// Clients that crash once, leaving an operation open.
        #[arg(long, default_value_t = 8)]
        crashes: usize,
        /// Add one late stale read: the history is then not linearizable.
        #[arg(long)]
        stale_read: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// What `history generate` writes.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum GeneratedFormat {
    Kv,
    CasRegister,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum HistoryFormat {
    /// Jepsen etcd register logs (`INFO jepsen.util - 3 :invoke :write 4`).
    JepsenEtcd,
    /// Key-value EDN maps, one per line (`{:process 0, :type :invoke, :f :get, :key "1", ...}`).
    Kv,
    /// Knossos's cas-register histories: an EDN vector or list of maps on one register
    /// (`{:process 0, :type :invoke, :f :cas, :value [1 2]}`), the register starting at 0.
    CasRegister,
}

impl HistoryFormat {
    fn name(self) -> &'static str {
        match self {
            HistoryFormat::JepsenEtcd => "jepsen-etcd",
            HistoryFormat::Kv => "kv",
            HistoryFormat::CasRegister => "cas-register",
        }
    }

    /// Recognise the format from the first non-blank line.
    fn detect(path: &Path, text: &str) -> Result<HistoryFormat, ConfigError> {
        let Some((index, first)) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()) else {
            return Err(ConfigError::new(path, "empty history; pass --format to check it as empty"));
        };
        if super::knossos::looks_like(text) {
            Ok(HistoryFormat::CasRegister)
        } else if first.trim_start().starts_with('{') {
            Ok(HistoryFormat::Kv)
        } else if first.contains("jepsen.util") {
            Ok(HistoryFormat::JepsenEtcd)
        } else {
            Err(ConfigError::new(
                path,
                format!(
                    "line {}: cannot tell the history format from `{}`; pass --format jepsen-etcd, kv or cas-register",
                    index + 1,
                    first.trim()
                ),
            ))
        }
    }
}

/// Parse `text` and check it; the time covers the check only.
fn check_text(
    path: &Path,
    text: &str,
    format: HistoryFormat,
    budget: Budget,
    options: Options,
) -> Result<Checked, ConfigError> {
    let parse_error = |e: parse::ParseError| ConfigError::new(path, e.to_string());
    match format {
        HistoryFormat::JepsenEtcd => {
            let ops = parse::jepsen_etcd(text).map_err(parse_error)?;
            // One register: a single key.
            let partitions = if ops.is_empty() {
                vec![]
            } else {
                vec![Partition { key: (), history_index: (0..ops.len()).collect(), ops: ops.clone() }]
            };
            Ok(checked(&Register, &ops, &partitions, |_| None, Clock::Lines, budget, options))
        }
        HistoryFormat::Kv => {
            let (ops, timed) = parse::kv_edn_timed(text).map_err(parse_error)?;
            Ok(check_kv(&ops, timed, budget, options))
        }
        HistoryFormat::CasRegister => {
            // Knossos's cas-register starts at 0.
            let (ops, by_line) = super::knossos::cas_register(text, Some(0)).map_err(parse_error)?;
            let partitions =
                vec![Partition { key: (), history_index: (0..ops.len()).collect(), ops: ops.clone() }];
            let clock = if by_line { Clock::Lines } else { Clock::Events };
            Ok(checked(&Register, &ops, &partitions, |_| None, clock, budget, options))
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
        HistoryCommand::Check { files, format, json, steps_max, threads, every_key, cache_mib_max, html } => {
            if html.is_some() && files.len() != 1 {
                return Err(ConfigError::new(
                    html.as_deref().unwrap_or(Path::new("--html")),
                    "--html draws one history: pass one file",
                ));
            }
            let budget =
                Budget { steps_max, time_max: None, cache_bytes_max: cache_mib_max.saturating_mul(1 << 20) };
            check_files(&files, format, json, budget, Options { threads, every_key }, html.as_deref())
        }
        HistoryCommand::Bench { dir, runs, threads, no_generated } => {
            bench(&dir, runs.max(1), threads, !no_generated)
        }
        HistoryCommand::Generate {
            output,
            format,
            clients,
            ops,
            keys,
            hot_percent,
            crashes,
            stale_read,
            seed,
        } => {
            let text = match format {
                GeneratedFormat::Kv => {
                    let spec = generate::Spec { clients, ops, keys, hot_percent, crashes, stale_read, seed };
                    generate::to_edn(&generate::generate(&spec))
                }
                GeneratedFormat::CasRegister => {
                    if keys != 1 || hot_percent != 0 {
                        return Err(ConfigError::new(
                            &output,
                            "--format cas-register: one register, so --keys and --hot-percent do not apply"
                                .to_string(),
                        ));
                    }
                    super::knossos::generate(&super::knossos::Spec {
                        clients,
                        ops,
                        crashes,
                        stale_read,
                        seed,
                    })
                }
            };
            std::fs::write(&output, text)
                .map_err(|e| ConfigError::new(&output, format!("cannot write: {e}")))?;
            Ok(0)
        }
    }
}

/// A file's format and outcome, or why it could not be checked.
type FileResult = Result<(HistoryFormat, Checked), ConfigError>;

/// Read, recognise and check one file.
fn check_file(
    path: &Path,
    format: Option<HistoryFormat>,
    budget: Budget,
    options: Options,
) -> Result<(HistoryFormat, Checked), ConfigError> {
    let text = read(path)?;
    let format = match format {
        Some(f) => f,
        None => HistoryFormat::detect(path, &text)?,
    };
    Ok((format, check_text(path, &text, format, budget, options)?))
}

/// Check every file; a file that cannot be read or parsed is reported (on stderr, and in the
/// JSON) and the others are still checked. Exit 2 if any file could not be checked, else as
/// [`exit_code`].
fn check_files(
    files: &[PathBuf],
    format: Option<HistoryFormat>,
    json: bool,
    budget: Budget,
    options: Options,
    html: Option<&Path>,
) -> Result<u8, ConfigError> {
    let mut results: Vec<(PathBuf, FileResult)> = Vec::new();
    for path in files {
        let result = check_file(path, format, budget, options);
        match &result {
            Err(e) => eprintln!("replicheck: error: {e}"),
            Ok((_, c)) if !json => {
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
            Ok(_) => {}
        }
        if let (Some(out), Ok((_, c))) = (html, &result) {
            let page = super::html::page(&path.display().to_string(), c);
            std::fs::write(out, page).map_err(|e| ConfigError::new(out, format!("cannot write: {e}")))?;
        }
        results.push((path.clone(), result));
    }
    let failed = results.iter().any(|(_, r)| r.is_err());
    let code = if failed {
        2
    } else {
        exit_code(results.iter().filter_map(|(_, r)| r.as_ref().ok()).map(|(_, c)| &c.verdict))
    };
    if json {
        let files: Vec<serde_json::Value> = results
            .iter()
            .map(|(path, result)| {
                let (format, c) = match result {
                    Ok(checked) => checked,
                    Err(e) => {
                        return serde_json::json!({ "path": path.display().to_string(), "error": e.to_string() })
                    }
                };
                let mut doc = serde_json::json!({
                    "path": path.display().to_string(),
                    "format": format.name(),
                    "ops": c.ops,
                    "keys": c.keys,
                    "verdict": verdict_word(&c.verdict),
                    "elapsed_ms": c.elapsed.as_secs_f64() * 1e3,
                    "steps": c.steps,
                    "cache_bytes_peak": c.cache_bytes_peak,
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

/// One bench line; true if the verdict agrees with the expected one.
fn bench_line(name: &str, c: &Checked, time: Duration, linearizable: bool) -> bool {
    let agrees = c.verdict.is_linearizable() == linearizable;
    println!(
        "  {:<44} {:>5} ops {:>3} keys  {:<16} {:>10.3} ms {:>10} steps {:>8} KiB{}",
        name,
        c.ops,
        c.keys,
        verdict_word(&c.verdict),
        time.as_secs_f64() * 1e3,
        c.steps,
        c.cache_bytes_peak.div_ceil(1024),
        if agrees { "" } else { "  DISAGREES with the known verdict" }
    );
    agrees
}

fn bench(dir: &Path, runs: usize, threads: usize, generated: bool) -> Result<u8, ConfigError> {
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ConfigError::new(dir, format!("cannot read directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("verdicts.tsv").is_file())
        .collect();
    subdirs.sort();
    if subdirs.is_empty() {
        return Err(ConfigError::new(dir, "no subdirectory with a verdicts.tsv"));
    }
    let options = Options { threads, every_key: false };
    println!(
        "median of {runs} runs per file, {threads} thread(s) per file, check only (parsing excluded); \
         steps and peak cache memory of the last run"
    );
    let mut disagreements = 0;
    let timed = |check: &dyn Fn() -> Checked| {
        let mut times = Vec::with_capacity(runs);
        let mut last = None;
        for _ in 0..runs {
            let c = check();
            times.push(c.elapsed);
            last = Some(c);
        }
        (last.expect("runs >= 1"), median(times))
    };
    for sub in &subdirs {
        let mut total = Duration::ZERO;
        let mut count = 0;
        for (file, linearizable) in read_verdicts(&sub.join("verdicts.tsv"))? {
            let path = sub.join(&file);
            let text = read(&path)?;
            let format = HistoryFormat::detect(&path, &text)?;
            check_text(&path, &text, format, Budget::default(), options)?;
            let (c, t) = timed(&|| {
                check_text(&path, &text, format, Budget::default(), options).expect("parsed above")
            });
            total += t;
            count += 1;
            if !bench_line(&path.display().to_string(), &c, t, linearizable) {
                disagreements += 1;
            }
        }
        println!("{}: {count} histories, {:.3} ms in total", sub.display(), total.as_secs_f64() * 1e3);
    }
    if generated {
        let mut total = Duration::ZERO;
        let specs = generate::Spec::bench_set();
        for spec in &specs {
            let ops = generate::generate(spec);
            let (c, t) = timed(&|| check_kv(&ops, true, Budget::default(), options));
            total += t;
            if !bench_line(&format!("generated/{}", spec.name()), &c, t, !spec.stale_read) {
                disagreements += 1;
            }
        }
        println!("generated: {} histories, {:.3} ms in total", specs.len(), total.as_secs_f64() * 1e3);
    }
    Ok(if disagreements == 0 { 0 } else { 1 })
}
