//! One BFS level's phases (see the module docs of [`super`]): expand the frontier's chunks,
//! dedup the candidates shard by shard, number the first occurrences, and, when edges are
//! recorded, give the candidates' edges and the seen table's provisional values their final
//! indices.

use super::seen::{shard_of, SeenSet, Shard, SHARD_COUNT};
use super::{Graph, Hooks, BATCH_STATES, DUPLICATE, NO_PARENT, PREFETCH_AHEAD};
use stateright::{Expectation, Model, Property};
use std::hash::Hash;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// What one worker learns about its contiguous chunk of a level's frontier.
pub(super) struct Part<S> {
    /// Per property, the first state of the chunk (BFS order) that discovers it.
    pub(super) discoveries: Vec<Option<u32>>,
    pub(super) transitions: u64,
    /// States of the chunk expanded with an ample subset of their actions.
    pub(super) ample_states: u64,
    /// Successors not in the seen set before this level, in order: fingerprint, state, and
    /// the index of the state that generated it. They may repeat within the level.
    pub(super) cand_fp: Vec<u64>,
    pub(super) cand_state: Vec<S>,
    pub(super) cand_parent: Vec<u32>,
    /// Per candidate, set by [`dedup`].
    pub(super) links: Vec<AtomicU32>,
    /// With several owners, per dedup thread (the owner of a range of shards, as
    /// [`shard_ranges`] splits them), the candidates whose fingerprints fall in its shards, in
    /// order: each thread reads its own candidates instead of scanning all of them.
    pub(super) owned: Vec<Vec<u32>>,
    pub(super) edges: EdgePart,
}

impl<S> Part<S> {
    /// An empty part; parts are reused from level to level, so their buffers' pages stay
    /// mapped instead of being returned to the system and faulted in (zeroed) again.
    pub(super) fn new() -> Part<S> {
        Part {
            discoveries: Vec::new(),
            transitions: 0,
            ample_states: 0,
            cand_fp: Vec::new(),
            cand_state: Vec::new(),
            cand_parent: Vec::new(),
            links: Vec::new(),
            owned: Vec::new(),
            edges: EdgePart::default(),
        }
    }

    /// Make room for about `candidates` candidate states. Parts are taken from the pool in no
    /// particular order, so a buffer grown for a large chunk is let go when the chunk it now
    /// gets needs less than half of it: kept, every part grew to the largest chunk it ever saw,
    /// and at 2 threads the pool held twice the level's candidates (256 B each on the library).
    /// A buffer too small is let go too: it is empty here, and growing it would copy its whole
    /// old allocation (stale states) into the new one.
    pub(super) fn make_room(&mut self, candidates: usize) {
        debug_assert!(self.cand_state.is_empty(), "the last level's candidates were numbered");
        let capacity = self.cand_state.capacity();
        if capacity > 2 * candidates || capacity < candidates {
            self.cand_state = Vec::new();
        }
        self.cand_state.reserve(candidates);
    }

    pub(super) fn clear(&mut self, property_count: usize, owners: &Owners) {
        self.discoveries.clear();
        self.discoveries.resize(property_count, None);
        self.transitions = 0;
        self.ample_states = 0;
        self.cand_fp.clear();
        self.cand_state.clear();
        self.cand_parent.clear();
        self.links.clear();
        self.owned.resize_with(if owners.count > 1 { owners.count } else { 0 }, Vec::new);
        self.owned.iter_mut().for_each(Vec::clear);
        let e = &mut self.edges;
        e.row_len.clear();
        e.targets.clear();
        e.labels.clear();
        e.cand_edge.clear();
    }
}

/// A chunk's rows of the graph, while its candidates' indices are not known yet.
#[derive(Default)]
pub(super) struct EdgePart {
    pub(super) row_len: Vec<u32>,
    /// Known targets; a candidate's slot is patched once the level is numbered.
    pub(super) targets: Vec<u32>,
    pub(super) labels: Vec<u8>,
    /// Per candidate, its slot in `targets`.
    pub(super) cand_edge: Vec<usize>,
}

