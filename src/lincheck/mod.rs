//! Linearizability checking of recorded client histories.
//!
//! A history is a list of [`Operation`]s: who called what, when it was called, when (if ever)
//! it returned and what it returned. [`check`] decides whether some total order of the
//! operations (a *linearization*) is consistent with both the real-time order (an operation
//! that returned before another was called comes first) and a sequential specification
//! ([`SeqModel`]). It is the Wing & Gong search with Lowe's just-in-time refinement, as in
//! Porcupine: see [`search`] for the algorithm and its limits.
//!
//! Operations whose outcome is unknown (the client crashed or timed out) have no return time:
//! they may take effect at any time after their call, or never. Linearizability is
//! compositional, so a history over independent keys can be split with [`partition`] and each
//! key checked alone ([`check_partitions`], in parallel if asked); that is exponentially cheaper
//! than checking the whole history at once.
//!
//! [`check_partitions_with`] searches the keys by turns and stops at the first key that is not
//! linearizable, with one memory bound for all keys ([`Budget::cache_bytes_max`]).
//! [`generate`] makes hard histories with known verdicts; [`html`] draws a checked history.
//!
//! Models: [`register::Register`] (one register with read/write/delete/compare-and-set, as in
//! the Jepsen etcd histories) and [`kv::Kv`] (get/put/append over string values). Parsers for
//! recorded histories are in [`parse`]; a checked history described for people in [`report`];
//! `replicheck history check` is in [`cli`].

pub mod cli;
pub mod generate;
pub mod html;
pub mod knossos;
pub mod kv;
pub mod parse;
pub mod register;
pub mod report;
pub mod search;

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

pub use search::check;

/// A sequential specification: what a single copy of the object does, one operation at a time.
///
/// Specifications are deterministic: an input applied to a state has one effect. `step` says
/// whether an observed output is possible; `apply` gives the effect when the output was not
/// observed (the operation timed out or its client crashed).
pub trait SeqModel {
    /// Hashed and compared by the checker's cache; keep it small.
    type State: Clone + Eq + Hash;
    /// Equal inputs must have equal effects: the checker treats operations with equal inputs
    /// and unknown outcomes as interchangeable.
    type Input: Eq;
    type Output;

    fn init(&self) -> Self::State;

    /// None if `output` is impossible for `input` in `state`; else the next state.
    fn step(&self, state: &Self::State, input: &Self::Input, output: &Self::Output) -> Option<Self::State>;

    /// The state after `input` takes effect in `state`, whatever it returned (its output was
    /// not observed).
    fn apply(&self, state: &Self::State, input: &Self::Input) -> Self::State;

    /// True if `input` never changes the state (a read). An operation with such an input and
    /// no observed output constrains nothing, so the checker drops it instead of searching
    /// over where to place it.
    fn is_read_only(&self, _input: &Self::Input) -> bool {
        false
    }

    /// Heap memory a state holds beyond its inline size (strings, vectors), for the memory
    /// budget ([`Budget::cache_bytes_max`]). States without heap data keep the default 0.
    fn state_bytes(&self, _state: &Self::State) -> usize {
        0
    }
}

/// One client operation of a history. Times are in nanoseconds on any clock shared by all
/// clients (a logical clock such as a log line number works too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<I, O> {
    pub client: u64,
    pub call_ns: u64,
    /// None: outcome unknown (crashed/timed out): may take effect at any time after the call,
    /// or never. Such an operation is optional even if it has an output (then, if it takes
    /// effect, it must produce that output).
    pub return_ns: Option<u64>,
    pub input: I,
    /// None when unknown. An operation with a return time but no output must still be placed
    /// within its interval, with the effect [`SeqModel::apply`] gives.
    pub output: Option<O>,
}

/// What [`check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    NotLinearizable {
        /// Indices into the checked history: the longest partial linearization the search
        /// reached, in linearization order.
        longest_prefix: Vec<usize>,
        /// Index of a completed operation that could not be linearized after that prefix
        /// before it returned: no order of the operations concurrent with it explains its
        /// output and the outputs already placed.
        unplaced_op: usize,
    },
    /// The search budget ran out before a verdict; says which limit and how far it got.
    Unknown {
        reason: String,
    },
}

impl Verdict {
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable)
    }
}

