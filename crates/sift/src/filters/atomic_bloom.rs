//! A [`BlockedBloom`] that many threads fill at once, without locks.
//!
//! * **Idea**: the same 512-bit blocks and the same bits as [`BlockedBloom`] (the layout of
//!   `src/simd/mod.rs`), stored as `AtomicU64` words. An insert loads each word it touches and
//!   `fetch_or`s only the words missing one of its bits, with relaxed ordering: setting bits is
//!   commutative and idempotent, so the final bits do not depend on the interleaving, and on a
//!   filter that already holds most items most inserts write nothing (no cache-line ping-pong).
//! * **FPR, space, parameters**: those of [`BlockedBloom`] ([`crate::math::blocked_words_fpr`]);
//!   `AtomicBloom::new(n, p)` makes the same choice of blocks and `k`.
//! * **Memory ordering**: relaxed. An insert that returned is visible to queries made after a
//!   synchronisation with the inserting thread (joining it, a channel, a mutex); queries racing
//!   with an insert of the same item may or may not see it, never a false negative afterwards.
//! * **Files**: [`Persist::to_bytes`] writes a [`BlockedBloom`] file, byte for byte the one the
//!   equivalent [`BlockedBloom`] writes; `from_bytes` reads one. [`From<BlockedBloom>`] and
//!   [`AtomicBloom::into_blocked`] convert in memory.
//! * **Cost**: a query is plain loads. Inserting a *new* item through `&self` loads the eight
//!   words, then does one locked `fetch_or` (`lock or`) per word that misses one of its bits (up
//!   to `min(k, 8)` words), and one locked add to the item counter. A locked instruction costs
//!   ~20 cycles even on a line already in L1, and the CPU does not let later loads pass it, so
//!   the next insert's cache miss cannot overlap with this one: single-threaded, a shared insert
//!   of `u64` keys into an empty filter costs 3.6–5.7× [`BlockedBloom`]'s, of 20-byte keys
//!   ~2× (`docs/BENCHMARKS.md`, "17–32-byte keys hashed with 4-byte loads; AtomicBloom rows
//!   corrected"). Re-inserting present items
//!   costs only the loads. [`Insert::insert`] and [`Insert::insert_many`], which take
//!   `&mut self` and so exclude other threads, run [`BlockedBloom`]'s block kernel (AVX2 when
//!   present) on the same memory and cost what [`BlockedBloom`]'s insert costs.
//! * **Limits**: [`Filter::len`] counts inserts that set a bit; two threads inserting the same
//!   new item at the same moment may both count it. No deletion.
//!
//! ```
//! use sift::prelude::*;
//! use sift::AtomicBloom;
//!
//! let f = AtomicBloom::new(40_000, 0.01)?;
//! std::thread::scope(|s| {
//!     for t in 0..4u32 {
//!         let f = &f;
//!         s.spawn(move || {
//!             for i in (t * 10_000)..(t + 1) * 10_000 {
//!                 f.insert(i.to_le_bytes());
//!             }
//!         });
//!     }
//! });
//! assert!((0..40_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: the measured FPR stays within a 99.9% binomial bound of 1%.
//! let fp = (40_000..140_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::bits::{Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, Result};
use crate::filters::blocked_bloom::{effective_k, Shape, BLOCK_BITS};
use crate::format::FilterKind;
use crate::hash::{fastrange, Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::simd::{scalar, Block, Blocks, Kernel, Probe, WORDS};
use crate::traits::{Filter, Insert, Persist};
use crate::BlockedBloom;

/// One 512-bit block of atomic words, a cache line.
#[derive(Default)]
#[repr(C, align(64))]
struct AtomicBlock([AtomicU64; WORDS]);

// The exclusive insert views an `AtomicBlock` as a plain `Block`: same size and alignment.
const _: () = assert!(
    core::mem::size_of::<AtomicBlock>() == core::mem::size_of::<Block>()
        && core::mem::align_of::<AtomicBlock>() == core::mem::align_of::<Block>()
);

// SAFETY: `AtomicU64` has the layout of `u64`, so zero bytes are eight atomics holding 0, which
// is `AtomicBlock::default()`.
unsafe impl crate::bits::Zeroable for AtomicBlock {}

/// A concurrent blocked Bloom filter. See the [module documentation](self).
pub struct AtomicBloom {
    /// Never empty (the constructors check), so `fastrange(h1, len)` is a valid index. Large
    /// filters get huge-page-friendly storage ([`crate::bits::Storage`]).
    blocks: Storage<AtomicBlock>,
    k: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the hot paths (as in
    /// [`BlockedBloom`]).
    hot: HotHasher,
    /// The block kernel of [`BlockedBloom`] (AVX2 when the CPU has it), for the exclusive
    /// (`&mut self`) inserts, which may treat a block as plain words.
    probe: Probe,
    items: AtomicU64,
    capacity: u64,
    target_fpr: f64,
}

impl core::fmt::Debug for AtomicBloom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AtomicBloom")
            .field("blocks", &self.blocks.len())
            .field("k", &self.k)
            .field("hasher", &self.hasher)
            .field("items", &self.items.load(Relaxed))
            .field("capacity", &self.capacity)
            .field("target_fpr", &self.target_fpr)
            .finish()
    }
}