/// Run `f` on every item with `workers` scoped threads (the calling thread among them), each
/// taking the next item nobody has taken: an item that costs more holds up one worker, not
/// the others. The results come back in item order, whatever thread ran each.
pub(super) fn par_map<I: Send, T: Send>(
    items: Vec<I>,
    workers: usize,
    f: impl Fn(usize, I) -> T + Sync,
) -> Vec<T> {
    let workers = workers.min(items.len());
    if workers <= 1 {
        return items.into_iter().enumerate().map(|(i, x)| f(i, x)).collect();
    }
    let count = items.len();
    let slots: Vec<Mutex<Option<I>>> = items.into_iter().map(|x| Mutex::new(Some(x))).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                return done;
            }
            let item = slots[i].lock().expect("no worker panicked").take().expect("each item is taken once");
            done.push((i, f(i, item)));
        }
    };
    let mut done = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..workers).map(|_| scope.spawn(work)).collect();
        let mut done = work();
        for h in handles {
            done.extend(h.join().expect("engine worker panicked"));
        }
        done
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// Expand a chunk of the frontier (its pieces, each with its first state's index): check the
/// properties on each state, generate its successors, and look them up in the seen set of the
/// earlier levels (read-only here).
#[allow(clippy::too_many_arguments)]
pub(super) fn expand_chunk<M>(
    model: &M,
    properties: &[Property<M>],
    seen: &SeenSet,
    hooks: Hooks<M>,
    record: bool,
    pieces: &[(u32, &[M::State])],
    owners: &Owners,
    part: &mut Part<M::State>,
) where
    M: Model,
    M::State: Hash,
    M::Action: Clone,
{
    part.clear(properties.len(), owners);
    let mut actions = Vec::new();
    let mut batch: Vec<(u64, M::State, u8)> = Vec::new();
    let mut chosen: Vec<usize> = Vec::new();
    let mut rows: Vec<(u32, usize)> = Vec::new();
    let groups = pieces.iter().flat_map(|&(first_index, states)| {
        states
            .chunks(BATCH_STATES)
            .enumerate()
            .map(move |(b, g)| (first_index + (b * BATCH_STATES) as u32, g))
    });
    for (group_index, group) in groups {
        rows.clear();
        for (i, state) in group.iter().enumerate() {
            let index = group_index + i as u32;
            discover(model, properties, state, index, &mut part.discoveries, &|_| false);
            model.actions(state, &mut actions);
            let before = batch.len();
            if let Some(ample) = hooks.ample {
                chosen.clear();
                ample(state, &actions, &mut chosen);
                if !chosen.is_empty() && chosen.len() < actions.len() {
                    // The cycle proviso: an ample successor already known may close a cycle
                    // on which the other actions would be deferred forever; expand fully.
                    let closes_cycle =
                        chosen.iter().any(|&i| match successor(model, hooks, state, actions[i].clone()) {
                            Some((fp, next, label)) => {
                                let known = seen.get(fp).is_some();
                                batch.push((fp, next, label));
                                known
                            }
                            None => true,
                        });
                    if closes_cycle {
                        batch.truncate(before);
                    } else {
                        part.ample_states += 1;
                        actions.clear();
                    }
                }
            }
            for a in actions.drain(..) {
                let Some((fp, next, label)) = successor(model, hooks, state, a) else { continue };
                seen.prefetch(fp);
                batch.push((fp, next, label));
            }
            rows.push((index, batch.len() - before));
        }
        let mut successors = batch.drain(..);
        for &(parent, count) in &rows {
            part.transitions += count as u64;
            let edges = &mut part.edges;
            if record {
                edges.row_len.push(u32::try_from(count).expect("fewer than 2^32 actions per state"));
            }
            for (fp, next, label) in successors.by_ref().take(count) {
                let known = seen.get(fp);
                if record {
                    if hooks.labeler.is_some() {
                        edges.labels.push(label);
                    }
                    if known.is_none() {
                        edges.cand_edge.push(edges.targets.len());
                    }
                    edges.targets.push(known.unwrap_or(NO_PARENT));
                }
                if known.is_none() {
                    let mut next = next;
                    if let Some(compact) = hooks.compact {
                        compact(&mut next);
                    }
                    if !part.owned.is_empty() {
                        let c = u32::try_from(part.cand_fp.len()).expect("fewer than 2^32 candidates");
                        part.owned[owners.of_shard[shard_of(fp)]].push(c);
                    }
                    part.cand_fp.push(fp);
                    part.cand_state.push(next);
                    part.cand_parent.push(parent);
                }
            }
        }
    }
}

