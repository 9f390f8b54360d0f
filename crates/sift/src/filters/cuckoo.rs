//! Cuckoo filter: fingerprints in buckets of 4 slots, two candidate buckets per item, deletes.
//!
//! Fan, Andersen, Kaminsky & Mitzenmacher, "Cuckoo filter: practically better than Bloom",
//! CoNEXT 2014.
//!
//! * **Idea**: an item is a non-zero `f`-bit fingerprint stored in one of two buckets of `b = 4`
//!   slots. When both are full, a resident fingerprint is kicked to *its* other bucket, which only
//!   needs the fingerprint (partial-key cuckoo hashing), and so on.
//! * **Insert**: the fingerprint goes to whichever of its two buckets has more empty slots (the
//!   primary on a tie; two-choice balanced allocation keeps full pairs rare until high load).
//!   Both 8-byte words are written back (the unchosen one unchanged), so the stores' addresses
//!   come from the hash and not from the loaded buckets, and on x86-64 the field arithmetic on
//!   the two words runs in SSE2 registers: the work that waits for the two cache misses stays
//!   small, and consecutive inserts overlap (n = 1M: 12 ns per insert up to 70% load, was 18; a
//!   query takes ~10). When both are full, a breadth-first search over up to [`BFS_DEPTH`] moves
//!   finds the shortest chain of kicks ending in a bucket with an empty slot (each level's
//!   buckets are prefetched ahead of their checks, so a chain costs about one cache miss per
//!   level, not one per move; its first two levels, which end ~97% of searches, are a specialised
//!   routine); only if that fails does a random walk of up to [`MAX_KICKS`] moves run. The last
//!   tenth of a fill to 95% load (half of its inserts find both buckets full) still costs ~5× the
//!   first tenths (`benches/probes/cuckoo.rs`).
//! * **FPR**: `p = 1 - (1 - 1/(2^f - 1))^(2·b·load)` ([`crate::math::cuckoo_fpr`]), at most about
//!   `2b/2^f`: 0.19% with 12-bit fingerprints at 95% load, 3.0% with 8 bits, 0.012% with 16 bits.
//! * **Space**: `f / load` bits per key: 12.6 bits/key for 12-bit fingerprints at 95% load.
//!   Buckets are packed back to back (a 12-bit bucket takes 48 bits = 6 bytes, read with one
//!   unaligned 8-byte load), and the bucket count is any integer: no power-of-two rounding of
//!   memory.
//! * **Alternate bucket**: `i2 = (H(fp) - i1) mod nb` with `H(fp) = fastrange(fp · ⌊2^64/φ⌋, nb)`
//!   (one multiply; layout 1). Applying it twice gives back `i1` for *every* bucket count `nb`,
//!   which is why the usual `i1 xor H(fp)` (an involution only when `nb` is a power of two) is not
//!   used. Files of earlier versions (layout 0) used SplitMix64's finaliser for `H`; they are still
//!   read, and such a table keeps its function (see [`Persist`] below).
//! * **Parameters**: [`Cuckoo::new`] picks `f ∈ {8, 12, 16}` as the smallest width with
//!   `2b/2^f ≤ p` and `nb = ⌈n / (4 · 0.95)⌉` buckets; [`Cuckoo::with_params`] takes both.
//! * **Full filter**: an item that cannot be placed by the search or the walk goes to a stash of
//!   [`STASH_SLOTS`] fingerprints; when the stash is full too, every move is undone and
//!   [`Cuckoo::try_insert`] returns [`Error::Full`]: nothing inserted earlier is ever lost. The
//!   first failure comes at about 95-97% load. [`Insert::insert`] returns `false` on a full filter
//!   (indistinguishable from "already present"), so prefer `try_insert`.
//! * **Duplicates and deletes**: inserting an item again stores another copy (at most `2b` copies
//!   plus the stash fit); [`Cuckoo::count`] counts them and [`Remove::remove`] removes one. Removing
//!   an item that was never inserted can remove a different item with the same fingerprint and
//!   bucket pair (a false negative for it): only remove what you inserted.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Cuckoo;
//!
//! let mut f = Cuckoo::new(10_000, 0.01)?; // 12-bit fingerprints
//! for i in 0..10_000u32 {
//!     f.try_insert(i.to_le_bytes())?;
//! }
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members; p ≤ 0.19% at this load, so the 99.9% binomial bound is 0.23%.
//! let fp = (10_000..110_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 230, "{fp} false positives");
//! assert!(f.remove(7u32.to_le_bytes()));
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{prefetch, Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter};
use crate::hash::{fastrange, Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove, BATCH_AHEAD};