impl AtomicBloom {
    /// A filter sized for `expected_items` at false-positive rate `fpr` (the same blocks and `k`
    /// as [`BlockedBloom::new`]).
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`AtomicBloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        Self::from_shape(Shape::for_target(expected_items, fpr, hasher)?, None::<core::iter::Empty<u64>>)
    }

    /// A filter of exactly `blocks` blocks and `hashes` bits per item, as
    /// [`BlockedBloom::with_params`].
    pub fn with_params(blocks: u64, hashes: u32, hasher: Hasher) -> Result<Self> {
        Self::from_shape(Shape::for_params(blocks, hashes, hasher)?, None::<core::iter::Empty<u64>>)
    }

    fn from_shape<I: Iterator<Item = u64>>(shape: Shape, words: Option<I>) -> Result<Self> {
        let bytes = shape.blocks as u128 * 64;
        if bytes > MAX_BYTES || shape.blocks > usize::MAX as u64 {
            return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
        }
        if shape.blocks == 0 {
            return Err(Error::param("blocks", 0, "at least 1"));
        }
        let mut blocks: Storage<AtomicBlock> = Storage::zeroed(shape.blocks as usize)?;
        if let Some(mut words) = words {
            for b in blocks.iter_mut() {
                for w in b.0.iter_mut() {
                    *w.get_mut() = words.next().unwrap_or(0);
                }
            }
        }
        Ok(Self::from_parts(shape, blocks))
    }

    /// A filter of `shape` over existing blocks (`blocks.len() == shape.blocks`).
    fn from_parts(shape: Shape, blocks: Storage<AtomicBlock>) -> Self {
        debug_assert_eq!(blocks.len() as u64, shape.blocks);
        AtomicBloom {
            blocks,
            k: shape.k,
            hasher: shape.hasher,
            hot: HotHasher::new(shape.hasher),
            probe: Probe::new(Kernel::detect(), shape.k),
            items: AtomicU64::new(shape.items),
            capacity: shape.capacity,
            target_fpr: shape.target_fpr,
        }
    }

    #[inline(always)]
    fn block(&self, h1: u64) -> &AtomicBlock {
        // `fastrange(h1, len) < len` and `len ≥ 1`: the index is always in bounds.
        &self.blocks[fastrange(h1, self.blocks.len() as u64) as usize]
    }

    /// Inserts the item with this digest; callable from many threads at once. Returns whether
    /// this call set a bit (the item was not reported present before).
    #[inline]
    pub fn insert_digest(&self, d: Digest) -> bool {
        let b = self.block(d.h1);
        let m = scalar::masks(d.h2, self.k);
        // Load first, all eight words, branch-free: `need` has bit `w` set when word `w` misses
        // one of the item's bits. Only those words are written, so a filter that already holds
        // the item (or is being filled by other threads) costs only loads, and the data-
        // dependent branches per word (mispredicted about half the time while filling) become
        // one loop over the set bits of `need`.
        let mut need = 0u32;
        for (w, (word, mask)) in b.0.iter().zip(m).enumerate() {
            need |= ((mask & !word.load(Relaxed) != 0) as u32) << w;
        }
        if need == 0 {
            return false;
        }
        while need != 0 {
            let w = need.trailing_zeros() as usize;
            need &= need - 1;
            b.0[w].fetch_or(m[w], Relaxed);
        }
        self.items.fetch_add(1, Relaxed);
        true
    }

    /// Inserts with exclusive access: the same bits as [`AtomicBloom::insert_digest`], with
    /// plain loads and stores (no locked instruction), since `&mut self` rules out other threads.
    #[inline]
    fn insert_digest_exclusive(&mut self, d: Digest) -> bool {
        let i = fastrange(d.h1, self.blocks.len() as u64) as usize;
        let b = &mut self.blocks[i];
        // SAFETY: `AtomicU64` has the size, alignment and bit validity of `u64`, and both block
        // types are `repr(C, align(64))` arrays of eight of them, so the pointer is a valid,
        // aligned `Block`. `&mut self` guarantees no other reference to this block (and no
        // other thread) exists while the plain `&mut Block` lives: no atomic access can race
        // with the non-atomic ones.
        let block: &mut Block = unsafe { &mut *(b as *mut AtomicBlock).cast::<Block>() };
        let new = self.probe.insert_block(block, d.h2);
        *self.items.get_mut() += new as u64;
        new
    }

    /// The exclusive insert on the atomic words, without the cast to a plain block: the safe
    /// reference the fast path is tested against.
    #[cfg(test)]
    fn insert_digest_exclusive_safe(&mut self, d: Digest) -> bool {
        let i = fastrange(d.h1, self.blocks.len() as u64) as usize;
        let m = scalar::masks(d.h2, self.k);
        let b = &mut self.blocks[i];
        let mut missing = 0;
        for (word, mask) in b.0.iter_mut().zip(m) {
            let w = word.get_mut();
            missing |= mask & !*w;
            *w |= mask;
        }
        let new = missing != 0;
        *self.items.get_mut() += new as u64;
        new
    }

    /// Inserts `item` (hashed by the filter's hasher); callable from many threads at once.
    #[inline]
    pub fn insert<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.insert_digest(self.hot.digest(item.as_ref()))
    }

    /// Inserts the item whose 64-bit hash is `hash`.
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> bool {
        self.insert_digest(Digest::from_u64(hash))
    }

    /// Whether `item` may be in the set (the same as [`Filter::contains`], without the import).
    #[inline]
    pub fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_digest(self.hot.digest(item.as_ref()))
    }

    /// Number of 512-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Number of bits set per item, `k`.
    pub fn num_hashes(&self) -> u32 {
        self.k
    }

    /// Number of bits `m`.
    pub fn num_bits(&self) -> u64 {
        self.num_blocks() * BLOCK_BITS
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for.
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// A snapshot of the words, eight per block (relaxed loads: exact once inserters are done).
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.iter().flat_map(|b| b.0.iter().map(|w| w.load(Relaxed)))
    }

    /// Fraction of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.words().map(|w| w.count_ones() as u64).sum::<u64>() as f64 / self.num_bits() as f64
    }

    /// Estimated number of distinct items from the number of set bits (Swamidass & Baldi 2007).
    pub fn estimated_items(&self) -> f64 {
        let ones = self.words().map(|w| w.count_ones() as u64).sum::<u64>();
        math::bloom_estimate_items(self.num_bits() as f64, effective_k(self.k), ones as f64)
    }

    /// Removes every item (not atomic as a whole: do not race it with inserts).
    pub fn clear(&mut self) {
        for b in self.blocks.iter_mut() {
            for w in &mut b.0 {
                *w.get_mut() = 0;
            }
        }
        *self.items.get_mut() = 0;
    }

    fn shape(&self) -> Shape {
        Shape {
            blocks: self.num_blocks(),
            k: self.k,
            hasher: self.hasher,
            items: self.items.load(Relaxed),
            capacity: self.capacity,
            target_fpr: self.target_fpr,
        }
    }

    /// The equivalent [`BlockedBloom`] (same bits, same file), in the same memory: nothing is
    /// copied or allocated.
    pub fn into_blocked(self) -> BlockedBloom {
        let shape = self.shape();
        // SAFETY: `AtomicBlock` and `Block` are `repr(C, align(64))` arrays of eight `AtomicU64`
        // / `u64` (same size and alignment, asserted above), and an `AtomicU64` holds exactly the
        // bits of a `u64`; owning `self` rules out any other thread still accessing the words.
        let storage = unsafe { self.blocks.reinterpret::<Block>() };
        let blocks = Blocks::from_storage(storage).expect("a filter has at least one block");
        BlockedBloom::from_blocks(shape, blocks)
    }
}

impl From<BlockedBloom> for AtomicBloom {
    /// The same filter in the same memory: nothing is copied or allocated (unless a snapshot is
    /// reading the blocks, [`BlockedBloom::freeze`]: then the atomic filter gets a copy).
    fn from(f: BlockedBloom) -> Self {
        let (shape, blocks) = f.into_parts();
        // SAFETY: as in `into_blocked`, in the other direction: every `u64` is a valid
        // `AtomicU64` with the same value.
        let blocks = unsafe { blocks.into_storage().reinterpret::<AtomicBlock>() };
        AtomicBloom::from_parts(shape, blocks)
    }
}

impl Filter for AtomicBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        let b = self.block(d.h1);
        let m = scalar::masks(d.h2, self.k);
        let mut missing = 0;
        for (word, mask) in b.0.iter().zip(m) {
            missing |= mask & !word.load(Relaxed);
        }
        missing == 0
    }

    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        let ahead = crate::simd::PREFETCH_AHEAD;
        for d in digests.iter().take(ahead) {
            crate::bits::prefetch(self.block(d.h1));
        }
        for (i, (d, o)) in digests.iter().zip(out.iter_mut()).enumerate() {
            if let Some(next) = digests.get(i + ahead) {
                crate::bits::prefetch(self.block(next.h1));
            }
            *o = self.contains_digest(*d);
        }
    }

    fn len(&self) -> usize {
        self.items.load(Relaxed).min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.blocks.len() * 64
    }

    fn expected_fpr(&self) -> f64 {
        math::blocked_words_fpr(self.num_bits() as f64, self.items.load(Relaxed) as f64, self.k)
    }
}

impl Insert for AtomicBloom {
    /// With `&mut self` no other thread can touch the filter, so this takes the plain-store
    /// path (same bits as the shared [`AtomicBloom::insert_digest`]).
    #[inline]
    fn insert_digest(&mut self, d: Digest) -> bool {
        self.insert_digest_exclusive(d)
    }

    /// Same effect as the trait's default, hashing through the precomputed state.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest_exclusive(d)
    }

    /// Exclusive batch insert, prefetching the blocks of the digests ahead.
    fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        let ahead = crate::simd::PREFETCH_AHEAD;
        for d in digests.iter().take(ahead) {
            crate::bits::prefetch(self.block(d.h1));
        }
        let mut new = 0;
        for (i, d) in digests.iter().enumerate() {
            if let Some(next) = digests.get(i + ahead) {
                crate::bits::prefetch(self.block(next.h1));
            }
            new += self.insert_digest_exclusive(*d) as usize;
        }
        new
    }
}

impl Persist for AtomicBloom {
    /// An `AtomicBloom` is stored as a [`BlockedBloom`] file.
    const KIND: FilterKind = FilterKind::BlockedBloom;

    /// The [`BlockedBloom`] file of the same bits and parameters (see its `Persist` impl).
    fn to_bytes(&self) -> Vec<u8> {
        self.shape().encode(self.words())
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (shape, payload) = Shape::decode(bytes)?;
        let words = payload.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        Self::from_shape(shape, Some(words))
    }

    /// The bytes of [`Persist::to_bytes`], streamed (only a 64 KiB buffer besides the filter).
    fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        self.shape().write_to(w, self.words())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;
    use crate::filters::blocked_bloom::tests::{splitmix, upper_bound};

    /// The exclusive insert through the block kernel (AVX2 when present, and the scalar one)
    /// sets the same bits and reports the same "new" as the safe insert on the atomic words
    /// and as the shared (`&self`) insert, for every `k`.
    #[test]
    fn exclusive_kernel_insert_equals_the_safe_and_shared_ones() {
        let mut st = 5;
        for k in 1..=16u32 {
            for kernel in [Kernel::detect(), Kernel::scalar()] {
                let mut fast = AtomicBloom::with_params(37, k, Hasher::default()).unwrap();
                fast.probe = Probe::new(kernel, k);
                let mut safe = AtomicBloom::with_params(37, k, Hasher::default()).unwrap();
                let shared = AtomicBloom::with_params(37, k, Hasher::default()).unwrap();
                // 37 blocks, 3000 items with repeats: blocks fill up, so "new" is often false.
                let pool: Vec<Digest> =
                    (0..1000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
                for i in 0..3000 {
                    let d = pool[(splitmix(&mut st) % 1000) as usize];
                    let a = fast.insert_digest_exclusive(d);
                    assert_eq!(a, safe.insert_digest_exclusive_safe(d), "k {k} item {i}");
                    assert_eq!(a, shared.insert_digest(d), "k {k} item {i}");
                }
                assert_eq!(fast.to_bytes(), safe.to_bytes(), "k {k}");
                assert_eq!(fast.to_bytes(), shared.to_bytes(), "k {k}");
            }
        }
    }

    #[test]
    fn is_sync_and_send() {
        fn check<T: Send + Sync>() {}
        check::<AtomicBloom>();
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(AtomicBloom::new(0, 0.01), Err(Error::InvalidParameter { .. })));
        assert!(matches!(AtomicBloom::new(10, 1.5), Err(Error::InvalidParameter { .. })));
        assert!(matches!(AtomicBloom::new(10, f64::NAN), Err(Error::InvalidParameter { .. })));
        assert!(matches!(AtomicBloom::new(usize::MAX, 1e-9), Err(Error::CapacityExceeded { .. })));
        assert!(AtomicBloom::with_params(0, 4, Hasher::default()).is_err());
        assert!(AtomicBloom::with_params(4, 17, Hasher::default()).is_err());
    }

    #[test]
    fn same_bits_and_file_as_blocked_bloom() {
        for k in [3u32, 8, 13] {
            let mut b = BlockedBloom::with_params(50, k, Hasher::default()).unwrap();
            let a = AtomicBloom::with_params(50, k, Hasher::default()).unwrap();
            for i in 0..3000u32 {
                assert_eq!(a.insert(i.to_le_bytes()), b.insert(i.to_le_bytes()), "k {k} item {i}");
            }
            assert_eq!(a.to_bytes(), b.to_bytes());
            for i in 0..20_000u32 {
                assert_eq!(a.contains(i.to_le_bytes()), b.contains(i.to_le_bytes()));
            }
            let back = AtomicBloom::from_bytes(&b.to_bytes()).unwrap();
            assert_eq!(back.to_bytes(), b.to_bytes());
            assert_eq!(AtomicBloom::from(b.clone()).into_blocked(), b);
        }
    }

    /// The conversions hand the memory over (no copy) for both kinds of storage: a small filter
    /// in a plain `Vec`, a large one in the huge-page allocation; the bits, the counters and the
    /// answers survive both directions, and the converted filter keeps working.
    #[test]
    fn conversions_keep_the_memory_and_the_contents() {
        for blocks in [50u64, 100_000] {
            let mut b = BlockedBloom::with_params(blocks, 7, Hasher::default()).unwrap();
            for i in 0..(blocks * 20) as u32 {
                b.insert(i.to_le_bytes());
            }
            let (bytes, huge) = (b.to_bytes(), b.blocks.is_huge());
            assert_eq!(huge, blocks * 64 >= crate::bits::HUGE_THRESHOLD as u64 && cfg!(target_os = "linux"));
            let addr = b.blocks.as_slice().as_ptr() as usize;
            let a = AtomicBloom::from(b);
            assert_eq!(a.blocks.as_ptr() as usize, addr, "blocks {blocks}: copied");
            assert_eq!(a.blocks.is_huge(), huge);
            assert_eq!(a.to_bytes(), bytes);
            a.insert(u32::MAX.to_le_bytes());
            let (len, after) = (a.len(), a.to_bytes());
            let mut back = a.into_blocked();
            assert_eq!(back.blocks.as_slice().as_ptr() as usize, addr, "blocks {blocks}: copied back");
            assert_eq!((back.len(), back.to_bytes()), (len, after));
            assert!(back.contains(u32::MAX.to_le_bytes()));
            assert!((0..(blocks * 20) as u32).all(|i| back.contains(i.to_le_bytes())));
            // The converted filter keeps working: a fresh item is new once, and counted.
            let fresh =
                (0..u32::MAX).map(|i| (u32::MAX - 1 - i).to_le_bytes()).find(|x| !back.contains(x)).unwrap();
            assert!(back.insert(fresh));
            assert_eq!(back.len(), len + 1);
        }
    }

    #[test]
    fn exclusive_and_shared_inserts_set_the_same_bits() {
        for k in [1u32, 4, 7, 8, 12, 16] {
            let shared = AtomicBloom::with_params(40, k, Hasher::default()).unwrap();
            let mut exclusive = AtomicBloom::with_params(40, k, Hasher::default()).unwrap();
            let mut batch = AtomicBloom::with_params(40, k, Hasher::default()).unwrap();
            let mut st = 11;
            let ds: Vec<Digest> =
                (0..4000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
            for d in &ds {
                assert_eq!(shared.insert_digest(*d), Insert::insert_digest(&mut exclusive, *d), "k {k}");
            }
            assert_eq!(batch.insert_digests(&ds), shared.len(), "k {k}");
            assert!(shared.words().eq(exclusive.words()) && shared.words().eq(batch.words()), "k {k}");
            assert!(ds.iter().all(|d| batch.contains_digest(*d)));
        }
    }

    #[test]
    fn threads_insert_everything_and_match_sequential_bits() {
        let n = 200_000u64;
        let f = AtomicBloom::new(n as usize, 0.01).unwrap();
        let items: Vec<u64> = {
            let mut st = 5;
            (0..n).map(|_| splitmix(&mut st)).collect()
        };
        std::thread::scope(|s| {
            for chunk in items.chunks(items.len() / 4) {
                let f = &f;
                s.spawn(move || {
                    // Interleave with another thread's items too: every item twice.
                    for h in chunk.iter().chain(chunk.iter().rev()) {
                        f.insert_hash(*h);
                    }
                });
            }
        });
        assert!(items.iter().all(|h| f.contains_hash(*h)));
        let mut seq = BlockedBloom::new(n as usize, 0.01).unwrap();
        for h in &items {
            seq.insert_hash(*h);
        }
        assert!(f.words().eq(seq.words()), "concurrent bits differ from sequential bits");
        let blocked = f.into_blocked();
        assert_eq!(blocked.words().collect::<Vec<_>>(), seq.words().collect::<Vec<_>>());
    }

    #[test]
    fn measured_fpr_within_bound() {
        let n = 1_000_000usize;
        let f = AtomicBloom::new(n, 0.01).unwrap();
        let mut st = 17;
        for _ in 0..n {
            f.insert_hash(splitmix(&mut st));
        }
        let probes = 1_000_000;
        let fp = (0..probes).filter(|_| f.contains_hash(splitmix(&mut st) ^ (1 << 63))).count();
        let formula = math::blocked_words_fpr(f.num_bits() as f64, n as f64, f.num_hashes());
        let measured = fp as f64 / probes as f64;
        assert!(formula <= 0.01);
        assert!(measured <= upper_bound(formula, probes as f64) + 1e-3 * formula, "{measured} vs {formula}");
    }

    #[test]
    fn round_trip_and_corruption() {
        let f = AtomicBloom::new(1000, 0.01).unwrap();
        for i in 0..800u32 {
            f.insert(i.to_string());
        }
        let bytes = f.to_bytes();
        let g = AtomicBloom::from_bytes(&bytes).unwrap();
        assert_eq!(g.to_bytes(), bytes);
        assert!((0..800u32).all(|i| g.contains(i.to_string())));
        assert_eq!(BlockedBloom::from_bytes(&bytes).unwrap().to_bytes(), bytes);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 10] ^= 1;
        assert!(matches!(
            AtomicBloom::from_bytes(&bad),
            Err(Error::Format(FormatError::ChecksumMismatch { .. }))
        ));
        assert!(AtomicBloom::from_bytes(&bytes[..n - 1]).is_err());
        let mut g = g;
        g.clear();
        assert!(g.is_empty() && !g.contains("1"));
    }
}
