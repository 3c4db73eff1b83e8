//! Running checks: every variant of a model (or a user's policy) through the engine, compared
//! with the expected verdicts, with counterexamples rebuilt as readable, timed steps.

pub mod args;
pub mod confirm;
pub mod diff;
pub mod distributed;
pub mod estimate;
pub mod merge;
mod paths;
pub mod proofs;
pub mod report;
pub mod shard;
pub mod simulate;
pub mod sweep;
pub mod sweep_cmd;
pub mod sweep_explain;
mod sweep_knob;
pub mod sweep_render;
pub mod terminal;
pub mod trace;

pub use crate::config::Found;
use crate::config::{ConfigError, PropertyName, Scenario, SourcedPolicy, Verdict};
use crate::engine::{self, cycles, Cut, Limits};
use crate::model::{properties, reduction, silence, Action, Reduction, World, WorldConfig, WorldState};
use indexmap::IndexMap;
pub use paths::counterexample;
use paths::{fewer_faults, lasso_counterexample, path};
use serde::Serialize;
use stateright::Model;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct TraceStep {
    pub step: usize,
    /// Model time at this step, in milliseconds since the start.
    pub time_ms: u64,
    pub action: String,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Counterexample {
    pub steps: Vec<TraceStep>,
    /// The explorer's link to this trace (`http://HOST:PORT/#/steps/...`), for the explorer
    /// that `explore_command` serves.
    pub explorer_url: String,
    /// How to open it: the command that serves the explorer for this model and policy.
    pub explore_command: String,
    pub final_state: String,
    /// For a liveness violation (a lasso): the steps from this one on repeat forever.
    pub loop_from_step: Option<usize>,
    /// The path itself, for a replay on the store (`store sim --replay`): the initial state's
    /// index among the world's initial states, then each step's action.
    #[serde(skip)]
    pub path: (usize, Vec<Action>),
}

#[derive(Clone, Debug, Serialize)]
pub struct PropertyResult {
    pub name: PropertyName,
    pub expected: Verdict,
    pub found: Found,
    pub counterexample: Option<Counterexample>,
    /// Why a violation has no counterexample: found with arrival slack, whose run is not
    /// step for step one of the world as written, and not found again without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample_missing: Option<String>,
}

impl PropertyResult {
    pub fn as_expected(&self) -> bool {
        matches!(
            (self.expected, self.found),
            (Verdict::Holds, Found::Holds) | (Verdict::Violated, Found::Violated)
        )
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub model: String,
    pub file: PathBuf,
    pub variant: String,
    pub description: String,
    /// The effective policy (defaults included) as key and TOML value; JSON gives an object
    /// of the keys with their values as JSON (`"2s"`, `3`, `true`).
    #[serde(serialize_with = "policy_object")]
    pub policy: Vec<(String, String)>,
    pub properties: Vec<PropertyResult>,
    pub unique_states: u64,
    pub transitions: u64,
    pub max_depth: u32,
    pub complete: bool,
    /// Why exploration stopped early, if it did.
    pub stopped: Option<String>,
    #[serde(skip)]
    pub cut: Option<Cut>,
    pub elapsed_ms: u64,
    pub states_per_second: f64,
    /// The chance that a 64-bit fingerprint collision hid a state from this run (an upper
    /// bound; see [`engine::collision`]): how sure a "holds" is.
    pub fingerprint_collision_probability: f64,
    /// The reduction the run used (`none` or `por`): with `por` the counts are of the reduced
    /// graph, which gives the same verdicts (docs/reductions.md).
    pub reduction: Reduction,
    /// Whether states were identified up to silence regions (`model::silence`): with it the
    /// counts are of the quotient graph, which gives the same verdicts.
    pub silence_regions: bool,
    /// Whether pings were answered at once, their pongs carrying the slack (`model::slack`):
    /// the counts are of that graph, which gives the same verdicts. A run that finds a
    /// violation with it is run again without it, and reports that run.
    pub arrival_slack: bool,
    /// States expanded with an ample subset of their actions (0 without reduction).
    pub ample_states: u64,
    /// Why no ample sets were used although `por` was asked for: a world the rules were not
    /// argued for (`reduction::refusal`), or the distributed engine. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ample_sets_refused: Option<&'static str>,
    /// How a distributed run (`check --workers/--processes`) was spread; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedRun>,
}

/// The shape of a distributed run, as its report gives it.
#[derive(Clone, Debug, Serialize)]
pub struct DistributedRun {
    pub processes: usize,
    /// Workers in all (worker threads per process times processes).
    pub workers: usize,
    /// Where the liveness properties were decided, when the run has any: the labelled graph is
    /// gathered to process 0 (worker 0), which runs the cycle analysis.
    pub liveness: Option<String>,
    /// BFS levels every worker ran before the frontier was shared out.
    pub shared_levels: u32,
    /// Per worker: the states it kept (and expanded) after the shared levels.
    pub states_kept_per_worker: Vec<u64>,
}

/// How a run explores: in this process ([`Local`]), or as one worker of a distributed
/// computation ([`distributed`]). A run calls it once for the model and once per reduced fault
/// budget (see `fewer_faults`), the same calls on every worker.
pub trait Explorer {
    /// Whether this explorer expands ample sets where they apply. The distributed engine does
    /// not: its cycle proviso would need the whole seen set at hand. Silence regions, a
    /// quotient of the fingerprints alone, both engines use alike.
    fn ample_sets(&self) -> bool {
        true
    }

    fn explore(
        &mut self,
        world: &World,
        properties: &[stateright::Property<World>],
        limits: &Limits,
        labeler: Option<engine::EdgeLabeler<World>>,
        // `Por`: each reduction where it applies (`reduction::applies`, `silence::applies`).
        reduction: Reduction,
    ) -> engine::Exploration;

    /// The shape of the run for its report, after its explorations (`None`: one process).
    fn describe(&mut self, _has_liveness: bool) -> Option<DistributedRun> {
        None
    }
}

/// The multi-threaded engine of this process.
pub struct Local;

impl Explorer for Local {
    fn explore(
        &mut self,
        world: &World,
        properties: &[stateright::Property<World>],
        limits: &Limits,
        labeler: Option<engine::EdgeLabeler<World>>,
        reduction: Reduction,
    ) -> engine::Exploration {
        let ample = |s: &WorldState, actions: &[Action], out: &mut Vec<usize>| {
            reduction::ample(world, s, actions, out)
        };
        let ample: engine::Ample<World> = &ample;
        let compact: engine::Compactor<World> = &crate::model::intern::compact;
        let regions = regions(world, reduction);
        let hooks = engine::Hooks {
            labeler,
            canonical: regions.as_ref().map(|r| r as _),
            ample: partial_order(world, reduction).then_some(ample),
            compact: Some(compact),
        };
        engine::explore_with(world, properties, limits, hooks)
    }
}

/// The policy's key = TOML value pairs as one JSON object, in their order.
fn policy_object<S: serde::Serializer>(policy: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(policy.len()))?;
    for (key, text) in policy {
        let value = toml::from_str::<toml::Table>(&format!("v = {text}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or_else(|| serde_json::Value::String(text.clone()));
        map.serialize_entry(key, &value)?;
    }
    map.end()
}

impl RunResult {
    pub fn as_expected(&self) -> bool {
        self.properties.iter().all(|p| p.as_expected())
    }
    /// Whether exploration was stopped by SIGINT/SIGTERM.
    pub fn interrupted(&self) -> bool {
        self.cut == Some(Cut::Interrupted)
    }
    pub fn has_unknown(&self) -> bool {
        self.properties.iter().any(|p| p.found == Found::Unknown)
    }
}

/// How a check runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub threads: usize,
    pub max_states: Option<u64>,
    pub progress: Option<fn(&engine::Progress)>,
    /// The explorer address printed in links.
    pub explorer_addr: String,
    /// Set to stop exploring (the run is then incomplete): see [`engine::Limits::stop`].
    pub stop: Option<&'static std::sync::atomic::AtomicBool>,
    /// The memory bound: see [`engine::Limits::memory_max_bytes`]. Default: 80% of the
    /// machine's memory.
    pub memory_max_bytes: Option<u64>,
    /// Which reduction to use (default: partial-order reduction, sound for every property
    /// the world checks; see `model::reduction`).
    pub reduction: Reduction,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            max_states: None,
            progress: None,
            explorer_addr: "127.0.0.1:3000".into(),
            stop: None,
            memory_max_bytes: engine::memory::default_limit_bytes(),
            reduction: Reduction::default(),
        }
    }
}

