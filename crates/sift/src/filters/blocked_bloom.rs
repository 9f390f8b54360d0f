//! Cache-line-blocked Bloom filter: all `k` bits of an item in one 512-bit block.
//!
//! Putze, Sanders & Singler, "Cache-, hash- and space-efficient Bloom filters", JEA 14, 2009.
//!
//! * **Idea**: the first hash word picks one 64-byte block (`fastrange(h1, blocks)`, any number of
//!   blocks); the second places the `k` bits inside it, one per 64-bit word in `min(k, 8)`
//!   consecutive words from a hash-chosen start word, plus a second round of `k - 8` bits for
//!   `k > 8` (the layout is described in `src/simd/mod.rs`). A query touches one cache line, whatever `k` is, and
//!   with AVX2 tests all bits at once (two `vptest`), with no loop and no branch on the data.
//! * **FPR**: block loads are Poisson(λ = n/blocks), and inside a block the layout is analysed
//!   exactly: `p = Σ_S (-1)^|S| e^(-λ(1 - q_S))` ([`crate::math::blocked_words_fpr`]).
//! * **Space**: a little more than a classic Bloom filter, because loads vary between blocks:
//!   4.86 bits/key at 10%, 9.93 at 1%, 15.6 at 0.1% for n = 1e6 (classic: 4.79, 9.59, 14.4);
//!   measured FPRs in the unit tests. [`BlockedBloom::new`] picks the number of blocks and the `k`
//!   (1 to 16) that minimise memory for the target FPR.
//! * **Set algebra**: [`BlockedBloom::union`], [`BlockedBloom::intersect`],
//!   [`BlockedBloom::estimated_items`] (Swamidass & Baldi 2007), as for [`crate::Bloom`].
//! * **Limits**: below about 1e-6 the Poisson spread of block loads makes the blocked layout
//!   expensive (k is capped at 16); use a classic [`crate::Bloom`] or a fingerprint filter there.
//!   No deletion. For inserts from many threads see [`crate::AtomicBloom`] (same bits).
//!
//! ```
//! use sift::prelude::*;
//! use sift::BlockedBloom;
//!
//! let mut f = BlockedBloom::new(10_000, 0.01)?;
//! for i in 0..10_000u32 {
//!     f.insert(i.to_le_bytes());
//! }
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: the measured FPR stays within a 99.9% binomial bound of 1%.
//! let fp = (10_000..110_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{CowGuard, CowWriter, Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{
    decode_verified, write_words, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter, RawFilter,
    StreamEncoder,
};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::simd::{Block, Blocks, Kernel, Probe, MAX_K, PREFETCH_AHEAD, WORDS};
use crate::traits::{Filter, Insert, Persist};

/// Largest number of hash functions (bits per item) accepted: two rounds of eight words.
pub const MAX_HASHES: u32 = MAX_K;

/// Bits per block.
pub const BLOCK_BITS: u64 = 512;

/// The layout code stored in the parameter block: 1 = the layout described in `src/simd/mod.rs`.
const LAYOUT: u32 = 1;

/// A cache-line-blocked Bloom filter. See the [module documentation](self).
#[derive(Clone)]
pub struct BlockedBloom {
    pub(crate) blocks: Blocks,
    k: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the hot paths.
    hot: HotHasher,
    items: u64,
    capacity: u64,
    target_fpr: f64,
    kernel: Kernel,
    /// The kernel specialised for `k`: what single queries and inserts call.
    probe: Probe,
}

impl PartialEq for BlockedBloom {
    /// Same parameters and same bits (the probe kernel in use does not matter: both set the same
    /// bits).
    fn eq(&self, other: &Self) -> bool {
        self.blocks == other.blocks
            && self.k == other.k
            && self.hasher == other.hasher
            && self.items == other.items
            && self.capacity == other.capacity
            && self.target_fpr == other.target_fpr
    }
}

impl core::fmt::Debug for BlockedBloom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockedBloom")
            .field("blocks", &self.blocks.len())
            .field("k", &self.k)
            .field("hasher", &self.hasher)
            .field("items", &self.items)
            .field("capacity", &self.capacity)
            .field("target_fpr", &self.target_fpr)
            .field("kernel", &self.kernel.name())
            .finish()
    }
}

/// Allocates `blocks` zeroed blocks, with structured errors for absurd sizes.
pub(crate) fn alloc_blocks(blocks: u64) -> Result<Blocks> {
    let bytes = blocks as u128 * 64;
    if bytes > MAX_BYTES || blocks > usize::MAX as u64 {
        return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
    }
    let v = Storage::<Block>::zeroed(blocks as usize)?;
    Blocks::from_storage(v).ok_or(Error::param("blocks", blocks, "at least 1"))
}

/// Effective number of distinct bits an item sets: `k`, less the expected round-2 collisions
/// (each of the `k - 8` second-round bits hits its word's round-1 bit with probability 1/64).
pub(crate) fn effective_k(k: u32) -> f64 {
    if k <= 8 {
        k as f64
    } else {
        8.0 + (k - 8) as f64 * 63.0 / 64.0
    }
}

/// The header fields of a blocked filter file (shared with [`crate::AtomicBloom`], which writes
/// the same file).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) blocks: u64,
    pub(crate) k: u32,
    pub(crate) hasher: Hasher,
    pub(crate) items: u64,
    pub(crate) capacity: u64,
    pub(crate) target_fpr: f64,
}

impl Shape {
    /// The shape [`BlockedBloom::with_params`] builds (parameters validated).
    pub(crate) fn for_params(blocks: u64, hashes: u32, hasher: Hasher) -> Result<Shape> {
        if blocks == 0 {
            return Err(Error::param("blocks", blocks, "at least 1"));
        }
        if hashes == 0 || hashes > MAX_HASHES {
            return Err(Error::param("hashes", hashes, "between 1 and 16"));
        }
        let bytes = blocks as u128 * 64;
        if bytes > MAX_BYTES {
            return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
        }
        let m = blocks as f64 * BLOCK_BITS as f64;
        let capacity = (m * core::f64::consts::LN_2 / hashes as f64).max(1.0);
        Ok(Shape {
            blocks,
            k: hashes,
            hasher,
            items: 0,
            capacity: capacity as u64,
            target_fpr: math::blocked_words_fpr(m, capacity, hashes).clamp(f64::MIN_POSITIVE, 0.5),
        })
    }

    /// The shape [`BlockedBloom::with_hasher`] builds: the fewest blocks (and their best `k`)
    /// for `expected_items` at `fpr`.
    pub(crate) fn for_target(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Shape> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let (blocks, k) = math::blocked_words_plan(expected_items as f64, fpr, MAX_HASHES);
        let mut shape = Shape::for_params(blocks, k, hasher)?;
        shape.capacity = expected_items as u64;
        shape.target_fpr = fpr;
        Ok(shape)
    }

