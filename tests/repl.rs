//! Issue #8: the `Repl.tla` benchmark (`../shared/bench/`) explored by replicheck's engine
//! reaches exactly the state space the other checkers report.
//!
//! Counting conventions: the figures in `../shared/bench/README.md` are TLC's. TLC's
//! "states generated" includes the initial state, and its search depth counts the initial
//! state as depth 1; the engine counts transitions (edges) and depth in steps from the initial
//! state. So TLC's 15,880,951 / 19,065,907 generated states are 15,880,950 / 19,065,906
//! transitions plus the one initial state, and TLC's depth 21 is 20 steps.

use replicheck::bench::repl::{AckEnumeration, Repl, ReplAction};
use replicheck::engine::{self, Limits};
use stateright::{Checker, Model};

// The binary explores with mimalloc; so do these tests (they take half the time).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DISTINCT_STATES: u64 = 2_427_180;
/// TLC's depth of the complete state graph search (it counts the initial state as 1).
const TLC_DEPTH: u32 = 21;

fn explore(model: &Repl, threads: usize) -> engine::Exploration {
    engine::explore(model, &[Repl::durable_property()], &Limits { threads, ..Limits::default() })
}

#[test]
fn benchmark_space_is_exact_and_durable_holds() {
    let model = Repl::benchmark();
    assert_eq!(model.ack, AckEnumeration::PerValue);
    let e = explore(&model, 2);
    assert!(e.complete(), "every reachable state explored");
    assert_eq!(e.unique_states, DISTINCT_STATES);
    assert_eq!(e.transitions + 1, 15_880_951, "per-value Ack: transitions + the initial state");
    assert_eq!(e.transitions, 15_880_950);
    assert_eq!(e.max_depth + 1, TLC_DEPTH);
    assert_eq!(e.discoveries, vec![None], "Durable holds on every reachable state");
}

#[test]
fn per_witness_ack_generates_tlcs_transitions() {
    let model = Repl { ack: AckEnumeration::PerWitness, ..Repl::benchmark() };
    let e = explore(&model, 2);
    assert!(e.complete());
    assert_eq!(e.unique_states, DISTINCT_STATES, "witnesses add duplicate successors only");
    assert_eq!(e.transitions + 1, 19_065_907, "per-(v, Q) Ack, as TLC: transitions + the initial state");
    assert_eq!(e.max_depth + 1, TLC_DEPTH);
    assert_eq!(e.discoveries, vec![None]);
}

#[test]
fn buggy_ack_violates_durable_with_a_shortest_counterexample() {
    let model = Repl { buggy: true, ..Repl::benchmark() };
    let e = explore(&model, 2);
    let index = e.discoveries[0].expect("Durable is violated with Buggy = TRUE");
    assert_eq!(e.cut, Some(engine::Cut::AllDecided), "exploration stops at the first violation");
    let path = engine::path(&model, &e, index);
    let last = &path.last().expect("a path").state;
    assert!(!Repl::durable(last), "the final state violates Durable: {last:?}");
    assert!(path[..path.len() - 1].iter().all(|s| Repl::durable(&s.state)), "only the last state violates");
    assert!(path[0].action.is_none() && path[1..].iter().all(|s| s.action.is_some()));
    // Breadth first, so the shortest: write v1, flush it on two nodes, write v2 (in memory
    // only) and acknowledge v2 on the strength of the two disks holding v1.
    let actions: Vec<ReplAction> = path[1..].iter().map(|s| s.action.expect("a step").1).collect();
    assert_eq!(actions.len(), 5, "{actions:?}");
    assert!(matches!(actions[4], ReplAction::Ack { version: 2, .. }), "{actions:?}");
    assert_eq!(format!("{:?}", actions[4]), "Ack(k1) with v = 2");
}

/// stateright's own checker and replicheck's engine agree on a smaller instance.
#[test]
fn engine_agrees_with_stateright_on_max_ver_2() {
    for ack in [AckEnumeration::PerValue, AckEnumeration::PerWitness] {
        let model = Repl::new(2, false, ack);
        let e = explore(&model, 1);
        assert!(e.complete() && e.discoveries == vec![None]);
        let checker = model.checker().spawn_bfs().join();
        assert_eq!(e.unique_states, checker.unique_state_count() as u64, "{ack:?}");
        assert_eq!(e.max_depth as usize + 1, checker.max_depth(), "{ack:?}");
        checker.assert_properties();
    }
}

/// `enabled_classes` (for weak fairness) agrees with the actions offered, on every state of
/// the `MaxVer = 1` space.
#[test]
fn enabled_fairness_classes_match_the_enabled_actions() {
    let model = Repl::new(1, false, AckEnumeration::PerValue);
    let mut seen = std::collections::HashSet::new();
    let mut queue: Vec<_> = model.init_states();
    while let Some(s) = queue.pop() {
        if !seen.insert(s) {
            continue;
        }
        let mut actions = Vec::new();
        model.actions(&s, &mut actions);
        let from_actions =
            actions.iter().filter_map(Repl::fair_class).fold(0u8, |bits, class| bits | 1 << class);
        assert_eq!(model.enabled_classes(&s), from_actions, "{s:?}");
        queue.extend(actions.into_iter().filter_map(|a| model.next_state(&s, a)));
    }
    assert!(seen.len() > 100);
}

