//! The packed bucket table: bucket `i` is 4 fingerprint fields of `f` bits, read as one
//! little-endian 8-byte word at byte `i·4f/8`. The field tests on a word (SWAR, and on x86-64
//! in SSE2 registers on both candidate words at once), and the reads and writes of words,
//! buckets and slots.

use super::*;

/// `1` in the lowest bit of each of the 4 `f`-bit fields of a bucket word.
#[inline(always)]
const fn field_lows(f: u32) -> u64 {
    1 | 1 << f | 1 << (2 * f) | 1 << (3 * f)
}

/// SWAR zero test on the 4 `f`-bit fields of a bucket word `x` (Mycroft's trick, as in
/// Hacker's Delight §6-1): nonzero iff some field of `x` is zero, and then its lowest set bit is
/// the top bit of the *lowest* zero field (flags above it may be spurious, from a borrow).
#[inline(always)]
const fn zero_fields(x: u64, f: u32) -> u64 {
    let lows = field_lows(f);
    x.wrapping_sub(lows) & !x & (lows << (f - 1))
}

/// Whether some slot of bucket word `b` (4 fields of `f` bits) holds `fp`: one xor against `fp`
/// copied into every field, then the zero test, instead of 4 compares and branches.
#[inline(always)]
pub(super) const fn bucket_has(b: u64, fp: u16, f: u32) -> bool {
    zero_fields(b ^ (fp as u64).wrapping_mul(field_lows(f)), f) != 0
}

/// Exactly the empty fields of bucket word `b` (4 fields of `f` bits): the top bit of each zero
/// field, and nothing else (no borrow between fields, unlike [`zero_fields`]; Hacker's Delight
/// §6-1, the exact variant), so its popcount is the number of empty slots.
#[inline(always)]
pub(super) const fn empty_fields(b: u64, f: u32) -> u64 {
    let highs = field_lows(f) << (f - 1);
    let low_bits = highs - field_lows(f);
    let y = (b & low_bits) + low_bits;
    !(y | b | low_bits) & highs
}

/// The lowest empty slot of bucket word `b`, if any.
#[inline(always)]
pub(super) const fn first_empty(b: u64, f: u32) -> Option<usize> {
    let z = zero_fields(b, f);
    if z == 0 {
        None
    } else {
        Some((z.trailing_zeros() / f) as usize)
    }
}

/// The insert's (and the query's) field arithmetic on both candidate words at once, in SSE2 registers (part of
/// every x86-64 CPU).
#[cfg(target_arch = "x86_64")]
pub(super) mod sse2 {
    use super::field_lows;
    use core::arch::x86_64::*;

