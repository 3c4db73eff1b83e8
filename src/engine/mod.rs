//! replicheck's exploration engine: a level-synchronous, multi-threaded breadth-first search
//! over any `stateright::Model`.
//!
//! One BFS level runs in three parallel phases, with no sequential merge:
//! 1. *expand*: the frontier is split into contiguous chunks, one per thread. Each thread
//!    checks the properties, generates successors, fingerprints them and looks them up in the
//!    seen set of earlier levels (read-only; lookups are prefetched a batch of states ahead).
//!    Unknown successors become the level's *candidates*, in frontier order.
//! 2. *dedup*: the seen set is sharded by the fingerprints' top bits ([`seen`]); each
//!    thread inserts, in the global candidate order, the candidates of its own shards. The
//!    first occurrence of each new state is therefore the same for any thread count.
//! 3. *number*: first occurrences get consecutive indices in candidate order (each chunk's
//!    base is a prefix sum of per-chunk counts), which is exactly the numbering of a plain
//!    sequential BFS: new states in order of (parent, action). When edges are recorded, the
//!    candidates' edges and the seen table's provisional values then get their final indices.
//!
//! State numbering, state counts, depths, parents and the first counterexample found are
//! therefore the same on every run and for every thread count. The engine keeps one 64-bit
//! fingerprint and one `u32` parent index per state (full states only for the frontier), so
//! any state's path can be rebuilt by replaying the model from its initial state.

pub mod collision;
pub mod cycles;
pub mod distributed;
mod level;
pub mod memory;
pub mod seen;

use level::{append_rows, dedup, expand_chunk, finalize_edges, number, par_map, Owners, Part};
use seen::SeenSet;
use stateright::{Model, Property};
use std::hash::Hash;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stable 64-bit fingerprint of a state (same value on every run and machine of one build).
pub fn fingerprint<T: Hash>(value: &T) -> u64 {
    // A fixed seed: the same state has the same fingerprint on every run and thread count.
    use std::hash::BuildHasher;
    const SEED: u64 = 0x5245_504c_4943_4845;
    let fp = foldhash::quality::FixedState::with_seed(SEED).hash_one(value);
    // 0 marks an empty slot of the seen table.
    fp.max(1)
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
    /// Polled after each BFS level, as the state limit is: once set, exploration stops
    /// (incomplete, [`Cut::Interrupted`]) with what it has found so far. The CLI sets it from
    /// its SIGINT/SIGTERM handler.
    pub stop: Option<&'static AtomicBool>,
    /// Stop (incomplete, [`Cut::MemoryLimit`]) before the next BFS level is expected to take
    /// resident memory past this many bytes (see [`memory::Guard`]).
    pub memory_max_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_states: None,
            threads: 1,
            progress: None,
            record_edges: false,
            stop_when_decided: true,
            stop: None,
            memory_max_bytes: None,
        }
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
    /// [`Limits::stop`] was set (the user interrupted the run).
    Interrupted,
    /// The next level was not expected to fit under [`Limits::memory_max_bytes`].
    MemoryLimit { limit_bytes: u64, resident_bytes: u64, frontier: u64 },
}

#[derive(Clone, Debug)]
pub struct Exploration {
    pub unique_states: u64,
    pub transitions: u64,
    /// States expanded with an ample subset of their actions (partial-order reduction).
    pub ample_states: u64,
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
    pub memory: MemoryUse,
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

    /// The memory the graph's vectors hold.
    fn bytes(&self) -> u64 {
        (self.offsets.capacity() * 8 + self.targets.capacity() * 4 + self.labels.capacity()) as u64
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
    walk_with(
        model,
        exploration,
        indices,
        labels,
        Hooks { labeler, canonical: None, ample: None, compact: None },
    )
}

/// `path` for an exploration run with hooks (the same canonicalizer must be given).
pub fn path_with<M>(model: &M, exploration: &Exploration, index: u32, hooks: Hooks<M>) -> Vec<Step<M>>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    let chain = exploration.chain(index);
    walk_with(model, exploration, &chain, &vec![0; chain.len().saturating_sub(1)], hooks)
}