/// Record `index` as the discovery of every property that `state` discovers (violates an
/// `always`, satisfies a `sometimes`) and that has none yet, skipping those `skip` names.
pub(super) fn discover<M: Model>(
    model: &M,
    properties: &[Property<M>],
    state: &M::State,
    index: u32,
    found: &mut [Option<u32>],
    skip: &dyn Fn(usize) -> bool,
) {
    for (p, prop) in properties.iter().enumerate() {
        if found[p].is_some() || skip(p) {
            continue;
        }
        let holds = (prop.condition)(model, state);
        let discovered = match prop.expectation {
            Expectation::Always => !holds,
            Expectation::Sometimes => holds,
            Expectation::Eventually => unreachable!("liveness is checked on cycles, not with `eventually`"),
        };
        if discovered {
            found[p] = Some(index);
        }
    }
}

/// A successor with its fingerprint and (when a labeler is given) its edge label.
fn successor<M>(model: &M, hooks: Hooks<M>, state: &M::State, a: M::Action) -> Option<(u64, M::State, u8)>
where
    M: Model,
    M::State: Hash,
    M::Action: Clone,
{
    let (next, label) = match hooks.labeler {
        Some(label) => {
            let next = model.next_state(state, a.clone())?;
            let l = label(state, &a, &next);
            (next, l)
        }
        None => (model.next_state(state, a)?, 0),
    };
    Some((hooks.fingerprint(&next), next, label))
}

/// The first shard of range `t` when the shards are split into `n` contiguous ranges: range
/// `t` is `range_start(t, n)..range_start(t + 1, n)`.
fn range_start(t: usize, n: usize) -> usize {
    SHARD_COUNT * t / n
}

/// The threads of a level (in dedup each owns a range of shards) and, per shard, the one
/// whose range of [`shard_ranges`] holds it: worked out once per level, read for every
/// candidate.
pub(super) struct Owners {
    pub(super) count: usize,
    pub(super) of_shard: [usize; SHARD_COUNT],
}

impl Owners {
    pub(super) fn new(count: usize) -> Owners {
        let of_shard = std::array::from_fn(|s| {
            (0..count).find(|&t| s < range_start(t + 1, count)).expect("a shard is in some range")
        });
        Owners { count, of_shard }
    }
}

/// Split the shards into `n` contiguous ranges (first shard index, shards).
pub(super) fn shard_ranges(shards: &mut [Shard], n: usize) -> Vec<(usize, &mut [Shard])> {
    let mut out = Vec::with_capacity(n);
    let mut rest = shards;
    let mut lo = 0;
    for t in 0..n {
        let hi = range_start(t + 1, n);
        let (mine, tail) = rest.split_at_mut(hi - lo);
        out.push((lo, mine));
        rest = tail;
        lo = hi;
    }
    out
}

/// Insert a level's candidates into the seen set, each of the `owners`' threads its own shards,
/// every thread in the level's global candidate order. `parts[w].links[c]` becomes the candidate's own position if
/// it is the first occurrence of its state, else the position of that first occurrence (or
/// [`DUPLICATE`] when values are not kept). Returns the first occurrences per part.
pub(super) fn dedup<S: Sync>(
    seen: &mut SeenSet,
    parts: &[Part<S>],
    starts: &[usize],
    owners: &Owners,
) -> Vec<u64> {
    let with_values = seen.with_values();
    let ranges = shard_ranges(seen.shards_mut(), owners.count);
    let counts = par_map(ranges, owners.count, |t, (lo, mine)| {
        let hi = lo + mine.len();
        let mut counts = vec![0u64; parts.len()];
        for (w, part) in parts.iter().enumerate() {
            let fps = &part.cand_fp;
            let insert = |mine: &mut [Shard], counts: &mut [u64], c: usize| {
                let fp = fps[c];
                let s = shard_of(fp);
                debug_assert!((lo..hi).contains(&s), "a candidate is deduplicated by its shard's owner");
                let pos = (starts[w] + c) as u32;
                let link = match mine[s - lo].insert(fp, pos) {
                    None => {
                        counts[w] += 1;
                        pos
                    }
                    Some(first) if with_values => first,
                    Some(_) => DUPLICATE,
                };
                part.links[c].store(link, Ordering::Relaxed);
            };
            // This thread's candidates of the part, in order; all of them when one thread owns
            // every shard.
            match part.owned.get(t) {
                Some(owned) => {
                    for (k, &c) in owned.iter().enumerate() {
                        if let Some(&ahead) = owned.get(k + PREFETCH_AHEAD) {
                            let ahead = fps[ahead as usize];
                            mine[shard_of(ahead) - lo].prefetch(ahead);
                        }
                        insert(mine, &mut counts, c as usize);
                    }
                }
                None => {
                    debug_assert!(lo == 0 && hi == SHARD_COUNT, "one thread owns every shard");
                    for c in 0..fps.len() {
                        if let Some(&ahead) = fps.get(c + PREFETCH_AHEAD) {
                            mine[shard_of(ahead)].prefetch(ahead);
                        }
                        insert(mine, &mut counts, c);
                    }
                }
            }
        }
        counts
    });
    (0..parts.len()).map(|w| counts.iter().map(|c| c[w]).sum()).collect()
}