    /// The file's parameter block.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.blocks).u32(self.k).u32(LAYOUT).u64(self.items).u64(self.capacity).f64(self.target_fpr);
        p
    }

    /// Encodes a file of this shape whose payload is `words` (exactly `8·blocks` of them).
    pub(crate) fn encode(&self, words: impl Iterator<Item = u64>) -> Vec<u8> {
        let p = self.params();
        let mut e = Encoder::new(FilterKind::BlockedBloom, self.hasher, p.as_bytes(), self.blocks * 64);
        let out = e.payload();
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        e.finish()
    }

    /// Writes the file [`Shape::encode`] makes to `w`, streaming the words (the CRC is computed
    /// as they go out), so no second copy of the payload is held in memory.
    pub(crate) fn write_to<W: std::io::Write + ?Sized>(
        &self,
        w: &mut W,
        words: impl Iterator<Item = u64>,
    ) -> std::io::Result<()> {
        let p = self.params();
        let mut e =
            StreamEncoder::new(w, FilterKind::BlockedBloom, self.hasher, p.as_bytes(), self.blocks * 64)?;
        write_words(&mut e, words)?;
        e.finish()?;
        Ok(())
    }

    /// Bytes `from .. from + len` of the file [`Shape::write_to`] writes for `blocks`, and the
    /// file's length (see `format::words_file_range`).
    pub(crate) fn file_range(&self, blocks: &[Block], from: u64, len: usize) -> (Vec<u8>, u64) {
        let mut p = ParamWriter::new();
        p.u64(self.blocks).u32(self.k).u32(LAYOUT).u64(self.items).u64(self.capacity).f64(self.target_fpr);
        crate::format::words_file_range(
            FilterKind::BlockedBloom,
            self.hasher,
            p.as_bytes(),
            self.blocks * 8,
            |i| blocks[(i / 8) as usize].0[(i % 8) as usize],
            from,
            len,
        )
    }

    /// Decodes and validates the header of a blocked filter file; returns the shape and the
    /// payload, whose length is checked to be exactly `64·blocks` bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<(Shape, &[u8])> {
        let raw: RawFilter<'_> = decode_verified(bytes, FilterKind::BlockedBloom)?;
        let mut r = raw.param_reader();
        let blocks = r.u64("blocks")?;
        let k = r.u32("hashes")?;
        let layout = r.u32("layout")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        if blocks == 0 {
            return Err(FormatError::InvalidParams("blocked bloom: zero blocks").into());
        }
        if k == 0 || k > MAX_HASHES {
            return Err(FormatError::InvalidParams("blocked bloom: hashes must be between 1 and 16").into());
        }
        if layout != LAYOUT {
            return Err(FormatError::InvalidParams("blocked bloom: unknown block layout").into());
        }
        let payload = raw.payload();
        if payload.len() as u128 != blocks as u128 * 64 {
            return Err(FormatError::InvalidParams("blocked bloom: payload is not 64 bytes per block").into());
        }
        Ok((Shape { blocks, k, hasher: raw.hasher(), items, capacity, target_fpr }, payload))
    }
}

/// Where an item lives in a blocked filter of `blocks` blocks with `k` bits per item: its block
/// index (`fastrange(h1, blocks)`) and the eight 64-bit word masks of its bits in that block (the
/// layout of `src/simd/mod.rs`; word `w` is bytes `8w..8w + 8` of the block, little-endian).
///
/// For clients that keep a filter's bytes somewhere else and set or test the bits themselves
/// (`sift-client` keeps them in Redis strings): `BlockedBloom::contains_digest(d)` is true
/// exactly when every bit of these masks is set in that block.
///
/// Errors: [`Error::InvalidParameter`] for `blocks = 0` or `k` outside `1..=16`.
pub fn item_bits(d: Digest, blocks: u64, k: u32) -> Result<(u64, [u64; WORDS])> {
    if blocks == 0 {
        return Err(Error::param("blocks", blocks, "at least 1"));
    }
    if k == 0 || k > MAX_HASHES {
        return Err(Error::param("hashes", k, "between 1 and 16"));
    }
    Ok((crate::hash::fastrange(d.h1, blocks), crate::simd::scalar::masks(d.h2, k)))
}

impl BlockedBloom {
    /// A filter sized for `expected_items` at false-positive rate `fpr`: the number of blocks
    /// and of bits per item that minimise memory ([`math::blocked_words_plan`]), and the
    /// default hash (XXH3, 128-bit only for astronomically large sets).
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`BlockedBloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        Self::from_shape(Shape::for_target(expected_items, fpr, hasher)?, None::<core::iter::Empty<u64>>)
    }

    /// A filter of exactly `blocks` 512-bit blocks setting `hashes` bits per item (1 to 16).
    ///
    /// Its [`capacity`](BlockedBloom::capacity) is the item count at which a classic Bloom
    /// filter of the same size and `k` would be half full, and its
    /// [`target_fpr`](BlockedBloom::target_fpr) the FPR of this filter at that count.
    pub fn with_params(blocks: u64, hashes: u32, hasher: Hasher) -> Result<Self> {
        Self::from_shape(Shape::for_params(blocks, hashes, hasher)?, None::<core::iter::Empty<u64>>)
    }

    /// A filter over an existing payload: `payload` holds the blocks in file order (64 bytes per
    /// block, the payload of [`Persist::to_bytes`]), for instance downloaded from where a client
    /// kept the bits. Its item count is estimated from the bits set
    /// ([`BlockedBloom::estimated_items`]); `capacity` and `target_fpr` are recorded as given.
    ///
    /// Errors: an empty payload or one that is not a whole number of blocks, `hashes` outside
    /// 1 to 16, a `target_fpr` outside (0, 1), or a size beyond the largest filter.
    pub fn from_payload(
        payload: &[u8],
        hashes: u32,
        hasher: Hasher,
        capacity: u64,
        target_fpr: f64,
    ) -> Result<Self> {
        if payload.is_empty() || payload.len() % 64 != 0 {
            return Err(Error::param(
                "payload",
                payload.len(),
                "a positive multiple of 64 bytes (whole blocks)",
            ));
        }
        check_fpr(target_fpr)?;
        let mut shape = Shape::for_params(payload.len() as u64 / 64, hashes, hasher)?;
        shape.capacity = capacity;
        shape.target_fpr = target_fpr;
        let words = payload.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        let mut f = Self::from_shape(shape, Some(words))?;
        f.items = f.estimated_items().min(u64::MAX as f64) as u64;
        Ok(f)
    }

    /// Switches this filter to the portable kernel (the tests use it to cover both kernels; the
    /// bits are the same either way).
    #[doc(hidden)]
    pub fn force_scalar(&mut self) {
        self.kernel = Kernel::scalar();
        self.probe = Probe::new(self.kernel, self.k);
    }

    /// The probe kernel in use: `"avx2"` or `"scalar"`.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name()
    }

    /// Number of 512-bit blocks.
    pub fn num_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Number of bits set per item, `k`.
    pub fn num_hashes(&self) -> u32 {
        self.k
    }

    /// Number of bits `m` (512 per block).
    pub fn num_bits(&self) -> u64 {
        self.num_blocks() * BLOCK_BITS
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`BlockedBloom::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Bytes `from .. from + len` of the file [`Persist::write_to`] writes (fewer at its end, none
    /// past it), and the file's length: a piece of the file read at its offset, in O(`len`)
    /// rather than by encoding the file up to `from` (a dump in pieces is then linear in the
    /// file, not quadratic). A range that reaches the 4-byte CRC trailer reads the whole filter
    /// once, for the CRC.
    pub fn file_range(&self, from: u64, len: usize) -> (Vec<u8>, u64) {
        self.shape().file_range(self.blocks.as_slice(), from, len)
    }

    /// The words of the blocks, eight per block, in order.
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.as_slice().iter().flat_map(|b| b.0)
    }

