//! The search: Wing & Gong's depth-first linearization search with Lowe's just-in-time
//! refinement and memoisation, the algorithm Porcupine implements.
//!
//! Every operation contributes a call event and (if it returned) a return event; the events,
//! sorted by time, form a doubly linked list. The search walks the list from its head. At a
//! call event it tries to linearize that operation now: if the model accepts its output in the
//! current state, and the pair (set of linearized operations, state) has not been seen before,
//! the operation's call and return are unlinked ("lifted") and the walk restarts from the head.
//! Reaching a return event means that operation should have been linearized already: undo the
//! most recent choice (relink it, restore the state) and try the next candidate after it.
//! Lifting in LIFO order makes every undo O(1) (dancing links).
//!
//! The cache is what makes this fast: two search paths that linearized the same set of
//! operations and reached the same state have the same future, so the second is cut.
//!
//! Unknown outcomes: an operation without a return time has no return event. It may be
//! linearized at any point after its call, or never; the search succeeds as soon as every
//! *completed* operation is linearized. That is Porcupine's "return at infinity" with the
//! trailing, unobservable placements of the unknown operations left out.
//!
//! Unknown-outcome operations never expire, so they pile up as candidates, and plain
//! memoisation then explodes: at every dead end the search would try every chain of them
//! (with 5% timeouts, 800 operations took 3.4 million steps). Four rules keep that in check,
//! each proved sound in its doc and checked against a brute-force search in the tests:
//! - at each point, completed operations are tried first, unknown ones only after (`Pass`);
//! - an unknown-outcome operation is only linearized if the next one linearized depends on it
//!   (`Search::skips_useless`);
//! - a node is cut if a seen node has the same state and completed operations and a subset of
//!   its unknown-outcome ones (`Cache`);
//! - unknown-outcome operations with equal inputs are used in call order
//!   (`interchangeable_twins`).
//!
//! Events at the same instant: calls sort before returns, so two operations whose intervals
//! touch are treated as concurrent (a shared clock cannot order them).

use super::{Budget, Operation, SeqModel, Verdict};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::time::Instant;

/// Marks "no entry" in the event list's link arrays.
const NONE: u32 = u32::MAX;

/// How many search steps pass between two looks at the clock (if the budget has a time limit).
const CLOCK_EVERY_STEPS: u64 = 4096;

/// Check whether `history` is linearizable with respect to `model`.
pub fn check<M: SeqModel>(model: &M, history: &[Operation<M::Input, M::Output>], budget: Budget) -> Verdict {
    let mut run = match Run::new(model, history, budget) {
        Ok(run) => run,
        Err(verdict) => return verdict,
    };
    loop {
        if let Some(verdict) = run.advance(u64::MAX, budget.cache_bytes_max) {
            return verdict;
        }
    }
}

/// A search that can be paused and resumed: [`super::check_partitions_with`] interleaves the
/// searches of a history's keys so that a key that is quick to refute is found even when
/// another key's search is long, and bounds their memory together.
pub struct Run<'a, M: SeqModel> {
    search: Search<'a, M>,
    budget: Budget,
    started: Option<Instant>,
    linearized: Vec<u64>,
    linearized_hash: u64,
    zobrist: Vec<u64>,
    cache: Cache<M::State>,
    completed_left: usize,
    /// The choices made so far, most recent last: (call event, state before it, the pass it
    /// was made in, the frontier then).
    stack: Vec<(u32, M::State, Pass, u32)>,
    state: M::State,
    /// Diagnostics: the deepest point at which a return forced a backtrack.
    longest_prefix: Vec<u32>,
    unplaced: Option<u32>,
    steps: u64,
    entry: u32,
    pass: Pass,
    /// In the unknown pass: the first return left in the main list. Only unknown-outcome
    /// operations called before it are candidates.
    frontier: u32,
}

