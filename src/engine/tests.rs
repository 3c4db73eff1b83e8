//! The engine's unit tests: counts, limits, cycles and determinism on small models.

use super::*;

/// Two counters that each count to 3: 16 states, 24 transitions, depth 6.
struct Counters;
impl Model for Counters {
    type State = (u8, u8);
    type Action = u8;
    fn init_states(&self) -> Vec<(u8, u8)> {
        vec![(0, 0)]
    }
    fn actions(&self, s: &(u8, u8), a: &mut Vec<u8>) {
        if s.0 < 3 {
            a.push(0);
        }
        if s.1 < 3 {
            a.push(1);
        }
    }
    fn next_state(&self, s: &(u8, u8), a: u8) -> Option<(u8, u8)> {
        Some(if a == 0 { (s.0 + 1, s.1) } else { (s.0, s.1 + 1) })
    }
}

#[test]
fn counts_states_transitions_and_depth() {
    let e = explore(&Counters, &[], &Limits::default());
    assert_eq!((e.unique_states, e.transitions, e.max_depth), (16, 24, 6));
    assert!(e.complete());
}

#[test]
fn finds_shortest_counterexample_and_rebuilds_it() {
    let props = [Property::<Counters>::always("sum below 3", |_, s| s.0 + s.1 < 3)];
    let e = explore(&Counters, &props, &Limits::default());
    let index = e.discoveries[0].expect("violated");
    let p = path(&Counters, &e, index);
    assert_eq!(p.len(), 4, "three steps from (0,0) reach a sum of 3");
    assert_eq!(p.last().unwrap().state.0 + p.last().unwrap().state.1, 3);
    assert_eq!(e.cut, Some(Cut::AllDecided));
}

#[test]
fn records_every_transition_as_edges() {
    let e = explore(&Counters, &[], &Limits { record_edges: true, ..Limits::default() });
    let g = e.graph.as_ref().expect("edges recorded");
    assert_eq!(g.targets.len() as u64, e.transitions);
    // State 0 is (0,0): its successors are (1,0) and (0,1), states 1 and 2.
    assert_eq!(g.successors(0), &[1, 2]);
}

/// Three counters to `MODULUS` with a rotation: wide levels (parallel path), many
/// duplicates within a level, and labelled edges. The distributed engine's tests use it too.
pub(super) struct Grid<const MODULUS: u8>;
impl<const MODULUS: u8> Model for Grid<MODULUS> {
    type State = [u8; 3];
    type Action = u8;
    fn init_states(&self) -> Vec<[u8; 3]> {
        vec![[0, 0, 0]]
    }
    fn actions(&self, _: &[u8; 3], a: &mut Vec<u8>) {
        a.extend(0..4);
    }
    fn next_state(&self, s: &[u8; 3], a: u8) -> Option<[u8; 3]> {
        let mut t = *s;
        match a {
            0..=2 => t[a as usize] = (t[a as usize] + 1) % MODULUS,
            _ => t = [t[1], t[2], t[0]],
        }
        Some(t)
    }
}

fn reference_bfs(model: &Grid<24>) -> (Vec<[u8; 3]>, Vec<u32>, Vec<Vec<u32>>) {
    let mut index = std::collections::HashMap::new();
    let mut states = model.init_states();
    let mut parents = vec![NO_PARENT];
    let mut rows = Vec::new();
    index.insert(states[0], 0u32);
    let mut i = 0;
    while i < states.len() {
        let s = states[i];
        let mut actions = Vec::new();
        model.actions(&s, &mut actions);
        let mut row = Vec::new();
        for a in actions {
            let t = model.next_state(&s, a).unwrap();
            let next = states.len() as u32;
            let j = *index.entry(t).or_insert_with(|| {
                states.push(t);
                parents.push(i as u32);
                next
            });
            row.push(j);
        }
        rows.push(row);
        i += 1;
    }
    (states, parents, rows)
}

#[test]
fn numbering_parents_and_edges_match_a_sequential_bfs_on_any_thread_count() {
    let (states, parents, rows) = reference_bfs(&Grid::<24>);
    assert_eq!(states.len(), 24 * 24 * 24);
    let label = |_: &[u8; 3], a: &u8, _: &[u8; 3]| 1u8 << a;
    let labeler: EdgeLabeler<Grid<24>> = &label;
    for threads in [1, 2, 3, 5] {
        let limits = Limits { threads, ..Limits::default() };
        let e = explore_labelled(&Grid::<24>, &[], &limits, Some(labeler));
        assert_eq!(e.unique_states, states.len() as u64, "{threads} threads");
        let fps: Vec<u64> = states.iter().map(fingerprint).collect();
        assert_eq!(e.fingerprints, fps, "BFS numbering with {threads} threads");
        assert_eq!(e.parents, parents, "{threads} threads");
        let g = e.graph.as_ref().unwrap();
        for (v, row) in rows.iter().enumerate() {
            assert_eq!(g.successors(v as u32), &row[..], "row {v}, {threads} threads");
            let labels: Vec<u8> = g.edge_range(v as u32).map(|e| g.labels[e]).collect();
            assert_eq!(labels, vec![1, 2, 4, 8]);
        }
        // Safety-only runs (no table values) number the states the same way.
        let plain = explore(&Grid::<24>, &[], &limits);
        assert_eq!((plain.fingerprints, plain.parents), (e.fingerprints.clone(), e.parents.clone()));
    }
}

