//! `replicheck sweep`: one or two policy knobs varied over a range, the model checked at the
//! points of that range exactly as `check --policy` would check it, and per property the
//! verdict at every point, the safe region and the boundary between safe and unsafe values.
//!
//! The search, along one knob: the two ends and a few evenly spaced samples first, then
//! bisection of every interval whose ends disagree (holds at one end, violated at the other)
//! until its ends are neighbouring values. Assuming the verdict is monotone in the knob, that
//! finds the boundary in a logarithmic number of checks; the samples are there to catch a
//! verdict that is not, and every change of verdict among the checked points is refined and
//! reported, so no boundary is claimed that a checked point contradicts. A value that was not
//! checked is *inferred* only when the checked values on both sides of it agree; reports mark
//! inferred cells as such. Two knobs: the same search along the first knob for every value of
//! the second. `exhaustive` (and `--shard`) check every point instead.

use super::shard::Shard;
use super::{Counterexample, Job, RunOptions, RunResult};
use crate::config::setting::{self, policy_patch as patch, FaultSlot};
use crate::config::{ConfigError, Found, LatencyTicks, PropertyName, Scenario, SourcedPolicy, Verdict};
use crate::model::WorldConfig;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub use super::sweep_knob::{parse_knob, FaultKnob, Knob, KnobValue};

/// At most this many knobs: a line or a grid.
pub const KNOBS_MAX: usize = 2;
/// At most this many values per knob, and points in a sweep.
pub const KNOB_VALUES_MAX: usize = 1000;
pub const POINTS_MAX: usize = 10_000;

/// How the sweep searches.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Evenly spaced values checked along a knob besides its two ends, before bisection.
    pub samples: usize,
    /// Check every point (no bisection, nothing inferred).
    pub exhaustive: bool,
    pub shard: Option<Shard>,
}

/// A planned sweep: the scenario, the policy the knobs patch, and the knobs.
pub struct Plan {
    pub scenario: Scenario,
    /// What the knobs are varied over: `variant NAME`, `policy FILE` or `[policy]`.
    pub base_label: String,
    pub base: SourcedPolicy,
    pub knobs: Vec<Knob>,
    /// Every point's policy, by point index; all resolved once before anything runs.
    policies: Vec<SourcedPolicy>,
}

impl Plan {
    /// The model at point `p`: the scenario with the fault knobs' windows.
    pub fn point_scenario(&self, p: usize) -> Scenario {
        let mut scenario = self.scenario.clone();
        for (window, slot) in self.point_windows(p) {
            setting::set_window(&mut scenario, slot, window);
        }
        scenario
    }

    /// The windows the fault knobs give at point `p`, with their faults.
    fn point_windows(&self, p: usize) -> Vec<(LatencyTicks, FaultSlot)> {
        let coords = self.coords(p);
        self.knobs
            .iter()
            .zip(&coords)
            .filter_map(|(k, &c)| k.fault.map(|f| (f.window(&k.values[c], self.scenario.tick_ms), f.slot)))
            .collect()
    }

    /// `--set faults.KIND[WHICH].duration=LO..HI` for each fault knob at point `p`.
    fn point_window_args(&self, p: usize) -> Vec<String> {
        let coords = self.coords(p);
        self.knobs
            .iter()
            .zip(&coords)
            .filter_map(|(k, &c)| {
                k.fault.map(|f| {
                    let window = f.window(&k.values[c], self.scenario.tick_ms);
                    format!("{}={}", k.key, setting::window_text(window, self.scenario.tick_ms))
                })
            })
            .collect()
    }
}

impl Plan {
    pub fn point_count(&self) -> usize {
        self.policies.len()
    }

    /// The knob value indices of point `p`: the first knob varies fastest.
    pub fn coords(&self, p: usize) -> Vec<usize> {
        let mut rest = p;
        self.knobs
            .iter()
            .map(|k| {
                let c = rest % k.values.len();
                rest /= k.values.len();
                c
            })
            .collect()
    }

