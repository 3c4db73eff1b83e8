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
        "{:<25} {:<19} {:>4} {:>3} {:>9} {:>11} {:>8} {:>7} {:>8} {:>6} {:>10} {:>9} {:>5} {:>9}",
        "model",
        "variant",
        "red",
        "thr",
        "states",
        "transitions",
        "safety",
        "speedup",
        "+cycles",
        "ratio",
        "states/s",
        "safe MiB",
        "B/st",
        "+cyc MiB"
    );
    // The library's safety-only totals per thread count (with the reduction `check` uses), and
    // per variant its states and bytes per state: what the summary line reports.
    let mut totals = vec![0.0f64; threads.len()];
    let mut bytes_per_state: Vec<(u64, u64)> = Vec::new();
    // `first`: the safety time at the first thread count measured, which the speed-up is of.
    let row = |model: &str,
               variant: &str,
               reduction: &str,
               t: usize,
               first: f64,
               safety: &serde_json::Value,
               full: &serde_json::Value| {
        let states = full["unique_states"].as_u64().unwrap_or(0);
        let safe_peak = safety["peak_memory_bytes"].as_u64().unwrap_or(0);
        let full_peak = full["peak_memory_bytes"].as_u64().unwrap_or(0);
        println!(
            "{:<25} {:<19} {:>4} {:>3} {:>9} {:>11} {:>7.2}s {:>6.2}x {:>7.2}s {:>6.2} {:>10.0} {:>9.1} {:>5} {:>9.1}{}",
            model,
            variant,
            reduction,
            t,
            states,
            full["transitions"],
            secs(safety),
            first / secs(safety).max(0.001),
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
        let mut first = None;
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
            let first = *first.get_or_insert(secs(&safety));
            row("Repl.tla (bench)", "Durable + WF", "none", t, first, &safety, &full);
        }
    }
    // Each library variant with and without the partial-order reduction.
    for job in &jobs {
        for reduction in [Reduction::None, Reduction::Por] {
            let mut first = None;
            for (i, &t) in threads.iter().enumerate() {
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
                let first = *first.get_or_insert(secs(&safety));
                row(&job.scenario.name, &job.variant, reduction.as_str(), t, first, &safety, &full);
                if reduction == Reduction::Por {
                    totals[i] += secs(&safety);
                    if i == 0 {
                        let states = safety["unique_states"].as_u64().unwrap_or(0).max(1);
                        let peak = safety["peak_memory_bytes"].as_u64().unwrap_or(0);
                        bytes_per_state.push((states, peak / states));
                    }
                }
            }
        }
    }
    if !jobs.is_empty() {
        println!("{}", library_summary(threads, &totals, &mut bytes_per_state));
    }
    Ok(0)
}

/// The library's line: its safety-only time (por) at each thread count and the speed-up over
/// the first; bytes per state (peak over states) at the first, the median over the variants
/// and the largest variant's (a small variant's peak is mostly the process itself).
fn library_summary(threads: &[usize], totals: &[f64], bytes_per_state: &mut [(u64, u64)]) -> String {
    let times: Vec<String> = threads
        .iter()
        .zip(totals)
        .map(|(t, s)| format!("{t} thread(s) {s:.2}s ({:.2}x)", totals[0] / s.max(0.001)))
        .collect();
    let largest = bytes_per_state.iter().max().copied().unwrap_or((0, 0));
    bytes_per_state.sort_unstable_by_key(|&(_, b)| b);
    let median = bytes_per_state.get(bytes_per_state.len().saturating_sub(1) / 2).map_or(0, |&(_, b)| b);
    format!(
        "library, safety only, por: {}; bytes per state at {} thread(s): median {median}, \
         largest variant ({} states) {}",
        times.join(", "),
        threads.first().copied().unwrap_or(1),
        largest.0,
        largest.1
    )
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

/// One OS process's measurement: wall time from start to exit, and peak resident memory.
struct ProcessCost {
    wall_secs: f64,
    peak_bytes: u64,
}

/// Start `args` as a replicheck process writing its stdout to `stdout_file`.
fn start(exe: &Path, args: &[String], stdout_file: &Path) -> Result<(std::process::Child, Instant), String> {
    let stdout = std::fs::File::create(stdout_file).map_err(|e| format!("{}: {e}", stdout_file.display()))?;
    let child = std::process::Command::new(exe)
        .args(args)
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    Ok((child, Instant::now()))
}

/// Wait for `child` with `wait4`, for its own peak resident memory (`ru_maxrss`), which a
/// plain wait does not give.
fn finish(child: std::process::Child, started: Instant) -> Result<ProcessCost, String> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for (the `Child` is never waited on).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_secs = started.elapsed().as_secs_f64();
    if r != pid {
        return Err(format!("waiting for process {pid}: {}", std::io::Error::last_os_error()));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) > 1 {
        return Err(format!("process {pid} failed (wait status {status})"));
    }
    Ok(ProcessCost { wall_secs, peak_bytes: usage.ru_maxrss as u64 * 1024 })
}

