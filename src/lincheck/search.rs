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
    for (index, op) in history.iter().enumerate() {
        if let Some(return_ns) = op.return_ns {
            if return_ns < op.call_ns {
                return Verdict::Unknown {
                    reason: format!(
                        "malformed history: operation {index} returns at {return_ns} ns, before its call at {} ns",
                        op.call_ns
                    ),
                };
            }
        }
    }
    // The event list indexes with u32; 2^31 operations is far beyond any checkable history.
    if history.len() >= (u32::MAX / 2) as usize {
        return Verdict::Unknown { reason: format!("history of {} operations is too long", history.len()) };
    }
    // A read whose result is unknown constrains nothing: leave it out of the search.
    let kept: Vec<usize> = (0..history.len())
        .filter(|&i| history[i].output.is_some() || !model.is_read_only(&history[i].input))
        .collect();
    Search::new(model, history, kept, budget).run()
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
/// entry, and entries with the same hash are chained through `next`.
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
    states: Vec<S>,
    /// Approximate memory held, for the budget.
    bytes: u64,
}

impl<S: Clone + Eq> Cache<S> {
    fn new(unknown_mask: Vec<u64>) -> Cache<S> {
        Cache {
            words: unknown_mask.len(),
            unknown_mask,
            first: HashMap::default(),
            next: Vec::new(),
            bits: Vec::new(),
            states: Vec::new(),
            bytes: 0,
        }
    }

    /// Bytes one entry adds: its bit set, state, chain link and (about) a hash map slot.
    fn entry_bytes(&self) -> u64 {
        (self.words * 8 + std::mem::size_of::<S>() + 4 + 16) as u64
    }

    /// Record the node; false if a seen node subsumes it.
    fn insert(&mut self, hash: u64, bits: &[u64], state: &S) -> bool {
        assert_eq!(bits.len(), self.words);
        let head = self.first.get(&hash).copied().unwrap_or(NONE);
        let mut e = head;
        while e != NONE {
            let at = e as usize * self.words;
            let seen = &self.bits[at..at + self.words];
            let subsumed = seen.iter().zip(bits).zip(&self.unknown_mask).all(|((&seen, &now), &unknown)| {
                // Same completed operations; unknown-outcome ones seen only if now too.
                (seen ^ now) & !unknown == 0 && seen & !now == 0
            });
            if subsumed && self.states[e as usize] == *state {
                return false;
            }
            e = self.next[e as usize];
        }
        let index = self.states.len() as u32;
        self.next.push(head);
        self.bits.extend_from_slice(bits);
        self.states.push(state.clone());
        self.first.insert(hash, index);
        self.bytes += self.entry_bytes();
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
    budget: Budget,
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
    fn new(
        model: &'a M,
        history: &'a [Operation<M::Input, M::Output>],
        kept: Vec<usize>,
        budget: Budget,
    ) -> Search<'a, M> {
        let ops: Vec<_> = kept.iter().map(|&i| &history[i]).collect();
        let events = Events::new(&ops);
        let twin_before = interchangeable_twins(&ops);
        Search { model, ops, history_index: kept, events, twin_before, budget }
    }

    /// The state after linearizing `ops[k]` in `state`, if its output allows it.
    fn step(&self, state: &M::State, k: u32) -> Option<M::State> {
        let op = self.ops[k as usize];
        match &op.output {
            Some(output) => self.model.step(state, &op.input, output),
            None => Some(self.model.apply(state, &op.input)),
        }
    }