/// Which policy a run uses: a declared variant, or a user's `--policy` file.
#[derive(Clone, Debug)]
pub enum PolicyChoice {
    Variants(Option<String>),
    File { path: PathBuf, policy: Box<SourcedPolicy> },
}

/// The `.toml` model files named by `paths` (directories are searched one level, sorted).
pub fn model_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| ConfigError::new(p, format!("cannot read directory: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                // A policy file kept beside the models it is checked against is no model.
                .filter(|f| {
                    let kind = std::fs::read_to_string(f).map(|t| crate::config::file_kind(&t));
                    kind.ok() != Some(crate::config::FileKind::Policy)
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(ConfigError::new(p, "no .toml model files in this directory"));
            }
            out.extend(files);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(ConfigError::new(p, "no such file or directory"));
        }
    }
    Ok(out)
}

/// One run to do: a scenario under one policy, with the verdicts it must give.
#[derive(Clone)]
pub struct Job {
    pub scenario: Scenario,
    pub variant: String,
    pub description: String,
    pub policy: SourcedPolicy,
    pub expect: IndexMap<PropertyName, Verdict>,
    pub explore_args: String,
}

/// Load every model and resolve the jobs before anything runs, so bad input fails fast.
///
/// `--variant NAME` over several models runs each model's variant of that name and skips the
/// models without one; it is an error (naming the variants there are) only when no model has
/// it, or when the one model named does not.
pub fn plan(files: &[PathBuf], choice: &PolicyChoice) -> Result<Vec<Job>, ConfigError> {
    let mut jobs = Vec::new();
    let mut all_variants: Vec<String> = Vec::new();
    for file in files {
        let scenario = Scenario::load(file)?;
        match choice {
            PolicyChoice::Variants(only) => {
                let names: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
                if let Some(name) = only {
                    if files.len() == 1 && scenario.variant(name).is_none() {
                        return Err(ConfigError::new(
                            file,
                            format!("--variant {}", unknown_variant(name, "no such variant", &names)),
                        ));
                    }
                }
                for n in &names {
                    if !all_variants.iter().any(|k| k == n) {
                        all_variants.push(n.to_string());
                    }
                }
                for v in &scenario.variants {
                    if only.as_ref().is_some_and(|o| o != &v.name) {
                        continue;
                    }
                    jobs.push(Job {
                        variant: v.name.clone(),
                        description: v.description.clone(),
                        policy: v.policy.clone(),
                        expect: v.expect.clone(),
                        explore_args: format!("{} --variant {}", file.display(), v.name),
                        scenario: scenario.clone(),
                    });
                }
            }
            PolicyChoice::File { path, policy } => {
                let merged = scenario.base_policy.then(policy);
                WorldConfig::new(&scenario, &merged).map_err(|m| {
                    // `m` already starts with the file and table that set the bad key.
                    let m = m.strip_prefix(&format!("{}: ", path.display())).unwrap_or(&m).to_string();
                    ConfigError::new(path, format!("{m} (checked against {})", file.display()))
                })?;
                jobs.push(Job {
                    variant: format!("policy {}", path.display()),
                    description: "every property must hold".into(),
                    expect: scenario.properties.iter().map(|p| (*p, Verdict::Holds)).collect(),
                    policy: merged,
                    explore_args: format!("{} --policy {}", file.display(), path.display()),
                    scenario: scenario.clone(),
                });
            }
        }
    }
    if let PolicyChoice::Variants(Some(name)) = choice {
        if jobs.is_empty() && files.len() > 1 {
            all_variants.sort();
            let names: Vec<&str> = all_variants.iter().map(String::as_str).collect();
            let what = format!("none of the {} models has this variant", files.len());
            return Err(ConfigError::new(Path::new("--variant"), unknown_variant(name, &what, &names)));
        }
    }
    Ok(jobs)
}