mod bucket;
mod eviction;

#[cfg(target_arch = "x86_64")]
use bucket::sse2;
use bucket::{bucket_has, empty_fields};

/// Slots per bucket (`b`).
pub const BUCKET_SLOTS: usize = 4;
/// Fingerprint moves tried before an item goes to the stash.
pub const MAX_KICKS: usize = 1000;
/// Levels of the breadth-first search for an empty slot (moves in the longest chain it finds)
/// before an insert falls back to a random walk of up to [`MAX_KICKS`] moves.
pub const BFS_DEPTH: usize = 3;
/// Fingerprints the victim stash holds.
pub const STASH_SLOTS: usize = 4;
/// Load the constructor sizes for: `nb = ⌈n / (4 · DESIGN_LOAD)⌉`.
pub const DESIGN_LOAD: f64 = 0.95;
/// Fingerprint widths supported.
pub const FINGERPRINT_BITS: [u32; 3] = [8, 12, 16];
/// Layout id 0 (files of earlier versions, still read): the alternate bucket's offset is
/// `fastrange(mix64(fp), nb)` (SplitMix64's finaliser, a chain of two multiplies).
const LAYOUT_MIX: u32 = 0;
/// Layout id 1 (written now): the offset is `fastrange(fp · ALT_MUL, nb)`, one multiply: it is on
/// the critical path between the first and the second bucket load of every query and insert, and
/// computed for 8 to 128 buckets per breadth-first search. The multiples of the golden-ratio
/// constant form a Weyl sequence, so the 2^f − 1 fingerprints get offsets spread evenly over
/// `0..nb` (no two within `nb / 2^f` of each other for large `nb`).
const LAYOUT_WEYL: u32 = 1;
/// The multiplier of [`LAYOUT_WEYL`]: ⌊2^64 / φ⌋, odd.
const ALT_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// A cuckoo filter. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Cuckoo {
    /// Packed buckets, little-endian: bucket `i` is bits `i·4f .. (i+1)·4f`, slot `j` its bits
    /// `j·f .. (j+1)·f`. A bucket is `f/2` whole bytes (4, 6 or 8), so bucket `i` is read with
    /// one unaligned 8-byte load at byte `i·f/2` and a mask; 8 zero guard bytes at the end make
    /// that load valid for the last bucket too. (The same bytes as the file's table.) In a
    /// [`Storage`], so that a table of 4 MiB or more is allocated on transparent huge pages
    /// where the system allows it (at n = 10M the 15.8 MB table spans ~3,900 4 KiB pages, more
    /// than the TLB holds; every probe of a random bucket would otherwise miss the TLB as well
    /// as the cache).
    table: Storage<u8>,
    buckets: u64,
    fp_bits: u32,
    /// Homeless fingerprints with one of their two buckets.
    stash: Vec<(u64, u16)>,
    /// Which alternate-bucket function the table was built with: [`LAYOUT_MIX`] (read from
    /// older files only) or [`LAYOUT_WEYL`] (written now). Stored in the file's parameter block.
    layout: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constant precomputed, for the insert and query paths.
    hot: HotHasher,
    items: u64,
    capacity: u64,
    target_fpr: f64,
}

/// 64-bit finalizer (Stafford's variant 13 of MurmurHash3's fmix64): spreads a small fingerprint
/// over all 64 bits before it is reduced to a bucket offset.
#[inline(always)]
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The smallest width in [`FINGERPRINT_BITS`] whose FPR bound `2b/2^f` is at most `fpr`.
pub(crate) fn fp_bits_for(fpr: f64) -> Option<u32> {
    FINGERPRINT_BITS.into_iter().find(|&f| (2 * BUCKET_SLOTS) as f64 / (1u64 << f) as f64 <= fpr)
}

