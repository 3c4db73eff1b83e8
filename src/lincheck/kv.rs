//! A key-value map of strings with get, put and append, as in Porcupine's kv histories. An
//! absent key reads as the empty string.
//!
//! Keys are independent, so a history is best checked per key: [`partition_by_key`] and
//! [`check_per_key`]. [`Kv`] also checks a multi-key history as a whole (correct, but the
//! search is then over the interleavings of every key at once).

use super::{
    check_partitions, check_partitions_with, partition, Budget, Checked, Operation, Options, Partition,
    SeqModel, Verdict,
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kv;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvInput {
    Get {
        key: String,
    },
    Put {
        key: String,
        value: String,
    },
    /// Append `value` to the key's current value.
    Append {
        key: String,
        value: String,
    },
}

impl KvInput {
    pub fn key(&self) -> &str {
        match self {
            KvInput::Get { key } | KvInput::Put { key, .. } | KvInput::Append { key, .. } => key,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvOutput {
    /// What a get returned ("" for an absent key).
    Value(String),
    /// A put or append was applied.
    Written,
}

/// The map, as (key, value) pairs sorted by key, without empty values: an absent key and a key
/// holding "" are the same state (they read the same), so they compare equal in the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KvState(Vec<(String, String)>);

impl KvState {
    pub fn get(&self, key: &str) -> &str {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => &self.0[i].1,
            Err(_) => "",
        }
    }

    fn with(&self, key: &str, value: String) -> KvState {
        let mut pairs = self.0.clone();
        match (pairs.binary_search_by(|(k, _)| k.as_str().cmp(key)), value.is_empty()) {
            (Ok(i), false) => pairs[i].1 = value,
            (Ok(i), true) => {
                pairs.remove(i);
            }
            (Err(i), false) => pairs.insert(i, (key.to_owned(), value)),
            (Err(_), true) => {}
        }
        KvState(pairs)
    }
}

impl SeqModel for Kv {
    type State = KvState;
    type Input = KvInput;
    type Output = KvOutput;

    fn init(&self) -> KvState {
        KvState::default()
    }

    fn step(&self, state: &KvState, input: &KvInput, output: &KvOutput) -> Option<KvState> {
        match (input, output) {
            (KvInput::Get { key }, KvOutput::Value(value)) => {
                (state.get(key) == value).then(|| state.clone())
            }
            (KvInput::Put { .. } | KvInput::Append { .. }, KvOutput::Written) => {
                Some(self.apply(state, input))
            }
            // An output of another kind of operation: not a history this model can explain.
            _ => None,
        }
    }

    fn apply(&self, state: &KvState, input: &KvInput) -> KvState {
        match input {
            KvInput::Get { .. } => state.clone(),
            KvInput::Put { key, value } => state.with(key, value.clone()),
            KvInput::Append { key, value } => state.with(key, format!("{}{value}", state.get(key))),
        }
    }

    fn is_read_only(&self, input: &KvInput) -> bool {
        matches!(input, KvInput::Get { .. })
    }

    fn state_bytes(&self, state: &KvState) -> usize {
        state.0.capacity() * std::mem::size_of::<(String, String)>()
            + state.0.iter().map(|(k, v)| k.capacity() + v.capacity()).sum::<usize>()
    }
}

/// The history's operations grouped by key, in key order.
pub fn partition_by_key(
    history: &[Operation<KvInput, KvOutput>],
) -> Vec<Partition<String, KvInput, KvOutput>> {
    partition(history, |input| input.key().to_owned())
}

/// Check each key's sub-history on up to `threads` threads; one verdict per key, in key order,
/// with operation indices into `history`. Combine with [`super::overall`].
pub fn check_per_key(
    history: &[Operation<KvInput, KvOutput>],
    budget: Budget,
    threads: usize,
) -> Vec<(String, Verdict)> {
    check_partitions(&Kv, &partition_by_key(history), budget, threads)
}

/// [`check_per_key`] with [`Options`]: by default the first key found not linearizable stops
/// the others; the steps and cache memory it took.
pub fn check_per_key_with(
    history: &[Operation<KvInput, KvOutput>],
    budget: Budget,
    options: Options,
) -> Checked<String> {
    check_partitions_with(&Kv, &partition_by_key(history), budget, options)
}
