//! `bench` and `bench-repl`: measurements, each in a fresh process.

use super::*;
use crate::model::Reduction;

/// Each measurement runs in its own process so peak memory is that run's alone.
pub(super) fn bench(
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
        "median of {runs} run(s) per cell; safety: safety properties only; +cycles: with the cycle analysis; \
         red: the reduction (none, or por: partial-order reduction, the default of check)"
    );
    println!(
        "{:<25} {:<19} {:>4} {:>3} {:>9} {:>11} {:>8} {:>8} {:>6} {:>10} {:>9} {:>5} {:>9}",
        "model",
        "variant",
        "red",
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
    let row = |model: &str,
               variant: &str,
               reduction: &str,
               t: usize,
               safety: &serde_json::Value,
               full: &serde_json::Value| {
        let states = full["unique_states"].as_u64().unwrap_or(0);
        let safe_peak = safety["peak_memory_bytes"].as_u64().unwrap_or(0);
        let full_peak = full["peak_memory_bytes"].as_u64().unwrap_or(0);
        println!(
            "{:<25} {:<19} {:>4} {:>3} {:>9} {:>11} {:>7.2}s {:>7.2}s {:>6.2} {:>10.0} {:>9.1} {:>5} {:>9.1}{}",
            model,
            variant,
            reduction,
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
            row("Repl.tla (bench)", "Durable + WF", "none", t, &safety, &full);
        }
    }
    // Each library variant with and without the partial-order reduction.
    for job in &jobs {
        for reduction in [Reduction::None, Reduction::Por] {
            for &t in threads {
                let args = |safety_only: bool| {
                    let mut a = vec![
                        "bench-one".to_string(),
                        job.scenario.path.display().to_string(),
                        job.variant.clone(),
                        t.to_string(),
                        "--reduce".to_string(),
                        reduction.as_str().to_string(),
                    ];
                    if safety_only {
                        a.push("--safety-only".into());
                    }
                    a
                };
                let safety = median(&job.scenario.path, &args(true))?;
                let full = median(&job.scenario.path, &args(false))?;
                row(&job.scenario.name, &job.variant, reduction.as_str(), t, &safety, &full);
            }
        }
    }
    Ok(0)
}

/// `bench-repl`: each measurement in a fresh process (`--one`), so peak memory is that run's.
pub(super) fn bench_repl(
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