impl Cuckoo {
    /// A filter for `expected_items` at false-positive rate `fpr` (from 2^-13 ≈ 1.2e-4 up), with
    /// the default hash.
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`Cuckoo::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let fp_bits = fp_bits_for(fpr).ok_or_else(|| {
            Error::param(
                "fpr",
                fpr,
                "at least 2^-13 ≈ 1.22e-4 for a cuckoo filter (16-bit fingerprints); \
                 use a Bloom or xor filter for lower rates",
            )
        })?;
        let buckets = (expected_items as f64 / (BUCKET_SLOTS as f64 * DESIGN_LOAD)).ceil().max(1.0);
        if buckets * (BUCKET_SLOTS as f64 * fp_bits as f64) / 8.0 > MAX_BYTES as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: (buckets * (BUCKET_SLOTS as f64 * fp_bits as f64) / 8.0) as u128,
                limit_bytes: MAX_BYTES,
            });
        }
        let mut f = Self::with_params(buckets as u64, fp_bits, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of exactly `buckets` buckets (any count ≥ 1) of 4 slots with `fp_bits`-bit
    /// fingerprints (8, 12 or 16).
    pub fn with_params(buckets: u64, fp_bits: u32, hasher: Hasher) -> Result<Self> {
        if buckets == 0 {
            return Err(Error::param("buckets", buckets, "at least 1"));
        }
        if !FINGERPRINT_BITS.contains(&fp_bits) {
            return Err(Error::param("fp_bits", fp_bits, "8, 12 or 16"));
        }
        let table = Storage::zeroed(Self::bytes_for(buckets, fp_bits)?)?;
        let slots = buckets as f64 * BUCKET_SLOTS as f64;
        Ok(Cuckoo {
            table,
            buckets,
            fp_bits,
            stash: Vec::with_capacity(STASH_SLOTS),
            layout: LAYOUT_WEYL,
            hasher,
            hot: HotHasher::new(hasher),
            items: 0,
            capacity: (slots * DESIGN_LOAD).floor().max(1.0) as u64,
            target_fpr: math::cuckoo_fpr(fp_bits, BUCKET_SLOTS as f64, DESIGN_LOAD),
        })
    }

    /// Bytes of storage for a table (plus the 8 guard bytes), with a structured error on
    /// overflow.
    fn bytes_for(buckets: u64, fp_bits: u32) -> Result<usize> {
        let bytes = buckets as u128 * (BUCKET_SLOTS as u128 * fp_bits as u128) / 8 + 8;
        if bytes > MAX_BYTES || bytes > usize::MAX as u128 {
            return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
        }
        Ok(bytes as usize)
    }

    /// Number of buckets.
    pub fn num_buckets(&self) -> u64 {
        self.buckets
    }

    /// Fingerprint width in bits.
    pub fn fingerprint_bits(&self) -> u32 {
        self.fp_bits
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`Cuckoo::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Fingerprints currently in the stash (0 until the table is nearly full).
    pub fn stash_len(&self) -> usize {
        self.stash.len()
    }

    /// Fraction of the `4 · nb` table slots in use (stashed fingerprints count as items).
    pub fn load_factor(&self) -> f64 {
        self.items as f64 / (self.buckets as f64 * BUCKET_SLOTS as f64)
    }

    /// Number of stored copies of `item` (fingerprint matches in its two buckets and the stash):
    /// at least the number of times it was inserted and not removed.
    pub fn count<T: AsRef<[u8]>>(&self, item: T) -> usize {
        self.count_digest(self.hasher.digest(item.as_ref()))
    }

    /// [`Cuckoo::count`] for a digest.
    pub fn count_digest(&self, d: Digest) -> usize {
        let (i1, fp) = self.locate(d);
        let i2 = self.alt(i1, fp);
        let mut n = self.matches(i1, fp);
        if i2 != i1 {
            n += self.matches(i2, fp);
        }
        n + self.stash.iter().filter(|&&(b, f)| f == fp && (b == i1 || b == i2)).count()
    }