/// `bench --distributed`: one model's distributed check with each process count on loopback
/// (one worker per process), each process's wall time and peak memory, and the one-process
/// engine (`check --threads 1`) for reference. The counts must agree across every row.
pub(super) fn bench_distributed(
    paths: &[PathBuf],
    variant: Option<String>,
    processes: &[usize],
) -> Result<ExitCode, ConfigError> {
    let fail = |m: String| ConfigError::new(Path::new("bench --distributed"), m);
    let [model] = paths else {
        return Err(fail(format!("needs exactly one model file, got {} paths", paths.len())));
    };
    let files = check::model_files(std::slice::from_ref(model))?;
    let jobs = check::plan(&files, &PolicyChoice::Variants(variant))?;
    let job = jobs.first().ok_or_else(|| fail(format!("{}: no variant to run", model.display())))?;
    let exe = std::env::current_exe().map_err(|e| fail(e.to_string()))?;
    // The reports and hostfiles go when this returns, an error included.
    let scratch =
        crate::store::run::ScratchDir::under(&std::env::temp_dir(), "bench-distributed").map_err(fail)?;
    let dir = &scratch.path;
    let base: Vec<String> = vec![
        "check".into(),
        job.scenario.path.display().to_string(),
        "--variant".into(),
        job.variant.clone(),
        "--format".into(),
        "json".into(),
        "--quiet".into(),
        // Every row explores the same graph, the unreduced one: the distributed engine merges
        // silence regions where they apply but has no ample sets, so with `por` its counts
        // would match neither engine's.
        "--reduce".into(),
        "none".into(),
    ];
    let report = |file: &Path| -> Result<serde_json::Value, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|e| fail(format!("{}: {e}", file.display())))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fail(format!("a run gave no JSON report: {e}")))?;
        Ok(doc["runs"][0].clone())
    };
    let counts = |r: &serde_json::Value| {
        (r["unique_states"].clone(), r["transitions"].clone(), r["max_depth"].clone())
    };
    println!("model {} / {}, one worker per process, loopback", job.scenario.name, job.variant);
    println!(
        "{:<22} {:>9} {:>11} {:>9} {:>12}  per process: wall s / peak MiB",
        "run", "states", "transitions", "wall s", "explore s"
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    // The reference: the one-process engine on one thread, on the same unreduced graph (so
    // the same counts).
    let out = dir.join("engine.json");
    let mut args = base.clone();
    args.extend(["--threads".into(), "1".into()]);
    let (child, started) = start(&exe, &args, &out).map_err(fail)?;
    let cost = finish(child, started).map_err(fail)?;
    let reference = report(&out)?;
    println!(
        "{:<22} {:>9} {:>11} {:>9.2} {:>12.2}  {:.2} / {:.0}",
        "engine, 1 thread, none",
        reference["unique_states"],
        reference["transitions"],
        cost.wall_secs,
        reference["elapsed_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
        cost.wall_secs,
        mib(cost.peak_bytes)
    );
    for &p in processes {
        let hostfile = dir.join(format!("hosts-{p}"));
        let mut hosts = Vec::new();
        for _ in 0..p {
            // A port the kernel picks, released for the process to bind a moment later.
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| fail(format!("no free port on 127.0.0.1: {e}")))?
                .port();
            hosts.push(format!("127.0.0.1:{port}"));
        }
        std::fs::write(&hostfile, hosts.join("\n") + "\n")
            .map_err(|e| fail(format!("{}: {e}", hostfile.display())))?;
        let mut children = Vec::new();
        for i in 0..p {
            let mut args = base.clone();
            args.extend([
                "--processes".into(),
                p.to_string(),
                "--process".into(),
                i.to_string(),
                "--hostfile".into(),
                hostfile.display().to_string(),
            ]);
            children.push(start(&exe, &args, &dir.join(format!("p{p}-{i}.json"))).map_err(fail)?);
        }
        let mut costs = Vec::new();
        for (child, started) in children {
            costs.push(finish(child, started).map_err(fail)?);
        }
        let r = report(&dir.join(format!("p{p}-0.json")))?;
        if counts(&r) != counts(&reference) {
            return Err(fail(format!(
                "{p} processes found {:?}, the engine {:?} (states, transitions, depth)",
                counts(&r),
                counts(&reference)
            )));
        }
        let wall = costs.iter().map(|c| c.wall_secs).fold(0.0, f64::max);
        let each: Vec<String> =
            costs.iter().map(|c| format!("{:.2} / {:.0}", c.wall_secs, mib(c.peak_bytes))).collect();
        println!(
            "{:<22} {:>9} {:>11} {:>9.2} {:>12.2}  {}",
            format!("{p} process(es)"),
            r["unique_states"],
            r["transitions"],
            wall,
            r["elapsed_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            each.join(", ")
        );
    }
    Ok(0)
}
