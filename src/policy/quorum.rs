//! Quorum rules for writes and strong reads.

/// A write (or read) is complete once `quorum` distinct replicas answered.
pub fn quorum_reached(answers: usize, quorum: u8) -> bool {
    assert!(quorum > 0, "a quorum of zero is rejected by config validation");
    answers >= usize::from(quorum)
}

/// Whether every read quorum overlaps every write quorum in a replica set of
/// `replication_factor` members: the classic `W + R > N` rule.
pub fn quorums_intersect(replication_factor: u8, write_quorum: u8, read_quorum: u8) -> bool {
    u16::from(write_quorum) + u16::from(read_quorum) > u16::from(replication_factor)
}

/// How many members of a replica set of `member_count` must hold a value so that every read
/// quorum of `read_quorum` members contains at least one of them.
pub fn holders_needed_for_reads(member_count: usize, read_quorum: u8) -> usize {
    let read_quorum = usize::from(read_quorum);
    if read_quorum > member_count {
        // No read quorum can form at all; a single holder is then as good as any.
        return 1;
    }
    member_count - read_quorum + 1
}

/// How many of its `source_count` copy sources a catch-up must have copied before the
/// replacement counts toward quorums: a read quorum of them, or all of them if fewer (at least
/// one). Every acknowledged write is on a write quorum of the old replica set, so with
/// intersecting quorums a read quorum of its members holds each of them.
pub fn copies_needed(read_quorum: u8, source_count: usize) -> u8 {
    assert!(read_quorum > 0, "a quorum of zero is rejected by config validation");
    let needed = usize::from(read_quorum).min(source_count).max(1);
    u8::try_from(needed).expect("at most read_quorum")
}

/// The answer of a strong read: the newest version among the replies, with its value.
/// Ties on version cannot disagree on value (one version is written once), so the first wins.
/// Generic over the version type: the model counts versions in a `u8` per shard
/// (`policy::Version`), the store in a `u64` per key.
pub fn read_result<Ver: Ord + Copy, V: Copy>(replies: &[(Ver, V)]) -> Option<(Ver, V)> {
    let mut best: Option<(Ver, V)> = None;
    for &(version, value) in replies {
        match best {
            Some((best_version, _)) if best_version >= version => {}
            _ => best = Some((version, value)),
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn majority_quorums_intersect_and_minorities_do_not() {
        assert!(quorums_intersect(3, 2, 2));
        assert!(!quorums_intersect(3, 1, 2));
        assert!(quorums_intersect(5, 3, 3));
        assert!(!quorums_intersect(4, 2, 2));
    }

    #[test]
    fn a_catch_up_needs_a_read_quorum_of_its_sources_or_all_of_fewer() {
        assert_eq!(copies_needed(2, 3), 2, "a move: two of the old three");
        assert_eq!(copies_needed(2, 2), 2, "an eviction: both remaining members");
        assert_eq!(copies_needed(3, 2), 2);
        assert_eq!(copies_needed(1, 0), 1, "no source: never complete by copying nothing");
    }

    #[test]
    fn holders_needed_matches_read_quorum_overlap() {
        assert_eq!(holders_needed_for_reads(3, 2), 2);
        assert_eq!(holders_needed_for_reads(3, 1), 3);
        assert_eq!(holders_needed_for_reads(2, 2), 1);
    }

    #[test]
    fn read_result_takes_newest_version() {
        assert_eq!(read_result(&[(1, 'a'), (3, 'c'), (2, 'b')]), Some((3, 'c')));
        assert_eq!(read_result::<u8, char>(&[]), None);
    }

    proptest! {
        /// If `holders_needed_for_reads` members hold a value, every read quorum sees it.
        #[test]
        fn every_read_quorum_sees_enough_holders(members in 1usize..6, read_quorum in 1u8..6, mask in 0u32..64) {
            prop_assume!(usize::from(read_quorum) <= members);
            let holders: Vec<bool> = (0..members).map(|i| mask & (1 << i) != 0).collect();
            let holder_count = holders.iter().filter(|h| **h).count();
            let every_quorum_sees = (0u32..(1 << members))
                .filter(|q| q.count_ones() as usize == usize::from(read_quorum))
                .all(|q| (0..members).any(|i| q & (1 << i) != 0 && holders[i]));
            prop_assert_eq!(holder_count >= holders_needed_for_reads(members, read_quorum), every_quorum_sees);
        }

        /// W + R > N is exactly the condition under which any W-set meets any R-set.
        #[test]
        fn intersection_rule_is_exact(n in 1u8..6, w in 1u8..6, r in 1u8..6) {
            prop_assume!(w <= n && r <= n);
            let sets = |k: u8| (0u32..(1 << n)).filter(move |s| s.count_ones() == u32::from(k));
            let all_meet = sets(w).all(|ws| sets(r).all(|rs| ws & rs != 0));
            prop_assert_eq!(quorums_intersect(n, w, r), all_meet);
        }

        #[test]
        fn read_result_is_a_maximum(replies in proptest::collection::vec((0u8..10, 0u8..10), 0..6)) {
            match read_result(&replies) {
                None => prop_assert!(replies.is_empty()),
                Some((version, _)) => prop_assert!(replies.iter().all(|(v, _)| *v <= version)),
            }
        }
    }
}
