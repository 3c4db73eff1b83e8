//! `explore`: the explorer for one model and policy, behind replicheck's front.

use super::*;

/// `explore`: serve the stateright explorer until interrupted, behind replicheck's front (see
/// `explorer`). The address is checked first: a malformed one is bad input, one in use a
/// runtime failure.
pub(super) fn explore(
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
