//! Simulation: random walks through a model too big to exhaust, under the same timed
//! semantics and fault budget as exhaustive checking. A violation found on a walk is real (it
//! is a behaviour of the model) and is printed as a replayable trace with its explorer link;
//! finding none proves nothing, and the report says so.
//!
//! Every walk is deterministic from the seed: walk `r` of seed `s` draws from its own
//! generator, seeded from `(s, r)`, so a reported violation is found again by the same
//! command. Swarm mode (as in swarm verification) gives each walk its own fault menu: a
//! random subset of the model's faults and a random budget up to the model's. A smaller menu
//! only removes choices, so each swarm walk is a walk of the full model; walks of different
//! menus reach corners that uniform choice among all faults rarely does.
//!
//! Liveness: a walk that comes back to a state it already visited has closed a cycle of the
//! state graph. When the cycle's edges are what `converges` or `ops_complete` forbid (the same
//! queries the exhaustive cycle analysis asks), it is a lasso: the walk up to the cycle's
//! start, then the cycle.

use super::{counterexample, cycle_queries, Counterexample, Job};
use crate::config::{ConfigError, Found, PropertyName, Verdict};
use crate::engine::Step;
use crate::model::{properties, Action, World, WorldConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use stateright::Model;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How a simulation runs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Walks to run (at most; `time_limit` may stop earlier).
    pub runs: u64,
    /// Steps per walk, at most; a walk also ends where no action is enabled.
    pub depth_steps: u32,
    pub seed: u64,
    /// Stop starting new walks after this long.
    pub time_limit: Option<Duration>,
    /// Each walk draws its own fault menu and budget.
    pub swarm: bool,
    pub explorer_addr: String,
    /// (I, N): make only the walks whose number is I modulo N (`check --shard`).
    pub shard: Option<(u64, u64)>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            runs: 1000,
            depth_steps: 200,
            seed: 0,
            time_limit: None,
            swarm: false,
            explorer_addr: "127.0.0.1:3000".into(),
            shard: None,
        }
    }
}

/// One property after simulation: violated (with the walk that shows it) or not found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimProperty {
    pub name: PropertyName,
    pub expected: Verdict,
    /// `violated`, or `unknown`: no walk violated it, which proves nothing.
    pub found: Found,
    /// The walk (counted from 0) that found the violation.
    pub run: Option<u64>,
    pub counterexample: Option<Counterexample>,
}

impl SimProperty {
    /// A declared "holds" that a walk violated: a real contradiction.
    pub fn contradicts(&self) -> bool {
        self.expected == Verdict::Holds && self.found == Found::Violated
    }
    /// A declared violation no walk found: simulation could not confirm it.
    pub fn unconfirmed(&self) -> bool {
        self.expected == Verdict::Violated && self.found != Found::Violated
    }
}

/// A simulation of one job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimResult {
    pub model: String,
    pub file: std::path::PathBuf,
    pub variant: String,
    pub seed: u64,
    pub runs: u64,
    pub depth_steps: u32,
    pub swarm: bool,
    /// Steps taken over all walks.
    pub steps: u64,
    /// The longest walk, in steps.
    pub deepest_steps: u32,
    pub elapsed_ms: u64,
    pub properties: Vec<SimProperty>,
}

/// Exit code of a simulation: 1 if a walk violated a declared "holds", else 3 if a declared
/// violation was not found (simulation could not confirm the verdict), else 0.
pub fn exit_code(results: &[SimResult]) -> u8 {
    let all = || results.iter().flat_map(|r| &r.properties);
    if all().any(SimProperty::contradicts) {
        1
    } else if all().any(SimProperty::unconfirmed) {
        3
    } else {
        0
    }
}

/// The faults a walk may inject: a subset of the model's menu and a budget.
struct Menu {
    budget: u8,
    crash: Vec<bool>,
    crash_coordinator: bool,
    partition: Vec<bool>,
    degrade: Vec<bool>,
    drop: bool,
}

impl Menu {
    fn full(cfg: &WorldConfig) -> Menu {
        let n = cfg.nodes.len();
        Menu {
            budget: cfg.faults.budget,
            crash: vec![true; n],
            crash_coordinator: true,
            partition: vec![true; cfg.zones.len()],
            degrade: vec![true; cfg.faults.degrade.len()],
            drop: true,
        }
    }

