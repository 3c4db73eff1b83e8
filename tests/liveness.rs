//! Issue #4: replicheck's cycle analysis finds livelocks that stateright's `eventually`
//! misses, and never reports a cycle in which no time passes.

use replicheck::engine::cycles::{self, CycleQuery};
use replicheck::engine::{self, Limits};
use stateright::{Checker, Model, Property};

const TICK: u8 = 1;
const MOVE: u8 = 2;

/// A shard that a rebalancer moves between two nodes on every tick, forever; `settled` is
/// never reached. The only terminal-free behaviour is the ping-pong loop.
#[derive(Clone)]
struct PingPong {
    /// With `false`, the moves happen without time passing (no `Tick` on the loop).
    tick_between_moves: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Tick,
    Move,
}

impl Model for PingPong {
    /// (node holding the shard, whether a move is due)
    type State = (u8, bool);
    type Action = Step;
    fn init_states(&self) -> Vec<(u8, bool)> {
        vec![(0, false)]
    }
    fn actions(&self, s: &(u8, bool), actions: &mut Vec<Step>) {
        if s.1 || !self.tick_between_moves {
            actions.push(Step::Move);
        } else {
            actions.push(Step::Tick);
        }
    }
    fn next_state(&self, s: &(u8, bool), a: Step) -> Option<(u8, bool)> {
        Some(match a {
            Step::Tick => (s.0, true),
            Step::Move => (1 - s.0, false),
        })
    }
    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::eventually("settled", |_, _| false)]
    }
}

fn label(_: &(u8, bool), a: &Step, _: &(u8, bool)) -> u8 {
    match a {
        Step::Tick => TICK,
        Step::Move => MOVE,
    }
}

fn explore(model: &PingPong) -> engine::Exploration {
    let labeler: engine::EdgeLabeler<PingPong> = &label;
    engine::explore_labelled(model, &[], &Limits::default(), Some(labeler))
}

#[test]
fn stateright_eventually_misses_the_livelock_and_replicheck_finds_it() {
    let model = PingPong { tick_between_moves: true };
    // stateright's `eventually` only sees acyclic paths: the loop never ends, so it is never
    // reported.
    let checker = model.clone().checker().spawn_bfs().join();
    assert!(checker.is_done());
    assert!(checker.discovery("settled").is_none(), "stateright misses the cycle");

    let e = explore(&model);
    assert!(e.complete());
    let lasso = cycles::find(
        e.graph.as_ref().unwrap(),
        CycleQuery { every_edge: 0, some_edge: TICK | MOVE, ..CycleQuery::default() },
    )
    .expect("the ping-pong is a livelock");
    assert_eq!(lasso.stem_end, 0);
    // The loop returns to where it started, through a tick and a move.
    assert_eq!(lasso.loop_states.last(), Some(&0));
    assert!(lasso.loop_labels.iter().any(|l| l & TICK != 0));
    assert!(lasso.loop_labels.iter().any(|l| l & MOVE != 0));
    // Replaying the lasso gives the actions of the loop.
    let mut indices = engine::shortest_chain(&e, lasso.stem_end);
    let mut labels = vec![0; indices.len() - 1];
    indices.extend(&lasso.loop_states);
    labels.extend(&lasso.loop_labels);
    let labeler: engine::EdgeLabeler<PingPong> = &label;
    let steps = engine::walk(&model, &e, &indices, &labels, Some(labeler));
    let actions: Vec<Step> = steps.into_iter().skip(1).map(|s| s.action.unwrap().1).collect();
    assert!(actions.contains(&Step::Tick) && actions.contains(&Step::Move));
}

#[test]
fn a_cycle_in_which_no_time_passes_is_not_reported() {
    let model = PingPong { tick_between_moves: false };
    let e = explore(&model);
    let graph = e.graph.as_ref().unwrap();
    assert!(
        cycles::find(graph, CycleQuery { every_edge: 0, some_edge: MOVE, ..CycleQuery::default() }).is_some(),
        "the loop exists"
    );
    assert_eq!(
        cycles::find(graph, CycleQuery { every_edge: 0, some_edge: TICK | MOVE, ..CycleQuery::default() }),
        None
    );
}

mod rebalancer_incident {
    use replicheck::check::{plan, run, Found, PolicyChoice, RunOptions};
    use replicheck::config::PropertyName;
    use std::path::PathBuf;

    fn variant(name: &str) -> replicheck::check::RunResult {
        let jobs = plan(
            &[PathBuf::from("models/rebalancer-compaction.toml")],
            &PolicyChoice::Variants(Some(name.into())),
        )
        .unwrap();
        run(&jobs[0], &RunOptions { threads: 2, ..RunOptions::default() }).unwrap()
    }

    #[test]
    fn the_lasso_shows_the_hot_shard_moving_back_and_forth() {
        let r = variant("incident");
        assert!(r.complete);
        let converges = r.properties.iter().find(|p| p.name == PropertyName::Converges).unwrap();
        assert_eq!(converges.found, Found::Violated);
        let cx = converges.counterexample.as_ref().unwrap();
        let loop_from = cx.loop_from_step.expect("a liveness counterexample is a lasso");
        let looped: Vec<&str> =
            cx.steps.iter().filter(|s| s.step >= loop_from).map(|s| s.action.as_str()).collect();
        assert!(looped.iter().any(|a| a.contains("queued: move hot n1 -> n2")), "{looped:#?}");
        assert!(looped.iter().any(|a| a.contains("queued: move hot n2 -> n1")), "{looped:#?}");
        assert!(looped.iter().any(|a| a.starts_with("tick")), "time passes on the loop");
    }

    #[test]
    fn a_capped_cooldown_slows_the_oscillation_without_ending_it() {
        let r = variant("cooldown-only");
        let found = |p: PropertyName| r.properties.iter().find(|x| x.name == p).unwrap().found;
        assert_eq!(found(PropertyName::ChurnBounded), Found::Holds);
        assert_eq!(found(PropertyName::Converges), Found::Violated);
        let fixed = variant("fixed");
        assert!(fixed.properties.iter().all(|p| p.found == Found::Holds));
    }
}