/// One model run as `check MODEL --policy FILE` runs it (with `policy`), or as `check MODEL
/// --variant NAME` does: for `lint --model` and `store run`'s model verdicts.
pub fn run_one(
    model: &Path,
    policy: Option<&Path>,
    variant: &str,
    opts: &RunOptions,
) -> Result<RunResult, ConfigError> {
    run(&job_of(model, policy, variant)?, opts)
}

/// The world `run_one` explores for the same arguments.
pub fn world_of(model: &Path, policy: Option<&Path>, variant: &str) -> Result<World, ConfigError> {
    let job = job_of(model, policy, variant)?;
    let cfg =
        WorldConfig::new(&job.scenario, &job.policy).map_err(|m| ConfigError::new(&job.scenario.path, m))?;
    Ok(World::new(cfg))
}

fn job_of(model: &Path, policy: Option<&Path>, variant: &str) -> Result<Job, ConfigError> {
    let choice = match policy {
        Some(path) => PolicyChoice::File {
            path: path.to_path_buf(),
            policy: Box::new(crate::config::load_policy(path)?),
        },
        None => PolicyChoice::Variants(Some(variant.to_string())),
    };
    let jobs = plan(&[model.to_path_buf()], &choice)?;
    jobs.into_iter().next().ok_or_else(|| ConfigError::new(model, format!("no variant {variant:?} to check")))
}

