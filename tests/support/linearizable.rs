//! The kill tests' verdict: every key's history, final reads included, is linearizable.

use replicheck::lincheck::register::{Register, RegisterInput, RegisterOutput};
use replicheck::lincheck::{check_partitions_with, partition_pairs, Budget, Operation, Options, Verdict};

/// Panics naming the first key whose history has no linearization (or no verdict).
pub fn assert_every_key_linearizable(
    seed: u64,
    history: Vec<(String, Operation<RegisterInput, RegisterOutput>)>,
) {
    let partitions = partition_pairs(history);
    let options = Options { threads: 1, every_key: true };
    let checked = check_partitions_with(&Register, &partitions, Budget::default(), options);
    for ((key, verdict), part) in checked.per_key.iter().zip(&partitions) {
        match verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { unplaced_op, longest_prefix } => panic!(
                "seed {seed}: key {key} is not linearizable: cannot place {:?} after {} operations",
                part.ops[*unplaced_op],
                longest_prefix.len()
            ),
            Verdict::Unknown { reason } => panic!("seed {seed}: key {key}: no verdict: {reason}"),
        }
    }
}
