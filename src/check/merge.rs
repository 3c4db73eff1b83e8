//! `replicheck merge`: the JSON reports of a sharded check (`check --shard I/N --format
//! json`, one per shard) combined into the report one unsharded check would have printed.
//!
//! An exhaustive check's shard holds the runs whose index is I modulo N, so the runs go back
//! in order by interleaving the shards. A simulation's shard holds every run with the walks
//! whose number is I modulo N: per run, walks and steps add up, and for each property the
//! violation of the lowest-numbered walk is kept (the one an unsharded simulation finds
//! first). A sweep's shard (`sweep --shard I/N --format json`) holds the points whose index is
//! I modulo N with every counterexample it found: the sweep is planned again from the model
//! file, its base and its knobs, and analysed once over all the points, as one run would have
//! (boundaries across shards included). Every shard must be there exactly once; anything else
//! is an error naming the file.

use super::simulate::{self, SimResult};
use crate::config::ConfigError;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Merge the shards' reports; returns the merged report and its exit code.
pub fn merge(reports: &[(PathBuf, Value)]) -> Result<(Value, u8), ConfigError> {
    let first = reports.first().ok_or_else(|| ConfigError::new(Path::new("merge"), "no reports given"))?;
    let count = shard_of(first)?.1;
    // By index in a map, not a Vec of `count` slots: a damaged report's count may be huge.
    let mut by_index: BTreeMap<usize, &(PathBuf, Value)> = BTreeMap::new();
    for report in reports {
        let (index, n) = shard_of(report)?;
        if n != count {
            return Err(ConfigError::new(
                &report.0,
                format!("shard {index}/{n}, but {} is of {count} shards", first.0.display()),
            ));
        }
        if let Some(other) = by_index.insert(index, report) {
            return Err(ConfigError::new(
                &report.0,
                format!("shard {index}/{n} again (also {})", other.0.display()),
            ));
        }
    }
    if by_index.len() < count {
        let missing = if count <= 64 {
            let list: Vec<String> =
                (0..count).filter(|i| !by_index.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
            list.join(", ")
        } else {
            format!("{} of {count}", count - by_index.len())
        };
        return Err(ConfigError::new(&first.0, format!("shards missing: {missing}")));
    }
    let shards: Vec<&(PathBuf, Value)> = by_index.into_values().collect();
    if shards.iter().all(|(_, v)| v.get("knobs").is_some()) {
        merge_sweeps(&shards)
    } else if shards.iter().all(|(_, v)| v.get("runs").is_some()) {
        merge_checks(&shards)
    } else if shards.iter().all(|(_, v)| v.get("simulations").is_some()) {
        merge_simulations(&shards)
    } else {
        Err(ConfigError::new(&first.0, "the reports mix kinds (exhaustive checks, simulations, sweeps)"))
    }
}

/// (I, N) of a shard's report.
fn shard_of((path, v): &(PathBuf, Value)) -> Result<(usize, usize), ConfigError> {
    let shard = v.get("shard").ok_or_else(|| {
        ConfigError::new(
            path,
            "not a shard's report: no \"shard\" (write it with `check --shard I/N --format json`)",
        )
    })?;
    let field = |k: &str| shard.get(k).and_then(Value::as_u64).map(|x| x as usize);
    match (field("index"), field("count")) {
        (Some(i), Some(n)) if i < n => Ok((i, n)),
        _ => Err(ConfigError::new(path, format!("\"shard\" = {shard}: expected index < count"))),
    }
}

fn merge_checks(shards: &[&(PathBuf, Value)]) -> Result<(Value, u8), ConfigError> {
    let total = shards[0].1["shard"]["runs_total"].as_u64().unwrap_or(0) as usize;
    let runs_of = |v: &Value| v["runs"].as_array().cloned().unwrap_or_default();
    let per_shard: Vec<Vec<Value>> = shards.iter().map(|(_, v)| runs_of(v)).collect();
    let mut runs = Vec::new();
    for position in 0.. {
        let mut any = false;
        for shard_runs in &per_shard {
            if let Some(r) = shard_runs.get(position) {
                runs.push(r.clone());
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let not_started: u64 = shards.iter().map(|(_, v)| v["runs_not_started"].as_u64().unwrap_or(0)).sum();
    if runs.len() + not_started as usize != total {
        return Err(ConfigError::new(
            &shards[0].0,
            format!(
                "the shards hold {} runs and {not_started} not started, but the check has {total}",
                runs.len()
            ),
        ));
    }
    let interrupted = shards.iter().any(|(_, v)| v["interrupted"].as_bool().unwrap_or(false));
    let mut codes = Vec::new();
    for (path, v) in shards {
        codes.push(match v["exit_code"].as_u64() {
            None => 3,
            Some(c @ 0..=4) => c as u8,
            Some(c) => {
                return Err(ConfigError::new(path, format!("\"exit_code\" = {c}: a check exits 0 to 4")));
            }
        });
    }
    let code = worst(codes.into_iter());
    let doc = json!({
        "exit_code": code,
        "interrupted": interrupted,
        "runs_not_started": not_started,
        "runs": runs,
    });
    Ok((doc, code))
}

fn merge_simulations(shards: &[&(PathBuf, Value)]) -> Result<(Value, u8), ConfigError> {
    let read = |(path, v): &(PathBuf, Value)| -> Result<Vec<SimResult>, ConfigError> {
        serde_json::from_value(v["simulations"].clone())
            .map_err(|e| ConfigError::new(path, format!("not a simulation report: {e}")))
    };
    let mut merged = read(shards[0])?;
    for shard in &shards[1..] {
        let (path, sims) = (&shard.0, read(shard)?);
        if sims.len() != merged.len() {
            return Err(ConfigError::new(path, "a different set of simulations than the first shard"));
        }
        for (m, s) in merged.iter_mut().zip(sims) {
            if (&m.file, &m.variant, m.seed) != (&s.file, &s.variant, s.seed) {
                return Err(ConfigError::new(
                    path,
                    format!("simulation {} / {} differs from the first shard's", s.model, s.variant),
                ));
            }
            m.runs += s.runs;
            m.steps += s.steps;
            m.deepest_steps = m.deepest_steps.max(s.deepest_steps);
            m.elapsed_ms = m.elapsed_ms.max(s.elapsed_ms);
            for (p, q) in m.properties.iter_mut().zip(s.properties) {
                // The lowest-numbered violating walk: the one an unsharded simulation finds.
                if q.run.is_some_and(|b| p.run.is_none_or(|a| b < a)) {
                    *p = q;
                }
            }
        }
    }
    let code = simulate::exit_code(&merged);
    Ok((json!({ "exit_code": code, "simulations": merged }), code))
}

/// Sweep shards: the points of all of them, analysed as one sweep.
fn merge_sweeps(shards: &[&(PathBuf, Value)]) -> Result<(Value, u8), ConfigError> {
    use super::sweep::{self, CheckedPoint};
    use crate::config::{PropertyName, Scenario};
    let (first_path, first) = shards[0];
    let same = |key: &str| -> Result<(), ConfigError> {
        match shards.iter().find(|(_, v)| v.get(key) != first.get(key)) {
            Some((path, _)) => Err(ConfigError::new(
                path,
                format!(
                    "\"{key}\" differs from {}'s: the shards are of different sweeps",
                    first_path.display()
                ),
            )),
            None => Ok(()),
        }
    };
    for key in ["file", "base", "knobs", "points"] {
        same(key)?;
    }
    let bad = |m: &str| ConfigError::new(first_path, format!("not a sweep shard's report: {m}"));
    let file = PathBuf::from(first["file"].as_str().ok_or_else(|| bad("no \"file\""))?);
    let scenario = Scenario::load(&file)?;
    let base = first["base"].as_str().ok_or_else(|| bad("no \"base\""))?;
    let (variant, policy) = match base.split_once(' ') {
        Some(("variant", name)) => (Some(name), None),
        Some(("policy", path)) => (None, Some(Path::new(path))),
        _ if base == "[policy]" => (None, None),
        _ => return Err(bad(&format!("unknown base {base:?}"))),
    };
    let (label, base_policy) = super::sweep_cmd::base_policy(&scenario, variant, policy)?;
    let specs: Vec<String> = first["knobs"]
        .as_array()
        .ok_or_else(|| bad("no \"knobs\""))?
        .iter()
        .map(|k| k["spec"].as_str().map(str::to_string).ok_or_else(|| bad("a knob without \"spec\"")))
        .collect::<Result<_, _>>()?;
    let plan = sweep::plan(scenario, label, base_policy, &specs)?;
    if first["points"].as_u64() != Some(plan.point_count() as u64) {
        return Err(ConfigError::new(
            first_path,
            format!(
                "{} points, but {} now plans {}: the model changed since the sweep",
                first["points"],
                file.display(),
                plan.point_count()
            ),
        ));
    }
    let mut checked: Vec<CheckedPoint> = Vec::new();
    let mut counterexamples: BTreeMap<usize, BTreeMap<PropertyName, super::Counterexample>> = BTreeMap::new();
    let mut elapsed_ms = 0;
    for (path, doc) in shards {
        let bad = |m: String| ConfigError::new(path, format!("not a sweep shard's report: {m}"));
        elapsed_ms = elapsed_ms.max(doc["elapsed_ms"].as_u64().unwrap_or(0));
        for c in doc["checked"].as_array().ok_or_else(|| bad("no \"checked\"".into()))? {
            let point = checked_point(c).ok_or_else(|| bad(format!("a checked point: {c}")))?;
            if checked.iter().any(|x| x.point == point.point) {
                return Err(bad(format!("point {} is in two shards", point.point)));
            }
            checked.push(point);
        }
        for cx in doc["counterexamples"].as_array().ok_or_else(|| bad("no \"counterexamples\"".into()))? {
            let point =
                cx["point"].as_u64().ok_or_else(|| bad("a counterexample without \"point\"".into()))?;
            let name = cx["property"]
                .as_str()
                .and_then(PropertyName::parse)
                .ok_or_else(|| bad("a counterexample's property".into()))?;
            let trace = serde_json::from_value(cx["counterexample"].clone())
                .map_err(|e| bad(format!("a counterexample: {e}")))?;
            counterexamples.entry(point as usize).or_default().insert(name, trace);
        }
    }
    checked.sort_by_key(|c| c.point);
    if checked.len() != plan.point_count() {
        return Err(ConfigError::new(
            first_path,
            format!("the shards checked {} of {} points", checked.len(), plan.point_count()),
        ));
    }
    let outcome = sweep::outcome_of(&plan, checked, counterexamples, false, elapsed_ms);
    let code = sweep::exit_code(&outcome);
    let text = super::sweep_render::json(&plan, &outcome, None, code);
    Ok((serde_json::from_str(&text).expect("the sweep report is JSON"), code))
}

/// A checked point as `sweep --format json` writes it.
fn checked_point(c: &Value) -> Option<super::sweep::CheckedPoint> {
    use crate::config::{Found, PropertyName};
    let verdicts = c["verdicts"]
        .as_object()?
        .iter()
        .map(|(name, found)| {
            let found = match found.as_str()? {
                "holds" => Found::Holds,
                "violated" => Found::Violated,
                "incomplete" => Found::Unknown,
                _ => return None,
            };
            Some((PropertyName::parse(name)?, found))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(super::sweep::CheckedPoint {
        point: c["point"].as_u64()? as usize,
        values: c["values"]
            .as_object()?
            .iter()
            .map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect::<Option<_>>()?,
        unique_states: c["unique_states"].as_u64()?,
        complete: c["complete"].as_bool()?,
        elapsed_ms: c["elapsed_ms"].as_u64()?,
        verdicts,
    })
}

/// The merged exit code: a wrong verdict (1) in any shard wins over an unknown one (3).
fn worst(codes: impl Iterator<Item = u8>) -> u8 {
    codes.fold(0, |acc, c| match (acc, c) {
        (1, _) | (_, 1) => 1,
        (3, _) | (_, 3) => 3,
        _ => acc.max(c),
    })
}
