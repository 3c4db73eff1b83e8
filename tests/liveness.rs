//! Issue #4: replicheck's cycle analysis finds livelocks that stateright's `eventually`
//! misses, and never reports a cycle in which no time passes.

use replicheck::check::cycles::{self, CycleQuery};
use replicheck::check::engine::{self, Limits};
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
    let lasso = cycles::find(e.graph.as_ref().unwrap(), CycleQuery { every_edge: 0, some_edge: TICK | MOVE })
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
    assert!(cycles::find(graph, CycleQuery { every_edge: 0, some_edge: MOVE }).is_some(), "the loop exists");
    assert_eq!(cycles::find(graph, CycleQuery { every_edge: 0, some_edge: TICK | MOVE }), None);
}