impl<'a, M: SeqModel> Run<'a, M> {
    /// A search of `history`, or the verdict if it is decided without one (a malformed history).
    pub fn new(
        model: &'a M,
        history: &'a [Operation<M::Input, M::Output>],
        budget: Budget,
    ) -> Result<Run<'a, M>, Verdict> {
        for (index, op) in history.iter().enumerate() {
            if let Some(return_ns) = op.return_ns {
                if return_ns < op.call_ns {
                    return Err(Verdict::Unknown {
                        reason: format!(
                            "malformed history: operation {index} returns at {return_ns} ns, before its call at {} ns",
                            op.call_ns
                        ),
                    });
                }
            }
        }
        // The event list indexes with u32; 2^31 operations is far beyond any checkable history.
        if history.len() >= (u32::MAX / 2) as usize {
            return Err(Verdict::Unknown {
                reason: format!("history of {} operations is too long", history.len()),
            });
        }
        // A read whose result is unknown constrains nothing: leave it out of the search.
        let kept: Vec<usize> = (0..history.len())
            .filter(|&i| history[i].output.is_some() || !model.is_read_only(&history[i].input))
            .collect();
        let search = Search::new(model, history, kept);
        let op_count = search.ops.len();
        let words = op_count.div_ceil(64).max(1);
        let mut unknown_mask = vec![0u64; words];
        // Zobrist keys; 0 for unknown-outcome operations, which the cache hash leaves out.
        let mut zobrist = vec![0u64; op_count];
        for (k, op) in search.ops.iter().enumerate() {
            if op.return_ns.is_none() {
                unknown_mask[k / 64] |= 1 << (k % 64);
            } else {
                zobrist[k] = op_key(k as u32);
            }
        }
        let completed_left = search.ops.iter().filter(|op| op.return_ns.is_some()).count();
        let entry = search.events.next[search.events.main_head as usize];
        Ok(Run {
            budget,
            started: None,
            linearized: vec![0u64; words],
            linearized_hash: 0,
            zobrist,
            cache: Cache::new(unknown_mask),
            completed_left,
            stack: Vec::with_capacity(op_count),
            state: model.init(),
            longest_prefix: Vec::new(),
            unplaced: None,
            steps: 0,
            entry,
            pass: Pass::Completed,
            frontier: NONE,
            search,
        })
    }

    /// Search steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Approximate memory held by the search's cache (entries, and each distinct state once
    /// with its heap data as [`SeqModel::state_bytes`] counts it).
    pub fn cache_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    /// Search for up to `steps` more steps, with at most `cache_bytes_max` bytes of cache;
    /// None if still undecided. The budget's step and time limits apply to the whole search.
    pub fn advance(&mut self, steps: u64, cache_bytes_max: u64) -> Option<Verdict> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let pause_at = self.steps.saturating_add(steps);
        let (main_head, unknown_head) = (self.search.events.main_head, self.search.events.unknown_head);
        let state_hasher = foldhash::quality::FixedState::with_seed(0x4c49_4e43_4845_434b);
        while self.completed_left > 0 {
            if self.steps >= pause_at {
                return None;
            }
            self.steps += 1;
            if self.steps > self.budget.steps_max {
                return Some(self.out_of_budget(format!("{} search steps", self.budget.steps_max)));
            }
            if let Some(time_max) = self.budget.time_max {
                if self.steps.is_multiple_of(CLOCK_EVERY_STEPS) && started.elapsed() > time_max {
                    return Some(self.out_of_budget(format!("{time_max:?}")));
                }
            }
            let events = &self.search.events;
            let candidate = match self.pass {
                Pass::Completed => {
                    // A completed operation not yet linearized has its return in the main
                    // list, after its call: the walk meets a return before the end.
                    assert!(self.entry != main_head, "walked past every pending return");
                    if !events.is_call[self.entry as usize] {
                        // Every completed candidate failed here: try the unknown-outcome ones.
                        self.pass = Pass::Unknown;
                        self.frontier = self.entry;
                        self.entry = events.next[unknown_head as usize];
                        continue;
                    }
                    Some(self.entry)
                }
                Pass::Unknown => {
                    (self.entry != unknown_head && self.entry < self.frontier).then_some(self.entry)
                }
            };
            if let Some(call) = candidate {
                let k = events.op[call as usize];
                let twin = self.search.twin_before[k as usize];
                let twin_placed =
                    twin == NONE || self.linearized[twin as usize / 64] & (1u64 << (twin % 64)) != 0;
                let next_state = twin_placed.then(|| self.search.step(&self.state, k)).flatten();
                if let Some(next_state) =
                    next_state.filter(|next| !self.search.skips_useless(&self.stack, k, next))
                {
                    let (word, bit) = (k as usize / 64, 1u64 << (k % 64));
                    self.linearized[word] |= bit;
                    self.linearized_hash ^= self.zobrist[k as usize];
                    let state_hash = state_hasher.hash_one(&next_state);
                    let hash = self.linearized_hash ^ state_hash;
                    let model = self.search.model;
                    if self
                        .cache
                        .insert(hash, state_hash, &self.linearized, &next_state, |s| model.state_bytes(s))
                    {
                        if self.cache.bytes() > cache_bytes_max {
                            let limit = format!("{} cache bytes", self.budget.cache_bytes_max);
                            return Some(self.out_of_budget(limit));
                        }
                        self.stack.push((
                            call,
                            std::mem::replace(&mut self.state, next_state),
                            self.pass,
                            self.frontier,
                        ));
                        self.search.events.lift(call);
                        if self.pass == Pass::Completed {
                            self.completed_left -= 1;
                        }
                        self.entry = self.search.events.next[main_head as usize];
                        self.pass = Pass::Completed;
                        continue;
                    }
                    self.linearized[word] &= !bit;
                    self.linearized_hash ^= self.zobrist[k as usize];
                }
                self.entry = self.search.events.next[call as usize];
            } else {
                // The operation returning at `frontier` cannot be linearized before its return
                // after the choices made so far: undo the latest one.
                if self.unplaced.is_none() || self.stack.len() > self.longest_prefix.len() {
                    self.longest_prefix = self.stack.iter().map(|&(e, ..)| events.op[e as usize]).collect();
                    self.unplaced = Some(events.op[self.frontier as usize]);
                }
                let Some((call, previous, previous_pass, previous_frontier)) = self.stack.pop() else {
                    let unplaced = self.unplaced.expect("set just above");
                    return Some(Verdict::NotLinearizable {
                        longest_prefix: self
                            .longest_prefix
                            .iter()
                            .map(|&k| self.search.history_index[k as usize])
                            .collect(),
                        unplaced_op: self.search.history_index[unplaced as usize],
                    });
                };
                self.state = previous;
                self.pass = previous_pass;
                self.frontier = previous_frontier;
                let undone = events.op[call as usize];
                self.linearized[undone as usize / 64] &= !(1u64 << (undone % 64));
                self.linearized_hash ^= self.zobrist[undone as usize];
                self.search.events.unlift(call);
                if self.pass == Pass::Completed {
                    self.completed_left += 1;
                }
                self.entry = self.search.events.next[call as usize];
            }
        }
        Some(Verdict::Linearizable)
    }

    fn out_of_budget(&self, limit: String) -> Verdict {
        Verdict::Unknown {
            reason: format!(
                "search budget of {limit} exhausted with {} of {} operations linearized",
                self.stack.len(),
                self.search.ops.len()
            ),
        }
    }
}

