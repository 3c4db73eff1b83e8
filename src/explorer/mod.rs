//! `replicheck explore`: stateright's explorer, handed what a person needs to understand a
//! counterexample.
//!
//! stateright's page shows, for each state, the model's action labels, a state rendering
//! (`Debug` of the state, or `format_step`) and an SVG; its property list only says whether
//! stateright's own search found a discovery on the path, never what holds *at* a state, and
//! it knows nothing of replicheck's liveness properties (cycle analysis, `engine::cycles`).
//! So the explorer runs [`Explorable`], a wrapper around [`World`] with the same states and
//! actions in the same order (the links `replicheck check` prints stay valid), whose states
//! render readably and whose actions carry their outcome; and [`server`] puts a small HTTP
//! front before stateright's server that serves a patched copy of its page and answers
//! `/.replicheck/path/...` with [`path_report`]: every property's status at every state of a
//! path, with reasons, and the loop when the path ends where it was before (a lasso).

pub mod server;

use crate::check::cycle_queries;
use crate::config::PropertyName;
use crate::engine::cycles::CycleQuery;
use crate::model::{display, properties, Action, World, WorldConfig, WorldState};
use serde::Serialize;
use stateright::Model;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The world as the explorer is handed it.
pub struct Explorable {
    pub world: World,
    cfg: Arc<WorldConfig>,
}

impl Explorable {
    pub fn new(world: World) -> Explorable {
        let cfg = Arc::new(world.cfg.clone());
        Explorable { world, cfg }
    }
}

/// A world state that prints readably (names, not indices) as its `Debug`, which is what
/// stateright's "Complete State" pane shows. Equality and hashing are the state's alone, so
/// fingerprints are the world's.
#[derive(Clone)]
pub struct Shown {
    pub state: WorldState,
    cfg: Arc<WorldConfig>,
}

impl PartialEq for Shown {
    fn eq(&self, other: &Self) -> bool {
        self.state == other.state
    }
}

impl Hash for Shown {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.state.hash(h)
    }
}

impl fmt::Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&complete_state(&self.cfg, &self.state))
    }
}

/// An action with the label the check report gives it: what it is, and what it changed in the
/// topology (`=> queued: move hot n1 -> n2`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Labelled {
    pub action: Action,
    pub label: String,
}

impl fmt::Debug for Labelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// The label of `action` taken at `before`, as `replicheck check` prints its steps.
pub fn label(cfg: &WorldConfig, world: &World, before: &WorldState, action: &Action) -> String {
    let mut text = display::action(cfg, action);
    if let Some(after) = world.next_state(before, action.clone()) {
        let changes = display::topology_changes(cfg, before, &after);
        if !changes.is_empty() {
            text.push_str(" => ");
            text.push_str(&changes);
        }
    }
    text
}

impl Model for Explorable {
    type State = Shown;
    type Action = Labelled;

    fn init_states(&self) -> Vec<Shown> {
        self.world
            .init_states()
            .into_iter()
            .map(|state| Shown { state, cfg: Arc::clone(&self.cfg) })
            .collect()
    }

    fn actions(&self, s: &Shown, actions: &mut Vec<Labelled>) {
        let mut inner = Vec::new();
        self.world.actions(&s.state, &mut inner);
        actions.extend(
            inner
                .into_iter()
                .map(|action| Labelled { label: label(&self.cfg, &self.world, &s.state, &action), action }),
        );
    }

    fn next_state(&self, last: &Shown, action: Labelled) -> Option<Shown> {
        self.world
            .next_state(&last.state, action.action)
            .map(|state| Shown { state, cfg: Arc::clone(&self.cfg) })
    }

    fn properties(&self) -> Vec<stateright::Property<Self>> {
        // The same safety properties, by name, for stateright's own search ("Run to completion").
        // (A property is a plain function, so one per name.)
        use stateright::Property;
        self.cfg
            .properties
            .iter()
            .filter(|p| !p.is_liveness())
            .map(|name| match name {
                PropertyName::AckedWritesPersist => {
                    Property::always("acked_writes_persist", |m: &Self, s: &Shown| {
                        properties::acked_writes_persist(&m.cfg, &s.state)
                    })
                }
                PropertyName::Linearizable => {
                    Property::always("linearizable", |_, s: &Shown| properties::linearizable(&s.state))
                }
                PropertyName::NoDuplicateEffects => {
                    Property::always("no_duplicate_effects", |_, s: &Shown| {
                        properties::no_duplicate_effects(&s.state)
                    })
                }
                PropertyName::NoHealthyEviction => Property::always("no_healthy_eviction", |_, s: &Shown| {
                    properties::no_healthy_eviction(&s.state)
                }),
                PropertyName::ChurnBounded => {
                    Property::always("churn_bounded", |_, s: &Shown| properties::churn_bounded(&s.state))
                }
                PropertyName::CapacityRespected => Property::always("capacity_respected", |_, s: &Shown| {
                    properties::capacity_respected(&s.state)
                }),
                PropertyName::Converges
                | PropertyName::OpsComplete
                | PropertyName::DeadReplaced
                | PropertyName::HotShardLeavesSlowNode => {
                    unreachable!("filtered above")
                }
                PropertyName::SinglePrimary => Property::always("single_primary", |_, s: &Shown| {
                    crate::model::leader::single_primary(&s.state)
                }),
            })
            .collect()
    }