    /// For the 8-byte words `w1`, `w2` at two buckets (4 fields of `F` bits each in their low
    /// bits): `None` if both buckets are full, else the two words to write back, `fp` in the
    /// lowest empty field of the bucket with more empty fields (the first on a tie) and the other
    /// word unchanged, and whether either bucket holds `fp`. The same words and answer as the
    /// scalar code (`empty_fields`, `count_ones`, `bucket_has`; tested against it).
    ///
    /// Why: the work that waits for the two bucket loads (cache misses) is what limits how many
    /// inserts overlap; kept in vector registers it leaves the integer scheduler free for the
    /// next inserts' hashing and loads.
    #[inline(always)]
    pub(in crate::filters::cuckoo) fn insert_words<const F: u32>(
        w1: u64,
        w2: u64,
        fp: u16,
    ) -> Option<(u64, u64, bool)> {
        let lows = field_lows(F);
        let highs = lows << (F - 1);
        let fpb = (fp as u64).wrapping_mul(lows);
        // The empty flags (top bit of each field) moved to the low bit of distinct bytes, so
        // that a sum of bytes counts them: bits 7, 15, 23, 31 (F = 8) and 15, 31, 47, 63
        // (F = 16) by one shift; for F = 12, bits 11, 35 by 11 and 23, 47 by 15 (to bits 0,
        // 24 and 8, 32), the rest masked out.
        let sad_mask: u64 = if F == 12 { 0x0000_0001_0100_0101 } else { u64::MAX };
        // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every CPU
        // this code compiles for; no memory is accessed.
        unsafe {
            let w = _mm_set_epi64x(w2 as i64, w1 as i64);
            // A shift by F − 1 (a constant: folded into an immediate shift).
            let top = _mm_cvtsi32_si128(F as i32 - 1);
            let fpv = _mm_set1_epi64x(fpb as i64);
            let lows_v = _mm_set1_epi64x(lows as i64);
            let highs_v = _mm_set1_epi64x(highs as i64);
            let low_bits = _mm_set1_epi64x((highs - lows) as i64);
            // `bucket_has` per lane: a zero field of w ^ fpb.
            let x = _mm_xor_si128(w, fpv);
            let z = _mm_and_si128(_mm_andnot_si128(x, _mm_sub_epi64(x, lows_v)), highs_v);
            // `empty_fields` per lane.
            let y = _mm_add_epi64(_mm_and_si128(w, low_bits), low_bits);
            let e = _mm_andnot_si128(_mm_or_si128(_mm_or_si128(y, w), low_bits), highs_v);
            let flags = _mm_or_si128(e, _mm_unpackhi_epi64(e, e));
            if _mm_cvtsi128_si64(flags) == 0 {
                return None;
            }
            let s = if F == 12 {
                _mm_or_si128(_mm_srli_epi64(e, 11), _mm_srli_epi64(e, 15))
            } else {
                _mm_srl_epi64(e, top)
            };
            let c = _mm_sad_epu8(_mm_and_si128(s, _mm_set1_epi64x(sad_mask as i64)), _mm_setzero_si128());
            // Lane 0 of `g`: count 2 > count 1, all ones or zero; `m` selects the lane written.
            let g = _mm_cmpgt_epi32(_mm_shuffle_epi32(c, 0b01_00_11_10), c);
            let m = _mm_xor_si128(_mm_shuffle_epi32(g, 0), _mm_set_epi64x(0, -1));
            // The lowest empty field's mask: lowest flag `l` (its top bit), (l << 1) − (l >> (F − 1)).
            let l = _mm_and_si128(e, _mm_sub_epi64(_mm_setzero_si128(), e));
            let field = _mm_sub_epi64(_mm_slli_epi64(l, 1), _mm_srl_epi64(l, top));
            let v = _mm_or_si128(w, _mm_and_si128(_mm_and_si128(fpv, field), m));
            let present = _mm_cvtsi128_si64(_mm_or_si128(z, _mm_unpackhi_epi64(z, z))) != 0;
            Some((_mm_cvtsi128_si64(v) as u64, _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)) as u64, present))
        }
    }

    /// Whether either of the 8-byte words `w1`, `w2` at two buckets holds `fp` in one of its 4
    /// low `F`-bit fields: `bucket_has` on both lanes at once (the bits past the bucket change
    /// nothing: a borrow only moves up, and only the 4 fields' top bits are kept).
    #[inline(always)]
    pub(in crate::filters::cuckoo) fn has_words<const F: u32>(w1: u64, w2: u64, fp: u16) -> bool {
        let lows = field_lows(F);
        // SAFETY: SSE2 is part of the x86-64 baseline; no memory is accessed.
        unsafe {
            let w = _mm_set_epi64x(w2 as i64, w1 as i64);
            let x = _mm_xor_si128(w, _mm_set1_epi64x((fp as u64).wrapping_mul(lows) as i64));
            let z = _mm_and_si128(
                _mm_andnot_si128(x, _mm_sub_epi64(x, _mm_set1_epi64x(lows as i64))),
                _mm_set1_epi64x((lows << (F - 1)) as i64),
            );
            _mm_movemask_epi8(_mm_cmpeq_epi8(z, _mm_setzero_si128())) != 0xffff
        }
    }
}

impl Cuckoo {
    /// The byte length of the packed table in the file: `⌈nb · 4f / 8⌉`.
    pub(super) fn table_bytes(buckets: u64, fp_bits: u32) -> u64 {
        (buckets * BUCKET_SLOTS as u64 * fp_bits as u64).div_ceil(8)
    }