    fn count_ones(&self) -> u64 {
        self.words().map(|w| w.count_ones() as u64).sum()
    }

    /// Fraction of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.num_bits() as f64
    }

    /// FPR measured from the contents: the probability that a random non-member finds all its
    /// Hints the CPU to load the cache line (the block) that `item` maps to, for a caller that
    /// knows its next items before it adds or queries them (a server running pipelined
    /// requests): started a few items ahead, the misses into a large filter overlap instead of
    /// following one another, as they do inside [`Filter::contains_many`]. Nothing is read for
    /// an answer and nothing changes.
    #[inline]
    pub fn prefetch(&self, item: &[u8]) {
        self.blocks.prefetch(self.hot.digest(item).h1);
    }

    /// bits set, averaged exactly over the blocks and the query's start words, from the fill of
    /// each word. What the filter gives now, whatever was inserted (duplicates, unions): the
    /// number to monitor before rebuilding.
    pub fn current_fpr(&self) -> f64 {
        self.fpr_of_blocks(self.blocks.as_slice()) / self.blocks.len() as f64
    }

    /// [`BlockedBloom::current_fpr`] averaged over an evenly spaced sample of at most
    /// [`FILL_SAMPLE_BYTES`](crate::bits::FILL_SAMPLE_BYTES) of blocks
    /// ([`sample_runs`](crate::bits::sample_runs)), the exact figure for a filter no larger:
    /// what a monitor polling large filters under a lock can afford.
    pub fn sampled_fpr(&self) -> f64 {
        let blocks = self.blocks.as_slice();
        let block = core::mem::size_of_val(&blocks[0]);
        let (mut total, mut n) = (0.0, 0usize);
        for r in crate::bits::sample_runs(
            blocks.len(),
            crate::bits::FILL_SAMPLE_RUN / block,
            crate::bits::FILL_SAMPLE_BYTES / block,
        ) {
            n += r.len();
            total += self.fpr_of_blocks(&blocks[r]);
        }
        total / n as f64
    }

    /// The sum over `blocks` of each block's false-positive probability (see `current_fpr`).
    fn fpr_of_blocks(&self, blocks: &[Block]) -> f64 {
        let k = self.k as usize;
        let (first, second) = (k.min(8), k.saturating_sub(8));
        let mut total = 0.0;
        for b in blocks {
            let f: [f64; WORDS] = core::array::from_fn(|w| b.0[w].count_ones() as f64 / 64.0);
            let mut block = 0.0;
            if k <= 8 {
                // Start word t: words t..t+k (mod 8), one bit each.
                for t in 0..WORDS {
                    block += (0..first).map(|i| f[(t + i) % WORDS]).product::<f64>();
                }
            } else {
                // Every word has a round-1 bit; the k-8 words from t2 have a second, independent
                // uniform one (both set with probability f²).
                let all: f64 = f.iter().product();
                for t in 0..WORDS {
                    block += all * (0..second).map(|i| f[(t + i) % WORDS]).product::<f64>();
                }
            }
            total += block / WORDS as f64;
        }
        total
    }

    /// Estimated number of distinct items from the number of set bits (Swamidass & Baldi 2007):
    /// every bit has the same probability `k/m` to be set by an item, as in a classic filter.
    /// Useful after [`BlockedBloom::union`], where [`Filter::len`] no longer counts distinct items.
    pub fn estimated_items(&self) -> f64 {
        math::bloom_estimate_items(self.num_bits() as f64, effective_k(self.k), self.count_ones() as f64)
    }

    fn check_same_shape(&self, other: &BlockedBloom) -> Result<()> {
        if self.blocks.len() != other.blocks.len() {
            return Err(Error::Incompatible { reason: "different number of blocks" });
        }
        if self.k != other.k {
            return Err(Error::Incompatible { reason: "different number of hash functions" });
        }
        if self.hasher != other.hasher {
            return Err(Error::Incompatible { reason: "different hash function or seed" });
        }
        Ok(())
    }

    /// Adds every item of `other` to `self` (bitwise OR). The result reports every member of
    /// either filter. [`Filter::len`] becomes the estimate of [`BlockedBloom::estimated_items`].
    pub fn union(&mut self, other: &BlockedBloom) -> Result<()> {
        self.check_same_shape(other)?;
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        for (a, b) in self.blocks.as_mut_slice().iter_mut().zip(other.blocks.as_slice()) {
            for (x, y) in a.0.iter_mut().zip(&b.0) {
                *x |= *y;
            }
        }
        self.items = self.estimated_items().min(u64::MAX as f64) as u64;
        Ok(())
    }

    /// Keeps only what both filters report (bitwise AND). Every item inserted in both is still
    /// reported; the FPR of the result is at most that of the fuller operand.
    pub fn intersect(&mut self, other: &BlockedBloom) -> Result<()> {
        self.check_same_shape(other)?;
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        for (a, b) in self.blocks.as_mut_slice().iter_mut().zip(other.blocks.as_slice()) {
            for (x, y) in a.0.iter_mut().zip(&b.0) {
                *x &= *y;
            }
        }
        self.items = self.estimated_items().min(u64::MAX as f64) as u64;
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        self.blocks.as_mut_slice().fill(Block::default());
        self.items = 0;
    }

    /// Takes the lock of `g` (a snapshot reading the blocks) and saves every block the snapshot
    /// has not read yet, for a write that changes them all; the write happens under the lock
    /// returned. It copies at most what the write itself then changes.
    #[cold]
    fn save_all<'g>(&self, g: &'g CowGuard) -> CowWriter<'g> {
        let mut w = g.writer();
        w.before_write_values(self.blocks.as_slice(), 0..self.blocks.len());
        w
    }

    /// [`Insert::insert_digest`] while a snapshot reads the blocks ([`BlockedBloom::freeze`]):
    /// the block's piece is saved for it first.
    #[cold]
    fn insert_digest_guarded(&mut self, g: &CowGuard, d: Digest) -> bool {
        let mut w = g.writer();
        let b = self.blocks.index(d.h1);
        w.before_write_values(self.blocks.as_slice(), b..b + 1);
        self.probe.insert(&mut self.blocks, d)
    }

    /// [`Insert::insert_digests`] while a snapshot reads the blocks: the pieces of all the
    /// digests' blocks are saved first, then the batch kernel runs as usual, under the lock.
    #[cold]
    fn insert_digests_guarded(&mut self, g: &CowGuard, digests: &[Digest]) -> usize {
        let mut w = g.writer();
        for d in digests {
            let b = self.blocks.index(d.h1);
            w.before_write_values(self.blocks.as_slice(), b..b + 1);
        }
        self.kernel.insert_batch(&mut self.blocks, self.k, digests)
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the blocks are guarded ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the
    /// writes that reach them before the file has been written), so that no write waits for a
    /// copy of the whole filter. `None` for a filter small enough to copy (not in its own
    /// huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.blocks.freeze()?;
        Some(self.frozen_with(FrozenPart::Words(g)))
    }

    /// [`BlockedBloom::freeze`] when it can, else a copy: a layer of a frozen chain.
    pub(crate) fn frozen(&self) -> FrozenFile {
        let payload = match self.blocks.freeze() {
            Some(g) => FrozenPart::Words(g),
            None => FrozenPart::Bytes(self.words().flat_map(u64::to_le_bytes).collect()),
        };
        self.frozen_with(payload)
    }

    fn frozen_with(&self, payload: FrozenPart) -> FrozenFile {
        let shape = self.shape();
        FrozenFile::new(FilterKind::BlockedBloom, self.hasher, shape.params().as_bytes(), vec![payload])
    }

    /// The file header fields.
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            blocks: self.num_blocks(),
            k: self.k,
            hasher: self.hasher,
            items: self.items,
            capacity: self.capacity,
            target_fpr: self.target_fpr,
        }
    }

    /// A filter of `shape` over existing blocks (`blocks.len() == shape.blocks`).
    pub(crate) fn from_blocks(shape: Shape, blocks: Blocks) -> Self {
        debug_assert_eq!(blocks.len() as u64, shape.blocks);
        BlockedBloom {
            blocks,
            k: shape.k,
            hasher: shape.hasher,
            hot: HotHasher::new(shape.hasher),
            items: shape.items,
            capacity: shape.capacity,
            target_fpr: shape.target_fpr,
            kernel: Kernel::detect(),
            probe: Probe::new(Kernel::detect(), shape.k),
        }
    }

    /// The shape and the blocks, handed over.
    pub(crate) fn into_parts(self) -> (Shape, Blocks) {
        (self.shape(), self.blocks)
    }

    /// Builds a filter of `shape`, empty or with the given words (8 per block, `shape.blocks`
    /// blocks; missing words are zero).
    pub(crate) fn from_shape<I: Iterator<Item = u64>>(shape: Shape, words: Option<I>) -> Result<Self> {
        let mut blocks = alloc_blocks(shape.blocks)?;
        if let Some(mut words) = words {
            for b in blocks.as_mut_slice() {
                for w in b.0.iter_mut() {
                    *w = words.next().unwrap_or(0);
                }
            }
        }
        Ok(Self::from_blocks(shape, blocks))
    }
}