/// The events, sorted by time, in two circular doubly linked lists sharing parallel arrays: the
/// *main* list (calls and returns of completed operations; sentinel `main_head`) and the
/// *unknown* list (calls of unknown-outcome operations; sentinel `unknown_head`). An event's
/// index is its position in time order, so comparing indices compares times. Keeping the
/// unknown-outcome calls apart spares every walk of the main list from passing them: they have
/// no deadline, so they pile up.
struct Events {
    /// The operation (index into `Search::ops`) of each event.
    op: Vec<u32>,
    /// For a call event, its return event (NONE if the operation never returned); for a return
    /// event, NONE.
    return_of_call: Vec<u32>,
    is_call: Vec<bool>,
    next: Vec<u32>,
    prev: Vec<u32>,
    main_head: u32,
    unknown_head: u32,
}

impl Events {
    fn new<I, O>(ops: &[&Operation<I, O>]) -> Events {
        // (time, is_return, op): calls before returns at the same instant; ties by op index so
        // the order, and therefore the search, is deterministic.
        let mut sorted: Vec<(u64, bool, u32)> = Vec::with_capacity(ops.len() * 2);
        for (k, op) in ops.iter().enumerate() {
            sorted.push((op.call_ns, false, k as u32));
            if let Some(return_ns) = op.return_ns {
                sorted.push((return_ns, true, k as u32));
            }
        }
        sorted.sort_unstable();
        let len = sorted.len() as u32;
        let (main_head, unknown_head) = (len, len + 1);
        let mut events = Events {
            op: sorted.iter().map(|e| e.2).collect(),
            return_of_call: vec![NONE; sorted.len()],
            is_call: sorted.iter().map(|e| !e.1).collect(),
            next: vec![NONE; sorted.len() + 2],
            prev: vec![NONE; sorted.len() + 2],
            main_head,
            unknown_head,
        };
        let mut call_event = vec![NONE; ops.len()];
        let (mut main_tail, mut unknown_tail) = (main_head, unknown_head);
        for (e, &(_, is_return, k)) in sorted.iter().enumerate() {
            let e = e as u32;
            let tail = if is_return {
                assert!(call_event[k as usize] != NONE, "a return sorts after its call");
                events.return_of_call[call_event[k as usize] as usize] = e;
                &mut main_tail
            } else {
                call_event[k as usize] = e;
                if ops[k as usize].return_ns.is_some() {
                    &mut main_tail
                } else {
                    &mut unknown_tail
                }
            };
            events.next[*tail as usize] = e;
            events.prev[e as usize] = *tail;
            *tail = e;
        }
        for (head, tail) in [(main_head, main_tail), (unknown_head, unknown_tail)] {
            events.next[tail as usize] = head;
            events.prev[head as usize] = tail;
        }
        events
    }