/// `"NAME": WHAT (variants: ...)`, with the nearest name if one is close.
fn unknown_variant(name: &str, what: &str, names: &[&str]) -> String {
    format!(
        "\"{name}\": {what} (variants: {}){}",
        names.join(", "),
        crate::config::nearest(name, names.iter().copied())
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default()
    )
}

/// Explore one job and compare with its expectations.
pub fn run(job: &Job, opts: &RunOptions) -> Result<RunResult, ConfigError> {
    run_with(job, opts, &mut Local)
}

/// [`run`] with the explorations done by `explorer`. A worker of a distributed run that gets
/// no graph (all but worker 0) leaves the liveness properties unknown; its result is not
/// reported.
pub fn run_with(job: &Job, opts: &RunOptions, explorer: &mut dyn Explorer) -> Result<RunResult, ConfigError> {
    let slack = arrival_slack(job, opts, explorer);
    let result = run_in(job, opts, explorer, slack)?;
    if !(result.arrival_slack && result.properties.iter().any(|p| p.found == Found::Violated)) {
        return Ok(result);
    }
    // A violation's counterexample must be a behaviour of the world as written: found again
    // without early answers (the run with them builds none).
    let concrete = run_in(job, opts, explorer, false)?;
    if concrete.complete {
        if result.complete {
            let same = concrete.properties.iter().zip(&result.properties).all(|(c, r)| c.found == r.found);
            assert!(same, "arrival slack keeps every verdict (model::slack)");
        }
        return Ok(concrete);
    }
    // Cut short without slack (a limit, an interrupt). The report is the complete run's, or
    // with both cut short the one without slack's; a violation found by either stands, with
    // the counterexample of the run without slack where it found one.
    let (mut merged, with_slack) =
        if result.complete { (result, None) } else { (concrete.clone(), Some(result)) };
    let stopped = concrete.stopped.clone().unwrap_or_else(|| "early".to_string());
    for (i, (m, c)) in merged.properties.iter_mut().zip(concrete.properties).enumerate() {
        let slack_found = with_slack.as_ref().map(|r| r.properties[i].found);
        if m.found == Found::Unknown && slack_found == Some(Found::Violated) {
            m.found = Found::Violated;
        }
        m.counterexample = c.counterexample;
        if m.found == Found::Violated && m.counterexample.is_none() {
            m.counterexample_missing = Some(format!(
                "found with arrival slack; the run without it, which gives the counterexample, stopped: {stopped}"
            ));
        }
    }
    Ok(merged)
}

/// Whether a run answers pings early (`model::slack`): with `por`, in this process, and where
/// no violation is expected (a run that finds one explores again without it for a concrete
/// counterexample, so it is used where it is likely to pay). `slack::applies` says where the
/// world allows it.
fn arrival_slack(job: &Job, opts: &RunOptions, explorer: &dyn Explorer) -> bool {
    opts.reduction == Reduction::Por
        && explorer.ample_sets()
        && job.expect.values().all(|v| *v != crate::config::Verdict::Violated)
}

