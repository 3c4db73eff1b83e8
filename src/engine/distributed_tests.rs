//! The distributed engine against the one-process engine, on workers of this process.
use super::*;
use stateright::Property;

/// Three counters to 12 with a rotation: wide levels with many duplicates, across workers.
type Grid = crate::engine::tests::Grid<12>;
const GRID: Grid = crate::engine::tests::Grid;

/// `explore` on `workers` timely workers of this process; worker 0's exploration.
fn on_workers(
    workers: usize,
    shared: usize,
    properties: fn() -> Vec<Property<Grid>>,
    limits: Limits,
) -> Exploration {
    let guards = timely::execute(timely::Config::process(workers), move |worker| {
        let label = |_: &[u8; 3], a: &u8, _: &[u8; 3]| 1u8 << a;
        let labeler: super::super::EdgeLabeler<Grid> = &label;
        let hooks = Hooks {
            labeler: limits.record_edges.then_some(labeler),
            canonical: None,
            ample: None,
            compact: None,
        };
        let (e, _) = explore(worker, &GRID, &properties(), &limits, hooks, shared);
        (worker.index() == 0).then_some(e)
    })
    .expect("timely starts");
    guards.join().into_iter().filter_map(|r| r.expect("no worker panics")).next().expect("worker 0")
}

fn sum_is_30() -> Vec<Property<Grid>> {
    vec![Property::always("sum below 30", |_, s: &[u8; 3]| s.iter().map(|&x| u32::from(x)).sum::<u32>() < 30)]
}

#[test]
fn the_gathered_graph_is_the_single_process_engines() {
    let limits = Limits { record_edges: true, stop_when_decided: false, ..Limits::default() };
    let label = |_: &[u8; 3], a: &u8, _: &[u8; 3]| 1u8 << a;
    let labeler: super::super::EdgeLabeler<Grid> = &label;
    let single = super::super::explore_labelled(&GRID, &sum_is_30(), &limits, Some(labeler));
    for (workers, shared) in [(1, 1), (3, 1), (3, SHARED_FRONTIER_PER_WORKER)] {
        let d = on_workers(workers, shared, sum_is_30, limits.clone());
        let what = format!("{workers} workers, shared frontier {shared}");
        assert_eq!((d.unique_states, d.transitions, d.max_depth), (1728, 6912, single.max_depth), "{what}");
        assert_eq!(d.fingerprints, single.fingerprints, "{what}");
        assert_eq!(d.parents, single.parents, "{what}");
        let (g, s) = (d.graph.as_ref().unwrap(), single.graph.as_ref().unwrap());
        assert_eq!((&g.offsets, &g.targets, &g.labels), (&s.offsets, &s.targets, &s.labels), "{what}");
        assert!(d.complete(), "{what}");
    }
}

#[test]
fn safety_counterexamples_have_the_shortest_length_and_cuts_match() {
    let single = super::super::explore(&GRID, &sum_is_30(), &Limits::default());
    let shortest = super::super::path(&GRID, &single, single.discoveries[0].unwrap()).len();
    for workers in [1, 2, 4] {
        let d = on_workers(workers, 1, sum_is_30, Limits::default());
        assert_eq!(
            (d.unique_states, d.transitions, d.max_depth),
            (single.unique_states, single.transitions, single.max_depth)
        );
        assert_eq!(d.cut, Some(Cut::AllDecided), "{workers} workers");
        let p = super::super::path(&GRID, &d, d.discoveries[0].expect("violated"));
        assert_eq!(p.len(), shortest, "{workers} workers");
        assert!(p.last().unwrap().state.iter().map(|&x| u32::from(x)).sum::<u32>() >= 30);
    }
    let limits = Limits { max_states: Some(500), ..Limits::default() };
    let single = super::super::explore(&GRID, &[], &limits);
    let d = on_workers(3, 1, Vec::new, limits);
    assert_eq!(d.cut, Some(Cut::StateLimit(500)));
    assert_eq!(
        (d.unique_states, d.transitions, d.max_depth),
        (single.unique_states, single.transitions, single.max_depth)
    );
}

#[test]
fn owners_spread_fingerprints_evenly() {
    let mut counts = [0u32; 4];
    for i in 0..40_000u64 {
        counts[owner(crate::engine::fingerprint(&i), 4)] += 1;
    }
    assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
}