/// A part's first occurrences, numbered: the level's new states in BFS order.
pub(super) struct Numbered<S> {
    pub(super) fingerprints: Vec<u64>,
    pub(super) parents: Vec<u32>,
    pub(super) states: Vec<S>,
    /// Per candidate, its state index if it is a first occurrence (edges only).
    pub(super) finals: Vec<u32>,
}

/// Number each part's first occurrences from its rank base (phase 3); with `record`, each
/// candidate's final index (or [`NO_PARENT`] for a repeat) in `finals`. The parts come back
/// for reuse.
pub(super) fn number<S: Send>(
    parts: Vec<Part<S>>,
    new_counts: &[u64],
    rank_bases: &[u64],
    starts: &[usize],
    record: bool,
    workers: usize,
) -> (Vec<Numbered<S>>, Vec<Part<S>>) {
    let numbered = par_map(parts, workers, |w, mut part| {
        let mut out = Numbered {
            fingerprints: Vec::with_capacity(new_counts[w] as usize),
            parents: Vec::with_capacity(new_counts[w] as usize),
            states: Vec::with_capacity(new_counts[w] as usize),
            finals: Vec::new(),
        };
        let mut index = rank_bases[w] as u32;
        let links = std::mem::take(&mut part.links);
        let candidates = part.cand_fp.iter().zip(part.cand_state.drain(..)).zip(&part.cand_parent);
        for (c, ((&fp, state), &parent)) in candidates.enumerate() {
            let first = links[c].load(Ordering::Relaxed) == (starts[w] + c) as u32;
            if record {
                out.finals.push(if first { index } else { NO_PARENT });
            }
            if first {
                out.fingerprints.push(fp);
                out.parents.push(parent);
                out.states.push(state);
                index += 1;
            }
        }
        part.links = links;
        (out, part)
    });
    numbered.into_iter().unzip()
}

/// Give the candidates' edges and the seen table's provisional values (candidate positions)
/// their final state indices: the parts' edges, then each of the `owners`' threads its own
/// shards.
pub(super) fn finalize_edges<S: Send>(
    seen: &mut SeenSet,
    parts: &mut [Part<S>],
    rest: &[Numbered<S>],
    starts: &[usize],
    owners: &Owners,
) {
    // Candidates' edges and the table's provisional values get the final indices.
    let finals: Vec<&Vec<u32>> = rest.iter().map(|r| &r.finals).collect();
    let final_of = |pos: u32| {
        let w = starts.partition_point(|&s| s <= pos as usize) - 1;
        let f = finals[w][pos as usize - starts[w]];
        debug_assert!(f != NO_PARENT, "a link points at a first occurrence");
        f
    };
    par_map(parts.iter_mut().collect(), owners.count, |w, part| {
        let edges = &mut part.edges;
        for (c, &slot) in edges.cand_edge.iter().enumerate() {
            let f = finals[w][c];
            edges.targets[slot] =
                if f != NO_PARENT { f } else { final_of(part.links[c].load(Ordering::Relaxed)) };
        }
    });
    let ranges = shard_ranges(seen.shards_mut(), owners.count);
    par_map(ranges, owners.count, |_, (_, shards)| {
        for shard in shards.iter_mut() {
            for (slot, pos) in shard.take_pending() {
                shard.set(slot, final_of(pos));
            }
        }
    });
}

/// Append the level's rows to the graph, in frontier order.
pub(super) fn append_rows<S>(g: &mut Graph, parts: &[Part<S>]) {
    for part in parts {
        let edges = &part.edges;
        let mut at = g.targets.len() as u64;
        for &len in &edges.row_len {
            g.offsets.push(at);
            at += u64::from(len);
        }
        g.targets.extend_from_slice(&edges.targets);
        g.labels.extend_from_slice(&edges.labels);
        debug_assert_eq!(at, g.targets.len() as u64);
    }
}