    fn format_action(&self, action: &Labelled) -> String {
        action.label.clone()
    }

    fn format_step(&self, last: &Shown, action: Labelled) -> Option<String> {
        self.world.next_state(&last.state, action.action).map(|s| display::state(&self.cfg, &s))
    }

    fn as_svg(&self, path: stateright::Path<Shown, Labelled>) -> Option<String> {
        let steps: Vec<(WorldState, Option<Action>)> =
            path.into_vec().into_iter().map(|(s, a)| (s.state, a.map(|a| a.action))).collect();
        Some(display::svg_of_steps(&self.cfg, &steps))
    }
}

/// The readable state plus what the summary leaves out: messages in flight, the
/// coordinator's requests, the ghost variables the properties read.
pub fn complete_state(cfg: &WorldConfig, s: &WorldState) -> String {
    use std::fmt::Write;
    let mut out = display::state(cfg, s);
    let _ = writeln!(out, "messages in flight:");
    if s.net.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for e in &s.net {
        let _ = writeln!(
            out,
            "  {} -> {}: {} (deliverable in {}..{} ticks)",
            display::endpoint(cfg, e.src),
            display::endpoint(cfg, e.dst),
            display::msg(cfg, &e.msg),
            e.earliest_ticks,
            e.latest_ticks
        );
    }
    let acked: Vec<String> = s
        .ghost
        .acked_version
        .iter()
        .enumerate()
        .map(|(k, v)| format!("{}=v{v}", cfg.shard_names[k]))
        .collect();
    let _ = writeln!(out, "acknowledged to clients (highest version per shard): {}", acked.join(" "));
    out
}

/// One property's status at one state.
#[derive(Clone, Debug, Serialize)]
pub struct PropertyStatus {
    pub name: &'static str,
    /// `safety` or `liveness`.
    pub kind: &'static str,
    /// Safety: `holds` or `violated` at this state. Liveness: `violated` (this path ends in a
    /// loop that breaks it), `not violated by this loop`, or `undecided` (a finite path
    /// without a loop decides nothing).
    pub status: &'static str,
    pub reason: String,
}

/// One state of a path: the action that led to it (none for the initial state).
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub step: usize,
    pub time_ms: u64,
    pub action: Option<String>,
    pub properties: Vec<PropertyStatus>,
}

/// A path that ends in a state it was in before: the steps after `returns_to` repeat forever.
#[derive(Clone, Debug, Serialize)]
pub struct LoopReport {
    /// The step whose state the last step returns to (0: the initial state).
    pub returns_to: usize,
    /// The loop's first and last steps.
    pub first: usize,
    pub last: usize,
    /// The explorer path of the loop's start (`#/steps/...`).
    pub start_path: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    pub model: String,
    pub variant: String,
    pub steps: Vec<StepReport>,
    #[serde(rename = "loop")]
    pub lasso: Option<LoopReport>,
}

/// Follow explorer `indices` (initial state, then action indices) through `world`, as
/// stateright does, and report every property at every state. An index that names no initial
/// state or no enabled action is an error, not a panic.
pub fn path_report(world: &World, variant: &str, indices: &[usize]) -> Result<PathReport, String> {
    let cfg = &world.cfg;
    let (states, actions) = follow(world, indices)?;
    // A lasso: the last state was visited before. Its first visit is where the loop starts.
    let last = states.len() - 1;
    let lasso =
        (last > 0).then(|| states[..last].iter().position(|s| *s == states[last])).flatten().map(|j| {
            let prefix: Vec<String> = indices[..=j].iter().map(|i| i.to_string()).collect();
            LoopReport {
                returns_to: j,
                first: j + 1,
                last,
                start_path: format!("#/steps/{}", prefix.join("/")),
            }
        });
    let liveness: Vec<PropertyName> = cfg.properties.iter().copied().filter(|p| p.is_liveness()).collect();
    let loop_verdicts: Vec<(bool, String)> = liveness
        .iter()
        .map(|&name| match &lasso {
            Some(l) => loop_breaks(world, &states[l.returns_to..], &actions[l.returns_to..], name),
            None => (false, String::new()),
        })
        .collect();
    let mut time_ms = 0;
    let mut steps = Vec::new();
    for (n, s) in states.iter().enumerate() {
        let action = n.checked_sub(1).map(|k| &actions[k]);
        if action == Some(&Action::Tick) {
            time_ms += cfg.tick_ms;
        }
        let mut props = Vec::new();
        for &name in cfg.properties.iter().filter(|p| !p.is_liveness()) {
            let (holds, reason) = properties::explain(name, cfg, s);
            props.push(PropertyStatus {
                name: name.as_str(),
                kind: "safety",
                status: if holds { "holds" } else { "violated" },
                reason,
            });
        }
        for (&name, (breaks, why)) in liveness.iter().zip(&loop_verdicts) {
            let (status, reason) = match &lasso {
                Some(l) if *breaks => (
                    "violated",
                    format!(
                        "on this path: steps {}-{} repeat forever (step {} returns to the state after step {}): {why}",
                        l.first, l.last, l.last, l.returns_to
                    ),
                ),
                Some(l) => (
                    "not violated by this loop",
                    format!("the loop of steps {}-{} does not break it: {why}", l.first, l.last),
                ),
                None => (
                    "undecided",
                    "a liveness property is about infinite runs: no single state or loop-free path decides it; \
                     `replicheck check` decides it by cycle analysis and links a lasso (a path ending where it was before)"
                        .to_string(),
                ),
            };
            props.push(PropertyStatus { name: name.as_str(), kind: "liveness", status, reason });
        }
        steps.push(StepReport {
            step: n,
            time_ms,
            action: action.map(|a| label(cfg, world, &states[n - 1], a)),
            properties: props,
        });
    }
    Ok(PathReport { model: cfg.model_name.clone(), variant: variant.to_string(), steps, lasso })
}