/// `walk` for an exploration run with hooks. Under symmetry reduction the replayed states are
/// concrete: each step takes the first action whose successor is in the recorded class.
pub fn walk_with<M>(
    model: &M,
    exploration: &Exploration,
    indices: &[u32],
    labels: &[u8],
    hooks: Hooks<M>,
) -> Vec<Step<M>>
where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    assert_eq!(labels.len() + 1, indices.len());
    let inits = model.init_states();
    let init = inits
        .into_iter()
        .find(|s| hooks.fingerprint(s) == exploration.fingerprints[indices[0] as usize])
        .expect("the model's initial states are deterministic");
    let mut steps = vec![Step { action: None, state: init }];
    walk_on(model, exploration, &mut steps, &indices[1..], labels, hooks);
    steps
}

/// Extend `steps` along the states `indices` (each a successor of the last), step k taking an
/// action whose label contains `labels[k]`.
fn walk_on<M>(
    model: &M,
    exploration: &Exploration,
    steps: &mut Vec<Step<M>>,
    indices: &[u32],
    labels: &[u8],
    hooks: Hooks<M>,
) where
    M: Model,
    M::State: Hash + Clone,
    M::Action: Clone,
{
    assert_eq!(labels.len(), indices.len());
    for (k, &index) in indices.iter().enumerate() {
        let fp = exploration.fingerprints[index as usize];
        let last = &steps.last().expect("path has a start").state;
        let mut actions = Vec::new();
        model.actions(last, &mut actions);
        let (i, action, next) = actions
            .into_iter()
            .enumerate()
            .find_map(|(i, a)| {
                let next = model.next_state(last, a.clone())?;
                let label_ok = match hooks.labeler {
                    Some(l) => l(last, &a, &next) & labels[k] == labels[k],
                    None => true,
                };
                (label_ok && hooks.fingerprint(&next) == fp).then_some((i, a, next))
            })
            .expect("the model's transitions are deterministic");
        steps.push(Step { action: Some((i, action)), state: next });
    }
}

/// A lasso of an exploration as concrete steps: the BFS path to `lasso.stem_end`, then its
/// loop, and the index of the step where the loop (the last lap) starts. Under a canonicalizer
/// the loop closes on a state of its start's class, which may not be its start: the loop is
/// walked again until a lap ends exactly where it began (for a quotient that forgets what
/// only saturates or is reset, such as silence regions, a few laps do; the laps before the
/// last become part of the stem). `None` if no lap within `laps_max` closes.
pub fn concrete_lasso<M>(
    model: &M,
    exploration: &Exploration,
    lasso: &cycles::Lasso,
    hooks: Hooks<M>,
    laps_max: usize,
) -> Option<(Vec<Step<M>>, usize)>
where
    M: Model,
    M::State: Hash + Clone + PartialEq,
    M::Action: Clone,
{
    let stem = exploration.chain(lasso.stem_end);
    let mut steps = walk_with(model, exploration, &stem, &vec![0; stem.len() - 1], hooks);
    for _ in 0..laps_max {
        let lap_start = steps.len() - 1;
        walk_on(model, exploration, &mut steps, &lasso.loop_states, &lasso.loop_labels, hooks);
        if steps[lap_start].state == steps.last().expect("a loop has steps").state {
            return Some((steps, lap_start));
        }
    }
    None
}

/// States are numbered `0..STATE_COUNT_MAX` in BFS order with `u32` indices (`u32::MAX` is
/// "no parent"). A space larger than this stops with [`Cut::StateLimit`] rather than wrap.
pub const STATE_COUNT_MAX: u64 = u32::MAX as u64 - 1;
const NO_PARENT: u32 = u32::MAX;
/// A candidate that is a duplicate of an earlier candidate of its level (safety-only runs,
/// which do not need to know of which).
const DUPLICATE: u32 = u32::MAX;
/// Frontier states expanded together before their successors are looked up, so the lookups'
/// cache misses (prefetched as successors are generated) overlap.
const BATCH_STATES: usize = 16;
/// How far ahead of the insert position the dedup pass prefetches.
const PREFETCH_AHEAD: usize = 16;
/// Below this many frontier states a level is expanded on one thread.
const PARALLEL_FRONTIER_MIN: usize = 256;
/// A parallel level is cut into this many chunks per thread, taken by whichever thread is
/// free: states differ in cost (an ample state has few successors), and with one chunk per
/// thread the thread with the dearer half kept the other waiting (a tenth of a library
/// model's expansion time at 2 threads). More chunks balance better but each keeps its own
/// buffers from level to level: at 8 per thread Repl's peak at 2 threads grew by a quarter.
const CHUNKS_PER_THREAD: usize = 2;