    pub fn point_index(&self, coords: &[usize]) -> usize {
        let mut p = 0;
        for (k, c) in self.knobs.iter().zip(coords).rev() {
            p = p * k.values.len() + c;
        }
        p
    }

    /// `key=value` for each knob at point `p`.
    pub fn point_label(&self, p: usize) -> String {
        let coords = self.coords(p);
        self.knobs
            .iter()
            .zip(&coords)
            .map(|(k, &c)| format!("{}={}", k.key, k.values[c].label))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The policy keys point `p` sets beyond the scenario's `[policy]`, as a `--policy` file:
    /// the base's own overrides (a variant's, a file's) and the knobs.
    pub fn point_policy_toml(&self, p: usize) -> String {
        policy_toml(&self.scenario, &self.policies[p])
    }

    /// Point `p`'s resolved policy: the base with the knobs set.
    pub fn point_policy(&self, p: usize) -> &SourcedPolicy {
        &self.policies[p]
    }

    /// Point `p`'s check; its explore command opens the base as the sweep named it and sets
    /// each knob with `--set`.
    pub(crate) fn job(&self, p: usize) -> Job {
        let base = match (self.base_label.strip_prefix("variant "), self.base_label.strip_prefix("policy ")) {
            (Some(name), _) => format!("--variant {}", shell_word(name)),
            (_, Some(path)) => format!("--policy {}", shell_word(path)),
            // The model's [policy]: an empty policy file (without --policy or --variant,
            // `explore` opens the first variant).
            _ => "--policy /dev/null".to_string(),
        };
        let coords = self.coords(p);
        let mut sets: Vec<String> = self
            .knobs
            .iter()
            .zip(&coords)
            .filter(|(k, _)| k.fault.is_none())
            .map(|(k, &c)| format!("{}={}", k.key, k.values[c].label))
            .collect();
        sets.extend(self.point_window_args(p));
        let scenario = self.point_scenario(p);
        let explore_args = explore_args(&scenario, &base, &sets);
        policy_job(
            &scenario,
            format!("{} {}", self.base_label, self.point_label(p)),
            &self.policies[p],
            explore_args,
        )
    }
}

/// The keys `policy` sets beyond the scenario's `[policy]`, as a `--policy` file.
pub fn policy_toml(scenario: &Scenario, policy: &SourcedPolicy) -> String {
    let base: BTreeMap<&str, String> = scenario.base_policy.patch.describe().into_iter().collect();
    let mut out = String::new();
    for (key, value) in policy.patch.describe() {
        if base.get(key) != Some(&value) {
            out.push_str(&format!("{key} = {value}\n"));
        }
    }
    out
}

/// A check of `policy` (a resolved policy) as `check --policy` would run it: every property
/// expected to hold.
pub(crate) fn policy_job(
    scenario: &Scenario,
    variant: String,
    policy: &SourcedPolicy,
    explore_args: String,
) -> Job {
    Job {
        scenario: scenario.clone(),
        variant,
        description: "sweep point".into(),
        policy: policy.clone(),
        expect: scenario.properties.iter().map(|n| (*n, Verdict::Holds)).collect(),
        explore_args,
    }
}

/// `explore`'s arguments for `policy`: the model's [policy] with `--set` for each key that
/// differs from it.
pub(crate) fn explore_args_of(scenario: &Scenario, policy: &SourcedPolicy) -> String {
    let sets: Vec<String> = policy_toml(scenario, policy)
        .lines()
        .filter_map(|line| line.split_once(" = "))
        .map(|(key, value)| format!("{key}={}", value.trim_matches('"')))
        .collect();
    explore_args(scenario, "--policy /dev/null", &sets)
}

fn explore_args(scenario: &Scenario, base: &str, sets: &[String]) -> String {
    let mut args = format!("{} {base}", shell_word(&scenario.path.display().to_string()));
    for set in sets {
        args.push_str(&format!(" --set {}", shell_word(set)));
    }
    args
}

/// `word` as one shell word: as is when it has nothing a shell treats specially.
fn shell_word(word: &str) -> String {
    if word.chars().all(|c| c.is_ascii_alphanumeric() || "_-.=/:,+@%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Resolve every point before anything runs, so a bad value fails fast, naming the key and value.
pub fn plan(
    scenario: Scenario,
    base_label: String,
    base: SourcedPolicy,
    specs: &[String],
) -> Result<Plan, ConfigError> {
    let path = scenario.path.clone();
    let input = |m: String| ConfigError::new(&path, m);
    if specs.is_empty() {
        return Err(input("sweep: give at least one --vary KEY=RANGE".into()));
    }
    if specs.len() > KNOBS_MAX {
        return Err(input(format!(
            "sweep: at most {KNOBS_MAX} --vary knobs (a line or a grid), {} given",
            specs.len()
        )));
    }
    let mut knobs: Vec<Knob> = Vec::new();
    for spec in specs {
        let knob = parse_knob(spec, &scenario).map_err(input)?;
        if knobs.iter().any(|k| k.key == knob.key) {
            return Err(input(format!("--vary {}: the key is varied twice", knob.key)));
        }
        knobs.push(knob);
    }
    let count: usize = knobs.iter().map(|k| k.values.len()).product();
    if count > POINTS_MAX {
        return Err(input(format!("sweep: {count} points, more than the limit of {POINTS_MAX}")));
    }
    let mut plan = Plan { scenario, base_label, base, knobs, policies: Vec::with_capacity(count) };
    for p in 0..count {
        let coords = plan.coords(p);
        let mut sourced = plan.base.clone();
        for (k, &c) in plan.knobs.iter().zip(&coords).filter(|(k, _)| k.fault.is_none()) {
            let v = &k.values[c];
            let over = patch(&k.key, &v.toml).expect("each value was parsed on its own");
            sourced = sourced.then(&SourcedPolicy::new(over, &format!("--vary {}={}", k.key, v.label)));
        }
        WorldConfig::new(&plan.point_scenario(p), &sourced).map_err(&input)?;
        plan.policies.push(sourced);
    }
    Ok(plan)
}

/// A value of a walk's knob left out: with the other keys as they are, the policy breaks a
/// rule between keys (as `suspect_after` <= `dead_after`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedValue {
    pub value: String,
    /// The rule broken, without the origin of the key: the point was generated, not written.
    pub reason: String,
}

/// [`plan`] for one knob walked between two valid policies (`sweep --from/--to`): a value whose
/// point is not a valid policy is dropped from the knob and returned, instead of failing the
/// plan, so one generated point cannot end the walk.
pub fn plan_skipping_invalid(
    scenario: Scenario,
    base_label: String,
    base: SourcedPolicy,
    spec: &str,
) -> Result<(Plan, Vec<SkippedValue>), ConfigError> {
    let path = scenario.path.clone();
    let input = |m: String| ConfigError::new(&path, m);
    let mut knob = parse_knob(spec, &scenario).map_err(input)?;
    assert!(knob.fault.is_none(), "a walk between two policies varies policy keys");
    let mut policies = Vec::with_capacity(knob.values.len());
    let mut skipped = Vec::new();
    let mut kept = Vec::with_capacity(knob.values.len());
    for v in knob.values {
        let over =
            patch(&knob.key, &v.toml).map_err(|m| input(format!("--vary {}={}: {m}", knob.key, v.label)))?;
        let sourced = base.then(&SourcedPolicy::new(over, &format!("--vary {}={}", knob.key, v.label)));
        match WorldConfig::new(&scenario, &sourced) {
            Ok(_) => {
                policies.push(sourced);
                kept.push(v);
            }
            Err(m) => {
                let reason = m.find("key `").map_or(m.as_str(), |at| &m[at..]).to_string();
                skipped.push(SkippedValue { value: v.label, reason });
            }
        }
    }
    knob.values = kept;
    Ok((Plan { scenario, base_label, base, knobs: vec![knob], policies }, skipped))
}

/// One property's verdict at one point of the sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    Holds,
    Violated,
    /// Checked, but exploration stopped at a limit before a verdict.
    Incomplete,
    /// Not checked: the checked values on both sides along the searched knob agree.
    InferredHolds,
    InferredViolated,
    /// Not checked, and nothing to infer from (or another shard's point).
    Unchecked,
}

impl Cell {
    /// One letter for grids: H, V checked; h, v inferred; ? incomplete; . not checked.
    pub fn letter(self) -> &'static str {
        match self {
            Cell::Holds => "H",
            Cell::Violated => "V",
            Cell::Incomplete => "?",
            Cell::InferredHolds => "h",
            Cell::InferredViolated => "v",
            Cell::Unchecked => ".",
        }
    }