/// Weak fairness in the cycle analysis: under WF on every Flush and every Ack, `Ack(k2)`
/// cannot stay enabled forever (a fair cycle would have to take it, and taking it raises
/// `acked[k2]`, which never falls); without WF on `Ack(k2)` a crash/restart loop keeps it
/// enabled forever, and the analysis gives that lasso.
#[test]
fn weak_fairness_on_ack_k2_is_what_makes_it_happen() {
    use replicheck::engine::cycles::{self, CycleQuery};
    let model = Repl::benchmark();
    let labeler: engine::EdgeLabeler<Repl> = &Repl::fairness_label;
    let e = engine::explore_labelled(&model, &[], &Limits { threads: 2, ..Limits::default() }, Some(labeler));
    assert!(e.complete());
    let graph = e.graph.as_ref().unwrap();
    let ack_k2 = Repl::ack_class_bit(1);
    let all_fair = CycleQuery { fair: 0xFF, every_state_enabled: ack_k2, ..CycleQuery::default() };
    assert_eq!(cycles::find(graph, all_fair), None, "under WF on every Flush and Ack, Ack(k2) is taken");

    let no_wf_on_ack_k2 = CycleQuery { fair: !ack_k2, every_state_enabled: ack_k2, ..CycleQuery::default() };
    let lasso =
        cycles::find(graph, no_wf_on_ack_k2).expect("without WF on Ack(k2) it can stay enabled forever");
    // Replay the lasso: Ack(k2) is enabled in every state of the loop and never taken.
    let mut indices = engine::shortest_chain(&e, lasso.stem_end);
    let mut labels = vec![0; indices.len() - 1];
    indices.extend(&lasso.loop_states);
    labels.extend(&lasso.loop_labels);
    let steps = engine::walk(&model, &e, &indices, &labels, Some(labeler));
    let loop_steps = &steps[steps.len() - lasso.loop_states.len()..];
    for step in loop_steps {
        assert!(model.enabled_classes(&step.state) & ack_k2 != 0, "Ack(k2) stays enabled");
        let (_, action) = step.action.as_ref().unwrap();
        assert!(!matches!(action, ReplAction::Ack { key: 1, .. }), "and is never taken");
    }
    assert_eq!(
        loop_steps.last().unwrap().state,
        steps[steps.len() - lasso.loop_states.len() - 1].state,
        "a loop"
    );
}

/// Symmetry over the three nodes: one state per class of node permutations.
fn explore_symmetric(model: &Repl, threads: usize) -> engine::Exploration {
    let canonical = |s: &replicheck::bench::repl::ReplState| Some(s.canonical());
    let hooks =
        engine::Hooks::<Repl> { labeler: None, canonical: Some(&canonical), ample: None, compact: None };
    engine::explore_with(model, &[Repl::durable_property()], &Limits { threads, ..Limits::default() }, hooks)
}

#[test]
fn symmetry_reduces_the_benchmark_to_one_state_per_node_permutation_class() {
    let e = explore_symmetric(&Repl::benchmark(), 2);
    assert!(e.complete());
    // At least DISTINCT_STATES / 3! classes; more, because states with two identical nodes
    // have classes of 3 (or 1) states.
    assert_eq!(e.unique_states, 429_705);
    assert!(e.unique_states * 6 >= DISTINCT_STATES);
    assert_eq!(e.max_depth + 1, TLC_DEPTH, "a permutation does not change the distance from Init");
    assert_eq!(e.discoveries, vec![None], "Durable holds");
    // Without the hook the count is unchanged.
    assert_eq!(explore(&Repl::benchmark(), 2).unique_states, DISTINCT_STATES);
}

/// The reduced count is the number of permutation classes of the reachable states, counted
/// independently on `MaxVer = 2` by a plain search over the concrete states.
#[test]
fn symmetric_count_is_the_number_of_classes_of_reachable_states() {
    let model = Repl::new(2, false, AckEnumeration::PerValue);
    let mut seen = std::collections::HashSet::new();
    let mut queue = model.init_states();
    while let Some(s) = queue.pop() {
        if seen.insert(s) {
            let mut actions = Vec::new();
            model.actions(&s, &mut actions);
            queue.extend(actions.into_iter().filter_map(|a| model.next_state(&s, a)));
        }
    }
    let classes: std::collections::HashSet<_> = seen.iter().map(|s| s.canonical()).collect();
    for threads in [1, 2] {
        let e = explore_symmetric(&model, threads);
        assert_eq!(e.unique_states, classes.len() as u64, "{threads} threads");
    }
    assert!(classes.len() * 2 < seen.len());
}

#[test]
fn symmetry_keeps_the_buggy_counterexample_concrete_and_shortest() {
    let model = Repl { buggy: true, ..Repl::benchmark() };
    let e = explore_symmetric(&model, 2);
    let index = e.discoveries[0].expect("Durable is violated with Buggy = TRUE");
    let canonical = |s: &replicheck::bench::repl::ReplState| Some(s.canonical());
    let hooks =
        engine::Hooks::<Repl> { labeler: None, canonical: Some(&canonical), ample: None, compact: None };
    let path = engine::path_with(&model, &e, index, hooks);
    assert_eq!(path.len(), 6, "five steps, as without symmetry");
    assert!(!Repl::durable(&path.last().unwrap().state));
    // Every step is a real transition of the model from the previous concrete state.
    for pair in path.windows(2) {
        let (_, action) = pair[1].action.expect("a step");
        assert_eq!(model.next_state(&pair[0].state, action), Some(pair[1].state));
    }
}