/// Replaces a state by the representative of its symmetry class before it is fingerprinted.
/// Exploration and counterexamples keep the concrete states; only the seen set identifies
/// symmetric ones, so a reduced run explores one state per class. Sound only when the
/// initial states, the transitions and every checked property are invariant under the
/// symmetry; a graph recorded under it is the quotient graph, whose edge labels are those of
/// the class's first concrete state (per-process fairness classes are not permuted).
/// `None` when the state is its own representative (most states, for a quotient that merges
/// few): no copy per candidate.
pub type Canonicalizer<'a, M> = &'a (dyn Fn(&<M as Model>::State) -> Option<<M as Model>::State> + Sync);

/// Partial-order reduction: given a state and its enabled actions (in the model's order), put
/// in `out` the indices of an ample subset to expand instead of all of them, or leave `out`
/// empty to expand all. The model is responsible for the subset's persistence (no action
/// dependent on it can run first), its invisibility to what is checked, and for a path to a
/// `Tick`-like dependent action; the engine adds the cycle proviso: the subset is used only if
/// none of its successors is already known (in an earlier level, or the state itself). Every
/// edge of a level-synchronous BFS that closes a cycle leads to a known state, so on every
/// cycle of the reduced graph some state is fully expanded, and an action is never deferred
/// forever. Deterministic: the seen set of earlier levels is read-only while a level expands.
pub type Ample<'a, M> = &'a (dyn Fn(&<M as Model>::State, &[<M as Model>::Action], &mut Vec<usize>) + Sync);

/// Make a state the engine keeps smaller without changing its hash or equality (shared parts
/// interned, spare capacity dropped). Called on each level's candidates, not on successors
/// that are already known.
pub type Compactor<'a, M> = &'a (dyn Fn(&mut <M as Model>::State) + Sync);

/// Optional per-model hooks of an exploration.
pub struct Hooks<'a, M: Model> {
    /// Label every transition and keep the labelled graph (for cycle analysis).
    pub labeler: Option<EdgeLabeler<'a, M>>,
    /// A quotient (symmetry, silence regions): fingerprint `canonical(state)` instead of `state`.
    pub canonical: Option<Canonicalizer<'a, M>>,
    /// Partial-order reduction (see [`Ample`]).
    pub ample: Option<Ample<'a, M>>,
    /// Memory (see [`Compactor`]).
    pub compact: Option<Compactor<'a, M>>,
}

impl<M: Model> Clone for Hooks<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: Model> Copy for Hooks<'_, M> {}
impl<M: Model> Default for Hooks<'_, M> {
    fn default() -> Self {
        Hooks { labeler: None, canonical: None, ample: None, compact: None }
    }
}

impl<M: Model> Hooks<'_, M>
where
    M::State: Hash,
{
    #[inline]
    fn fingerprint(&self, state: &M::State) -> u64 {
        match self.canonical {
            Some(canonical) => canonical(state).map_or_else(|| fingerprint(state), |c| fingerprint(&c)),
            None => fingerprint(state),
        }
    }
}

/// Where the engine's memory went (bytes, at the end of the exploration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryUse {
    /// One `u64` fingerprint per state.
    pub fingerprints_bytes: u64,
    /// One `u32` parent index per state.
    pub parents_bytes: u64,
    /// The seen table: slots (at most 3/4 full) of `u64` keys, plus `u32` values when edges
    /// are recorded.
    pub seen_bytes: u64,
    /// The recorded graph (offsets, targets, labels), if any.
    pub graph_bytes: u64,
    /// The largest level's working set: frontier states plus candidate successors.
    pub level_peak_bytes: u64,
}