    /// The cell's name in JSON reports.
    pub fn name(self) -> &'static str {
        match self {
            Cell::Holds => "holds",
            Cell::Violated => "violated",
            Cell::Incomplete => "incomplete",
            Cell::InferredHolds => "inferred_holds",
            Cell::InferredViolated => "inferred_violated",
            Cell::Unchecked => "unchecked",
        }
    }

    pub fn verdict(self) -> Option<Verdict> {
        match self {
            Cell::Holds | Cell::InferredHolds => Some(Verdict::Holds),
            Cell::Violated | Cell::InferredViolated => Some(Verdict::Violated),
            Cell::Incomplete | Cell::Unchecked => None,
        }
    }
    pub fn checked(self) -> bool {
        matches!(self, Cell::Holds | Cell::Violated | Cell::Incomplete)
    }
    pub fn from_found(f: Found) -> Cell {
        match f {
            Found::Holds => Cell::Holds,
            Found::Violated => Cell::Violated,
            Found::Unknown => Cell::Incomplete,
        }
    }
}

/// A change of verdict between two values along one knob, the other knob (if any) fixed.
#[derive(Clone, Debug, Serialize)]
pub struct Boundary {
    /// The knob along which the verdict changes.
    pub knob: String,
    /// The other knob's value on this line, if there are two.
    pub fixed: Option<(String, String)>,
    /// The safe side: the value (and point index) nearest the change where the property holds.
    pub holds_at: String,
    pub holds_point: usize,
    /// The unsafe side: the first value past the change where it is violated.
    pub violated_at: String,
    pub violated_point: usize,
    /// The two values are neighbours in the range: the boundary is exact. Otherwise values
    /// between them are unchecked or incomplete.
    pub adjacent: bool,
    /// An end of it is inferred, not checked (a grid's column).
    pub inferred: bool,
}