/// The states and actions explorer `indices` lead through; an index that names no initial
/// state or no enabled action is an error.
pub fn follow(world: &World, indices: &[usize]) -> Result<(Vec<WorldState>, Vec<Action>), String> {
    let (&init, rest) = indices.split_first().ok_or("an explorer path starts with an initial-state index")?;
    let mut state =
        world.init_states().into_iter().nth(init).ok_or_else(|| {
            format!("no initial state {init} (the model has {})", world.init_states().len())
        })?;
    let mut states = vec![state.clone()];
    let mut actions = Vec::new();
    for (n, &i) in rest.iter().enumerate() {
        let mut enabled = Vec::new();
        world.actions(&state, &mut enabled);
        let action = enabled
            .get(i)
            .cloned()
            .ok_or_else(|| format!("step {}: no action {i} (only {} enabled)", n + 1, enabled.len()))?;
        state = world
            .next_state(&state, action.clone())
            .ok_or_else(|| format!("step {}: action {i} is ignored by the model", n + 1))?;
        actions.push(action);
        states.push(state.clone());
    }
    Ok((states, actions))
}

/// Whether the loop through `states` (closed: the last equals the first) taking `actions` is a
/// cycle the liveness property `name` forbids, by the edge labels and query `check` uses.
fn loop_breaks(
    world: &World,
    states: &[WorldState],
    actions: &[Action],
    name: PropertyName,
) -> (bool, String) {
    let queries: Vec<CycleQuery> = cycle_queries(name, world.cfg.clients.len());
    let labels: Vec<u8> = actions
        .iter()
        .enumerate()
        .map(|(i, a)| properties::edge_label(&world.cfg, &states[i], a, &states[i + 1]))
        .collect();
    // The classes enabled in each state of the loop, when the query looks at them.
    let loop_states = &states[..states.len() - 1];
    let needs_enabled = queries.iter().any(|q| q.fair | q.every_state_enabled != 0);
    let enabled: Vec<u8> = if !needs_enabled {
        Vec::new()
    } else {
        loop_states
            .iter()
            .map(|s| {
                let mut acts = Vec::new();
                world.actions(s, &mut acts);
                acts.iter()
                    .filter_map(|a| {
                        world.next_state(s, a.clone()).map(|t| properties::edge_label(&world.cfg, s, a, &t))
                    })
                    .fold(0, |m, l| m | l)
            })
            .collect()
    };
    let breaks = queries.iter().any(|q| q.forbids(&labels, &enabled));
    let why = match name {
        PropertyName::Converges if breaks => {
            "time passes and the replica sets (or the membership queue) keep changing: the topology never settles"
        }
        PropertyName::Converges => "a loop that breaks it must both pass time and change the topology",
        PropertyName::OpsComplete if breaks => {
            "one client's operation is outstanding at every step while time passes: it never completes"
        }
        PropertyName::OpsComplete => "a loop that breaks it must keep one client's operation outstanding at every step and pass time",
        PropertyName::DeadReplaced if breaks => {
            "time passes and a replica set keeps a node that is down at every step: it is never replaced"
        }
        PropertyName::DeadReplaced => {
            "a loop that breaks it must keep a down node in a replica set at every step and pass time"
        }
        PropertyName::HotShardLeavesSlowNode if breaks => {
            "time passes and a hot shard keeps a replica on a slow node at every step: it is never moved off"
        }
        PropertyName::HotShardLeavesSlowNode => {
            "a loop that breaks it must keep a hot shard on a slow node at every step and pass time"
        }
        _ => "",
    };
    (breaks, why.to_string())
}
