//! A history checked and described for people: the outcome per file ([`Checked`]) that
//! `replicheck history check` prints, `store run` reports and [`super::html`] draws.

use super::kv::{self, Kv, KvInput, KvOutput};
use super::{check_partitions_with, overall, Budget, Operation, Options, Partition, SeqModel, Verdict};
use std::fmt::Debug;
use std::time::{Duration, Instant};

/// One operation as the picture (`--html`) shows it.
pub struct Shown {
    pub client: u64,
    /// The key's name ("" for a single-register format).
    pub key: String,
    pub call: u64,
    pub ret: Option<u64>,
    /// What it did and returned.
    pub label: String,
}

/// The outcome for one file.
pub struct Checked {
    pub ops: usize,
    pub keys: usize,
    pub verdict: Verdict,
    /// The key whose verdict `verdict` is, for a keyed format.
    pub key: Option<String>,
    /// The operation a `NotLinearizable` verdict names, described.
    pub unplaced: Option<String>,
    /// Every key's verdict, in key order.
    pub per_key: Vec<(Option<String>, Verdict)>,
    pub steps: u64,
    pub cache_bytes_peak: u64,
    pub elapsed: Duration,
    /// The operations, for the picture.
    pub shown: Vec<Shown>,
    /// True if times are nanoseconds, false if log line numbers.
    pub nanoseconds: bool,
}

/// How a file's times read: log line numbers or nanoseconds.
#[derive(Clone, Copy)]
pub(super) enum Clock {
    Lines,
    Nanoseconds,
    /// The events' positions in the file (several on one line).
    Events,
}

fn describe<I: Debug, O: Debug>(index: usize, op: &Operation<I, O>, clock: Clock) -> String {
    let output = match &op.output {
        Some(o) => format!("{o:?}"),
        None => "unknown".to_owned(),
    };
    let called = match clock {
        Clock::Lines => format!("invoked on line {}", op.call_ns),
        Clock::Nanoseconds => format!("invoked at {} ns", op.call_ns),
        Clock::Events => format!("invoked as event {}", op.call_ns),
    };
    format!("op {index} (process {}, {called}): {:?} -> {output}", op.client, op.input)
}

fn label<I: Debug, O: Debug>(op: &Operation<I, O>) -> String {
    match &op.output {
        Some(o) => format!("{:?} -> {o:?}", op.input),
        None => format!("{:?} -> ?", op.input),
    }
}

/// Check `partitions` of `ops` and describe the outcome; the time covers the check only.
pub(super) fn checked<M, K>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    partitions: &[Partition<K, M::Input, M::Output>],
    key_name: impl Fn(&K) -> Option<String>,
    clock: Clock,
    budget: Budget,
    options: Options,
) -> Checked
where
    M: SeqModel + Sync,
    M::Input: Sync + Debug,
    M::Output: Sync + Debug,
    M::State: Send,
    K: Clone + Sync,
{
    let started = Instant::now();
    let result = check_partitions_with(model, partitions, budget, options);
    let elapsed = started.elapsed();
    let per_key: Vec<(Option<String>, Verdict)> =
        result.per_key.into_iter().map(|(k, v)| (key_name(&k), v)).collect();
    let keys = per_key.len();
    let (key, verdict) = overall(&per_key).cloned().unwrap_or((None, Verdict::Linearizable));
    let unplaced = match &verdict {
        Verdict::NotLinearizable { unplaced_op, .. } => {
            Some(describe(*unplaced_op, &ops[*unplaced_op], clock))
        }
        _ => None,
    };
    let mut key_of = vec![String::new(); ops.len()];
    for p in partitions {
        let name = key_name(&p.key).unwrap_or_default();
        for &i in &p.history_index {
            key_of[i].clone_from(&name);
        }
    }
    let shown = ops
        .iter()
        .zip(key_of)
        .map(|(op, key)| Shown {
            client: op.client,
            key,
            call: op.call_ns,
            ret: op.return_ns,
            label: label(op),
        })
        .collect();
    Checked {
        ops: ops.len(),
        keys,
        verdict,
        key,
        unplaced,
        per_key,
        steps: result.steps,
        cache_bytes_peak: result.cache_bytes_peak,
        elapsed,
        shown,
        nanoseconds: matches!(clock, Clock::Nanoseconds),
    }
}

/// Check a key-value history per key.
pub fn check_kv(
    ops: &[Operation<KvInput, KvOutput>],
    nanoseconds: bool,
    budget: Budget,
    options: Options,
) -> Checked {
    let clock = if nanoseconds { Clock::Nanoseconds } else { Clock::Lines };
    let partitions = kv::partition_by_key(ops);
    checked(&Kv, ops, &partitions, |k: &String| Some(k.clone()), clock, budget, options)
}