/// Everything found about one property over the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct PropertySweep {
    pub name: PropertyName,
    /// By point index.
    pub cells: Vec<Cell>,
    pub boundaries: Vec<Boundary>,
    /// No line of the sweep changes verdict more than once among its checked points.
    pub monotone: bool,
    /// Point indices where the property holds (checked or inferred).
    pub safe_points: Vec<usize>,
}

/// What one checked point found, for the report (its counterexamples are kept only where a
/// boundary needs them).
#[derive(Clone, Debug, Serialize)]
pub struct CheckedPoint {
    pub point: usize,
    pub values: BTreeMap<String, String>,
    pub unique_states: u64,
    pub complete: bool,
    pub elapsed_ms: u64,
    pub verdicts: Vec<(PropertyName, Found)>,
}

/// The result of a sweep.
pub struct Outcome {
    pub checked: Vec<CheckedPoint>,
    pub properties: Vec<PropertySweep>,
    /// The counterexamples of every point at the unsafe side of a boundary (of a shard's
    /// run: of every point with a violation, since the boundaries are only known once the
    /// shards are merged), by point and property.
    pub counterexamples: BTreeMap<usize, BTreeMap<PropertyName, Counterexample>>,
    pub elapsed_ms: u64,
}

impl Outcome {
    pub fn counterexample(&self, point: usize, property: PropertyName) -> Option<&Counterexample> {
        self.counterexamples.get(&point)?.get(&property)
    }
}