    fn swarm(cfg: &WorldConfig, rng: &mut StdRng) -> Menu {
        let mut menu = Menu::full(cfg);
        menu.budget = rng.random_range(0..=cfg.faults.budget);
        for keep in menu.crash.iter_mut().chain(&mut menu.partition).chain(&mut menu.degrade) {
            *keep = rng.random_bool(0.5);
        }
        menu.crash_coordinator = rng.random_bool(0.5);
        menu.drop = rng.random_bool(0.5);
        menu
    }

    /// Whether this menu allows `action` after `used` faults. Recoveries (restart, heal,
    /// restore) and ordinary steps are always allowed.
    fn allows(&self, action: &Action, used: u8) -> bool {
        let fault_ok = used < self.budget;
        match action {
            Action::Crash(n) => fault_ok && self.crash[usize::from(*n)],
            Action::CoordinatorRestart => fault_ok && self.crash_coordinator,
            Action::Partition(z) => fault_ok && self.partition[usize::from(*z)],
            Action::Degrade(i) => fault_ok && self.degrade[usize::from(*i)],
            Action::Lose(_) => fault_ok && self.drop,
            _ => true,
        }
    }
}

fn is_fault(action: &Action) -> bool {
    matches!(
        action,
        Action::Crash(_)
            | Action::CoordinatorRestart
            | Action::Partition(_)
            | Action::Degrade(_)
            | Action::Lose(_)
    )
}

/// Simulate one job: walks until `opts.runs` are done, the time limit passes, or every
/// property has been violated.
pub fn simulate(job: &Job, opts: &SimOptions) -> Result<SimResult, ConfigError> {
    let cfg =
        WorldConfig::new(&job.scenario, &job.policy).map_err(|m| ConfigError::new(&job.scenario.path, m))?;
    let world = World::new(cfg);
    let names: Vec<PropertyName> = world.cfg.properties.clone();
    let mut found: Vec<Option<(u64, Counterexample)>> = vec![None; names.len()];
    let started = Instant::now();
    let (mut runs, mut steps, mut deepest) = (0u64, 0u64, 0u32);
    let (shard_index, shard_count) = opts.shard.unwrap_or((0, 1));
    assert!(shard_index < shard_count);
    for number in (shard_index..opts.runs).step_by(shard_count as usize) {
        if opts.time_limit.is_some_and(|limit| started.elapsed() >= limit)
            || found.iter().all(Option::is_some)
        {
            break;
        }
        let walk = walk(&world, opts, &job.explore_args, number, &names, &found);
        steps += u64::from(walk.steps);
        deepest = deepest.max(walk.steps);
        for (i, cx) in walk.violations {
            if found[i].is_none() {
                found[i] = Some((number, cx));
            }
        }
        runs += 1;
    }
    let properties = names
        .iter()
        .zip(found)
        .map(|(name, f)| SimProperty {
            name: *name,
            expected: job.expect[name],
            found: if f.is_some() { Found::Violated } else { Found::Unknown },
            run: f.as_ref().map(|(r, _)| *r),
            counterexample: f.map(|(_, cx)| cx),
        })
        .collect();
    Ok(SimResult {
        model: job.scenario.name.clone(),
        file: job.scenario.path.clone(),
        variant: job.variant.clone(),
        seed: opts.seed,
        runs,
        depth_steps: opts.depth_steps,
        swarm: opts.swarm,
        steps,
        deepest_steps: deepest,
        elapsed_ms: started.elapsed().as_millis() as u64,
        properties,
    })
}

struct Walk {
    steps: u32,
    /// (index into the property list, counterexample) for each property this walk violated.
    violations: Vec<(usize, Counterexample)>,
}