impl Filter for BlockedBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        self.probe.contains(&self.blocks, d)
    }

    /// Same answer as the trait's default; reads the hasher in place instead of copying it out
    /// (fewer instructions per query, see `simd::Probe`).
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.probe.contains(&self.blocks, self.hot.digest(item.as_ref()))
    }

    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        self.kernel.contains_batch(&self.blocks, self.k, digests, out);
    }

    fn len(&self) -> usize {
        self.items.min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.blocks.len() * 64
    }

    fn expected_fpr(&self) -> f64 {
        math::blocked_words_fpr(self.num_bits() as f64, self.items as f64, self.k)
    }
}

impl Insert for BlockedBloom {
    #[inline]
    fn insert_digest(&mut self, d: Digest) -> bool {
        let new = match self.blocks.cow_guard() {
            None => self.probe.insert(&mut self.blocks, d),
            Some(g) => self.insert_digest_guarded(&g, d),
        };
        self.items += new as u64;
        new
    }

    /// Same effect as the trait's default, without copying the hasher out.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest(d)
    }

    fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        let new = match self.blocks.cow_guard() {
            None => self.kernel.insert_batch(&mut self.blocks, self.k, digests),
            Some(g) => self.insert_digests_guarded(&g, digests),
        };
        self.items += new as u64;
        new
    }
}

impl Persist for BlockedBloom {
    const KIND: FilterKind = FilterKind::BlockedBloom;

    /// Parameters: blocks `u64`, hashes `u32` (1 to 16), layout `u32` (1: the layout of
    /// `src/simd/mod.rs`), items `u64`, capacity `u64`, target FPR `f64`. Payload: the blocks in
    /// order, each as its eight 64-bit words, little-endian (64 bytes per block; bit `j` of word
    /// `w` of block `b` is bit `j & 7` of byte `64b + 8w + j/8`).
    fn to_bytes(&self) -> Vec<u8> {
        self.shape().encode(self.words())
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (shape, payload) = Shape::decode(bytes)?;
        let words = payload.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        Self::from_shape(shape, Some(words))
    }

    /// The bytes of [`Persist::to_bytes`], streamed: only a 64 KiB buffer besides the filter.
    fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        self.shape().write_to(w, self.words())
    }
}

/// One part of a [`BlockedBloom`]'s blocks, filled by one thread while other threads fill the
/// other parts, without locks or atomic instructions: see [`BlockedBloom::with_stripes`].
pub struct Stripe<'a> {
    /// Blocks `first .. first + blocks.len()` of the filter, borrowed exclusively.
    blocks: &'a mut [Block],
    first: u64,
    /// Blocks of the whole filter (what `fastrange` maps `h1` into).
    total: u64,
    probe: Probe,
    /// Inserts into this stripe that set a bit.
    new: u64,
    /// Scratch: (index in `blocks`, h2) of the digests of one call that fall in this stripe.
    own: Vec<(usize, u64)>,
}

impl core::fmt::Debug for Stripe<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stripe").field("blocks", &self.blocks()).field("new", &self.new).finish()
    }
}

impl Stripe<'_> {
    /// The blocks of the filter this stripe holds (indexes into the whole filter).
    pub fn blocks(&self) -> core::ops::Range<u64> {
        self.first..self.first + self.blocks.len() as u64
    }

    /// Inserts, in order, the digests whose block lies in this stripe, and skips the others;
    /// returns how many of those inserts set a bit (as [`Insert::insert_digests`] counts them).
    /// Give every stripe every digest, in the same order: each item is then inserted exactly
    /// once, by the stripe holding its block.
    pub fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        // Pass 1, without a branch on the data: keep the digests that fall in the stripe (with
        // a stripe per thread, a branch would mispredict on about every other digest).
        if self.own.len() < digests.len() {
            self.own.resize(digests.len(), (0, 0));
        }
        let len = self.blocks.len() as u64;
        let mut n = 0;
        for (i, d) in digests.iter().enumerate() {
            let local = crate::hash::fastrange(d.h1, self.total).wrapping_sub(self.first);
            // `n ≤ i < digests.len() ≤ own.len()`.
            self.own[n] = (local as usize, d.h2);
            n += (local < len) as usize;
            debug_assert!(n <= i + 1);
        }
        // Pass 2: insert with the blocks of the digests `PREFETCH_AHEAD` ahead prefetched, as
        // the whole-filter batch insert does.
        let own = &self.own[..n];
        for &(b, _) in own.iter().take(PREFETCH_AHEAD) {
            crate::bits::prefetch(self.blocks.as_ptr().wrapping_add(b));
        }
        let mut new = 0;
        for (j, &(b, h2)) in own.iter().enumerate() {
            if let Some(&(next, _)) = own.get(j + PREFETCH_AHEAD) {
                crate::bits::prefetch(self.blocks.as_ptr().wrapping_add(next));
            }
            new += self.probe.insert_block(&mut self.blocks[b], h2) as usize;
        }
        self.new += new as u64;
        new
    }
}

