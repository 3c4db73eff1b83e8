//! `check --simulate`: random walks instead of exhaustive exploration.

use super::*;

/// `check --simulate`: walk every job, then print the report.
pub(super) fn simulate(
    jobs: &[check::Job],
    sim: &SimArgs,
    shard: Option<check::shard::Shard>,
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
        shard: shard.map(|s| (s.index as u64, s.count as u64)),
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
            let mut doc = serde_json::json!({ "exit_code": code, "simulations": results });
            if let Some(sh) = shard {
                doc["shard"] = serde_json::json!({ "index": sh.index, "count": sh.count });
            }
            println!("{}", serde_json::to_string_pretty(&doc).expect("reports serialize"));
        }
        Format::Junit => unreachable!("refused above"),
    }
    Ok(code)
}