impl MemoryUse {
    pub fn total_bytes(&self) -> u64 {
        self.fingerprints_bytes
            + self.parents_bytes
            + self.seen_bytes
            + self.graph_bytes
            + self.level_peak_bytes
    }
}

/// Labels a transition for cycle analysis (bits chosen by the caller, e.g. "time passes").
pub type EdgeLabeler<'a, M> =
    &'a (dyn Fn(&<M as Model>::State, &<M as Model>::Action, &<M as Model>::State) -> u8 + Sync);

/// Explore every state reachable from the model's initial states, checking `properties`.
pub fn explore<M>(model: &M, properties: &[Property<M>], limits: &Limits) -> Exploration
where
    M: Model + Sync,
    M::State: Hash + Clone + Send + Sync,
    M::Action: Clone,
{
    explore_with(model, properties, limits, Hooks::default())
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
    explore_with(model, properties, limits, Hooks { labeler, canonical: None, ample: None, compact: None })
}

/// `explore` with hooks: an edge labeler (as `explore_labelled`) and a symmetry canonicalizer.
pub fn explore_with<M>(model: &M, properties: &[Property<M>], limits: &Limits, hooks: Hooks<M>) -> Exploration
where
    M: Model + Sync,
    M::State: Hash + Clone + Send + Sync,
    M::Action: Clone,
{
    explore_bounded(model, properties, limits, hooks, STATE_COUNT_MAX)
}

