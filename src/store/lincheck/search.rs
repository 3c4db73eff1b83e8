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

/// The event list, as parallel arrays; entry `len` is the head sentinel of a circular list.
struct Events {
    /// The operation (index into `Search::ops`) of each event.
    op: Vec<u32>,
    /// For a call event, its return event (NONE if the operation never returned); for a return
    /// event, NONE.
    return_of_call: Vec<u32>,
    is_call: Vec<bool>,
    next: Vec<u32>,
    prev: Vec<u32>,
    head: u32,
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
        let len = sorted.len();
        let head = len as u32;
        let mut events = Events {
            op: sorted.iter().map(|e| e.2).collect(),
            return_of_call: vec![NONE; len],
            is_call: sorted.iter().map(|e| !e.1).collect(),
            next: (1..=len as u32).chain([0]).collect(),
            prev: std::iter::once(head).chain(0..len as u32).collect(),
            head,
        };
        let mut call_event = vec![NONE; ops.len()];
        for (e, &(_, is_return, k)) in sorted.iter().enumerate() {
            if is_return {
                assert!(call_event[k as usize] != NONE, "a return sorts after its call");
                events.return_of_call[call_event[k as usize] as usize] = e as u32;
            } else {
                call_event[k as usize] = e as u32;
            }
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

/// Seen (linearized set, state) pairs, stored flat: `bits` holds `words` u64s per entry, and
/// entries with the same hash are chained through `next`.
struct Cache<S> {
    words: usize,
    first: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    next: Vec<u32>,
    bits: Vec<u64>,
    states: Vec<S>,
}

impl<S: Clone + Eq> Cache<S> {
    fn new(words: usize) -> Cache<S> {
        Cache { words, first: HashMap::default(), next: Vec::new(), bits: Vec::new(), states: Vec::new() }
    }

    /// Record the pair; false if it was already there.
    fn insert(&mut self, hash: u64, bits: &[u64], state: &S) -> bool {
        debug_assert_eq!(bits.len(), self.words);
        let head = self.first.get(&hash).copied().unwrap_or(NONE);
        let mut e = head;
        while e != NONE {
            let at = e as usize * self.words;
            if self.bits[at..at + self.words] == *bits && self.states[e as usize] == *state {
                return false;
            }
            e = self.next[e as usize];
        }
        let index = self.states.len() as u32;
        self.next.push(head);
        self.bits.extend_from_slice(bits);
        self.states.push(state.clone());
        self.first.insert(hash, index);
        true
    }
}

/// A per-operation random key: the linearized set's hash is the XOR of its members' keys, so
/// adding or removing an operation updates it in O(1) (Zobrist hashing).
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
        let mut cache: Cache<M::State> = Cache::new(words);
        let mut completed_left = self.ops.iter().filter(|op| op.return_ns.is_some()).count();
        // The choices made so far: (call event, state before it, pass it was made in), most
        // recent last.
        let mut stack: Vec<(u32, M::State, Pass)> = Vec::with_capacity(op_count);
        let mut state = self.model.init();
        // Diagnostics: the deepest point at which a return forced a backtrack.
        let mut longest_prefix: Vec<u32> = Vec::new();
        let mut unplaced: Option<u32> = None;
        let mut steps: u64 = 0;
        let mut entry = self.events.next[self.events.head as usize];
        let mut pass = Pass::Completed;
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
            // A completed operation not yet linearized has its return event in the list, after
            // its call: the walk meets that return before the end of the list.
            assert!(entry != self.events.head, "walked past every pending return");
            let k = self.events.op[entry as usize];
            if self.events.is_call[entry as usize] {
                let candidate = self.ops[k as usize].return_ns.is_some() == (pass == Pass::Completed);
                let twin = self.twin_before[k as usize];
                let twin_placed = twin == NONE || linearized[twin as usize / 64] & (1u64 << (twin % 64)) != 0;
                if let Some(next_state) = (candidate && twin_placed).then(|| self.step(&state, k)).flatten() {
                    let (word, bit) = (k as usize / 64, 1u64 << (k % 64));
                    linearized[word] |= bit;
                    linearized_hash ^= op_key(k);
                    let hash = linearized_hash ^ state_hasher.hash_one(&next_state);
                    if cache.insert(hash, &linearized, &next_state) {
                        stack.push((entry, std::mem::replace(&mut state, next_state), pass));
                        self.events.lift(entry);
                        if self.ops[k as usize].return_ns.is_some() {
                            completed_left -= 1;
                        }
                        entry = self.events.next[self.events.head as usize];
                        pass = Pass::Completed;
                        continue;
                    }
                    linearized[word] &= !bit;
                    linearized_hash ^= op_key(k);
                }
                entry = self.events.next[entry as usize];
            } else if pass == Pass::Completed {
                // Every completed candidate failed here: now try the unknown-outcome ones.
                pass = Pass::Unknown;
                entry = self.events.next[self.events.head as usize];
            } else {
                // Operation k returned without being linearized: undo the latest choice.
                if unplaced.is_none() || stack.len() > longest_prefix.len() {
                    longest_prefix = stack.iter().map(|&(e, _, _)| self.events.op[e as usize]).collect();
                    unplaced = Some(k);
                }
                let Some((call, previous, previous_pass)) = stack.pop() else {
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
                let undone = self.events.op[call as usize];
                linearized[undone as usize / 64] &= !(1u64 << (undone % 64));
                linearized_hash ^= op_key(undone);
                self.events.unlift(call);
                if self.ops[undone as usize].return_ns.is_some() {
                    completed_left += 1;
                }
                entry = self.events.next[call as usize];
            }
        }
        Verdict::Linearizable
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