/// The generator of walk `run`: the seed and the walk number mixed, so walks do not share
/// streams and any one walk can be replayed alone.
fn walk_rng(seed: u64, run: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ run.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn walk(
    world: &World,
    opts: &SimOptions,
    explore_args: &str,
    run: u64,
    names: &[PropertyName],
    already: &[Option<(u64, Counterexample)>],
) -> Walk {
    let mut rng = walk_rng(opts.seed, run);
    let menu = if opts.swarm { Menu::swarm(&world.cfg, &mut rng) } else { Menu::full(&world.cfg) };
    let mut inits = world.init_states();
    let first = inits.swap_remove(rng.random_range(0..inits.len()));
    let mut path: Vec<Step<World>> = vec![Step { action: None, state: first }];
    let mut labels: Vec<u8> = Vec::new();
    // Where each state of the path was first visited, for closing cycles.
    let mut visited: HashMap<u64, Vec<usize>> = HashMap::new();
    visited.entry(crate::engine::fingerprint(&path[0].state)).or_default().push(0);
    let mut violations: Vec<(usize, Counterexample)> = Vec::new();
    let pending =
        |i: usize, v: &[(usize, Counterexample)]| already[i].is_none() && !v.iter().any(|(j, _)| *j == i);
    let mut used_faults = 0u8;
    let mut enabled = Vec::new();
    for _ in 0..opts.depth_steps {
        let state = &path.last().expect("a walk starts with a state").state;
        enabled.clear();
        world.actions(state, &mut enabled);
        let allowed: Vec<usize> =
            (0..enabled.len()).filter(|&i| menu.allows(&enabled[i], used_faults)).collect();
        if allowed.is_empty() {
            break;
        }
        let index = allowed[rng.random_range(0..allowed.len())];
        let action = enabled[index].clone();
        let Some(next) = world.next_state(state, action.clone()) else { break };
        if is_fault(&action) {
            used_faults += 1;
        }
        labels.push(properties::edge_label(&world.cfg, state, &action, &next));
        path.push(Step { action: Some((index, action)), state: next });
        let at = path.len() - 1;
        for (i, name) in names.iter().enumerate() {
            if !name.is_liveness()
                && pending(i, &violations)
                && !properties::holds(*name, &world.cfg, &path[at].state)
            {
                violations.push((i, counterexample(world, &path, explore_args, &opts.explorer_addr)));
            }
        }
        let hash = crate::engine::fingerprint(&path[at].state);
        let seen = visited
            .get(&hash)
            .and_then(|at_steps| at_steps.iter().copied().find(|&i| path[i].state == path[at].state));
        match seen {
            Some(start) => {
                // The walk closed a cycle: path[start..=at], edges labels[start..at].
                let cycle = &labels[start..at];
                for (i, name) in names.iter().enumerate() {
                    let forbidden = || {
                        cycle_queries(*name, world.cfg.clients.len()).iter().any(|q| q.forbids(cycle, &[]))
                    };
                    if name.is_liveness() && pending(i, &violations) && forbidden() {
                        let mut cx = counterexample(world, &path, explore_args, &opts.explorer_addr);
                        cx.loop_from_step = Some(start + 1);
                        violations.push((i, cx));
                    }
                }
            }
            None => visited.entry(hash).or_default().push(at),
        }
        if names.iter().enumerate().all(|(i, _)| !pending(i, &violations)) {
            break;
        }
    }
    Walk { steps: (path.len() - 1) as u32, violations }
}

/// The human report of simulations: per run, the walks made and, per property, a violation
/// found (with its walk's counterexample) or "no violation in N walks (not a proof)".
pub fn human(results: &[SimResult]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut last_model = None;
    for r in results {
        if last_model != Some(&r.file) {
            let _ = writeln!(out, "model {} ({})", r.model, r.file.display());
            last_model = Some(&r.file);
        }
        let _ = writeln!(
            out,
            "  variant {}: simulation, seed {}: {} walks of at most {} steps{} ({} steps, deepest {}), {:.2}s; not exhaustive",
            r.variant,
            r.seed,
            r.runs,
            r.depth_steps,
            if r.swarm { ", swarm fault menus" } else { "" },
            r.steps,
            r.deepest_steps,
            r.elapsed_ms as f64 / 1000.0
        );
        for p in &r.properties {
            let mark = if p.contradicts() {
                "FAIL"
            } else if p.unconfirmed() {
                "??  "
            } else {
                "ok  "
            };
            let found = match p.run {
                Some(walk) => format!("violated (walk {walk})"),
                None => format!("no violation in {} walks", r.runs),
            };
            let expected = match p.expected {
                Verdict::Holds => "holds",
                Verdict::Violated => "violated",
            };
            let _ = writeln!(out, "    {mark} {:<22} {:<30} (expected: {expected})", p.name.as_str(), found);
        }
        for p in &r.properties {
            if let Some(cx) = &p.counterexample {
                super::report::counterexample_lines(&mut out, p.name.as_str(), cx);
            }
        }
    }
    let contradicted = results.iter().flat_map(|r| &r.properties).filter(|p| p.contradicts()).count();
    let unconfirmed = results.iter().flat_map(|r| &r.properties).filter(|p| p.unconfirmed()).count();
    let _ = writeln!(
        out,
        "simulation: {contradicted} declared \"holds\" violated, {unconfirmed} declared violation(s) not found; \"no violation\" is not a proof"
    );
    out
}