/// The engine, with the index limit as a parameter so a test can reach it.
///
/// One loop iteration is one level; its phases are functions of [`level`]. What is left here
/// is the bookkeeping that carries from level to level (seen set, frontier, part pool,
/// counters, the reason to stop), kept in one place rather than split into functions passing
/// it all back and forth.
fn explore_bounded<M>(
    model: &M,
    properties: &[Property<M>],
    limits: &Limits,
    hooks: Hooks<M>,
    state_count_max: u64,
) -> Exploration
where
    M: Model + Sync,
    M::State: Hash + Clone + Send + Sync,
    M::Action: Clone,
{
    assert!(properties.len() <= 64);
    assert!(state_count_max <= STATE_COUNT_MAX);
    let start = Instant::now();
    let threads = limits.threads.max(1);
    let record = limits.record_edges || hooks.labeler.is_some();
    let mut seen = SeenSet::new(record);
    let (mut fingerprints, mut parents, initial) = initial_states(model, hooks, &mut seen);
    // The frontier is kept in the segments the level's parts numbered (in BFS order), not
    // copied into one vector: that copy was a serial pass over every state.
    let mut frontier: Vec<Arc<Vec<M::State>>> = vec![Arc::new(initial)];
    let mut frontier_start = 0u32;
    let mut discoveries: Vec<Option<u32>> = vec![None; properties.len()];
    let mut graph = record.then(Graph::default);
    let mut transitions = 0u64;
    let mut ample_states = 0u64;
    let mut depth = 0u32;
    let mut cut = None;
    let mut memory_guard = limits.memory_max_bytes.map(memory::Guard::new);
    let mut level_peak_bytes = 0u64;
    let mut pool: Vec<Part<M::State>> = Vec::new();
    let all_decided = |d: &[Option<u32>]| d.iter().all(|x| x.is_some());

    let mut frontier_len = frontier[0].len();
    // The last level's new candidates per frontier state: what a chunk's candidate buffer is
    // sized by.
    let mut candidates_per_state = 0.0f64;
    while frontier_len > 0 {
        let workers = if frontier_len >= PARALLEL_FRONTIER_MIN { threads } else { 1 };
        let chunk =
            if workers > 1 { frontier_len.div_ceil(workers * CHUNKS_PER_THREAD) } else { frontier_len };
        // The chunks own the segments between them (shared): a segment is freed by the worker
        // whose chunk lets go of it last, while the others still expand, not by a pass of its
        // own after the level.
        let chunks = chunks_of(&std::mem::take(&mut frontier), chunk);
        // Never more owners than shards: an owner with none would start an idle thread.
        let owners = Owners::new(workers.min(seen::SHARD_COUNT));
        let jobs: Vec<_> = chunks.into_iter().map(|c| (c, pool.pop().unwrap_or_else(Part::new))).collect();
        let mut parts = par_map(jobs, workers, |_, (pieces, mut part)| {
            let pieces: Vec<(u32, &[M::State])> = pieces
                .iter()
                .map(|(offset, segment, range)| (frontier_start + *offset as u32, &segment[range.clone()]))
                .collect();
            let states: usize = pieces.iter().map(|p| p.1.len()).sum();
            part.make_room((states as f64 * candidates_per_state * 1.25) as usize);
            expand_chunk(model, properties, &seen, hooks, record, &pieces, &owners, &mut part);
            part
        });
        transitions += merge_discoveries(&parts, &mut discoveries);
        ample_states += parts.iter().map(|p| p.ample_states).sum::<u64>();
        let (starts, candidates) = candidate_starts(&parts);
        candidates_per_state = candidates as f64 / frontier_len as f64;
        level_peak_bytes = level_peak_bytes.max(
            (frontier_len * std::mem::size_of::<M::State>()
                + candidates * (std::mem::size_of::<M::State>() + 8 + 4 + 4)) as u64,
        );
        let base = fingerprints.len() as u64;
        if candidates as u64 >= u64::from(u32::MAX) {
            // Candidate positions are `u32` provisional values in the seen table.
            cut = Some(Cut::StateLimit(state_count_max));
            break;
        }
        for part in &mut parts {
            part.links.resize_with(part.cand_fp.len(), || AtomicU32::new(0));
        }
        let new_counts = dedup(&mut seen, &parts, &starts, &owners);
        let (rank_bases, next_index) = rank_bases(&new_counts, base);
        if next_index > state_count_max {
            // The level's new states cannot all get a `u32` index: stop before numbering them.
            cut = Some(Cut::StateLimit(state_count_max));
            break;
        }
        let (rest, mut parts) = number(parts, &new_counts, &rank_bases, &starts, record, workers);
        if record {
            finalize_edges(&mut seen, &mut parts, &rest, &starts, &owners);
        }
        let mut next = Vec::with_capacity(rest.len());
        for n in rest {
            fingerprints.extend(n.fingerprints);
            parents.extend(n.parents);
            if !n.states.is_empty() {
                next.push(Arc::new(n.states));
            }
        }
        if let Some(g) = graph.as_mut() {
            append_rows(g, &parts);
        }
        pool = parts;
        assert_eq!(fingerprints.len() as u64, next_index);
        if !next.is_empty() {
            depth += 1;
        }
        frontier_start = base as u32;
        frontier = next;
        frontier_len = (next_index - base) as usize;
        if let Some(f) = limits.progress {
            f(&Progress {
                unique_states: fingerprints.len() as u64,
                depth,
                frontier: frontier_len,
                elapsed: start.elapsed(),
            });
        }
        if limits.stop_when_decided && all_decided(&discoveries) && !properties.is_empty() {
            if frontier_len > 0 {
                cut = Some(Cut::AllDecided);
            }
            break;
        }
        if let Some(max) = limits.max_states {
            if fingerprints.len() as u64 >= max && frontier_len > 0 {
                cut = Some(Cut::StateLimit(max));
                break;
            }
        }
        if limits.stop.is_some_and(|s| s.load(Ordering::Relaxed)) && frontier_len > 0 {
            cut = Some(Cut::Interrupted);
            break;
        }
        if let Some(guard) = memory_guard.as_mut() {
            if let Err(resident_bytes) = guard.next_level_fits(frontier_len as u64) {
                if frontier_len > 0 {
                    cut = Some(Cut::MemoryLimit {
                        limit_bytes: guard.limit_bytes,
                        resident_bytes,
                        frontier: frontier_len as u64,
                    });
                    break;
                }
            }
        }
    }
    let graph = graph.map(|mut g| {
        g.offsets.push(g.targets.len() as u64);
        g
    });
    let memory = MemoryUse {
        fingerprints_bytes: (fingerprints.capacity() * 8) as u64,
        parents_bytes: (parents.capacity() * 4) as u64,
        seen_bytes: seen.bytes() as u64,
        graph_bytes: graph.as_ref().map_or(0, Graph::bytes),
        level_peak_bytes,
    };
    Exploration {
        unique_states: fingerprints.len() as u64,
        transitions,
        ample_states,
        max_depth: depth,
        cut,
        elapsed: start.elapsed(),
        discoveries,
        fingerprints,
        parents,
        graph,
        memory,
    }
}

