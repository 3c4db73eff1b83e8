//! How sure "holds" is. The seen set keeps 64-bit fingerprints, not states: two different
//! states with the same fingerprint make the second look explored, and whatever only it leads
//! to is missed. A run that found no violation can therefore be wrong, with a probability the
//! report states. Each of the `m` generated successors is looked up once among at most `n`
//! stored fingerprints; with uniformly distributed 64-bit fingerprints a lookup of a new state
//! hits another state's fingerprint with probability at most `n / 2^64`, so the chance that
//! any did is at most `n * m / 2^64` (the union bound; TLC's "calculated" estimate is of the
//! same order). A fingerprint computed from `k` parts' own 64-bit hashes (as the world's
//! shared parts are, `model::shared`) also collides when a part's hash does: at most
//! `(k + 1) * n * m / 2^64`.

/// The estimated probability that a fingerprint collision hid a state, after `unique_states`
/// distinct states and `transitions` generated successors (each looked up once), when a
/// fingerprint is a hash of `parts_hashed` parts' own hashes and the rest of the state.
pub fn collision_probability(unique_states: u64, transitions: u64, parts_hashed: u64) -> f64 {
    let n = unique_states as f64;
    // Every state but the initial ones was generated, so lookups are at least the states.
    let m = transitions.max(unique_states) as f64;
    ((parts_hashed + 1) as f64 * n * m / 2f64.powi(64)).min(1.0)
}

/// The probability for a report: `"2.3e-9"`, or `"< 1e-15"` when smaller than a reader needs.
pub fn describe(probability: f64) -> String {
    if probability < 1e-15 {
        "< 1e-15".to_string()
    } else {
        format!("{probability:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_the_state_space_and_stays_a_probability() {
        let small = collision_probability(1_000, 3_000, 0);
        let large = collision_probability(10_000_000, 30_000_000, 0);
        assert!(small < large);
        // 10M states, 30M lookups: 3e14 / 1.8e19, about 1.6e-5.
        assert!((large - 1.6e-5).abs() < 0.1e-5, "{large}");
        // Each part hashed on its own is one more chance per lookup.
        let parts = collision_probability(10_000_000, 30_000_000, 3);
        assert!((parts - 4.0 * large).abs() < 1e-12, "{parts}");
        assert_eq!(collision_probability(u64::MAX, u64::MAX, 3), 1.0);
        assert_eq!(collision_probability(0, 0, 0), 0.0);
    }

    #[test]
    fn describes_small_and_large_values() {
        assert_eq!(describe(1e-20), "< 1e-15");
        assert_eq!(describe(1.63e-5), "1.6e-5");
    }
}