    fn unlink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    /// Undo `unlink(e)`; valid only in reverse order of the unlinks.
    fn relink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = e;
        self.prev[n as usize] = e;
    }

    /// Take a linearized operation (its call event `call`) out of the list.
    fn lift(&mut self, call: u32) {
        self.unlink(call);
        let ret = self.return_of_call[call as usize];
        if ret != NONE {
            self.unlink(ret);
        }
    }

    fn unlift(&mut self, call: u32) {
        let ret = self.return_of_call[call as usize];
        if ret != NONE {
            self.relink(ret);
        }
        self.relink(call);
    }
}

/// A u64 key that is already a good hash: used as its own hash.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Seen search nodes (linearized set, state), stored flat: `bits` holds `words` u64s per
/// entry, and entries with the same hash are chained through `next`. States are interned: each
/// distinct state is stored once (`states`), and an entry holds its number, so the many entries
/// that differ only in their linearized sets share one copy of a large state.
///
/// A node is cut if a seen node has the same state, the same completed operations and a
/// subset of its unknown-outcome operations: everything the search can still do from the
/// larger set it can do from the smaller one (unknown-outcome operations have no deadline), so
/// the larger adds nothing. With equal sets this is plain memoisation. The hash therefore
/// covers the state and the completed operations only.
struct Cache<S> {
    words: usize,
    /// The unknown-outcome operations, as a bit mask over operation indices.
    unknown_mask: Vec<u64>,
    first: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    next: Vec<u32>,
    bits: Vec<u64>,
    /// Each entry's state, as an index into `states`.
    state_of: Vec<u32>,
    /// The distinct states seen, and their index by hash (chained through `state_next`).
    states: Vec<S>,
    state_first: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    state_next: Vec<u32>,
    /// The distinct states' heap data, as [`SeqModel::state_bytes`] counts it.
    state_heap_bytes: u64,
}

impl<S: Clone + Eq> Cache<S> {
    fn new(unknown_mask: Vec<u64>) -> Cache<S> {
        Cache {
            words: unknown_mask.len(),
            unknown_mask,
            first: HashMap::default(),
            next: Vec::new(),
            bits: Vec::new(),
            state_of: Vec::new(),
            states: Vec::new(),
            state_first: HashMap::default(),
            state_next: Vec::new(),
            state_heap_bytes: 0,
        }
    }

    /// Memory held, by the capacities allocated (a hash map slot counted as its key, value and
    /// control byte), for the budget.
    fn bytes(&self) -> u64 {
        let map_slot = (8 + 4 + 1) as u64;
        let vecs = self.next.capacity() * 4
            + self.bits.capacity() * 8
            + self.state_of.capacity() * 4
            + self.states.capacity() * std::mem::size_of::<S>()
            + self.state_next.capacity() * 4;
        vecs as u64
            + (self.first.capacity() + self.state_first.capacity()) as u64 * map_slot
            + self.state_heap_bytes
    }

    /// The number of `state` in `states`, interning it if new (counting its bytes).
    fn intern(&mut self, state_hash: u64, state: &S, heap_bytes: impl Fn(&S) -> usize) -> u32 {
        let head = self.state_first.get(&state_hash).copied().unwrap_or(NONE);
        let mut e = head;
        while e != NONE {
            if self.states[e as usize] == *state {
                return e;
            }
            e = self.state_next[e as usize];
        }
        let index = self.states.len() as u32;
        self.states.push(state.clone());
        self.state_next.push(head);
        self.state_first.insert(state_hash, index);
        self.state_heap_bytes += heap_bytes(state) as u64;
        index
    }