    /// Inserts `item`; `Ok(true)` if it was not reported present before, `Ok(false)` if another
    /// copy was stored, [`Error::Full`] if it could not be placed (the filter is then unchanged).
    #[inline(always)]
    pub fn try_insert<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        self.try_insert_digest(self.hot_digest(item.as_ref()))
    }

    /// [`Cuckoo::try_insert`] for a caller-computed 64-bit hash.
    pub fn try_insert_hash(&mut self, hash: u64) -> Result<bool> {
        self.try_insert_digest(Digest::from_u64(hash))
    }

    /// [`Cuckoo::try_insert`] for a digest.
    #[inline(always)]
    pub fn try_insert_digest(&mut self, d: Digest) -> Result<bool> {
        // One predictable branch on the width, then constant-folded masks and shifts.
        match self.fp_bits {
            8 => self.insert_width::<8>(d),
            12 => self.insert_width::<12>(d),
            _ => self.insert_width::<16>(d),
        }
    }

    /// The insert for a fingerprint width known at compile time. Both buckets are loaded at
    /// once; the fingerprint goes to the one with more empty slots (the primary on a tie), in its
    /// lowest empty slot, chosen and written without a data-dependent branch: both words are
    /// stored, at addresses known from the hash. Only when both buckets are full (or their 8-byte
    /// words overlap) does it branch, to [`Cuckoo::insert_scalar`] and from there to the
    /// breadth-first search and, rarely, the random walk.
    ///
    /// The less-loaded choice (two-choice balanced allocation) keeps the share of inserts that
    /// find both buckets full far below what "primary first" gives near 95% load.
    #[inline(always)]
    fn insert_width<const F: u32>(&mut self, d: Digest) -> Result<bool> {
        #[cfg(target_arch = "x86_64")]
        {
            let i1 = fastrange(d.h1, self.buckets);
            let fp = (fastrange(d.h2, (1u64 << F) - 1) + 1) as u16;
            let i2 = self.alt(i1, fp);
            let step = (BUCKET_SLOTS as u64 * F as u64 / 8) as usize;
            let (at1, at2) = (i1 as usize * step, i2 as usize * step);
            // The 8 bytes at each bucket's first byte, unmasked: the bits past the bucket (the
            // next bucket's, or guard bytes) change none of the field tests, and the word is
            // written back whole, so they are stored unchanged (nothing else is written between).
            let (w1, w2) = (self.bucket_word::<F>(i1), self.bucket_word::<F>(i2));
            if at1.abs_diff(at2) >= 8 {
                if let Some((v1, v2, present)) = sse2::insert_words::<F>(w1, w2, fp) {
                    self.set_bucket_word::<F>(i1, v1);
                    self.set_bucket_word::<F>(i2, v2);
                    self.items += 1;
                    // `|`, not `||`: the stash test branches only on the stash being empty, not
                    // on `present` (which waits for both loads), and a caller that ignores the
                    // answer lets the membership test be dropped.
                    return Ok(!(present | self.stashed(i1, i2, fp)));
                }
            }
        }
        self.insert_scalar::<F>(d)
    }

    /// [`Cuckoo::insert_width`] in scalar code: on x86-64 only for the rare inserts whose two
    /// words overlap or whose buckets are both full (out of line, so that the common path keeps
    /// few registers live), elsewhere every insert.
    #[cfg_attr(target_arch = "x86_64", cold, inline(never))]
    #[cfg_attr(not(target_arch = "x86_64"), inline(always))]
    fn insert_scalar<const F: u32>(&mut self, d: Digest) -> Result<bool> {
        let i1 = fastrange(d.h1, self.buckets);
        let fp = (fastrange(d.h2, (1u64 << F) - 1) + 1) as u16;
        let i2 = self.alt(i1, fp);
        let step = (BUCKET_SLOTS as u64 * F as u64 / 8) as usize;
        let (at1, at2) = (i1 as usize * step, i2 as usize * step);
        let (w1, w2) = (self.word(at1), self.word(at2));
        let was_present = (bucket_has(w1, fp, F) | bucket_has(w2, fp, F)) || self.stashed(i1, i2, fp);
        let (e1, e2) = (empty_fields(w1, F), empty_fields(w2, F));
        if e1 | e2 == 0 {
            let mask = u64::MAX >> (64 - BUCKET_SLOTS as u32 * F);
            return self.insert_full::<F>(i1, i2, w1 & mask, w2 & mask, fp, d, was_present);
        }
        let second = e2.count_ones() > e1.count_ones();
        // `e` has the top bit of each empty field set: the lowest one marks the slot, and
        // shifting `fp` to its field is a shift by (that bit + 1 − F) (at most 64 + 1 − 8 < 64
        // when `e` is 0, a value then masked out).
        let (sh1, sh2) = (e1.trailing_zeros() + 1 - F, e2.trailing_zeros() + 1 - F);
        if at1.abs_diff(at2) >= 8 {
            // Both words are written, the unchosen one unchanged: the store addresses then come
            // from the hash alone, not from the loaded buckets. A store whose address waits for
            // a cache miss held back the next inserts (n = 1M, to 70% load: 18 -> 16.5 ns per
            // insert in `benches/probes/cuckoo.rs`; ~26 -> ~15 ns in a stand-alone model).
            let m2 = (second as u64).wrapping_neg();
            let v1 = w1 | ((fp as u64) << sh1) & !m2;
            let v2 = w2 | ((fp as u64) << sh2) & m2;
            self.before_table_write(at1..at1 + 8);
            self.before_table_write(at2..at2 + 8);
            self.table[at1..at1 + 8].copy_from_slice(&v1.to_le_bytes());
            self.table[at2..at2 + 8].copy_from_slice(&v2.to_le_bytes());
        } else {
            // The two words overlap (the same or adjacent buckets): one write.
            let (at, w, sh) = if second { (at2, w2, sh2) } else { (at1, w1, sh1) };
            self.before_table_write(at..at + 8);
            self.table[at..at + 8].copy_from_slice(&(w | (fp as u64) << sh).to_le_bytes());
        }
        self.items += 1;
        Ok(!was_present)
    }

    /// Whether the stash holds `fp` for the bucket pair `(i1, i2)`.
    #[inline(always)]
    fn stashed(&self, i1: u64, i2: u64, fp: u16) -> bool {
        !self.stash.is_empty() && self.stash.iter().any(|&(b, f)| f == fp && (b == i1 || b == i2))
    }

    /// The query for a fingerprint width known at compile time (so the field masks, the bucket
    /// width and the fingerprint range fold into constants). Both buckets are computed and
    /// loaded up front, without a branch between them, so their cache misses overlap.
    #[inline(always)]
    fn contains_width<const F: u32>(&self, d: Digest) -> bool {
        let i1 = fastrange(d.h1, self.buckets);
        let fp = (fastrange(d.h2, (1u64 << F) - 1) + 1) as u16;
        let i2 = self.alt(i1, fp);
        // On x86-64 the field test of both words in one SSE2 register (as the insert's): the
        // work that waits for the two loads stays out of the integer scheduler (n = 1M:
        // 7.9-8.3 -> 7.3 ns per u64 query).
        #[cfg(target_arch = "x86_64")]
        let has = sse2::has_words::<F>(self.bucket_word::<F>(i1), self.bucket_word::<F>(i2), fp);
        #[cfg(not(target_arch = "x86_64"))]
        let has = {
            let bb = BUCKET_SLOTS as u64 * F as u64;
            let (b1, b2) = (self.bucket_at(i1, bb), self.bucket_at(i2, bb));
            bucket_has(b1, fp, F) | bucket_has(b2, fp, F)
        };
        has || self.stashed(i1, i2, fp)
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.before_table_write(0..self.table.len());
        self.table.fill(0);
        self.stash.clear();
        self.items = 0;
    }

    /// Saves the copy-on-write pieces holding `bytes` of the table, if a snapshot is reading
    /// it ([`Cuckoo::freeze`]); call before changing those bytes. One atomic load when no
    /// snapshot is running. The write may follow after the guard's lock is released: a saved
    /// piece is never read live again by the snapshot, so only the first change to a piece
    /// needs the lock (eviction chains write many buckets and take it once per bucket).
    #[inline(always)]
    pub(super) fn before_table_write(&self, bytes: core::ops::Range<usize>) {
        if let Some(g) = self.table.cow_guard() {
            g.writer().before_write(&self.table, bytes);
        }
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the parameters and the stash are copied now, the table is guarded (pieces of
    /// [`crate::bits::COW_PIECE`] bytes copied aside by the writes that reach them before the
    /// file has been written), so that no write waits for a copy of the whole table. `None` for
    /// a table small enough to copy (not in its own huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.table.freeze()?;
        Some(self.frozen_with(FrozenPart::Prefix(g, Self::table_bytes(self.buckets, self.fp_bits))))
    }

    /// [`Cuckoo::freeze`] when it can, else a copy: a table of a frozen chain.
    pub(crate) fn frozen(&self) -> FrozenFile {
        let table = Self::table_bytes(self.buckets, self.fp_bits) as usize;
        let payload = match self.table.freeze() {
            Some(g) => FrozenPart::Prefix(g, table as u64),
            None => FrozenPart::Bytes(self.table[..table].to_vec()),
        };
        self.frozen_with(payload)
    }

    fn frozen_with(&self, table: FrozenPart) -> FrozenFile {
        FrozenFile::new(
            Self::KIND,
            self.hasher,
            self.params().as_bytes(),
            vec![table, FrozenPart::Bytes(self.stash_bytes())],
        )
    }

    /// The file's parameter block.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.buckets)
            .u32(self.fp_bits)
            .u32(BUCKET_SLOTS as u32)
            .u64(self.items)
            .u64(self.capacity)
            .f64(self.target_fpr)
            .u32(self.stash.len() as u32)
            .u32(self.layout);
        p
    }

    /// The stash as the file's payload ends with it.
    fn stash_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * self.stash.len());
        for &(b, fp) in &self.stash {
            out.extend_from_slice(&b.to_le_bytes());
            out.extend_from_slice(&(fp as u32).to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        out
    }

    // ---- hashing -------------------------------------------------------------------------

    /// The digest of `bytes` for the insert and query paths: [`HotHasher::digest`] (which
    /// hashes keys of 17 to 32 bytes with 4-byte loads: see `hash::xxh3_len17to32` for why that
    /// matters for keys just written to the stack).
    #[inline(always)]
    fn hot_digest(&self, bytes: &[u8]) -> Digest {
        self.hot.digest(bytes)
    }

    /// Primary bucket and fingerprint (in `1 .. 2^f`) of a digest.
    #[inline(always)]
    fn locate(&self, d: Digest) -> (u64, u16) {
        let i1 = fastrange(d.h1, self.buckets);
        let fp = fastrange(d.h2, (1u64 << self.fp_bits) - 1) + 1;
        (i1, fp as u16)
    }

    /// The other bucket of fingerprint `fp` stored in bucket `i`: `(H(fp) - i) mod nb`, an
    /// involution for any `nb` (see the module documentation).
    #[inline(always)]
    fn alt(&self, i: u64, fp: u16) -> u64 {
        // One predictable branch (the layout never changes after construction).
        let x = if self.layout == LAYOUT_WEYL { (fp as u64).wrapping_mul(ALT_MUL) } else { mix64(fp as u64) };
        let h = fastrange(x, self.buckets);
        if h >= i {
            h - i
        } else {
            h + self.buckets - i
        }
    }

    /// Prefetches both candidate buckets of a digest (the batch query runs ahead with it).
    #[inline(always)]
    fn prefetch_digest(&self, d: Digest) {
        let (i1, fp) = self.locate(d);
        let bb = self.bucket_bits();
        prefetch(&self.table[(i1 * (bb / 8)) as usize]);
        prefetch(&self.table[(self.alt(i1, fp) * (bb / 8)) as usize]);
    }
}