impl BlockedBloom {
    /// Fills the filter from several threads at once: splits the blocks into `parts` stripes
    /// of consecutive blocks (at least 1, at most one per block), hands them to `f` (which
    /// typically gives each to a thread, see the example), then adds the stripes' counts of
    /// inserts that set a bit to [`Filter::len`].
    ///
    /// When every stripe is given the same digests in the same order, the result is **exactly**
    /// that of inserting them in that order on one thread, item counter included: an item's
    /// bits all lie in one block, each block belongs to one stripe, and whether an insert sets
    /// a bit depends only on the earlier inserts into its block, which the stripe makes in
    /// order. No lock and no atomic instruction: each stripe borrows its blocks exclusively.
    /// Each stripe reads every digest (a multiply and a compare each) and inserts its share.
    ///
    /// ```
    /// use sift::prelude::*;
    /// use sift::{BlockedBloom, Digest};
    ///
    /// let keys: Vec<Digest> = (0..100_000u32).map(|i| sift::Hasher::default().digest(&i.to_le_bytes())).collect();
    /// let mut seq = BlockedBloom::new(100_000, 0.01)?;
    /// seq.insert_digests(&keys);
    /// let mut par = BlockedBloom::new(100_000, 0.01)?;
    /// par.with_stripes(3, |stripes| {
    ///     std::thread::scope(|s| {
    ///         for stripe in stripes.iter_mut() {
    ///             let keys = &keys;
    ///             s.spawn(move || {
    ///                 for batch in keys.chunks(1000) {
    ///                     stripe.insert_digests(batch);
    ///                 }
    ///             });
    ///         }
    ///     })
    /// });
    /// assert_eq!(par.to_bytes(), seq.to_bytes());
    /// # Ok::<(), sift::Error>(())
    /// ```
    pub fn with_stripes<R>(&mut self, parts: usize, f: impl FnOnce(&mut [Stripe<'_>]) -> R) -> R {
        let total = self.blocks.len();
        let parts = parts.clamp(1, total);
        let probe = self.probe;
        // While a snapshot reads the blocks, the threads write under its lock, all blocks saved.
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        let mut stripes = Vec::with_capacity(parts);
        let mut rest = self.blocks.as_mut_slice();
        let mut first = 0usize;
        for p in 1..=parts {
            // Stripe boundaries `total·p/parts` (in u128: no overflow), the last one `total`.
            let end = (total as u128 * p as u128 / parts as u128) as usize;
            let (head, tail) = rest.split_at_mut(end - first);
            stripes.push(Stripe {
                blocks: head,
                first: first as u64,
                total: total as u64,
                probe,
                new: 0,
                own: Vec::new(),
            });
            rest = tail;
            first = end;
        }
        let r = f(&mut stripes);
        let new: u64 = stripes.iter().map(|s| s.new).sum();
        drop(stripes);
        self.items += new;
        r
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::{assert_each_write_keeps_frozen, NamedWrite};

    /// SplitMix64: deterministic test streams.
    pub(crate) fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A deterministic test digest: two SplitMix64 draws.
    pub(crate) fn digest(st: &mut u64) -> Digest {
        Digest { h1: splitmix(st), h2: splitmix(st) }
    }

    /// 99.9% one-sided binomial upper bound on the measured rate of `trials` trials at rate `p`.
    pub(crate) fn upper_bound(p: f64, trials: f64) -> f64 {
        p + 3.1 * (p * (1.0 - p) / trials).sqrt()
    }

    /// A filter above the huge-page threshold (6 MB) and the same filter in plain `Vec` storage
    /// set the same bits, answer the same and write the same file; AtomicBloom too.
    #[test]
    fn huge_page_and_plain_storage_agree() {
        let n = 5_000_000;
        let mut f = BlockedBloom::new(n, 0.01).unwrap();
        assert_eq!(f.blocks.is_huge(), cfg!(target_os = "linux"));
        let mut g = f.clone();
        g.blocks = g.blocks.with_plain_storage();
        assert!(!g.blocks.is_huge());
        let a = crate::AtomicBloom::new(n, 0.01).unwrap();
        let mut st = 3;
        let ds: Vec<Digest> =
            (0..200_000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
        for d in &ds[..100_000] {
            assert_eq!(f.insert_digest(*d), g.insert_digest(*d));
            a.insert_digest(*d);
        }
        assert_eq!(f.insert_digests(&ds[100_000..]), g.insert_digests(&ds[100_000..]));
        for d in &ds[100_000..] {
            a.insert_digest(*d);
        }
        assert!(f == g);
        assert!(ds.iter().all(|d| f.contains_digest(*d) && a.contains_digest(*d)), "false negative");
        let probes: Vec<Digest> =
            (0..100_000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
        let (mut x, mut y) = (vec![false; probes.len()], vec![false; probes.len()]);
        f.contains_digests(&probes, &mut x);
        g.contains_digests(&probes, &mut y);
        assert_eq!(x, y);
        let bytes = f.to_bytes();
        assert_eq!(bytes, g.to_bytes());
        assert_eq!(bytes, a.to_bytes());
        assert!(BlockedBloom::from_bytes(&bytes).unwrap() == f);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            BlockedBloom::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(BlockedBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })),
                "p = {p}"
            );
        }
        assert!(matches!(BlockedBloom::new(usize::MAX, 1e-9), Err(Error::CapacityExceeded { .. })));
        assert!(matches!(
            BlockedBloom::with_params(0, 3, Hasher::default()),
            Err(Error::InvalidParameter { name: "blocks", .. })
        ));
        assert!(BlockedBloom::with_params(1, 0, Hasher::default()).is_err());
        assert!(BlockedBloom::with_params(1, 17, Hasher::default()).is_err());
        assert!(matches!(
            BlockedBloom::with_params(u64::MAX, 8, Hasher::default()),
            Err(Error::CapacityExceeded { .. })
        ));
    }

    #[test]
    fn formula_reduces_to_classic_for_one_bit() {
        for lambda in [1.0, 20.0, 300.0] {
            let a = math::blocked_words_fpr_at_load(lambda, 1);
            let b = 1.0 - (-lambda / 512.0f64).exp();
            assert!((a - b).abs() < 1e-14, "{a} vs {b}");
        }
    }

    #[test]
    fn formula_is_monotone_and_near_random_positions() {
        // Same order of magnitude as k random positions in 512 bits (Putze et al.): the windows of
        // consecutive words correlate the bits of different items a little, which costs at
        // small loads and gains nothing at large ones.
        for k in 2..=16u32 {
            let mut last = 0.0;
            for lambda in [5.0, 20.0, 40.0, 60.0, 100.0] {
                let ours = math::blocked_words_fpr_at_load(lambda, k);
                let random = math::blocked_fpr(512.0 * 1000.0, lambda * 1000.0, k as f64, 512.0);
                assert!(ours > last, "k {k} λ {lambda}: not increasing");
                assert!(ours < random * 6.0 && ours > random * 0.5, "k {k} λ {lambda}: {ours} vs {random}");
                last = ours;
            }
        }
    }

    /// The formula against the real filter for k below, at and above 8, at loads that give FPRs
    /// of 0.5% to 5% (1M probes each, 99.9% bounds both ways).
    #[test]
    fn formula_matches_every_k() {
        let mut st = 99;
        for k in [2u32, 5, 8, 11, 16] {
            let blocks = 2000u64;
            let n = (math::blocked_words_max_load(k, 0.02) * blocks as f64) as usize;
            let mut f = BlockedBloom::with_params(blocks, k, Hasher::default()).unwrap();
            for _ in 0..n {
                f.insert_digest(Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) });
            }
            let probes = 1_000_000;
            let fp = (0..probes)
                .filter(|_| f.contains_digest(Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }))
                .count();
            let measured = fp as f64 / probes as f64;
            let formula = math::blocked_words_fpr(f.num_bits() as f64, n as f64, k);
            let sd = (formula * (1.0 - formula) / probes as f64).sqrt();
            // Beyond the probe noise, the filter's own FPR varies around the expectation with
            // the random loads of only 2000 blocks: allow 3% of the formula for that.
            let slack = 3.1 * sd + 0.03 * formula;
            assert!((measured - formula).abs() <= slack, "k {k}: measured {measured}, formula {formula}");
        }
    }

    #[test]
    fn plan_meets_the_target_with_the_fewest_blocks() {
        for p in [0.1, 0.01, 0.001, 1e-5] {
            let n = 1e6;
            let (blocks, k) = math::blocked_words_plan(n, p, 16);
            assert!(math::blocked_words_fpr(blocks as f64 * 512.0, n, k) <= p);
            for kk in 1..=16 {
                assert!(math::blocked_words_fpr((blocks - 1) as f64 * 512.0, n, kk) > p, "p {p} k {kk}");
            }
            let bpk = blocks as f64 * 512.0 / n;
            assert!(bpk > math::bloom_bits_per_key(p) && bpk < 1.3 * math::bloom_bits_per_key(p), "{bpk}");
        }
    }

    /// Builds `n` items at `p`, probes `probes` non-members; returns (bits/key, measured FPR,
    /// formula FPR).
    pub(crate) fn measure(n: usize, p: f64, probes: usize, seed: u64) -> (f64, f64, f64) {
        let mut f = BlockedBloom::new(n, p).unwrap();
        let mut st = seed;
        for _ in 0..n {
            f.insert_hash(splitmix(&mut st));
        }
        let mut fp = 0usize;
        for _ in 0..probes {
            // Members come from one SplitMix stream; non-members from another with the top bit
            // flipped (distinct values, independent of the members).
            fp += f.contains_hash(splitmix(&mut st) ^ (1 << 63)) as usize;
        }
        // The formula at the n inserted items (`len` counts only inserts that changed the filter).
        let formula = math::blocked_words_fpr(f.num_bits() as f64, n as f64, f.num_hashes());
        (f.num_bits() as f64 / n as f64, fp as f64 / probes as f64, formula)
    }

    #[test]
    fn measured_fpr_matches_the_formula() {
        // n = 1e6 at p = 0.1, 0.01 and 0.001, with 2M, 2M and 4M non-member probes.
        for (n, p, probes) in
            [(1_000_000, 0.1, 2_000_000), (1_000_000, 0.01, 2_000_000), (1_000_000, 0.001, 4_000_000)]
        {
            let (bpk, measured, formula) = measure(n, p, probes, 7);
            assert!(formula <= p, "formula {formula} above target {p}");
            // Poisson loads slightly overstate the spread of binomial ones: 0.1% model error.
            let hi = upper_bound(formula, probes as f64) + 1e-3 * formula;
            let lo = formula - 3.1 * (formula * (1.0 - formula) / probes as f64).sqrt() - 1e-3 * formula;
            assert!(measured <= hi && measured >= lo, "p {p}: measured {measured}, formula {formula}");
            eprintln!("p {p}: {bpk:.2} bits/key, measured FPR {measured:.5}, formula {formula:.5}");
        }
    }

    #[test]
    fn no_false_negatives_any_k_both_kernels() {
        for k in 1..=16 {
            for scalar in [false, true] {
                let mut f = BlockedBloom::with_params(97, k, Hasher::default()).unwrap();
                if scalar {
                    f.force_scalar();
                }
                let items: Vec<[u8; 8]> = (0..5000u64).map(|i| (i * 31 + k as u64).to_le_bytes()).collect();
                for it in &items[..2500] {
                    f.insert(it);
                }
                f.insert_many(&items[2500..]);
                assert!(items.iter().all(|i| f.contains(i)), "k {k}");
                assert!(f.contains_many(&items).into_iter().all(|x| x));
            }
        }
    }

    /// `item_bits` names exactly the bits `insert` sets, for every k, and a filter rebuilt with
    /// `from_payload` from bytes set through it answers as the original.
    #[test]
    fn item_bits_are_the_bits_insert_sets() {
        let mut st = 17;
        for k in 1..=16 {
            let blocks = 37;
            let mut f = BlockedBloom::with_params(blocks, k, Hasher::default()).unwrap();
            let mut payload = vec![0u8; blocks as usize * 64];
            for _ in 0..300 {
                let d = Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) };
                let mut one = BlockedBloom::with_params(blocks, k, Hasher::default()).unwrap();
                one.insert_digest(d);
                f.insert_digest(d);
                let (block, masks) = item_bits(d, blocks, k).unwrap();
                let want: Vec<u64> = one.words().collect();
                for (w, m) in masks.iter().enumerate() {
                    assert_eq!(want[block as usize * 8 + w], *m, "k {k} word {w}");
                    let at = block as usize * 64 + w * 8;
                    let old = u64::from_le_bytes(payload[at..at + 8].try_into().unwrap());
                    payload[at..at + 8].copy_from_slice(&(old | m).to_le_bytes());
                }
                assert!(want.iter().map(|w| w.count_ones()).sum::<u32>() <= k);
            }
            let g = BlockedBloom::from_payload(&payload, k, Hasher::default(), 300, 0.01).unwrap();
            assert!(g.words().eq(f.words()), "k {k}");
            assert!((g.len() as f64 - 300.0).abs() < 60.0, "k {k}: estimated {}", g.len());
        }
        assert!(item_bits(Digest::default(), 0, 7).is_err());
        assert!(item_bits(Digest::default(), 1, 0).is_err());
        assert!(item_bits(Digest::default(), 1, 17).is_err());
        for bad in [&[][..], &[0u8; 63][..], &[0u8; 65][..]] {
            assert!(BlockedBloom::from_payload(bad, 7, Hasher::default(), 1, 0.01).is_err());
        }
        assert!(BlockedBloom::from_payload(&[0u8; 64], 0, Hasher::default(), 1, 0.01).is_err());
        assert!(BlockedBloom::from_payload(&[0u8; 64], 7, Hasher::default(), 1, 1.5).is_err());
    }

    #[test]
    fn insert_reports_new_and_len_counts() {
        let mut f = BlockedBloom::new(1000, 0.01).unwrap();
        assert!(f.insert("a"));
        assert!(!f.insert("a"));
        assert_eq!(f.len(), 1);
        assert!(f.contains("a"));
        assert!(f.contains_hash(f.hasher().hash64(b"a")));
        f.clear();
        assert!(f.is_empty() && !f.contains("a") && f.fill_ratio() == 0.0);
    }

    /// A filter of 16 MiB of blocks, a quarter of them sampled: the sample's mean block FPR
    /// stands within its error of the exact mean (65,536 sampled blocks; the block FPRs'
    /// coefficient of variation is about 1 at this fill, so the sample mean's relative standard
    /// error is about 0.4%; 3% is over seven of them), and a small filter gives the exact figure.
    #[test]
    fn the_sampled_fpr_of_a_large_filter_stands_for_the_exact_one() {
        let mut big = BlockedBloom::new(14_000_000, 0.01).unwrap();
        assert!(big.size_in_bytes() >= 4 * crate::bits::FILL_SAMPLE_BYTES, "{}", big.size_in_bytes());
        let mut st = 11;
        for _ in 0..12_000_000 {
            big.insert_hash(splitmix(&mut st));
        }
        let (exact, sampled) = (big.current_fpr(), big.sampled_fpr());
        assert!(exact > 1e-3, "{exact}");
        assert!((sampled - exact).abs() < 0.03 * exact, "sampled {sampled} vs exact {exact}");
        let mut small = BlockedBloom::new(10_000, 0.01).unwrap();
        for _ in 0..5_000 {
            small.insert_hash(splitmix(&mut st));
        }
        assert_eq!(small.sampled_fpr(), small.current_fpr());
    }

    #[test]
    fn current_fpr_and_estimate_track_the_contents() {
        let mut f = BlockedBloom::new(100_000, 0.01).unwrap();
        let mut st = 3;
        for _ in 0..100_000 {
            f.insert_hash(splitmix(&mut st));
        }
        let (cur, exp) = (f.current_fpr(), f.expected_fpr());
        assert!((cur - exp).abs() < 0.05 * exp, "current {cur} vs expected {exp}");
        let est = f.estimated_items();
        assert!((est - 100_000.0).abs() < 1500.0, "estimate {est}");
    }

    #[test]
    fn union_and_intersection() {
        let mut a = BlockedBloom::new(10_000, 0.01).unwrap();
        let mut b = BlockedBloom::new(10_000, 0.01).unwrap();
        for i in 0..3000u32 {
            a.insert(i.to_le_bytes());
        }
        for i in 2000..5000u32 {
            b.insert(i.to_le_bytes());
        }
        let mut u = a.clone();
        u.union(&b).unwrap();
        assert!((0..5000u32).all(|i| u.contains(i.to_le_bytes())));
        let est = u.estimated_items();
        assert!((est - 5000.0).abs() < 200.0, "estimate {est}");
        let mut x = a.clone();
        x.intersect(&b).unwrap();
        assert!((2000..3000u32).all(|i| x.contains(i.to_le_bytes())));
        let other = BlockedBloom::new(20_000, 0.01).unwrap();
        assert!(matches!(a.union(&other), Err(Error::Incompatible { .. })));
        let seeded = BlockedBloom::with_hasher(10_000, 0.01, Hasher::new(HashKind::Xxh3_64, 1)).unwrap();
        assert!(matches!(a.intersect(&seeded), Err(Error::Incompatible { .. })));
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut f = BlockedBloom::new(1000, 0.001).unwrap();
        for i in 0..700u32 {
            f.insert(i.to_string());
        }
        let bytes = f.to_bytes();
        let g = BlockedBloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert!((0..700u32).all(|i| g.contains(i.to_string())));
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x10;
        assert!(matches!(
            BlockedBloom::from_bytes(&bad),
            Err(Error::Format(FormatError::ChecksumMismatch { .. }))
        ));
        for cut in [0, 10, 40, n - 1] {
            assert!(BlockedBloom::from_bytes(&bytes[..cut]).is_err());
        }
        assert!(matches!(
            crate::Bloom::from_bytes(&bytes),
            Err(Error::Format(FormatError::WrongKind { .. }))
        ));
    }

    /// Re-encodes a file with edited parameters and a fresh CRC, to reach the validation that
    /// comes after the checksum.
    fn reencode(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>), payload_len: Option<u64>) -> Vec<u8> {
        let raw = crate::format::decode(bytes).unwrap();
        let mut params = raw.params().to_vec();
        edit(&mut params);
        let payload = raw.payload();
        let len = payload_len.unwrap_or(payload.len() as u64);
        let mut e = Encoder::new(FilterKind::BlockedBloom, raw.hasher(), &params, len);
        e.payload().extend_from_slice(&payload[..(len as usize).min(payload.len())]);
        let missing = len as usize - (len as usize).min(payload.len());
        e.payload().extend(std::iter::repeat_n(0, missing));
        e.finish()
    }

    #[test]
    fn inconsistent_parameters_are_errors() {
        let f = BlockedBloom::new(1000, 0.01).unwrap();
        let bytes = f.to_bytes();
        assert_eq!(BlockedBloom::from_bytes(&reencode(&bytes, |_| {}, None)).unwrap(), f);
        let cases: Vec<Vec<u8>> = vec![
            reencode(&bytes, |p| p[..8].copy_from_slice(&0u64.to_le_bytes()), None), // 0 blocks
            reencode(&bytes, |p| p[..8].copy_from_slice(&u64::MAX.to_le_bytes()), None), // huge
            reencode(&bytes, |p| p[8..12].copy_from_slice(&0u32.to_le_bytes()), None), // k = 0
            reencode(&bytes, |p| p[8..12].copy_from_slice(&17u32.to_le_bytes()), None), // k = 17
            reencode(&bytes, |p| p[12..16].copy_from_slice(&2u32.to_le_bytes()), None), // layout
            reencode(&bytes, |p| p[32..40].copy_from_slice(&2.0f64.to_le_bytes()), None), // fpr
            reencode(&bytes, |p| p.push(0), None),                                   // long
            reencode(&bytes, |p| p.truncate(20), None),                              // short
            reencode(&bytes, |_| {}, Some(f.size_in_bytes() as u64 - 64)),           // payload
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(
                matches!(BlockedBloom::from_bytes(c), Err(Error::Format(_))),
                "case {i} decoded: {:?}",
                BlockedBloom::from_bytes(c)
            );
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut st = 11;
        let good = BlockedBloom::new(100, 0.01).unwrap().to_bytes();
        for _ in 0..2000 {
            let mut b = good.clone();
            let i = (splitmix(&mut st) % b.len() as u64) as usize;
            b[i] = splitmix(&mut st) as u8;
            let cut = (splitmix(&mut st) % (b.len() as u64 + 1)) as usize;
            let _ = BlockedBloom::from_bytes(&b[..cut]);
        }
    }

    /// Striped inserts (any number of stripes, on threads, in batches of any size, duplicates
    /// included, both kernels) give the same file as one thread inserting in order: same bits,
    /// same counter.
    #[test]
    fn stripes_equal_a_sequential_insert() {
        let mut st = 21;
        for (blocks, k) in [(1u64, 7u32), (3, 4), (50, 7), (1000, 12), (4096, 16)] {
            // Items drawn from a pool a quarter of their number: ~75% repeats, and the
            // filter gets crowded (bits already set by other items: counted or not by order).
            let pool: Vec<Digest> =
                (0..2000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
            let ds: Vec<Digest> = (0..8000).map(|_| pool[(splitmix(&mut st) % 2000) as usize]).collect();
            for scalar in [false, true] {
                let mut seq = BlockedBloom::with_params(blocks, k, Hasher::default()).unwrap();
                if scalar {
                    seq.force_scalar();
                }
                let mut par = seq.clone();
                let want_new = seq.insert_digests(&ds);
                let want = seq.to_bytes();
                for parts in [1usize, 2, 3, 5, 8] {
                    let mut f = par.clone();
                    let batch = 1 + (splitmix(&mut st) % 700) as usize;
                    let news = f.with_stripes(parts, |stripes| {
                        assert_eq!(stripes.len(), parts.min(blocks as usize));
                        // The stripes cover the blocks, in order, without overlap.
                        assert_eq!(stripes[0].blocks().start, 0);
                        assert_eq!(stripes.last().unwrap().blocks().end, blocks);
                        for w in stripes.windows(2) {
                            assert_eq!(w[0].blocks().end, w[1].blocks().start);
                        }
                        std::thread::scope(|s| {
                            let hs: Vec<_> = stripes
                                .iter_mut()
                                .map(|stripe| {
                                    let ds = &ds;
                                    s.spawn(move || {
                                        ds.chunks(batch).map(|c| stripe.insert_digests(c)).sum::<usize>()
                                    })
                                })
                                .collect();
                            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
                        })
                    });
                    assert_eq!(news, want_new, "blocks {blocks} k {k} parts {parts}");
                    assert_eq!(f.to_bytes(), want, "blocks {blocks} k {k} parts {parts} batch {batch}");
                    assert!(ds.iter().all(|d| f.contains_digest(*d)));
                }
                // A second round on a filter that already holds items adds to its counter.
                let again = par.insert_digests(&ds[..100]);
                let mut g = par.clone();
                g.with_stripes(2, |stripes| {
                    for s in stripes.iter_mut() {
                        s.insert_digests(&ds[100..]);
                    }
                });
                par.insert_digests(&ds[100..]);
                assert!(again > 0 && g == par && g.len() == par.len());
            }
        }
    }

    /// The streamed file is the file of `to_bytes`, byte for byte, for small and large filters
    /// (several write buffers), through `Persist::write_to` on both blocked types.
    #[test]
    fn write_to_streams_the_bytes_of_to_bytes() {
        let mut st = 8;
        for (n, p) in [(1usize, 0.5), (1000, 0.01), (300_000, 0.001)] {
            let mut f = BlockedBloom::new(n, p).unwrap();
            let a = crate::AtomicBloom::new(n, p).unwrap();
            for _ in 0..n {
                let d = Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) };
                f.insert_digest(d);
                a.insert_digest(d);
            }
            let want = f.to_bytes();
            let mut got = Vec::new();
            f.write_to(&mut got).unwrap();
            assert_eq!(got, want, "n {n}");
            let mut got = Vec::new();
            a.write_to(&mut got).unwrap();
            assert_eq!(got, want, "atomic, n {n}");
            assert_eq!(BlockedBloom::from_bytes(&got).unwrap(), f);
        }
    }

    /// A filter of 8 MiB (huge storage on Linux, so it freezes: 32 copy-on-write pieces) with
    /// 20,000 items.
    fn big_filter() -> BlockedBloom {
        let mut f = BlockedBloom::with_params(8 << 20 >> 6, 7, Hasher::default()).unwrap();
        let mut st = 11;
        let ds: Vec<Digest> =
            (0..20_000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
        f.insert_digests(&ds);
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze, whether the filter is dropped before the file is
    /// written or not: one insert, a batch insert (the SIMD kernel where the CPU has one), a
    /// union, an intersection, a clear, stripes. One write at a time, so that a write skipping
    /// its guard changes pieces no other write saved, and this test fails.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let mut st = 5;
        let mut digests = |n: usize| -> Vec<Digest> {
            (0..n).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect()
        };
        let (one, batch, other, striped) = (digests(1), digests(5000), digests(30_000), digests(3000));
        let mut full = BlockedBloom::with_params(8 << 20 >> 6, 7, Hasher::default()).unwrap();
        full.insert_digests(&other);
        let ops: Vec<NamedWrite<'_, BlockedBloom>> = vec![
            ("insert", Box::new(|f: &mut BlockedBloom| assert!(f.insert_digest(one[0])))),
            ("batch insert", Box::new(|f: &mut BlockedBloom| assert!(f.insert_digests(&batch) > 4900))),
            ("union", Box::new(|f: &mut BlockedBloom| f.union(&full).unwrap())),
            ("intersect", Box::new(|f: &mut BlockedBloom| f.intersect(&full).unwrap())),
            ("clear", Box::new(|f: &mut BlockedBloom| f.clear())),
            (
                "stripes",
                Box::new(|f: &mut BlockedBloom| {
                    f.with_stripes(3, |s| s.iter_mut().map(|s| s.insert_digests(&striped)).sum::<usize>());
                }),
            ),
        ];
        assert_each_write_keeps_frozen(&big_filter, |f| f.to_bytes(), BlockedBloom::freeze, &ops);
        // Once written, the frozen file lets go: the filter freezes again.
        let f = big_filter();
        drop(f.freeze());
        assert!(f.freeze().is_some());
    }

    /// While a snapshot reads the filter, an insert copies aside only the piece of its block:
    /// the pieces saved are exactly those where the live blocks now differ from the frozen ones.
    #[test]
    fn an_insert_during_a_freeze_copies_only_the_piece_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut f = big_filter();
        let bytes = |f: &BlockedBloom| f.words().flat_map(u64::to_le_bytes).collect::<Vec<u8>>();
        let at_freeze = bytes(&f);
        let frozen = f.freeze().unwrap();
        let g = frozen.guard(0);
        assert_eq!(g.len() / COW_PIECE, 32);
        let changed = |f: &BlockedBloom| {
            let live = bytes(f);
            crate::bits::pieces_differing(&live, &at_freeze).len()
        };
        let mut st = 99;
        for i in 0..20 {
            let saved = g.saved_pieces();
            assert!(f.insert_digest(Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }));
            assert!(g.saved_pieces() <= saved + 1, "one block written, one piece at most");
            assert_eq!(g.saved_pieces(), changed(&f), "after insert {i}");
        }
        // A batch of 8 saves at most 8 pieces, those it changes.
        let saved = g.saved_pieces();
        let ds: Vec<Digest> =
            (0..8).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
        f.insert_digests(&ds);
        assert!(g.saved_pieces() <= saved + 8);
        assert_eq!(g.saved_pieces(), changed(&f));
        assert!(g.saved_pieces() > 10, "28 random blocks of 32 pieces hit many: {}", g.saved_pieces());
        let want = big_filter();
        let mut want_file = want.to_bytes();
        // The items counter of the frozen file is the one at the freeze too.
        let got = frozen.to_vec();
        assert_eq!(got.len(), want_file.len());
        assert!(got == std::mem::take(&mut want_file), "the frozen file is the filter at the freeze");
    }

    /// A frozen filter turned atomic keeps the frozen file: the atomic filter's writers (which
    /// take no guard) write a copy of the blocks.
    #[test]
    fn a_frozen_filter_turned_atomic_writes_a_copy() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let f = big_filter();
        let before = f.to_bytes();
        let frozen = f.freeze().unwrap();
        let a = crate::AtomicBloom::from(f);
        assert!(a.insert(b"atomic"));
        assert!(frozen.to_vec() == before, "the atomic filter wrote the frozen blocks");
    }

    /// A small filter does not freeze (the caller copies it).
    #[test]
    fn only_large_filters_freeze() {
        assert!(BlockedBloom::new(1000, 0.01).unwrap().freeze().is_none());
        assert_eq!(big_filter().freeze().is_some(), cfg!(target_os = "linux"));
    }
}