/// The frontier's segments cut into chunks of at most `chunk` states in BFS order, each chunk
/// a list of pieces (a piece's offset in the frontier, its segment, the piece's range in it)
/// that may span segments: the chunks are as many whatever the segments, so the part pool
/// stays that size. A segment lives as long as a chunk holds a piece of it.
#[allow(clippy::type_complexity)]
fn chunks_of<S>(segments: &[Arc<Vec<S>>], chunk: usize) -> Vec<Vec<(usize, Arc<Vec<S>>, Range<usize>)>> {
    let chunk = chunk.max(1);
    let mut chunks = vec![Vec::new()];
    let (mut offset, mut room) = (0, chunk);
    for segment in segments {
        let mut at = 0;
        while at < segment.len() {
            if room == 0 {
                chunks.push(Vec::new());
                room = chunk;
            }
            let len = room.min(segment.len() - at);
            chunks.last_mut().expect("one chunk at least").push((offset, Arc::clone(segment), at..at + len));
            offset += len;
            room -= len;
            at += len;
        }
    }
    chunks
}

/// Fold a level's parts into the exploration's discoveries; returns the level's transitions.
/// Chunks are in frontier order, so the first chunk with a discovery has the first one.
fn merge_discoveries<S>(parts: &[Part<S>], discoveries: &mut [Option<u32>]) -> u64 {
    let mut transitions = 0;
    for part in parts {
        for (d, found) in discoveries.iter_mut().zip(&part.discoveries) {
            *d = d.or(*found);
        }
        transitions += part.transitions;
    }
    transitions
}

/// Each part's first position in the level's global candidate order, and the candidate count.
fn candidate_starts<S>(parts: &[Part<S>]) -> (Vec<usize>, usize) {
    let mut starts = Vec::with_capacity(parts.len());
    let mut candidates = 0usize;
    for part in parts {
        starts.push(candidates);
        candidates += part.cand_fp.len();
    }
    (starts, candidates)
}

/// Each part's first new state index (a prefix sum of the new counts from `base`), and the
/// index after the level's last new state.
fn rank_bases(new_counts: &[u64], base: u64) -> (Vec<u64>, u64) {
    let mut rank_bases = Vec::with_capacity(new_counts.len());
    let mut next_index = base;
    for &n in new_counts {
        rank_bases.push(next_index);
        next_index += n;
    }
    (rank_bases, next_index)
}

/// The model's initial states, deduplicated, with their fingerprints and (no) parents; they
/// are inserted into `seen` with their final indices.
#[allow(clippy::type_complexity)]
fn initial_states<M>(model: &M, hooks: Hooks<M>, seen: &mut SeenSet) -> (Vec<u64>, Vec<u32>, Vec<M::State>)
where
    M: Model,
    M::State: Hash,
{
    let mut fingerprints: Vec<u64> = Vec::new();
    let mut parents: Vec<u32> = Vec::new();
    let mut frontier: Vec<M::State> = Vec::new();
    for s in model.init_states() {
        let fp = hooks.fingerprint(&s);
        let index = fingerprints.len() as u32;
        if seen.insert(fp, index).is_none() {
            frontier.push(s);
            fingerprints.push(fp);
            parents.push(NO_PARENT);
        }
    }
    // Initial states were inserted with their final indices.
    seen.shards_mut().iter_mut().for_each(|s| drop(s.take_pending()));
    (fingerprints, parents, frontier)
}

/// Peak resident memory of this process so far, in bytes (Linux; `None` elsewhere).
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests;