impl Filter for Cuckoo {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        // One predictable branch on the width, then a constant-folded probe.
        match self.fp_bits {
            8 => self.contains_width::<8>(d),
            12 => self.contains_width::<12>(d),
            _ => self.contains_width::<16>(d),
        }
    }

    /// Same answer as the provided method; hashes with `Hasher::digest_inline`.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool
    where
        Self: Sized,
    {
        self.contains_digest(self.hot_digest(item.as_ref()))
    }

    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        for d in digests.iter().take(BATCH_AHEAD) {
            self.prefetch_digest(*d);
        }
        for i in 0..digests.len() {
            if let Some(d) = digests.get(i + BATCH_AHEAD) {
                self.prefetch_digest(*d);
            }
            out[i] = self.contains_digest(digests[i]);
        }
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.table.len() + self.stash.capacity() * core::mem::size_of::<(u64, u16)>()
    }

    fn expected_fpr(&self) -> f64 {
        math::cuckoo_fpr(self.fp_bits, BUCKET_SLOTS as f64, self.load_factor())
    }
}

impl Insert for Cuckoo {
    /// Inserts a copy; `false` if the item was already reported present **or the filter is
    /// full** (see [`Cuckoo::try_insert_digest`], which tells the two apart).
    fn insert_digest(&mut self, d: Digest) -> bool {
        self.try_insert_digest(d).unwrap_or(false)
    }
}