/// Limits on one search. The search is exponential in the worst case (linearizability
/// checking is NP-complete); a budget turns a runaway search into [`Verdict::Unknown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Search steps (an operation tried or undone) per checked history.
    pub steps_max: u64,
    /// Wall-clock time per checked history, if limited.
    pub time_max: Option<Duration>,
    /// Memory of the search's cache, approximately (bit sets, and each distinct state once
    /// with the heap data [`SeqModel::state_bytes`] counts). For [`check_partitions_with`],
    /// the bound is on all the keys' caches together.
    pub cache_bytes_max: u64,
}

impl Budget {
    /// Enough for any reference history (Porcupine's Jepsen etcd and kv test data) by four orders of magnitude; about ten
    /// seconds of search.
    pub const STEPS_MAX_DEFAULT: u64 = 100_000_000;
    /// 1 GiB: two searches in parallel stay well inside a small machine.
    pub const CACHE_BYTES_MAX_DEFAULT: u64 = 1 << 30;

    pub fn unlimited() -> Budget {
        Budget { steps_max: u64::MAX, time_max: None, cache_bytes_max: u64::MAX }
    }

    /// At most `steps_max` steps, and the default cache size.
    pub fn steps(steps_max: u64) -> Budget {
        Budget { steps_max, time_max: None, cache_bytes_max: Budget::CACHE_BYTES_MAX_DEFAULT }
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::steps(Budget::STEPS_MAX_DEFAULT)
    }
}

/// The operations of a history that touch one key, with their indices in the whole history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition<K, I, O> {
    pub key: K,
    /// `history_index[i]` is the index in the whole history of `ops[i]`.
    pub history_index: Vec<usize>,
    pub ops: Vec<Operation<I, O>>,
}

/// Split a history by key, in key order. Sound whenever operations on different keys are
/// independent (linearizability is compositional: a history is linearizable iff each
/// per-object sub-history is).
pub fn partition<K, I, O>(history: &[Operation<I, O>], key_of: impl Fn(&I) -> K) -> Vec<Partition<K, I, O>>
where
    K: Ord + Clone,
    I: Clone,
    O: Clone,
{
    let mut by_key: BTreeMap<K, Partition<K, I, O>> = BTreeMap::new();
    for (index, op) in history.iter().enumerate() {
        let key = key_of(&op.input);
        let part = by_key.entry(key.clone()).or_insert_with(|| Partition {
            key,
            history_index: Vec::new(),
            ops: Vec::new(),
        });
        part.history_index.push(index);
        part.ops.push(op.clone());
    }
    by_key.into_values().collect()
}

/// Group `(key, operation)` pairs by key, in key order; `history_index` is the position in
/// `history`. For histories whose model's input carries no key, such as a store of
/// [`register::Register`]s.
pub fn partition_pairs<K: Ord + Clone, I, O>(history: Vec<(K, Operation<I, O>)>) -> Vec<Partition<K, I, O>> {
    let mut by_key: BTreeMap<K, Partition<K, I, O>> = BTreeMap::new();
    for (index, (key, op)) in history.into_iter().enumerate() {
        let part = by_key.entry(key.clone()).or_insert_with(|| Partition {
            key,
            history_index: Vec::new(),
            ops: Vec::new(),
        });
        part.history_index.push(index);
        part.ops.push(op);
    }
    by_key.into_values().collect()
}

/// Check every partition, with up to `threads` OS threads (1: on this thread), and give every
/// key's verdict: [`check_partitions_with`] with `every_key`. Results are in partition order,
/// and operation indices in a [`Verdict::NotLinearizable`] refer to the whole history.
pub fn check_partitions<M, K>(
    model: &M,
    partitions: &[Partition<K, M::Input, M::Output>],
    budget: Budget,
    threads: usize,
) -> Vec<(K, Verdict)>
where
    M: SeqModel + Sync,
    M::Input: Sync,
    M::Output: Sync,
    M::State: Send,
    K: Clone + Sync,
{
    check_partitions_with(model, partitions, budget, Options { threads, every_key: true }).per_key
}

/// How [`check_partitions_with`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// OS threads (1: on this thread).
    pub threads: usize,
    /// Decide every key even after one is found not linearizable (else the rest are left
    /// undecided: the history is not linearizable whatever they hold).
    pub every_key: bool,
}

/// What [`check_partitions_with`] found, and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked<K> {
    /// One verdict per partition, in partition order. A key left undecided because another
    /// was not linearizable is [`Verdict::Unknown`], with a reason saying so.
    pub per_key: Vec<(K, Verdict)>,
    /// Search steps over all keys.
    pub steps: u64,
    /// The most memory the caches of all keys held at once, approximately.
    pub cache_bytes_peak: u64,
}

