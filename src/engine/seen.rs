//! The engine's seen set: every fingerprint explored so far, in an open-addressed table.
//!
//! Fingerprints are well-mixed 64-bit hashes, so the table uses their bits directly: the top
//! [`SHARD_BITS`] bits pick a shard, the low bits the home slot inside it. Each shard is a
//! power-of-two array of slots holding `u64` keys (0 marks an empty slot;
//! [`super::fingerprint`] never returns 0) probed linearly, and grows by doubling past a 3/4 load. A lookup touches
//! one cache line in the common case (8 keys per 64-byte line), against two for a
//! control-byte map.
//!
//! Shards let one BFS level's new states be inserted by several threads at once with no lock
//! and no sequential merge: thread `t` owns a contiguous range of shards and inserts, in the
//! level's global candidate order, exactly the candidates whose fingerprints fall there. So
//! which candidate is the first occurrence of a state does not depend on the thread count.
//!
//! Values (a `u32` state index per key, stored next to its key in a 16-byte slot) are kept
//! only when the caller needs them (edge recording for the cycle analysis); a safety-only
//! exploration stores 8 bytes per slot.

/// `2^SHARD_BITS` shards: enough to spread a level over the threads evenly, few enough that
/// every shard holds thousands of states on the spaces worth parallelising.
pub const SHARD_BITS: u32 = 3;
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;
/// Initial slots per shard.
const SHARD_CAPACITY_MIN: usize = 1 << 10;

const EMPTY: u64 = 0;

/// The shard a fingerprint belongs to.
#[inline]
pub fn shard_of(fp: u64) -> usize {
    (fp >> (64 - SHARD_BITS)) as usize
}

