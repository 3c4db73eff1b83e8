//! replicheck's exploration engine: a level-synchronous, multi-threaded breadth-first search
//! over any `stateright::Model`.
//!
//! Each BFS level is expanded in parallel (states split into contiguous chunks, one per
//! thread), then merged sequentially in frontier order. State numbering, state counts,
//! depths and the first counterexample found are therefore the same on every run and for
//! every thread count. The engine keeps one 64-bit fingerprint and one parent index per state
//! (full states only for the frontier), so any state's path can be rebuilt by replaying the
//! model from its initial state.

use stateright::{Expectation, Model, Property};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::{Duration, Instant};

/// Fingerprints are already well-mixed hashes: the seen-set uses them as they are.
#[derive(Default)]
struct PassThrough(u64);
impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 fingerprints are hashed")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
type SeenMap = HashMap<u64, u32, BuildHasherDefault<PassThrough>>;

/// A stable 64-bit fingerprint of a state (same value on every run and machine of one build).
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    // A fixed seed: the same state has the same fingerprint on every run and thread count.
    use std::hash::BuildHasher;
    const SEED: u64 = 0x5245_504c_4943_4845;
    foldhash::quality::FixedState::with_seed(SEED).hash_one(value)
}

#[derive(Clone, Debug)]
pub struct Limits {
    /// Stop (incomplete) once this many distinct states are known.
    pub max_states: Option<u64>,
    pub threads: usize,
    /// Called after each BFS level with the running statistics.
    pub progress: Option<fn(&Progress)>,
    /// Keep every transition (as state indices) for cycle analysis.
    pub record_edges: bool,
    /// Stop once every property has its verdict. Cycle analysis needs the whole graph, so a
    /// check with liveness properties turns this off.
    pub stop_when_decided: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_states: None, threads: 1, progress: None, record_edges: false, stop_when_decided: true }
    }
}

#[derive(Clone, Debug)]
pub struct Progress {
    pub unique_states: u64,
    pub depth: u32,
    pub frontier: usize,
    pub elapsed: Duration,
}

/// Why exploration stopped before seeing every reachable state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every property already had its verdict (all invariants violated): nothing left to learn.
    AllDecided,
    /// The state limit was reached.
    StateLimit(u64),
}

#[derive(Clone, Debug)]
pub struct Exploration {
    pub unique_states: u64,
    pub transitions: u64,
    pub max_depth: u32,
    /// `None`: every reachable state was explored.
    pub cut: Option<Cut>,
    pub elapsed: Duration,
    /// Per property (in the model's order): the first state (BFS order) that violates an
    /// `always` property, or that satisfies a `sometimes` property.
    pub discoveries: Vec<Option<u32>>,
    fingerprints: Vec<u64>,
    parents: Vec<u32>,
    /// The explored transitions, when `Limits::record_edges` asked for them.
    pub graph: Option<Graph>,
}

/// The state graph in compressed rows: the successors of state `i` (by index, in the order of
/// the model's actions) are `targets[offsets[i]..offsets[i + 1]]`. Only states that were
/// expanded have rows.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub offsets: Vec<u64>,
    pub targets: Vec<u32>,
    /// Parallel to `targets` when a labeler was given, else empty.
    pub labels: Vec<u8>,
}

impl Graph {
    /// The range of state `i`'s edges in `targets` (and `labels`).
    pub fn edge_range(&self, i: u32) -> std::ops::Range<usize> {
        let i = i as usize;
        if i + 1 >= self.offsets.len() {
            return 0..0;
        }
        self.offsets[i] as usize..self.offsets[i + 1] as usize
    }