/// Steps one key's search takes before another key has its turn.
pub const SLICE_STEPS: u64 = 4096;

/// The reason given for a key left undecided.
pub const NOT_DECIDED: &str = "not decided: another key is not linearizable (--every-key decides every key)";

/// Check the partitions by turns: each key's search runs [`SLICE_STEPS`] steps, then the next
/// key's, so a key that is quickly shown not linearizable is found even when another key's
/// search is long (Porcupine gets the same effect by running every key at once). Unless
/// `options.every_key`, the first key found not linearizable stops the others. The budget's
/// steps and time apply to each key; its `cache_bytes_max` to all keys' caches together: a key
/// whose search would push the total past it ends [`Verdict::Unknown`] and frees its cache.
pub fn check_partitions_with<M, K>(
    model: &M,
    partitions: &[Partition<K, M::Input, M::Output>],
    budget: Budget,
    options: Options,
) -> Checked<K>
where
    M: SeqModel + Sync,
    M::Input: Sync,
    M::Output: Sync,
    M::State: Send,
    K: Clone + Sync,
{
    let mut verdicts: Vec<Option<Verdict>> = vec![None; partitions.len()];
    let mut queue = std::collections::VecDeque::new();
    for (i, part) in partitions.iter().enumerate() {
        match search::Run::new(model, &part.ops, budget) {
            Ok(run) => queue.push_back((i, run)),
            Err(verdict) => verdicts[i] = Some(verdict),
        }
    }
    struct Shared<'a, M: SeqModel> {
        queue: std::collections::VecDeque<(usize, search::Run<'a, M>)>,
        verdicts: Vec<Option<Verdict>>,
        /// Each key's cache bytes now (0 once decided).
        bytes: Vec<u64>,
        steps: u64,
        peak: u64,
        stop: bool,
    }
    let shared = Mutex::new(Shared {
        queue,
        verdicts,
        bytes: vec![0; partitions.len()],
        steps: 0,
        peak: 0,
        stop: false,
    });
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    let work = || loop {
        let (i, mut run, allowance) = {
            let mut s = lock();
            if s.stop {
                break;
            }
            let Some((i, run)) = s.queue.pop_front() else { break };
            let others: u64 = s.bytes.iter().sum::<u64>() - s.bytes[i];
            (i, run, budget.cache_bytes_max.saturating_sub(others))
        };
        let steps_before = run.steps();
        let verdict = run.advance(SLICE_STEPS, allowance);
        let mut s = lock();
        s.steps += run.steps() - steps_before;
        s.bytes[i] = run.cache_bytes();
        let total: u64 = s.bytes.iter().sum();
        s.peak = s.peak.max(total);
        match verdict {
            None => s.queue.push_back((i, run)),
            Some(verdict) => {
                s.bytes[i] = 0;
                let part = &partitions[i];
                let verdict = match verdict {
                    Verdict::NotLinearizable { longest_prefix, unplaced_op } => {
                        s.stop |= !options.every_key;
                        Verdict::NotLinearizable {
                            longest_prefix: longest_prefix
                                .into_iter()
                                .map(|k| part.history_index[k])
                                .collect(),
                            unplaced_op: part.history_index[unplaced_op],
                        }
                    }
                    other => other,
                };
                s.verdicts[i] = Some(verdict);
            }
        }
    };
    let threads = options.threads.clamp(1, partitions.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(work);
            }
        });
    }
    let s = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    let per_key = partitions
        .iter()
        .zip(s.verdicts)
        .map(|(p, v)| {
            (p.key.clone(), v.unwrap_or_else(|| Verdict::Unknown { reason: NOT_DECIDED.to_owned() }))
        })
        .collect();
    Checked { per_key, steps: s.steps, cache_bytes_peak: s.peak }
}

/// The verdict of a whole history from its per-key verdicts: the first non-linearizable key if
/// any, else the first key the budget stopped, else linearizable.
pub fn overall<K>(per_key: &[(K, Verdict)]) -> Option<&(K, Verdict)> {
    per_key
        .iter()
        .find(|(_, v)| matches!(v, Verdict::NotLinearizable { .. }))
        .or_else(|| per_key.iter().find(|(_, v)| matches!(v, Verdict::Unknown { .. })))
}