/// Ask the CPU to start loading a cache line we are about to probe (a hint: no effect on
/// results, and never a fault).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint; it never dereferences in a way that can fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A zeroed vector of `len` elements whose pages the kernel may back with huge pages: the
/// table is probed at random, so 4 KiB pages would cost a TLB miss on nearly every probe.
fn zeroed_table<T: Copy + Default>(len: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    let bytes = len * std::mem::size_of::<T>();
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE_BYTES {
        // Advise the 2 MiB-aligned part before the first touch, so its faults map huge pages.
        let start = (v.as_ptr() as usize).next_multiple_of(HUGE_PAGE_BYTES);
        let end = (v.as_ptr() as usize + bytes) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        if end > start {
            // SAFETY: the range lies inside `v`'s allocation; MADV_HUGEPAGE changes no contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    v.resize(len, T::default());
    v
}
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// One shard: a power-of-two number of slots, and the slots inserted since the last
/// [`Shard::take_pending`] (so their provisional values can be replaced by final ones).
///
/// A slot is one `u64` key, or with values a key and its value side by side (16 bytes,
/// aligned, so both sit in one cache line and a lookup costs one miss, not two).
pub struct Shard {
    /// `stride` words per slot: the key, then (stride 2) the value.
    words: Vec<u64>,
    stride: usize,
    len: usize,
    /// (slot, provisional value) of keys inserted since the last `take_pending`, kept valid
    /// across growth. Only used when values are kept.
    pending: Vec<(u32, u32)>,
}

impl Shard {
    fn new(with_values: bool) -> Shard {
        let stride = if with_values { 2 } else { 1 };
        Shard { words: zeroed_table(SHARD_CAPACITY_MIN * stride), stride, len: 0, pending: Vec::new() }
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.words.len() / self.stride
    }

    #[inline]
    fn key(&self, slot: usize) -> u64 {
        self.words[slot * self.stride]
    }

    #[inline]
    fn value(&self, slot: usize) -> u32 {
        if self.stride == 2 {
            self.words[slot * 2 + 1] as u32
        } else {
            0
        }
    }

    /// The slot holding `fp`, or the empty slot where it would go.
    #[inline]
    fn find_slot(&self, fp: u64) -> usize {
        debug_assert!(fp != EMPTY);
        let mask = self.capacity() - 1;
        let mut i = fp as usize & mask;
        loop {
            let k = self.key(i);
            if k == fp || k == EMPTY {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn prefetch(&self, fp: u64) {
        let i = fp as usize & (self.capacity() - 1);
        prefetch(&self.words[i * self.stride]);
    }

    /// Insert `fp` with `value` if absent: `None` if it was inserted, else the stored value
    /// (0 when values are not kept).
    #[inline]
    pub fn insert(&mut self, fp: u64, value: u32) -> Option<u32> {
        if (self.len + 1) * 4 > self.capacity() * 3 {
            self.grow();
        }
        let i = self.find_slot(fp);
        if self.key(i) == fp {
            return Some(self.value(i));
        }
        self.words[i * self.stride] = fp;
        self.len += 1;
        if self.stride == 2 {
            self.words[i * 2 + 1] = u64::from(value);
            let slot = u32::try_from(i).expect("a shard has fewer than 2^32 slots");
            self.pending.push((slot, value));
        }
        None
    }

    fn grow(&mut self) {
        let stride = self.stride;
        let doubled = zeroed_table(self.words.len() * 2);
        let old = std::mem::replace(&mut self.words, doubled);
        for slot in old.chunks_exact(stride) {
            if slot[0] != EMPTY {
                let j = self.find_slot(slot[0]);
                self.words[j * stride..(j + 1) * stride].copy_from_slice(slot);
            }
        }
        // Pending slots moved: find them again by key.
        let mut pending = std::mem::take(&mut self.pending);
        for p in &mut pending {
            p.0 = self.find_slot(old[p.0 as usize * stride]) as u32;
        }
        self.pending = pending;
    }

    /// The keys inserted since the last call, as (slot, provisional value); see [`Shard::set`].
    pub fn take_pending(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.pending)
    }

    /// Replace the value in `slot` (from [`Shard::take_pending`], with no insert in between).
    pub fn set(&mut self, slot: u32, value: u32) {
        assert_eq!(self.stride, 2, "values are kept");
        self.words[slot as usize * 2 + 1] = u64::from(value);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// The sharded seen set.
pub struct SeenSet {
    shards: Vec<Shard>,
    with_values: bool,
}

impl SeenSet {
    pub fn new(with_values: bool) -> SeenSet {
        SeenSet { shards: (0..SHARD_COUNT).map(|_| Shard::new(with_values)).collect(), with_values }
    }

    pub fn with_values(&self) -> bool {
        self.with_values
    }

    #[inline]
    pub fn prefetch(&self, fp: u64) {
        self.shards[shard_of(fp)].prefetch(fp);
    }

    /// The stored value of `fp` (0 when values are not kept), if it is present.
    #[inline]
    pub fn get(&self, fp: u64) -> Option<u32> {
        let shard = &self.shards[shard_of(fp)];
        let i = shard.find_slot(fp);
        (shard.key(i) == fp).then(|| shard.value(i))
    }

    /// Insert into the right shard (single-threaded use, e.g. initial states).
    pub fn insert(&mut self, fp: u64, value: u32) -> Option<u32> {
        self.shards[shard_of(fp)].insert(fp, value)
    }

    /// The shards, to be split among threads by contiguous ranges.
    pub fn shards_mut(&mut self) -> &mut [Shard] {
        &mut self.shards
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(Shard::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the table (keys and values).
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(Shard::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(i: u64) -> u64 {
        // Spread over shards and slots like real fingerprints; never 0.
        (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 7)) | 1
    }

    #[test]
    fn inserts_finds_and_grows_without_losing_values() {
        let mut seen = SeenSet::new(true);
        for i in 0..200_000u64 {
            assert_eq!(seen.insert(fp(i), i as u32), None);
        }
        for i in 0..200_000u64 {
            assert_eq!(seen.get(fp(i)), Some(i as u32));
            assert_eq!(seen.insert(fp(i), 7), Some(i as u32), "a second insert keeps the first value");
        }
        assert_eq!(seen.get(fp(200_001)), None);
        assert_eq!(seen.len(), 200_000);
        // Every shard stays at most 3/4 full.
        assert!(seen.shards.iter().all(|s| s.len() * 4 <= s.capacity() * 3));
    }

    #[test]
    fn pending_slots_survive_growth() {
        let mut seen = SeenSet::new(true);
        let shard = &mut seen.shards_mut()[0];
        let keys: Vec<u64> = (1..5000u64).map(|i| i << 8 | 1).collect();
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(shard.insert(k, i as u32), None);
        }
        let pending = shard.take_pending();
        assert_eq!(pending.len(), keys.len());
        for &(slot, provisional) in &pending {
            shard.set(slot, provisional + 1_000_000);
        }
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(shard.insert(k, 0), Some(i as u32 + 1_000_000));
        }
    }

    #[test]
    fn without_values_it_is_a_set() {
        let mut seen = SeenSet::new(false);
        assert_eq!(seen.insert(fp(3), 9), None);
        assert_eq!(seen.get(fp(3)), Some(0));
        assert!(seen.shards_mut()[shard_of(fp(3))].take_pending().is_empty());
        assert_eq!(seen.bytes(), SHARD_COUNT * SHARD_CAPACITY_MIN * 8);
    }
}
