//! Counterexamples: paths read off an exploration (concrete under silence regions), the
//! fewest faults that reach a violation, lassos walked to a concrete cycle, and paths as
//! timed, readable steps with their explorer link.

use super::{regions, Counterexample, Explorer, Job, RunOptions, TraceStep};
use crate::config::PropertyName;
use crate::engine::{self, cycles, Limits};
use crate::model::{display, Action, Reduction, World, WorldState};
use stateright::Model;

/// The shortest path to a violation of safety property `name` among those using the fewest
/// faults, if that is fewer than `shortest` uses. BFS finds a shortest path, which may spend a
/// fault (a lost message, say) where an ordinary step of the same length would do; a reader
/// should not have to wonder whether the fault matters. The world is explored again with a
/// fault budget of 0, 1, ... below what `shortest` spent; a violation found there is a
/// behaviour of the real world too (a smaller budget only removes choices) and is replayed
/// in it, action by action, for the explorer's indices.
pub(super) fn fewer_faults(
    world: &World,
    name: PropertyName,
    shortest: &[engine::Step<World>],
    limits: &Limits,
    explorer: &mut dyn Explorer,
    reduction: Reduction,
) -> Option<Vec<engine::Step<World>>> {
    let spent = world.cfg.faults.budget - shortest.last()?.state.env.faults_left;
    for budget in 0..spent {
        let mut cfg = world.cfg.clone();
        cfg.faults.budget = budget;
        let reduced = World::new(cfg);
        let property: Vec<_> = reduced.properties().into_iter().filter(|p| p.name == name.as_str()).collect();
        assert_eq!(property.len(), 1, "{name} is a safety property of this world");
        let limits = Limits { record_edges: false, stop_when_decided: true, progress: None, ..*limits };
        // Partial-order reduction keeps every safety violation reachable (model::reduction).
        let exploration = explorer.explore(&reduced, &property, &limits, None, reduction);
        let Some(index) = exploration.discoveries[0] else { continue };
        let path = path(&reduced, &exploration, index, reduction);
        // The same initial choices (the key partitions) in the real world; only the budget differs.
        let init = world
            .init_states()
            .into_iter()
            .find(|s| s.clients == path[0].state.clients)
            .expect("the reduced world starts where the real one does");
        let actions: Vec<Action> = path.into_iter().filter_map(|s| s.action.map(|(_, a)| a)).collect();
        return Some(replay(world, init, &actions));
    }
    None
}

/// Steps of `world` taking `actions` in order from initial state `init`, with each action's
/// index among the state's enabled actions (what the explorer's links are made of).
fn replay(world: &World, init: WorldState, actions: &[Action]) -> Vec<engine::Step<World>> {
    let mut state = init;
    let mut steps = vec![engine::Step { action: None, state: state.clone() }];
    for action in actions {
        let mut enabled = Vec::new();
        world.actions(&state, &mut enabled);
        let i =
            enabled.iter().position(|a| a == action).expect("a reduced budget's behaviour is a behaviour");
        state = world.next_state(&state, action.clone()).expect("an enabled action has a next state");
        steps.push(engine::Step { action: Some((i, action.clone())), state: state.clone() });
    }
    steps
}

/// The concrete BFS path to state `index` of an exploration of `world` with `reduction`.
pub(super) fn path(
    world: &World,
    exploration: &engine::Exploration,
    index: u32,
    reduction: Reduction,
) -> Vec<engine::Step<World>> {
    let regions = regions(world, reduction);
    let hooks = engine::Hooks { canonical: regions.as_ref().map(|r| r as _), ..engine::Hooks::default() };
    engine::path_with(world, exploration, index, hooks)
}

/// Most laps of a lasso's loop walked to reach a concrete cycle (`engine::concrete_lasso`):
/// under silence regions a lap either hears from a node (its counter then ends every lap
/// alike) or does not (it saturates at `dead_after`, at most 255 ticks, a tick or more a lap).
const LASSO_LAPS_MAX: usize = 257;

/// A lasso as a counterexample: the stem, then the loop (marked), ending where it started.
pub(super) fn lasso_counterexample(
    world: &World,
    exploration: &engine::Exploration,
    lasso: &cycles::Lasso,
    labeler: engine::EdgeLabeler<World>,
    reduction: Reduction,
    job: &Job,
    opts: &RunOptions,
) -> Counterexample {
    let regions = regions(world, reduction);
    let hooks = engine::Hooks {
        labeler: Some(labeler),
        canonical: regions.as_ref().map(|r| r as _),
        ..engine::Hooks::default()
    };
    let (steps, loop_start) = engine::concrete_lasso(world, exploration, lasso, hooks, LASSO_LAPS_MAX)
        .expect("a lasso's loop closes on a concrete state within LASSO_LAPS_MAX laps");
    let mut cx = counterexample(world, &steps, &job.explore_args, &opts.explorer_addr);
    cx.loop_from_step = Some(loop_start + 1);
    cx
}

/// A path as timed, readable steps plus its explorer link.
pub fn counterexample(
    world: &World,
    path: &[engine::Step<World>],
    explore_args: &str,
    addr: &str,
) -> Counterexample {
    let mut time_ms = 0;
    let mut steps = Vec::new();
    // The explorer's first index picks the initial state (one per choice of key partitions).
    let init = world
        .init_states()
        .iter()
        .position(|s| *s == path[0].state)
        .expect("a path starts at an initial state");
    let mut indices = vec![init.to_string()];
    for (n, step) in path.iter().enumerate().skip(1) {
        let (i, action) = step.action.as_ref().expect("every step after the first has an action");
        indices.push(i.to_string());
        if *action == Action::Tick {
            time_ms += world.cfg.tick_ms;
        }
        let mut text = world.format_action(action);
        let changes = display::topology_changes(&world.cfg, &path[n - 1].state, &step.state);
        if !changes.is_empty() {
            text.push_str(&format!(" => {changes}"));
        }
        steps.push(TraceStep { step: n, time_ms, action: text });
    }
    let final_state = display::state(&world.cfg, &path.last().expect("non-empty").state);
    Counterexample {
        steps,
        explorer_url: format!("http://{addr}/#/steps/{}", indices.join("/")),
        explore_command: format!("replicheck explore {explore_args} --addr {addr}"),
        final_state,
        loop_from_step: None,
        path: (init, path.iter().skip(1).filter_map(|s| s.action.as_ref().map(|(_, a)| a.clone())).collect()),
    }
}