#[test]
fn first_discovery_is_the_same_on_any_thread_count() {
    let props = [Property::<Grid<24>>::always("no 7-7-7", |_, s| s != &[7, 7, 7])];
    let one = explore(&Grid::<24>, &props, &Limits::default());
    let index = one.discoveries[0].expect("reachable");
    for threads in [2, 3] {
        let e = explore(&Grid::<24>, &props, &Limits { threads, ..Limits::default() });
        assert_eq!(e.discoveries, one.discoveries);
        assert_eq!(shortest_chain(&e, index), shortest_chain(&one, index));
    }
    assert_eq!(path(&Grid::<24>, &one, index).last().unwrap().state, [7, 7, 7]);
}

#[test]
fn the_index_limit_stops_exploration_instead_of_wrapping() {
    let e = explore_bounded(
        &Grid::<24>,
        &[],
        &Limits { threads: 2, ..Limits::default() },
        Hooks::default(),
        1000,
    );
    assert_eq!(e.cut, Some(Cut::StateLimit(1000)));
    assert!(e.unique_states <= 1000);
}

#[test]
fn a_canonicalizer_explores_one_state_per_class_and_paths_stay_concrete() {
    // Rotations of the three counters are symmetric: the model commutes with them.
    let canon = |s: &[u8; 3]| Some(*[*s, [s[1], s[2], s[0]], [s[2], s[0], s[1]]].iter().min().unwrap());
    let hooks = Hooks::<Grid<24>> { labeler: None, canonical: Some(&canon), ample: None, compact: None };
    // A symmetric property (invariant under rotation), as symmetry reduction requires.
    let props = [Property::<Grid<24>>::always("no rotation of 1-2-3", |_, s| {
        ![[1, 2, 3], [2, 3, 1], [3, 1, 2]].contains(s)
    })];
    let limits = Limits { threads: 2, stop_when_decided: false, ..Limits::default() };
    let e = explore_with(&Grid::<24>, &props, &limits, hooks);
    // 24^3 states; 24 fixed by rotation (all equal), the rest in classes of 3.
    assert_eq!(e.unique_states, 24 + (24 * 24 * 24 - 24) / 3);
    let index = e.discoveries[0].expect("a rotation of 1-2-3 is reachable");
    let p = path_with(&Grid::<24>, &e, index, hooks);
    assert_eq!(canon(&p.last().unwrap().state), canon(&[1, 2, 3]));
}

#[test]
fn state_limit_makes_exploration_incomplete() {
    let e = explore(&Counters, &[], &Limits { max_states: Some(5), ..Limits::default() });
    assert_eq!(e.cut, Some(Cut::StateLimit(5)));
    assert!(!e.complete());
}

#[test]
fn a_set_stop_flag_cuts_exploration_after_the_level_in_hand() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let full = explore(&Counters, &[], &Limits { stop: Some(&STOP), ..Limits::default() });
    assert!(full.complete(), "an unset flag changes nothing");
    STOP.store(true, Ordering::Relaxed);
    let e = explore(&Counters, &[], &Limits { stop: Some(&STOP), ..Limits::default() });
    assert_eq!(e.cut, Some(Cut::Interrupted));
    assert!(!e.complete());
    assert!(e.unique_states < full.unique_states, "{} of {}", e.unique_states, full.unique_states);
    assert_eq!(e.max_depth, 1, "one level was expanded before the flag was polled");
}

/// A ring 0 -> 1 -> ... -> 5 -> 0 where every ring state may also exit to 100 + i.
struct Ring;
impl Model for Ring {
    type State = u8;
    type Action = bool;
    fn init_states(&self) -> Vec<u8> {
        vec![0]
    }
    fn actions(&self, s: &u8, a: &mut Vec<bool>) {
        if *s < 100 {
            a.extend([true, false]);
        }
    }
    fn next_state(&self, s: &u8, step: bool) -> Option<u8> {
        Some(if step { (s + 1) % 6 } else { 100 + s })
    }
}