/// The outcome of a sweep from its points' verdicts (every point checked at most once, as
/// the shards of a sharded sweep give them), analysed as one run would have been: without
/// inference when some point was not checked by a sample-and-bisect search.
pub fn outcome_of(
    plan: &Plan,
    checked: Vec<CheckedPoint>,
    mut counterexamples: BTreeMap<usize, BTreeMap<PropertyName, Counterexample>>,
    infer: bool,
    elapsed_ms: u64,
) -> Outcome {
    let props = &plan.scenario.properties;
    let shape = Shape::of(plan);
    let verdicts: BTreeMap<usize, Vec<Found>> = checked
        .iter()
        .map(|c| {
            let found = props
                .iter()
                .map(|n| c.verdicts.iter().find(|(x, _)| x == n).map_or(Found::Unknown, |(_, f)| *f))
                .collect();
            (c.point, found)
        })
        .collect();
    let properties: Vec<PropertySweep> =
        props.iter().enumerate().map(|(i, &name)| analyse(plan, &shape, name, i, &verdicts, infer)).collect();
    let wanted: BTreeSet<usize> =
        properties.iter().flat_map(|p| p.boundaries.iter().map(|b| b.violated_point)).collect();
    counterexamples.retain(|p, _| wanted.contains(p));
    Outcome { checked, properties, counterexamples, elapsed_ms }
}

/// Run the sweep: `on_point` is told about each point as its check finishes.
pub fn run(
    plan: &Plan,
    search: &SearchOptions,
    opts: &RunOptions,
    on_point: &mut dyn FnMut(&Plan, &RunResult, usize, usize),
) -> Result<Outcome, ConfigError> {
    let start = std::time::Instant::now();
    let props = plan.scenario.properties.clone();
    let mut runs: BTreeMap<usize, RunResult> = BTreeMap::new();
    let shape = Shape::of(plan);
    let verdicts = search_points(&shape, props.len(), search, &mut |p| {
        let r = super::run(&plan.job(p), opts)?;
        on_point(plan, &r, p, runs.len() + 1);
        let found = props
            .iter()
            .map(|n| {
                r.properties.iter().find(|x| x.name == *n).expect("every point checks every property").found
            })
            .collect();
        runs.insert(p, r);
        Ok(found)
    })?;
    debug_assert_eq!(verdicts.len(), runs.len());
    let checked = runs
        .iter()
        .map(|(&p, r)| CheckedPoint {
            point: p,
            values: plan
                .knobs
                .iter()
                .zip(plan.coords(p))
                .map(|(k, c)| (k.key.clone(), k.values[c].label.clone()))
                .collect(),
            unique_states: r.unique_states,
            complete: r.complete,
            elapsed_ms: r.elapsed_ms,
            verdicts: r.properties.iter().map(|x| (x.name, x.found)).collect(),
        })
        .collect();
    let counterexamples: BTreeMap<usize, BTreeMap<PropertyName, Counterexample>> = runs
        .into_iter()
        .map(|(p, r)| {
            let found = r.properties.into_iter().filter_map(|x| Some((x.name, x.counterexample?))).collect();
            (p, found)
        })
        .filter(|(_, found): &(usize, BTreeMap<_, _>)| !found.is_empty())
        .collect();
    // A shard cannot know the merged boundaries: it keeps every counterexample it found.
    let kept = search.shard.is_some().then(|| counterexamples.clone());
    let elapsed_ms = start.elapsed().as_millis() as u64;
    let mut outcome = outcome_of(plan, checked, counterexamples, search.shard.is_none(), elapsed_ms);
    if let Some(kept) = kept {
        outcome.counterexamples = kept;
    }
    Ok(outcome)
}

/// The shape of a sweep's points: how many values each knob has (the first varies fastest).
#[derive(Clone, Debug)]
pub struct Shape {
    pub sizes: Vec<usize>,
}

