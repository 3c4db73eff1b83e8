//! The kill tests' verdict: every key's history, final reads included, is linearizable.

use replicheck::lincheck::register::{Register, RegisterInput, RegisterOutput};
use replicheck::lincheck::{check_partitions_with, partition_pairs, Budget, Operation, Options, Verdict};

/// Panics naming the first key whose history has no linearization (or no verdict), with the
/// operation that could not be placed and the key's operations around it (indices in `history`).
pub fn assert_every_key_linearizable(
    seed: u64,
    history: Vec<(String, Operation<RegisterInput, RegisterOutput>)>,
) {
    let partitions = partition_pairs(history.clone());
    let options = Options { threads: 1, every_key: true };
    let checked = check_partitions_with(&Register, &partitions, Budget::default(), options);
    for ((key, verdict), part) in checked.per_key.iter().zip(&partitions) {
        match verdict {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { unplaced_op, longest_prefix } => {
                // Verdict indices refer to the whole history. The key's operations nearest the
                // unplaced one in call time: enough to see what it contradicts.
                let at = history[*unplaced_op].1.call_ns;
                let mut near: Vec<usize> = part.history_index.clone();
                near.sort_by_key(|&i| history[i].1.call_ns.abs_diff(at));
                near.truncate(40);
                near.sort_by_key(|&i| history[i].1.call_ns);
                let ops: Vec<String> = near.iter().map(|&i| format!("  #{i}: {:?}", history[i].1)).collect();
                panic!(
                    "seed {seed}: key {key} is not linearizable: cannot place #{unplaced_op} {:?} after {} \
                     operations; the key's {} operations nearest it in call time:\n{}",
                    history[*unplaced_op].1,
                    longest_prefix.len(),
                    ops.len(),
                    ops.join("\n")
                )
            }
            Verdict::Unknown { reason } => panic!("seed {seed}: key {key}: no verdict: {reason}"),
        }
    }
}
