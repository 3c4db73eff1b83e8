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
    addr: &str,
) -> Result<ExitCode, Error> {
    let (scenario, mut cfg) = world_config(model, variant.clone(), policy)?;
    if let (Some((from, rollback)), Some(to)) = (rollout, policy) {
        cfg = rollout_config(&scenario, &from, to, rollback)?;
    }
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
