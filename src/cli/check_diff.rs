//! `check` and `diff`: the exploring commands that report per model and variant.

use super::*;

/// `check --set`: each run with the settings applied, as a what-if where every property must
/// hold; a setting the model cannot take (no such fault, a rule between keys broken) is an
/// error naming the model.
fn with_settings(jobs: Vec<check::Job>, sets: &[String]) -> Result<Vec<check::Job>, ConfigError> {
    if sets.is_empty() {
        return Ok(jobs);
    }
    jobs.into_iter()
        .map(|mut job| {
            let settings = super::explore::parse_settings(sets, &job.scenario)?;
            job.policy = config::setting::apply(&settings, &mut job.scenario, &job.policy);
            WorldConfig::new(&job.scenario, &job.policy)
                .map_err(|m| ConfigError::new(&job.scenario.path, m))?;
            for set in sets {
                job.variant.push_str(&format!(" --set {set}"));
                job.explore_args.push_str(&format!(" --set '{}'", set.replace('\'', "'\\''")));
            }
            job.description = format!("{} (with --set: every property must hold)", job.description);
            job.expect = job.scenario.properties.iter().map(|p| (*p, config::Verdict::Holds)).collect();
            Ok(job)
        })
        .collect()
}

/// `check --estimate`: each run's scopes measured, one report per run.
pub(super) fn estimate_command(
    paths: Vec<PathBuf>,
    (policy, variant, sets): (Option<PathBuf>, Option<String>, Vec<String>),
    format: Format,
    run: RunArgs,
) -> Result<ExitCode, Error> {
    if format == Format::Junit {
        return Err(ConfigError::new(Path::new("--estimate"), "use --format human or json").into());
    }
    let files = check::model_files(&paths)?;
    let jobs = with_settings(check::plan(&files, &policy_choice(policy, variant)?)?, &sets)?;
    let interactive = format == Format::Human && std::io::stderr().is_terminal();
    let opts = run_options(run, interactive, false);
    let mut estimates = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let e = check::estimate::estimate(job, &opts)?;
        if format == Format::Human {
            if i > 0 {
                println!();
            }
            print!("{}", check::estimate::human(&e));
        }
        estimates.push(e);
    }
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&estimates).expect("an estimate serializes"));
    }
    Ok(0)
}

/// `check`: every job explored (or walked, with `--simulate`), lint first, the report last.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_command(
    paths: Vec<PathBuf>,
    (policy, variant, sets): (Option<PathBuf>, Option<String>, Vec<String>),
    format: Format,
    run: RunArgs,
    sim: SimArgs,
    shard: Option<check::shard::Shard>,
    dist: DistArgs,
    quiet: bool,
) -> Result<ExitCode, Error> {
    // Flags first: a bad cluster is refused before any model is read.
    let cluster = dist.distributed().then(|| dist.cluster()).transpose()?;
    if cluster.is_some() && sim.simulate {
        return Err(ConfigError::new(
            Path::new("--simulate"),
            "random walks do not run distributed: use --shard to spread them over machines",
        )
        .into());
    }
    let files = check::model_files(&paths)?;
    let only = variant.clone();
    let jobs = with_settings(check::plan(&files, &policy_choice(policy, variant)?)?, &sets)?;
    if sim.simulate {
        return Ok(simulate(&jobs, &sim, shard, format, quiet, run.addr)?);
    }
    if shard.is_some() && format == Format::Junit {
        return Err(ConfigError::new(
            Path::new("--shard"),
            "use --format json (or human) with --shard: `replicheck merge` combines JSON reports",
        )
        .into());
    }
    let jobs_total = jobs.len();
    let jobs: Vec<check::Job> = match shard {
        Some(sh) => {
            jobs.into_iter().enumerate().filter(|(i, _)| i % sh.count == sh.index).map(|(_, j)| j).collect()
        }
        None => jobs,
    };
    let chatty = format == Format::Human && !quiet;
    let interactive = std::io::stderr().is_terminal() && chatty;
    crate::check::terminal::stop_on_interrupt().map_err(|m| ConfigError::new(Path::new("check"), m))?;
    let opts = run_options(run, interactive, true);
    if chatty {
        if let Some(name) = &only {
            let without = files.iter().filter(|f| !jobs.iter().any(|j| &j.scenario.path == *f)).count();
            if without > 0 {
                eprintln!("{without} of {} model(s) have no variant \"{name}\": skipped", files.len());
            }
        }
        // Static rules first, above the results; they do not change the exit code.
        for job in &jobs {
            for line in crate::lint::job_lines(&job.scenario, &job.variant, &job.policy) {
                eprintln!("{line}");
            }
        }
    }
    if let Some(cluster) = cluster {
        // Every process runs every job; only process 0 reports.
        let total = jobs.len();
        if interactive {
            // One progress line for the whole check: worker 0 reports each level of each run.
            let label = format!("distributed check, {total} run(s) on {} worker(s)", cluster.total_workers());
            crate::check::terminal::start(label, None);
        }
        let outcome = check::distributed::run(jobs, &opts, &cluster);
        crate::check::terminal::clear();
        let Some(results) = outcome? else {
            if chatty {
                eprintln!(
                    "process {} of {}: done (process 0 prints the report)",
                    cluster.process, cluster.processes
                );
            }
            return Ok(0);
        };
        let code = check::exit_code(&results);
        match format {
            Format::Human => print!("{}", report::human(&results)),
            Format::Json => {
                println!("{}", report::json_sharded(&results, code, total - results.len(), shard, jobs_total))
            }
            Format::Junit => print!("{}", report::junit(&results, &[])),
        }
        return Ok(code);
    }
    let mut results = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        if crate::check::terminal::interrupted() {
            break;
        }
        if interactive {
            // Certificates record the unreduced count: no estimate for a reduced run.
            let expected = (opts.reduction == crate::model::Reduction::None)
                .then(|| check::proofs::recorded_states(Path::new("proofs"), job))
                .flatten();
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
        Format::Json => println!("{}", report::json_sharded(&results, code, not_run, shard, jobs_total)),
        Format::Junit => print!("{}", report::junit(&results, &jobs[results.len()..])),
    }
    Ok(code)
}

/// `diff`: the same models under the base and the candidate policy, side by side.
pub(super) fn diff_command(
    paths: Vec<PathBuf>,
    (base, candidate): (PathBuf, PathBuf),
    rollout: check::diff::RolloutArgs,
    format: Format,
    run: RunArgs,
    quiet: bool,
) -> Result<ExitCode, ConfigError> {
    let files = check::model_files(&paths)?;
    let base_choice = policy_choice(Some(base.clone()), None)?;
    let candidate_choice = policy_choice(Some(candidate.clone()), None)?;
    let interactive = std::io::stderr().is_terminal() && format == Format::Human && !quiet;
    crate::check::terminal::stop_on_interrupt().map_err(|m| ConfigError::new(Path::new("diff"), m))?;
    let opts = run_options(run, interactive, true);
    let mut on_run = |i: usize, n: usize, model: &str, side: &str| {
        if interactive {
            crate::check::terminal::start(run_label(i, n, model, side), None);
        }
    };
    let diffs = check::diff::diff(&files, &base_choice, &candidate_choice, rollout, &opts, &mut on_run)?;
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
                check::diff::human(&diffs, &base.display().to_string(), &candidate.display().to_string())
            );
            if crate::check::terminal::interrupted() {
                println!("interrupted: the verdicts of the runs cut short are unknown (exit 3 unless a regression was found)");
            }
        }
    }
    Ok(code)
}
