//! A part of a world state shared between states (`Arc`), which remembers its own hash.
//!
//! Most steps change one actor: a successor shares its other parts with its parent, and
//! before this every fingerprint walked all of them again (a third of the time on the
//! two-coordinator rollout models went to hashing). A `Shared` part is hashed once per
//! allocation and feeds the state's hash that one `u64`; `make_mut` forgets it, so a part is
//! never hashed by a stale value. Equality is still the contents'.
//!
//! The state's fingerprint then depends on each part's 64-bit hash: two different parts with
//! the same hash make two different states collide. The report's collision bound counts those
//! chances too (`WorldState::parts_hashed`).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct Shared<T>(Arc<Cached<T>>);

struct Cached<T> {
    value: T,
    /// The value's fingerprint, 0 until it is first hashed (a fingerprint is never 0).
    hash: AtomicU64,
}

impl<T: Clone> Clone for Cached<T> {
    fn clone(&self) -> Self {
        Cached { value: self.value.clone(), hash: AtomicU64::new(self.hash.load(Ordering::Relaxed)) }
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> Shared<T> {
    pub fn new(value: T) -> Self {
        Shared(Arc::new(Cached { value, hash: AtomicU64::new(0) }))
    }

    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    pub fn strong_count(this: &Self) -> usize {
        Arc::strong_count(&this.0)
    }
}

impl<T: Clone> Shared<T> {
    /// The part, to change it: unshared first, and its hash forgotten.
    pub fn make_mut(this: &mut Self) -> &mut T {
        let cached = Arc::make_mut(&mut this.0);
        *cached.hash.get_mut() = 0;
        &mut cached.value
    }
}

impl<T: Clone + PartialEq> Shared<T> {
    /// Change the part with `f` where the change may change nothing: `f` runs on a copy, which
    /// the part takes only if it differs, so an unchanged part stays shared with the parent
    /// state, with its hash, instead of an equal copy to hash and keep.
    pub fn update(this: &mut Self, f: impl FnOnce(&mut T)) {
        let mut changed = this.0.value.clone();
        f(&mut changed);
        if changed != this.0.value {
            *this = Shared::new(changed);
        }
    }
}

impl<T: Hash> Shared<T> {
    fn hash64(&self) -> u64 {
        match self.0.hash.load(Ordering::Relaxed) {
            0 => {
                let h = part_hash(&self.0.value);
                self.0.hash.store(h, Ordering::Relaxed);
                h
            }
            h => h,
        }
    }
}

/// A part's own 64-bit hash: a fixed seed (the same on every run and thread count), never 0
/// (0 marks a hash not yet known).
fn part_hash<T: Hash>(value: &T) -> u64 {
    use std::hash::BuildHasher;
    const SEED: u64 = 0x5348_4152_4544_5054;
    foldhash::quality::FixedState::with_seed(SEED).hash_one(value).max(1)
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: Hash> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of<T: Hash>(x: &T) -> u64 {
        part_hash(x)
    }

    #[test]
    fn a_change_is_hashed_anew_and_equal_parts_hash_equally() {
        let mut a = Shared::new(vec![1u8, 2, 3]);
        let b = Shared::new(vec![1u8, 2, 3]);
        assert_eq!(hash_of(&a), hash_of(&b));
        assert_eq!(a, b);
        let shared = a.clone();
        Shared::make_mut(&mut a).push(4);
        assert_ne!(hash_of(&a), hash_of(&shared), "the old hash is forgotten");
        assert_eq!(hash_of(&a), hash_of(&Shared::new(vec![1u8, 2, 3, 4])));
        assert_eq!(*shared, vec![1, 2, 3], "the parent's part is untouched");
        // Changed back in place (unshared, so no copy): the hash follows the contents.
        Shared::make_mut(&mut a).pop();
        assert_eq!(hash_of(&a), hash_of(&b));
    }

    #[test]
    fn an_update_that_changes_nothing_keeps_the_shared_part() {
        let parent = Shared::new(vec![1u8, 2, 3]);
        let mut child = parent.clone();
        Shared::update(&mut child, |v| v.sort());
        assert!(Shared::ptr_eq(&parent, &child), "an equal copy is not kept");
        Shared::update(&mut child, |v| v.push(4));
        assert!(!Shared::ptr_eq(&parent, &child));
        assert_eq!((*parent).clone(), vec![1, 2, 3], "the parent's part is untouched");
        assert_eq!(hash_of(&child), hash_of(&Shared::new(vec![1u8, 2, 3, 4])));
    }
}