fn run_in(
    job: &Job,
    opts: &RunOptions,
    explorer: &mut dyn Explorer,
    slack: bool,
) -> Result<RunResult, ConfigError> {
    let cfg =
        WorldConfig::new(&job.scenario, &job.policy).map_err(|m| ConfigError::new(&job.scenario.path, m))?;
    let world = if slack { World::with_arrival_slack(cfg) } else { World::new(cfg) };
    let safety = world.properties();
    let liveness: Vec<PropertyName> =
        world.cfg.properties.iter().copied().filter(|p| p.is_liveness()).collect();
    let limits = Limits {
        max_states: opts.max_states.or(job.scenario.max_states),
        threads: opts.threads,
        progress: opts.progress,
        record_edges: !liveness.is_empty(),
        stop_when_decided: liveness.is_empty(),
        stop: opts.stop,
        memory_max_bytes: opts.memory_max_bytes,
    };
    let labeler =
        |a: &WorldState, act: &Action, b: &WorldState| properties::edge_label(&world.cfg, a, act, b);
    let labeler: engine::EdgeLabeler<World> = &labeler;
    // What the explorer reduces: the partial-order reduction where it applies (and the
    // explorer has it), silence regions where they do.
    let reduction = opts.reduction;
    let exploration =
        explorer.explore(&world, &safety, &limits, (!liveness.is_empty()).then_some(labeler), reduction);
    // Why `por` got no ample sets, if it did not: the report's reduction follows from it.
    let ample_sets_refused = match reduction {
        Reduction::None => None,
        Reduction::Por => {
            reduction::refusal(&world.cfg).or((!explorer.ample_sets()).then_some("the distributed engine"))
        }
    };
    let mut results = Vec::new();
    let mut safety_index = 0;
    for name in &world.cfg.properties {
        let (found, counterexample) = if name.is_liveness() {
            // A cycle among the explored edges is real even if exploration was cut short.
            let queries = cycle_queries(*name, world.cfg.clients.len());
            let found =
                exploration.graph.as_ref().map(|graph| queries.iter().find_map(|q| cycles::find(graph, *q)));
            match found {
                // A run with arrival slack that finds a violation is run again without it
                // (`run_with`): its paths are not the world's as written.
                Some(Some(lasso)) => {
                    let cx = (!world.arrival_slack).then(|| {
                        lasso_counterexample(&world, &exploration, &lasso, labeler, reduction, job, opts)
                    });
                    (Found::Violated, cx)
                }
                Some(None) if exploration.complete() => (Found::Holds, None),
                _ => (Found::Unknown, None),
            }
        } else {
            let discovery = exploration.discoveries[safety_index];
            safety_index += 1;
            let found = match discovery {
                Some(_) => Found::Violated,
                None if exploration.complete() => Found::Holds,
                None => Found::Unknown,
            };
            let cx = discovery.filter(|_| !world.arrival_slack).map(|index| {
                let shortest = path(&world, &exploration, index, reduction);
                let path =
                    fewer_faults(&world, *name, &shortest, &limits, explorer, reduction).unwrap_or(shortest);
                counterexample(&world, &path, &job.explore_args, &opts.explorer_addr)
            });
            (found, cx)
        };
        results.push(PropertyResult {
            name: *name,
            expected: job.expect[name],
            found,
            counterexample,
            counterexample_missing: None,
        });
    }
    Ok(RunResult {
        model: job.scenario.name.clone(),
        file: job.scenario.path.clone(),
        variant: job.variant.clone(),
        description: job.description.clone(),
        policy: job.policy.effective().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        properties: results,
        unique_states: exploration.unique_states,
        transitions: exploration.transitions,
        max_depth: exploration.max_depth,
        complete: exploration.complete(),
        stopped: exploration.cut.as_ref().map(|c| match c {
            Cut::AllDecided => {
                "every property was violated; the rest of the state space could not change a verdict"
                    .to_string()
            }
            Cut::StateLimit(n) => format!("state limit of {n} reached"),
            Cut::Interrupted => "interrupted (SIGINT or SIGTERM)".to_string(),
            Cut::MemoryLimit { limit_bytes, resident_bytes, frontier } => format!(
                "{} ({} resident, {frontier} states in the frontier; raise --memory-max or shrink the model: `replicheck check {} --estimate` measures what drives its size)",
                memory_bound_reached(*limit_bytes),
                engine::memory::describe(*resident_bytes),
                job.explore_args
            ),
        }),
        cut: exploration.cut.clone(),
        elapsed_ms: exploration.elapsed.as_millis() as u64,
        states_per_second: exploration.states_per_second(),
        fingerprint_collision_probability: engine::collision::collision_probability(
            exploration.unique_states,
            exploration.transitions,
            world.init_states().first().map_or(0, WorldState::parts_hashed),
        ),
        reduction: if reduction == Reduction::Por && ample_sets_refused.is_none() {
            Reduction::Por
        } else {
            Reduction::None
        },
        ample_sets_refused,
        silence_regions: silence_regions(&world, reduction),
        arrival_slack: world.arrival_slack,
        ample_states: exploration.ample_states,
        distributed: explorer.describe(!liveness.is_empty()),
    })
}