    fn run(mut self) -> Verdict {
        let started = Instant::now();
        let op_count = self.ops.len();
        let words = op_count.div_ceil(64).max(1);
        let mut linearized = vec![0u64; words];
        let mut linearized_hash = 0u64;
        let state_hasher = foldhash::quality::FixedState::with_seed(0x4c49_4e43_4845_434b);
        let mut unknown_mask = vec![0u64; words];
        // Zobrist keys; 0 for unknown-outcome operations, which the cache hash leaves out.
        let mut zobrist = vec![0u64; op_count];
        for (k, op) in self.ops.iter().enumerate() {
            if op.return_ns.is_none() {
                unknown_mask[k / 64] |= 1 << (k % 64);
            } else {
                zobrist[k] = op_key(k as u32);
            }
        }
        let mut cache: Cache<M::State> = Cache::new(unknown_mask);
        let mut completed_left = self.ops.iter().filter(|op| op.return_ns.is_some()).count();
        // The choices made so far, most recent last: (call event, state before it, the pass it
        // was made in, the frontier then).
        let mut stack: Vec<(u32, M::State, Pass, u32)> = Vec::with_capacity(op_count);
        let mut state = self.model.init();
        // Diagnostics: the deepest point at which a return forced a backtrack.
        let mut longest_prefix: Vec<u32> = Vec::new();
        let mut unplaced: Option<u32> = None;
        let mut steps: u64 = 0;
        let (main_head, unknown_head) = (self.events.main_head, self.events.unknown_head);
        let mut entry = self.events.next[main_head as usize];
        let mut pass = Pass::Completed;
        // In the unknown pass: the first return left in the main list. Only unknown-outcome
        // operations called before it are candidates.
        let mut frontier = NONE;
        while completed_left > 0 {
            steps += 1;
            if steps > self.budget.steps_max {
                return self.out_of_budget(format!("{} search steps", self.budget.steps_max), stack.len());
            }
            if let Some(time_max) = self.budget.time_max {
                if steps.is_multiple_of(CLOCK_EVERY_STEPS) && started.elapsed() > time_max {
                    return self.out_of_budget(format!("{time_max:?}"), stack.len());
                }
            }
            let candidate = match pass {
                Pass::Completed => {
                    // A completed operation not yet linearized has its return in the main
                    // list, after its call: the walk meets a return before the end.
                    assert!(entry != main_head, "walked past every pending return");
                    if !self.events.is_call[entry as usize] {
                        // Every completed candidate failed here: try the unknown-outcome ones.
                        pass = Pass::Unknown;
                        frontier = entry;
                        entry = self.events.next[unknown_head as usize];
                        continue;
                    }
                    Some(entry)
                }
                Pass::Unknown => (entry != unknown_head && entry < frontier).then_some(entry),
            };
            if let Some(call) = candidate {
                let k = self.events.op[call as usize];
                let twin = self.twin_before[k as usize];
                let twin_placed = twin == NONE || linearized[twin as usize / 64] & (1u64 << (twin % 64)) != 0;
                let next_state = twin_placed.then(|| self.step(&state, k)).flatten();
                if let Some(next_state) = next_state.filter(|next| !self.skips_useless(&stack, k, next)) {
                    let (word, bit) = (k as usize / 64, 1u64 << (k % 64));
                    linearized[word] |= bit;
                    linearized_hash ^= zobrist[k as usize];
                    let hash = linearized_hash ^ state_hasher.hash_one(&next_state);
                    if cache.insert(hash, &linearized, &next_state) {
                        if cache.bytes > self.budget.cache_bytes_max {
                            let limit = format!("{} cache bytes", self.budget.cache_bytes_max);
                            return self.out_of_budget(limit, stack.len());
                        }
                        stack.push((call, std::mem::replace(&mut state, next_state), pass, frontier));
                        self.events.lift(call);
                        if pass == Pass::Completed {
                            completed_left -= 1;
                        }
                        entry = self.events.next[main_head as usize];
                        pass = Pass::Completed;
                        continue;
                    }
                    linearized[word] &= !bit;
                    linearized_hash ^= zobrist[k as usize];
                }
                entry = self.events.next[call as usize];
            } else {
                // The operation returning at `frontier` cannot be linearized before its return
                // after the choices made so far: undo the latest one.
                if unplaced.is_none() || stack.len() > longest_prefix.len() {
                    longest_prefix = stack.iter().map(|&(e, ..)| self.events.op[e as usize]).collect();
                    unplaced = Some(self.events.op[frontier as usize]);
                }
                let Some((call, previous, previous_pass, previous_frontier)) = stack.pop() else {
                    let unplaced = unplaced.expect("set just above");
                    return Verdict::NotLinearizable {
                        longest_prefix: longest_prefix
                            .iter()
                            .map(|&k| self.history_index[k as usize])
                            .collect(),
                        unplaced_op: self.history_index[unplaced as usize],
                    };
                };
                state = previous;
                pass = previous_pass;
                frontier = previous_frontier;
                let undone = self.events.op[call as usize];
                linearized[undone as usize / 64] &= !(1u64 << (undone % 64));
                linearized_hash ^= zobrist[undone as usize];
                self.events.unlift(call);
                if pass == Pass::Completed {
                    completed_left += 1;
                }
                entry = self.events.next[call as usize];
            }
        }
        Verdict::Linearizable
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

    fn out_of_budget(&self, limit: String, depth: usize) -> Verdict {
        Verdict::Unknown {
            reason: format!(
                "search budget of {limit} exhausted with {depth} of {} operations linearized",
                self.ops.len()
            ),
        }
    }
}