    /// Record the node; false if a seen node subsumes it.
    fn insert(
        &mut self,
        hash: u64,
        state_hash: u64,
        bits: &[u64],
        state: &S,
        heap_bytes: impl Fn(&S) -> usize,
    ) -> bool {
        assert_eq!(bits.len(), self.words);
        let id = self.intern(state_hash, state, heap_bytes);
        let head = self.first.get(&hash).copied().unwrap_or(NONE);
        let mut e = head;
        while e != NONE {
            let at = e as usize * self.words;
            let seen = &self.bits[at..at + self.words];
            if self.state_of[e as usize] == id
                && seen.iter().zip(bits).zip(&self.unknown_mask).all(|((&seen, &now), &unknown)| {
                    // Same completed operations; unknown-outcome ones seen only if now too.
                    (seen ^ now) & !unknown == 0 && seen & !now == 0
                })
            {
                return false;
            }
            e = self.next[e as usize];
        }
        let index = self.state_of.len() as u32;
        self.next.push(head);
        self.bits.extend_from_slice(bits);
        self.state_of.push(id);
        self.first.insert(hash, index);
        true
    }
}

/// A per-operation random key: the hash of the linearized completed operations is the XOR of
/// their keys, so adding or removing one updates it in O(1) (Zobrist hashing).
fn op_key(k: u32) -> u64 {
    // splitmix64 finaliser
    let mut z = u64::from(k).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Which candidates a walk of the event list tries. At each point the search first tries the
/// completed operations, then those of unknown outcome: a linearization usually needs few of
/// the latter, so trying them last finds it sooner. The order changes speed, not the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Completed,
    Unknown,
}

struct Search<'a, M: SeqModel> {
    model: &'a M,
    /// The operations searched over; `history_index[k]` is `ops[k]`'s index in the history.
    ops: Vec<&'a Operation<M::Input, M::Output>>,
    history_index: Vec<usize>,
    events: Events,
    /// For an operation with unknown outcome (no return, no output): the latest one before it
    /// (by call time, then index) with an equal input, else NONE. See `interchangeable_twins`.
    twin_before: Vec<u32>,
}

/// Operations with unknown outcome and equal inputs are interchangeable, and the one called
/// first can go wherever a later one can (neither has a deadline). So some linearization, if
/// any exists, uses them in call order: the search only linearizes such an operation once its
/// earlier twin is linearized. With many timed-out writes of few distinct values (the Jepsen
/// etcd histories) this cuts the search by orders of magnitude.
fn interchangeable_twins<I: Eq, O>(ops: &[&Operation<I, O>]) -> Vec<u32> {
    let mut twin_before = vec![NONE; ops.len()];
    let mut unknown: Vec<u32> = (0..ops.len() as u32)
        .filter(|&k| ops[k as usize].return_ns.is_none() && ops[k as usize].output.is_none())
        .collect();
    unknown.sort_by_key(|&k| (ops[k as usize].call_ns, k));
    for (i, &k) in unknown.iter().enumerate() {
        let earlier = unknown[..i].iter().rev().find(|&&j| ops[j as usize].input == ops[k as usize].input);
        if let Some(&j) = earlier {
            twin_before[k as usize] = j;
        }
    }
    twin_before
}

impl<'a, M: SeqModel> Search<'a, M> {
    fn new(model: &'a M, history: &'a [Operation<M::Input, M::Output>], kept: Vec<usize>) -> Search<'a, M> {
        let ops: Vec<_> = kept.iter().map(|&i| &history[i]).collect();
        let events = Events::new(&ops);
        let twin_before = interchangeable_twins(&ops);
        Search { model, ops, history_index: kept, events, twin_before }
    }

    /// The state after linearizing `ops[k]` in `state`, if its output allows it.
    fn step(&self, state: &M::State, k: u32) -> Option<M::State> {
        let op = self.ops[k as usize];
        match &op.output {
            Some(output) => self.model.step(state, &op.input, output),
            None => Some(self.model.apply(state, &op.input)),
        }
    }

    /// True if linearizing `k` now, giving `next`, makes the unknown-outcome operation just
    /// before it useless: `k` straight after the state before that operation gives `next` too.
    /// Then the search without that operation (a sibling, tried before or after this node)
    /// reaches the same state with the same completed operations and fewer unknown ones, and
    /// everything this node leads to, it leads to. Without this, every failure point tries
    /// every chain of pending operations, exponentially many.
    fn skips_useless(&self, stack: &[(u32, M::State, Pass, u32)], k: u32, next: &M::State) -> bool {
        let Some((previous_call, before_previous, Pass::Unknown, _)) = stack.last() else { return false };
        let previous = self.events.op[*previous_call as usize];
        // Without `previous`, `k` may not be allowed (its twin rule) and the sibling not searched.
        if self.twin_before[k as usize] == previous {
            return false;
        }
        self.step(before_previous, k).is_some_and(|alternative| alternative == *next)
    }
}