impl Remove for Cuckoo {
    fn remove_digest(&mut self, d: Digest) -> bool {
        let (i1, fp) = self.locate(d);
        let i2 = self.alt(i1, fp);
        if self.take(i1, fp) || self.take(i2, fp) {
            self.items -= 1;
            self.drain_stash();
            return true;
        }
        if let Some(k) = self.stash.iter().position(|&(b, f)| f == fp && (b == i1 || b == i2)) {
            self.stash.swap_remove(k);
            self.items -= 1;
            return true;
        }
        false
    }
}

impl Persist for Cuckoo {
    const KIND: FilterKind = FilterKind::Cuckoo;

    /// Parameters (48 bytes): buckets `u64`, fingerprint bits `u32` (8, 12 or 16), slots per
    /// bucket `u32` (4), items `u64` (table fingerprints plus stash), capacity `u64`, target FPR
    /// `f64`, stash entries `u32` (0 to 4), layout `u32` (0 or 1; the field was "reserved, 0"
    /// before layout 1 existed, so every older file reads as layout 0).
    ///
    /// The layout names the alternate-bucket function `alt(i, fp) = (H(fp) − i) mod nb`:
    /// layout 1 (written now) `H(fp) = fastrange(fp · 0x9e3779b97f4a7c15, nb)`; layout 0
    /// (earlier versions; read, and written back unchanged) `H(fp) = fastrange(mix(fp), nb)` with
    /// `mix` SplitMix64's finaliser. A table keeps its layout: its fingerprints sit where its
    /// function put them.
    ///
    /// Payload: the packed table, `nb · 4f / 8` bytes (a whole number: `f` is even): bucket `i`
    /// slot `j` is the `f`-bit little-endian field starting at bit `(4i + j)·f`, bit `x` being bit
    /// `x & 7` of byte `x >> 3`; 0 is an empty slot. Then each stash entry as bucket `u64` (one of
    /// the fingerprint's two buckets), fingerprint `u32`, reserved `u32` (0).
    fn to_bytes(&self) -> Vec<u8> {
        let p = self.params();
        let table = Self::table_bytes(self.buckets, self.fp_bits);
        let len = table + 16 * self.stash.len() as u64;
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), len);
        let out = e.payload();
        out.extend_from_slice(&self.table[..table as usize]);
        out.extend_from_slice(&self.stash_bytes());
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let buckets = r.u64("buckets")?;
        let fp_bits = r.u32("fingerprint bits")?;
        let slots = r.u32("slots per bucket")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        let stash_len = r.u32("stash entries")?;
        let layout = r.u32("layout")?;
        r.finish()?;
        let bad = |m: &'static str| -> Error { FormatError::InvalidParams(m).into() };
        if buckets == 0 || !FINGERPRINT_BITS.contains(&fp_bits) || slots != BUCKET_SLOTS as u32 {
            return Err(bad("cuckoo: buckets ≥ 1, fingerprint bits 8/12/16, 4 slots per bucket"));
        }
        if stash_len as usize > STASH_SLOTS {
            return Err(bad("cuckoo: at most 4 stash entries"));
        }
        if layout != LAYOUT_MIX && layout != LAYOUT_WEYL {
            return Err(bad("cuckoo: unknown layout (this build reads 0 and 1)"));
        }
        // Sizes first (checked arithmetic), so a forged bucket count cannot cause an allocation.
        let table = (buckets as u128 * BUCKET_SLOTS as u128 * fp_bits as u128).div_ceil(8);
        let payload = raw.payload();
        if table + 16 * stash_len as u128 != payload.len() as u128 {
            return Err(FormatError::Truncated {
                what: "cuckoo table and stash",
                needed: (table + 16 * stash_len as u128).min(u64::MAX as u128) as u64,
                available: payload.len() as u64,
            }
            .into());
        }
        let table = table as usize;
        let mut f = Cuckoo::with_params(buckets, fp_bits, raw.hasher())?;
        // A bucket is f/2 whole bytes: the table ends on a byte boundary, with no spare bits.
        f.table[..table].copy_from_slice(&payload[..table]);
        f.layout = layout;
        for e in payload[table..].chunks_exact(16) {
            let b = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
            let fp = u32::from_le_bytes(e[8..12].try_into().expect("4 bytes"));
            let res = u32::from_le_bytes(e[12..].try_into().expect("4 bytes"));
            if b >= buckets || fp == 0 || fp >= 1 << fp_bits || res != 0 {
                return Err(bad("cuckoo: stash entry out of range"));
            }
            f.stash.push((b, fp as u16));
        }
        let mut stored = f.stash.len() as u64;
        for i in 0..buckets {
            let b = f.bucket(i);
            stored += (0..BUCKET_SLOTS).filter(|&j| f.slot_of(b, j) != 0).count() as u64;
        }
        if stored != items {
            return Err(bad("cuckoo: item count does not match the stored fingerprints"));
        }
        f.items = items;
        f.capacity = capacity;
        f.target_fpr = target_fpr;
        Ok(f)
    }
}

#[cfg(test)]
mod tests;