    pub fn state_count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn successors(&self, i: u32) -> &[u32] {
        let i = i as usize;
        if i + 1 >= self.offsets.len() {
            return &[];
        }
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

impl Exploration {
    pub fn complete(&self) -> bool {
        self.cut.is_none()
    }

    pub fn states_per_second(&self) -> f64 {
        self.unique_states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// State indices from an initial state to `index`.
    fn chain(&self, index: u32) -> Vec<u32> {
        let mut chain = vec![index];
        let mut i = index;
        while self.parents[i as usize] != u32::MAX {
            i = self.parents[i as usize];
            chain.push(i);
        }
        chain.reverse();
        chain
    }
}

/// One step of a rebuilt path: the action taken (with its index among the state's enabled
/// actions, as the explorer numbers them) and the state it led to.
#[derive(Clone, Debug)]
pub struct Step<M: Model> {
    pub action: Option<(usize, M::Action)>,
    pub state: M::State,
}

/// Rebuild the path to a discovered state by replaying the model along the fingerprints.
pub fn path<M>(model: &M, exploration: &Exploration, index: u32) -> Vec<Step<M>>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    let chain = exploration.chain(index);
    walk(model, exploration, &chain, &vec![0; chain.len().saturating_sub(1)], None)
}

/// The BFS path to state `index` (state indices from an initial state).
pub fn shortest_chain(exploration: &Exploration, index: u32) -> Vec<u32> {
    exploration.chain(index)
}

/// Replay a walk through the explored graph given as state indices (the first an initial
/// state, or reachable from one by `chain`). Step k must take an action whose label contains
/// `labels[k]`, so a walk that needs "time passes" on an edge replays the tick, not another
/// action between the same two states.
pub fn walk<M>(
    model: &M,
    exploration: &Exploration,
    indices: &[u32],
    labels: &[u8],
    labeler: Option<EdgeLabeler<M>>,
) -> Vec<Step<M>>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    assert_eq!(labels.len() + 1, indices.len());
    let fps: Vec<u64> = indices.iter().map(|&i| exploration.fingerprints[i as usize]).collect();
    let inits = model.init_states();
    let init = inits
        .into_iter()
        .find(|s| fingerprint(s) == fps[0])
        .expect("the model's initial states are deterministic");
    let mut steps = vec![Step { action: None, state: init }];
    for (k, &fp) in fps[1..].iter().enumerate() {
        let last = &steps.last().expect("path has a start").state;
        let mut actions = Vec::new();
        model.actions(last, &mut actions);
        let (i, action, next) = actions
            .into_iter()
            .enumerate()
            .find_map(|(i, a)| {
                let next = model.next_state(last, a.clone())?;
                let label_ok = match labeler {
                    Some(l) => l(last, &a, &next) & labels[k] == labels[k],
                    None => true,
                };
                (label_ok && fingerprint(&next) == fp).then_some((i, a, next))
            })
            .expect("the model's transitions are deterministic");
        steps.push(Step { action: Some((i, action)), state: next });
    }
    steps
}

/// A successor as a worker reports it: a state seen at an earlier level (by index), or a
/// candidate new state (it may still be a duplicate within this level).
enum Successor<S> {
    Known(u32),
    New(u64, S),
}

/// What one worker learns about one frontier state.
struct Expanded<S> {
    /// Bit p: property p is "discovered" in this state.
    discovered: u64,
    successors: Vec<Successor<S>>,
    /// Per successor, its edge label (empty unless edges are labelled).
    labels: Vec<u8>,
}

/// Labels a transition for cycle analysis (bits chosen by the caller, e.g. "time passes").
pub type EdgeLabeler<'a, M> =
    &'a (dyn Fn(&<M as Model>::State, &<M as Model>::Action, &<M as Model>::State) -> u8 + Sync);

/// Workers look successors up in the seen-set of earlier levels (read-only while they run), so
/// most duplicate detection happens in parallel and the sequential merge sees only candidates.
fn expand<M>(
    model: &M,
    properties: &[Property<M>],
    seen: &SeenMap,
    labeler: Option<EdgeLabeler<M>>,
    state: &M::State,
) -> Expanded<M::State>
where
    M: Model,
    M::State: Hash,
    M::Action: Clone,
{
    let mut discovered = 0u64;
    for (p, prop) in properties.iter().enumerate() {
        let holds = (prop.condition)(model, state);
        let found = match prop.expectation {
            Expectation::Always => !holds,
            Expectation::Sometimes => holds,
            Expectation::Eventually => {
                unreachable!("liveness is checked on cycles, not with `eventually`")
            }
        };
        if found {
            discovered |= 1 << p;
        }
    }
    let mut actions = Vec::new();
    model.actions(state, &mut actions);
    let mut labels = Vec::new();
    let successors = actions
        .into_iter()
        .filter_map(|a| {
            let next = match labeler {
                Some(label) => {
                    let next = model.next_state(state, a.clone())?;
                    labels.push(label(state, &a, &next));
                    next
                }
                None => model.next_state(state, a)?,
            };
            Some(next)
        })
        .map(|s| {
            let fp = fingerprint(&s);
            match seen.get(&fp) {
                Some(&i) => Successor::Known(i),
                None => Successor::New(fp, s),
            }
        })
        .collect();
    Expanded { discovered, successors, labels }
}

/// Explore every state reachable from the model's initial states, checking `properties`.
pub fn explore<M>(model: &M, properties: &[Property<M>], limits: &Limits) -> Exploration
where
    M: Model + Sync,
    M::State: Hash + Clone + Send + Sync,
    M::Action: Clone,
{
    explore_labelled(model, properties, limits, None)
}

/// `explore`, keeping the labelled state graph when `labeler` is given (edges are recorded
/// whenever it is, whatever `limits.record_edges` says).
pub fn explore_labelled<M>(
    model: &M,
    properties: &[Property<M>],
    limits: &Limits,
    labeler: Option<EdgeLabeler<M>>,
) -> Exploration
where
    M: Model + Sync,
    M::State: Hash + Clone + Send + Sync,
    M::Action: Clone,
{
    assert!(properties.len() <= 64);
    let start = Instant::now();
    let threads = limits.threads.max(1);
    let mut seen = SeenMap::default();
    let mut fingerprints = Vec::new();
    let mut parents = Vec::new();
    let mut frontier: Vec<(u32, M::State)> = Vec::new();
    for s in model.init_states() {
        let fp = fingerprint(&s);
        if seen.insert(fp, fingerprints.len() as u32).is_none() {
            frontier.push((fingerprints.len() as u32, s));
            fingerprints.push(fp);
            parents.push(u32::MAX);
        }
    }
    let mut discoveries: Vec<Option<u32>> = vec![None; properties.len()];
    let mut edges = (limits.record_edges || labeler.is_some()).then(Graph::default);
    let mut transitions = 0u64;
    let mut depth = 0u32;
    let mut cut = None;
    // Sometimes-properties are decided by a discovery too; invariants by a violation.
    let all_decided = |d: &[Option<u32>]| d.iter().all(|x| x.is_some());

    while !frontier.is_empty() {
        let expanded: Vec<Expanded<M::State>> = if threads == 1 || frontier.len() < 256 {
            frontier.iter().map(|(_, s)| expand(model, properties, &seen, labeler, s)).collect()
        } else {
            let chunk = frontier.len().div_ceil(threads);
            let seen = &seen;
            std::thread::scope(|scope| {
                let handles: Vec<_> = frontier
                    .chunks(chunk)
                    .map(|part| {
                        scope.spawn(move || {
                            part.iter()
                                .map(|(_, s)| expand(model, properties, seen, labeler, s))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
            })
        };
        let mut next = Vec::new();
        for ((index, _), e) in frontier.iter().zip(expanded) {
            for (p, d) in discoveries.iter_mut().enumerate() {
                if d.is_none() && e.discovered & (1 << p) != 0 {
                    *d = Some(*index);
                }
            }
            transitions += e.successors.len() as u64;
            if let Some(edges) = edges.as_mut() {
                edges.offsets.push(edges.targets.len() as u64);
            }
            if let Some(edges) = edges.as_mut() {
                edges.labels.extend_from_slice(&e.labels);
            }
            for succ in e.successors {
                let target = match succ {
                    Successor::Known(i) => i,
                    Successor::New(fp, s) => match seen.entry(fp) {
                        std::collections::hash_map::Entry::Occupied(o) => *o.get(),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            let i = fingerprints.len() as u32;
                            v.insert(i);
                            fingerprints.push(fp);
                            parents.push(*index);
                            next.push((i, s));
                            i
                        }
                    },
                };
                if let Some(edges) = edges.as_mut() {
                    edges.targets.push(target);
                }
            }
        }
        if !next.is_empty() {
            depth += 1;
        }
        frontier = next;
        if let Some(f) = limits.progress {
            f(&Progress {
                unique_states: fingerprints.len() as u64,
                depth,
                frontier: frontier.len(),
                elapsed: start.elapsed(),
            });
        }
        if limits.stop_when_decided && all_decided(&discoveries) && !properties.is_empty() {
            if !frontier.is_empty() {
                cut = Some(Cut::AllDecided);
            }
            break;
        }
        if let Some(max) = limits.max_states {
            if fingerprints.len() as u64 >= max && !frontier.is_empty() {
                cut = Some(Cut::StateLimit(max));
                break;
            }
        }
    }
    Exploration {
        unique_states: fingerprints.len() as u64,
        transitions,
        max_depth: depth,
        cut,
        elapsed: start.elapsed(),
        discoveries,
        fingerprints,
        parents,
        graph: edges.map(|mut g| {
            g.offsets.push(g.targets.len() as u64);
            g
        }),
    }
}

/// Peak resident memory of this process so far, in bytes (Linux; `None` elsewhere).
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn state_limit_makes_exploration_incomplete() {
        let e = explore(&Counters, &[], &Limits { max_states: Some(5), ..Limits::default() });
        assert_eq!(e.cut, Some(Cut::StateLimit(5)));
        assert!(!e.complete());
    }
}