    /// The 8 bytes at byte `at` of the table, little-endian.
    #[inline(always)]
    pub(super) fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.table[at..at + 8].try_into().expect("8 bytes"))
    }

    /// [`Cuckoo::word`] at the first byte of bucket `i`, `at = i · 4F/8`, without the bounds
    /// check, for the x86-64 fast paths (insert and query). The caller passes a bucket index
    /// from [`fastrange`] or [`Cuckoo::alt`], both `< self.buckets`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn bucket_word<const F: u32>(&self, i: u64) -> u64 {
        debug_assert_eq!(F, self.fp_bits);
        debug_assert!(i < self.buckets);
        let at = i as usize * (BUCKET_SLOTS * F as usize / 8);
        // SAFETY: the table holds `buckets · 4F/8 + 8` bytes (`with_params`, the only place it
        // is made; neither `buckets` nor its length change afterwards), and `i < buckets` (a
        // `fastrange` result or `alt`, both reduced modulo `buckets`), so the 8 bytes at
        // `at ≤ (buckets − 1) · 4F/8` are in the table. Unaligned read of plain bytes.
        unsafe { self.table.as_ptr().add(at).cast::<u64>().read_unaligned() }.to_le()
    }

    /// Stores `v` as the 8 bytes at the first byte of bucket `i` (`i < self.buckets`), without
    /// the bounds check: see [`Cuckoo::bucket_word`].
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn set_bucket_word<const F: u32>(&mut self, i: u64, v: u64) {
        debug_assert!(i < self.buckets);
        let at = i as usize * (BUCKET_SLOTS * F as usize / 8);
        self.before_table_write(at..at + 8);
        // SAFETY: as in `bucket_word`: the 8 bytes at `at` are in the table, which `&mut self`
        // borrows exclusively. Unaligned write of plain bytes.
        unsafe { self.table.as_mut_ptr().add(at).cast::<u64>().write_unaligned(v.to_le()) }
    }

    #[inline(always)]
    pub(super) fn bucket_bits(&self) -> u64 {
        BUCKET_SLOTS as u64 * self.fp_bits as u64
    }

    /// The `4f` bits of bucket `i`, slot 0 in the low bits.
    #[inline(always)]
    pub(super) fn bucket(&self, i: u64) -> u64 {
        self.bucket_at(i, self.bucket_bits())
    }

    /// [`Cuckoo::bucket`] for a bucket width `bb` the caller may know at compile time: one
    /// unaligned 8-byte load at the bucket's first byte and a mask (the guard bytes make the load
    /// valid for the last bucket).
    #[inline(always)]
    pub(super) fn bucket_at(&self, i: u64, bb: u64) -> u64 {
        let at = (i * (bb / 8)) as usize;
        let word: [u8; 8] = self.table[at..at + 8].try_into().expect("8 bytes");
        u64::from_le_bytes(word) & (u64::MAX >> (64 - bb))
    }

    #[inline(always)]
    pub(super) fn set_bucket(&mut self, i: u64, v: u64) {
        self.put_at(i, self.bucket_bits(), v);
    }

    /// Writes bucket `i` (width `bb`, known at the call site) as `v`: one 8-byte read-modify-write
    /// at the bucket's first byte that keeps the bits after it (the next bucket's, or the zero
    /// guard bytes) as they are.
    #[inline(always)]
    pub(super) fn put_at(&mut self, i: u64, bb: u64, v: u64) {
        let at = (i * (bb / 8)) as usize;
        let mask = u64::MAX >> (64 - bb);
        self.before_table_write(at..at + 8);
        let word: &mut [u8; 8] = (&mut self.table[at..at + 8]).try_into().expect("8 bytes");
        let old = u64::from_le_bytes(*word);
        *word = ((old & !mask) | v).to_le_bytes();
    }

    #[inline(always)]
    pub(super) fn slot_of(&self, bucket: u64, j: usize) -> u16 {
        ((bucket >> (j as u32 * self.fp_bits)) & ((1u64 << self.fp_bits) - 1)) as u16
    }

    #[inline(always)]
    pub(super) fn with_slot(&self, bucket: u64, j: usize, fp: u16) -> u64 {
        let sh = j as u32 * self.fp_bits;
        let mask = ((1u64 << self.fp_bits) - 1) << sh;
        (bucket & !mask) | ((fp as u64) << sh)
    }

    pub(super) fn matches(&self, i: u64, fp: u16) -> usize {
        let b = self.bucket(i);
        (0..BUCKET_SLOTS).filter(|&j| self.slot_of(b, j) == fp).count()
    }

    /// Puts `fp` in an empty slot of bucket `i`, if there is one.
    #[inline]
    pub(super) fn try_put(&mut self, i: u64, fp: u16) -> bool {
        let b = self.bucket(i);
        match first_empty(b, self.fp_bits) {
            Some(j) => {
                let nb = self.with_slot(b, j, fp);
                self.set_bucket(i, nb);
                true
            }
            None => false,
        }
    }

    /// Removes one copy of `fp` from bucket `i`.
    pub(super) fn take(&mut self, i: u64, fp: u16) -> bool {
        let b = self.bucket(i);
        for j in 0..BUCKET_SLOTS {
            if self.slot_of(b, j) == fp {
                let nb = self.with_slot(b, j, 0);
                self.set_bucket(i, nb);
                return true;
            }
        }
        false
    }
}
