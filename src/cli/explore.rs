//! `explore`: the explorer for one model and policy, behind replicheck's front.

use super::*;

/// `explore`: serve the stateright explorer until interrupted, behind replicheck's front (see
/// `explorer`). The address is checked first: a malformed one is bad input, one in use a
/// runtime failure.
pub(super) fn explore(
    model: &std::path::Path,
    variant: Option<String>,
    policy: Option<&std::path::Path>,
    rollout: Option<(PathBuf, bool)>,
    sets: &[String],
    addr: &str,
    memory_max_bytes: Option<u64>,
) -> Result<ExitCode, Error> {
    let (scenario, mut cfg) = world_config(model, variant.clone(), policy, sets)?;
    if let (Some((from, rollback)), Some(to)) = (rollout, policy) {
        cfg = rollout_config(&scenario, &from, to, rollback)?;
    }
    let mut variant_name = match (policy, variant) {
        // An empty policy file is the model's own [policy] (what a sweep's point names).
        (Some(p), _) if config::load_policy(p)?.patch.describe().is_empty() => "[policy]".to_string(),
        (Some(p), _) => format!("policy {}", p.display()),
        (None, Some(v)) => v,
        (None, None) => scenario.variants[0].name.clone(),
    };
    for set in sets {
        variant_name.push_str(&format!(" --set {set}"));
    }
    let socket: std::net::SocketAddr = addr.parse().map_err(|e| {
        ConfigError::new(std::path::Path::new("--addr"), format!("\"{addr}\" is not HOST:PORT ({e})"))
    })?;
    let front = crate::explorer::server::bind(socket)
        .map_err(|e| Error::Runtime(format!("explore: cannot listen on {addr}: {e}")))?;
    eprintln!("explorer for {} (variant {variant_name}) at http://{addr}/ (Ctrl-C to stop)", scenario.name);
    if let Some(limit_bytes) = memory_max_bytes {
        watch_memory(limit_bytes);
    }
    front.serve(World::new(cfg), variant_name).map_err(Error::Runtime)?;
    Ok(0)
}

/// How often the explorer's resident memory is compared with its bound.
const MEMORY_WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Stop the process (exit 3) once its resident memory passes `limit_bytes`: stateright's
/// checker behind the explorer ("Run to completion") has no bound of its own and cannot be
/// stopped part way, and a machine out of memory is worse than an explorer that ends.
fn watch_memory(limit_bytes: u64) {
    std::thread::spawn(move || loop {
        std::thread::sleep(MEMORY_WATCH_INTERVAL);
        let Some(resident_bytes) = engine::memory::resident_bytes() else { return };
        if resident_bytes >= limit_bytes {
            eprintln!(
                "explore: memory bound of {} reached ({} resident): the explorer stops; raise \
                 --memory-max, or run `replicheck check` on the model for a bounded, reported run",
                engine::memory::describe(limit_bytes),
                engine::memory::describe(resident_bytes)
            );
            std::process::exit(3);
        }
    });
}

/// The world of `model` rolling `to` out over `from` (`explore --policy TO --rollout-from
/// FROM`), as `diff --rollout` checks it.
fn rollout_config(
    scenario: &Scenario,
    from: &std::path::Path,
    to: &std::path::Path,
    rollback: bool,
) -> Result<WorldConfig, ConfigError> {
    let base = scenario.base_policy.then(&config::load_policy(from)?);
    let candidate = scenario.base_policy.then(&config::load_policy(to)?);
    let mut policy = base.clone();
    policy.rollout = Some(Box::new(config::RolloutPlan {
        stages: vec![("base".into(), base), ("candidate".into(), candidate)],
        rollback,
        order: config::RolloutOrder::Any,
    }));
    WorldConfig::new(scenario, &policy).map_err(|m| ConfigError::new(&scenario.path, m))
}

/// The world of `model` under `--variant` (the first, by default) or `--policy`.
pub(super) fn world_config(
    model: &std::path::Path,
    variant: Option<String>,
    policy: Option<&std::path::Path>,
    sets: &[String],
) -> Result<(Scenario, WorldConfig), ConfigError> {
    let mut scenario = Scenario::load(model)?;
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
    let settings = parse_settings(sets, &scenario)?;
    let sourced = config::setting::apply(&settings, &mut scenario, &sourced);
    let cfg = WorldConfig::new(&scenario, &sourced).map_err(|m| ConfigError::new(model, m))?;
    Ok((scenario, cfg))
}

/// Each `--set KEY=VALUE` against `scenario`; an error names the model file.
pub(super) fn parse_settings(
    sets: &[String],
    scenario: &Scenario,
) -> Result<Vec<config::setting::Setting>, ConfigError> {
    sets.iter()
        .map(|s| {
            config::setting::Setting::parse(s, scenario).map_err(|m| ConfigError::new(&scenario.path, m))
        })
        .collect()
}