#[test]
fn the_cycle_proviso_expands_a_state_whose_ample_successor_is_known() {
    // An ample set that always defers the exit would go round the ring forever and never
    // see an exit state; the proviso expands state 5 fully, whose step leads back to 0.
    let step_only = |_: &u8, actions: &[bool], out: &mut Vec<usize>| {
        out.extend(actions.iter().position(|&a| a));
    };
    let hooks = Hooks::<Ring> { labeler: None, canonical: None, ample: Some(&step_only), compact: None };
    let props = [Property::<Ring>::sometimes("an exit", |_, s| *s >= 100)];
    let limits = Limits { stop_when_decided: false, ..Limits::default() };
    let e = explore_with(&Ring, &props, &limits, hooks);
    assert_eq!(e.ample_states, 5, "states 0..=4 took only their step");
    assert_eq!(e.unique_states, 6 + 1, "the ring and the exit of state 5");
    assert!(e.discoveries[0].is_some());
}

/// The owner table a level's expansion buckets candidates by is the split dedup uses: every
/// shard is in its owner's range, for any thread count (more threads than shards included).
#[test]
fn each_shard_is_owned_by_the_dedup_thread_whose_range_holds_it() {
    for n in 1..=2 * seen::SHARD_COUNT {
        let owners = level::Owners::new(n);
        let mut seen = SeenSet::new(false);
        for (t, (lo, shards)) in level::shard_ranges(seen.shards_mut(), n).into_iter().enumerate() {
            for s in lo..lo + shards.len() {
                assert_eq!(owners.of_shard[s], t, "{n} threads: shard {s}");
            }
        }
    }
}

/// A level's chunks cover the frontier's segments in BFS order, each piece with its offset in
/// the frontier, at most `chunk` states a chunk, as many chunks as the states need whatever
/// the segments (one chunk spans two segments where a segment ends inside it).
#[test]
fn chunks_cover_the_frontier_in_order_across_segments() {
    let segments: Vec<std::sync::Arc<Vec<u32>>> =
        [(0..5).collect(), vec![], (5..6).collect(), (6..17).collect()]
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
    for chunk in 1..=20 {
        let chunks = chunks_of(&segments, chunk);
        assert_eq!(chunks.len(), 17usize.div_ceil(chunk), "chunk {chunk}");
        let mut next = 0u32;
        for pieces in &chunks {
            let len: usize = pieces.iter().map(|p| p.2.len()).sum();
            assert!(len <= chunk && len > 0, "chunk {chunk}: {len} states");
            for (offset, segment, range) in pieces {
                let states = &segment[range.clone()];
                assert_eq!(*offset, next as usize, "chunk {chunk}: a piece's offset");
                assert!(!states.is_empty());
                for &s in states {
                    assert_eq!(s, next, "chunk {chunk}: BFS order");
                    next += 1;
                }
            }
        }
        assert_eq!(next, 17);
        // The chunks hold the segments between them: once they are gone, so is every segment.
        drop(chunks);
        assert!(segments.iter().all(|s| std::sync::Arc::strong_count(s) == 1), "chunk {chunk}");
    }
}

/// A counter that flips between 0 and 1 and a count of steps that saturates at 3, which no
/// step reads: a quotient forgetting the count is a bisimulation.
struct Flip;
impl Model for Flip {
    type State = (u8, u8);
    type Action = ();
    fn init_states(&self) -> Vec<(u8, u8)> {
        vec![(0, 0)]
    }
    fn actions(&self, _: &(u8, u8), a: &mut Vec<()>) {
        a.push(());
    }
    fn next_state(&self, s: &(u8, u8), _: ()) -> Option<(u8, u8)> {
        Some((1 - s.0, (s.1 + 1).min(3)))
    }
}

#[test]
fn a_lasso_under_a_quotient_is_walked_until_a_lap_closes_on_a_concrete_state() {
    let forget = |s: &(u8, u8)| (s.1 != 0).then_some((s.0, 0));
    let hooks = Hooks::<Flip> { canonical: Some(&forget), ..Hooks::default() };
    let props = [Property::<Flip>::always("anything", |_, _| true)];
    let limits = Limits { threads: 1, record_edges: true, ..Limits::default() };
    let e = explore_with(&Flip, &props, &limits, hooks);
    assert_eq!(e.unique_states, 2, "one state per class");
    // The quotient's loop 0 -> 1 -> 0 closes at once; the concrete states do from the third lap.
    let lasso = cycles::Lasso { stem_end: 0, loop_states: vec![1, 0], loop_labels: vec![0, 0] };
    let (steps, lap_start) = concrete_lasso(&Flip, &e, &lasso, hooks, 5).expect("a lap closes");
    let states: Vec<(u8, u8)> = steps.iter().map(|s| s.state).collect();
    assert_eq!(states, [(0, 0), (1, 1), (0, 2), (1, 3), (0, 3), (1, 3), (0, 3)]);
    assert_eq!(lap_start, 4);
    assert!(concrete_lasso(&Flip, &e, &lasso, hooks, 2).is_none(), "two laps do not close");
}