/// Whether a run of `world` with `reduction` expands ample sets (the partial-order reduction).
fn partial_order(world: &World, reduction: Reduction) -> bool {
    reduction == Reduction::Por && reduction::applies(&world.cfg)
}

/// Whether a run of `world` with `reduction` identifies states up to silence regions.
pub fn silence_regions(world: &World, reduction: Reduction) -> bool {
    reduction == Reduction::Por && silence::applies(&world.cfg)
}

/// The quotient a run of `world` with `reduction` fingerprints states by, if any: both
/// engines' explorations and the paths and lassos replayed from them take this one.
pub(super) fn regions(
    world: &World,
    reduction: Reduction,
) -> Option<impl Fn(&WorldState) -> Option<WorldState> + Sync + '_> {
    silence_regions(world, reduction).then_some(|s: &WorldState| silence::canonical(&world.cfg, s))
}

/// A run cut by its memory bound, in the words that stay the same from run to run (a
/// certificate records only these: what was resident when, and so the counts, vary).
pub fn memory_bound_reached(limit_bytes: u64) -> String {
    format!("memory bound of {} reached", engine::memory::describe(limit_bytes))
}

/// Exit code for a set of results: 1 if a verdict differs from what was required, else 3 if a
/// required "holds" could not be established because exploration was cut short, else 0.
pub fn exit_code(results: &[RunResult]) -> u8 {
    let wrong =
        results.iter().flat_map(|r| &r.properties).any(|p| p.found != Found::Unknown && !p.as_expected());
    if wrong {
        1
    } else if results.iter().any(|r| r.has_unknown()) {
        3
    } else {
        0
    }
}

pub fn format_duration(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// A model file, and its scenario or why it does not load.
pub type LoadedModel = (PathBuf, Result<Scenario, ConfigError>);

/// The model files of a directory, for `replicheck models`.
pub fn describe_models(dir: &Path) -> Result<Vec<LoadedModel>, ConfigError> {
    let files = model_files(&[dir.to_path_buf()])?;
    // Each file on its own: one that does not load is reported beside the others.
    Ok(files.into_iter().map(|f| (f.clone(), Scenario::load(&f))).collect())
}

/// The cycles a liveness property forbids, over the model's edge labels: any one of them is a
/// violation.
pub fn cycle_queries(name: PropertyName, client_count: usize) -> Vec<cycles::CycleQuery> {
    use properties::{EDGE_HOT_ON_SLOW, EDGE_PENDING_CLIENT0, EDGE_TICK, EDGE_TOPOLOGY, EDGE_UNREPLACED};
    match name {
        PropertyName::Converges => {
            vec![cycles::CycleQuery {
                every_edge: 0,
                some_edge: EDGE_TICK | EDGE_TOPOLOGY,
                ..Default::default()
            }]
        }
        // One client's operation outstanding at every step: one query per client.
        PropertyName::OpsComplete => (0..client_count)
            .map(|c| cycles::CycleQuery {
                every_edge: EDGE_PENDING_CLIENT0 << c,
                some_edge: EDGE_TICK,
                ..Default::default()
            })
            .collect(),
        PropertyName::DeadReplaced => {
            vec![cycles::CycleQuery {
                every_edge: EDGE_UNREPLACED,
                some_edge: EDGE_TICK,
                ..Default::default()
            }]
        }
        PropertyName::HotShardLeavesSlowNode => {
            vec![cycles::CycleQuery {
                every_edge: EDGE_HOT_ON_SLOW,
                some_edge: EDGE_TICK,
                ..Default::default()
            }]
        }
        other => unreachable!("{other} is a safety property"),
    }
}