impl Shape {
    pub(crate) fn of(plan: &Plan) -> Shape {
        Shape { sizes: plan.knobs.iter().map(|k| k.values.len()).collect() }
    }
    fn count(&self) -> usize {
        self.sizes.iter().product()
    }
    fn index(&self, coords: &[usize]) -> usize {
        let mut p = 0;
        for (size, c) in self.sizes.iter().zip(coords).rev() {
            p = p * size + c;
        }
        p
    }
    /// The lines the search runs along: the first knob, for each value of the second.
    fn search_lines(&self) -> Vec<Vec<usize>> {
        let first = self.sizes[0];
        (0..self.count() / first).map(|r| (0..first).map(|c| r * first + c).collect()).collect()
    }
    /// Every line along every knob, for boundaries: (knob, point indices, the other knob's
    /// value index).
    fn all_lines(&self) -> Vec<(usize, Vec<usize>, Option<usize>)> {
        if self.sizes.len() == 1 {
            return vec![(0, (0..self.count()).collect(), None)];
        }
        let (a, b) = (self.sizes[0], self.sizes[1]);
        let mut out = Vec::new();
        for j in 0..b {
            out.push((0, (0..a).map(|i| self.index(&[i, j])).collect(), Some(j)));
        }
        for i in 0..a {
            out.push((1, (0..b).map(|j| self.index(&[i, j])).collect(), Some(i)));
        }
        out
    }
}

/// The points to check and their verdicts (one per property, in order), found through
/// `verdicts`: samples and bisection along each search line, or every point (of the shard).
pub fn search_points(
    shape: &Shape,
    property_count: usize,
    search: &SearchOptions,
    verdicts: &mut dyn FnMut(usize) -> Result<Vec<Found>, ConfigError>,
) -> Result<BTreeMap<usize, Vec<Found>>, ConfigError> {
    let mut found: BTreeMap<usize, Vec<Found>> = BTreeMap::new();
    let mut check = |p: usize, found: &mut BTreeMap<usize, Vec<Found>>| -> Result<(), ConfigError> {
        if let std::collections::btree_map::Entry::Vacant(slot) = found.entry(p) {
            slot.insert(verdicts(p)?);
        }
        Ok(())
    };
    if search.exhaustive || search.shard.is_some() {
        let shard = search.shard.unwrap_or(Shard { index: 0, count: 1 });
        for p in (shard.index..shape.count()).step_by(shard.count) {
            check(p, &mut found)?;
        }
        return Ok(found);
    }
    for line in shape.search_lines() {
        for pos in sample_positions(line.len(), search.samples) {
            check(line[pos], &mut found)?;
        }
        loop {
            let mut next = BTreeSet::new();
            for i in 0..property_count {
                let cell = |p: usize| found.get(&p).map_or(Cell::Unchecked, |f| Cell::from_found(f[i]));
                next.extend(bisection_points(&line, cell).into_iter().map(|pos| line[pos]));
            }
            if next.is_empty() {
                break;
            }
            for p in next {
                check(p, &mut found)?;
            }
        }
    }
    Ok(found)
}

/// One property's cells (checked, and with `infer` inferred along the search lines), its
/// boundaries along every line, whether it is monotone, and its safe points.
fn analyse(
    plan: &Plan,
    shape: &Shape,
    name: PropertyName,
    i: usize,
    found: &BTreeMap<usize, Vec<Found>>,
    infer: bool,
) -> PropertySweep {
    let mut cells: Vec<Cell> = (0..shape.count())
        .map(|p| found.get(&p).map_or(Cell::Unchecked, |f| Cell::from_found(f[i])))
        .collect();
    if infer {
        for line in shape.search_lines() {
            infer_line(&line, &mut cells);
        }
    }
    let mut boundaries = Vec::new();
    let mut monotone = true;
    for (knob, line, fixed) in shape.all_lines() {
        let along = line_boundaries(plan, knob, &line, fixed, &cells);
        monotone &= along.len() <= 1;
        boundaries.extend(along);
    }
    let safe_points = (0..shape.count()).filter(|&p| cells[p].verdict() == Some(Verdict::Holds)).collect();
    PropertySweep { name, cells, boundaries, monotone, safe_points }
}

/// The two ends and `samples` evenly spaced positions between them, of a line of `len`.
pub fn sample_positions(len: usize, samples: usize) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    // More samples than positions add none (and `samples + 1` must not wrap).
    let samples = samples.min(len);
    let mut out = BTreeSet::from([0, len - 1]);
    for i in 1..=samples {
        out.insert(i * (len - 1) / (samples + 1));
    }
    out.into_iter().collect()
}

/// Positions to check next on a line: for every pair of consecutive checked, decided
/// positions that disagree and are not neighbours, the unchecked position nearest their middle.
pub fn bisection_points(line: &[usize], cell: impl Fn(usize) -> Cell) -> Vec<usize> {
    let decided: Vec<(usize, Verdict)> = (0..line.len())
        .filter_map(|pos| {
            let c = cell(line[pos]);
            if c.checked() {
                c.verdict().map(|v| (pos, v))
            } else {
                None
            }
        })
        .collect();
    let mut out = Vec::new();
    for w in decided.windows(2) {
        let ((a, va), (b, vb)) = (w[0], w[1]);
        if va == vb || b - a < 2 {
            continue;
        }
        let middle = (a + b) / 2;
        let pick = (a + 1..b)
            .filter(|&pos| cell(line[pos]) == Cell::Unchecked)
            .min_by_key(|&pos| (pos.abs_diff(middle), pos));
        out.extend(pick);
    }
    out
}

/// Fill the unchecked cells of a line whose nearest checked neighbours on both sides give the
/// same verdict.
pub(crate) fn infer_line(line: &[usize], cells: &mut [Cell]) {
    let checked: Vec<usize> = (0..line.len()).filter(|&pos| cells[line[pos]].checked()).collect();
    for w in checked.windows(2) {
        let (a, b) = (cells[line[w[0]]], cells[line[w[1]]]);
        let fill = match (a, b) {
            (Cell::Holds, Cell::Holds) => Cell::InferredHolds,
            (Cell::Violated, Cell::Violated) => Cell::InferredViolated,
            _ => continue,
        };
        for pos in w[0] + 1..w[1] {
            cells[line[pos]] = fill;
        }
    }
}

/// Every change of verdict along a line between consecutive decided cells.
fn line_boundaries(
    plan: &Plan,
    knob: usize,
    line: &[usize],
    fixed: Option<usize>,
    cells: &[Cell],
) -> Vec<Boundary> {
    let decided: Vec<(usize, Cell)> = (0..line.len())
        .filter(|&pos| cells[line[pos]].verdict().is_some())
        .map(|pos| (pos, cells[line[pos]]))
        .collect();
    let k = &plan.knobs[knob];
    let fixed = fixed.map(|j| {
        let other = &plan.knobs[1 - knob];
        (other.key.clone(), other.values[j].label.clone())
    });
    let mut out = Vec::new();
    for w in decided.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if ca.verdict() == cb.verdict() {
            continue;
        }
        let (holds, violated) = if ca.verdict() == Some(Verdict::Holds) { (a, b) } else { (b, a) };
        out.push(Boundary {
            knob: k.key.clone(),
            fixed: fixed.clone(),
            holds_at: k.values[holds].label.clone(),
            holds_point: line[holds],
            violated_at: k.values[violated].label.clone(),
            violated_point: line[violated],
            adjacent: b - a == 1,
            inferred: !ca.checked() || !cb.checked(),
        });
    }
    out
}

/// Exit code of a sweep: 3 if a point's exploration was cut short by a limit, else 0. A
/// violation is a finding of the sweep, not a failure.
pub fn exit_code(outcome: &Outcome) -> u8 {
    if outcome.checked.iter().any(|c| c.verdicts.iter().any(|(_, f)| *f == Found::Unknown)) {
        3
    } else {
        0
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
