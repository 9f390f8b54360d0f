//! Bit and word storage shared by the Bloom family.
//!
//! Storage is allocated with `try_reserve_exact`, so an absurd size is an [`Error`], not an
//! abort. Bits are numbered least-significant first within little-endian 64-bit words, so the
//! byte image of a bit array (what the file format stores) is the same on every platform: bit `x`
//! is bit `x & 7` of byte `x >> 3`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// The largest filter payload `sift` will allocate: 2^48 bytes (256 TiB). Anything above is
/// certainly a mistake in the parameters, not a real filter.
pub const MAX_BYTES: u128 = 1 << 48;

/// Allocates `len` zeroed values of `T`, failing with a structured error instead of aborting.
pub(crate) fn try_zeroed<T: Copy + Default>(len: usize) -> Result<Vec<T>> {
    let bytes = (len as u128) * core::mem::size_of::<T>() as u128;
    if bytes > MAX_BYTES || bytes > isize::MAX as u128 {
        return Err(Error::CapacityExceeded {
            requested_bytes: bytes,
            limit_bytes: MAX_BYTES.min(isize::MAX as u128),
        });
    }
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { bytes: bytes as usize })?;
    v.resize(len, T::default());
    Ok(v)
}

/// Converts a bit count that may not fit in `usize` into a word count, with a structured error.
pub(crate) fn words_for_bits(bits: u64) -> Result<usize> {
    let words = bits.div_ceil(64);
    let bytes = words as u128 * 8;
    if bytes > MAX_BYTES || words > usize::MAX as u64 {
        return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
    }
    Ok(words as usize)
}

/// A fixed-size array of bits backed by 64-bit words.
#[derive(Clone, PartialEq, Eq)]
pub struct BitVec {
    words: Storage<u64>,
    bits: u64,
}

impl core::fmt::Debug for BitVec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BitVec").field("bits", &self.bits).field("ones", &self.count_ones()).finish()
    }
}

impl BitVec {
    /// `bits` zero bits.
    pub fn zeroed(bits: u64) -> Result<Self> {
        let words = Storage::zeroed(words_for_bits(bits)?)?;
        Ok(BitVec { words, bits })
    }

    /// Rebuilds from the little-endian byte image written by [`BitVec::write_le`].
    pub fn from_le_bytes(bits: u64, bytes: &[u8]) -> Result<Self> {
        let n = words_for_bits(bits)?;
        if bytes.len() as u128 != n as u128 * 8 {
            return Err(crate::error::FormatError::Truncated {
                what: "bit array",
                needed: n as u64 * 8,
                available: bytes.len() as u64,
            }
            .into());
        }
        let mut words: Storage<u64> = Storage::zeroed(n)?;
        for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        }
        let v = BitVec { words, bits };
        // Bits past the end must be zero, or count_ones and equality would see phantom bits.
        if v.tail_garbage() {
            return Err(
                crate::error::FormatError::InvalidParams("bits set past the end of the bit array").into()
            );
        }
        Ok(v)
    }

    fn tail_garbage(&self) -> bool {
        let used = self.bits % 64;
        used != 0 && self.words.last().is_some_and(|w| w >> used != 0)
    }

    /// Appends the little-endian byte image (8 bytes per word) to `out`.
    pub fn write_le(&self, out: &mut Vec<u8>) {
        out.reserve(self.words.len() * 8);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Number of bits.
    #[inline]
    pub fn len(&self) -> u64 {
        self.bits
    }

    /// Whether the array has no bits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bits == 0
    }

    /// The backing words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The backing words, mutably (callers keep bits past `len` zero).
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Bytes of storage.
    pub fn size_in_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Reads bit `i` (`i < len`).
    #[inline(always)]
    pub fn get(&self, i: u64) -> bool {
        debug_assert!(i < self.bits);
        (self.words[(i >> 6) as usize] >> (i & 63)) & 1 == 1
    }

    /// Sets bit `i` and returns whether it was 0 before.
    #[inline(always)]
    pub fn set(&mut self, i: u64) -> bool {
        debug_assert!(i < self.bits);
        let w = &mut self.words[(i >> 6) as usize];
        let mask = 1u64 << (i & 63);
        let was_clear = *w & mask == 0;
        *w |= mask;
        was_clear
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// `self |= other` (same length).
    pub fn or_assign(&mut self, other: &BitVec) {
        debug_assert_eq!(self.bits, other.bits);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// `self &= other` (same length).
    pub fn and_assign(&mut self, other: &BitVec) {
        debug_assert_eq!(self.bits, other.bits);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// A guard for reading the words as they are now while they keep changing
    /// ([`Storage::freeze`]); `None` for a small array or one already guarded.
    pub(crate) fn freeze(&self) -> Option<CowHandle> {
        self.words.freeze()
    }

    /// The guard of the words, if a snapshot is reading them ([`Storage::cow_guard`]).
    #[inline]
    pub(crate) fn cow_guard(&self) -> Option<Arc<CowGuard>> {
        self.words.cow_guard()
    }

    /// The same bits in plain `Vec` storage (tests compare both storage kinds).
    #[cfg(test)]
    pub(crate) fn with_plain_storage(&self) -> BitVec {
        BitVec { words: Storage::plain_from(&self.words).unwrap(), bits: self.bits }
    }

    /// Whether the words live in the 2 MiB-aligned, huge-page-advised allocation.
    #[cfg(test)]
    pub(crate) fn is_huge(&self) -> bool {
        self.words.is_huge()
    }
}

// ---------------------------------------------------------------------------------------------
// Storage: zeroed arrays, in huge pages when they are large
// ---------------------------------------------------------------------------------------------

/// Types whose all-zero byte pattern is a valid value equal to `T::default()` (integers, arrays
/// of them, atomics of them). [`Storage`] relies on it to hand out freshly zeroed memory as `T`s.
///
/// # Safety
/// Implement only for types for which every byte being zero is a valid value, and that have no
/// padding bytes (a snapshot of a [`Storage`] reads its values as bytes: [`Storage::freeze`]).
pub(crate) unsafe trait Zeroable: Default {}

// SAFETY: zero is a valid `u64` (and `u32`, `u8`), and integers have no padding.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for i64 {}
// SAFETY: all-zero bits are the double 0.0, and a double has no padding.
unsafe impl Zeroable for f64 {}
// SAFETY: an array of `u32`s (a split-block Bloom filter's block) is zero when its bytes are,
// and arrays have no padding between elements of a padding-free type.
unsafe impl Zeroable for [u32; 8] {}

/// Arrays at least this large go into huge-page-friendly memory: below it a filter fits in a few
/// hundred 4 KiB pages, which the TLB covers anyway.
pub(crate) const HUGE_THRESHOLD: usize = 4 << 20;

/// Alignment (and huge-page size) of large arrays: 2 MiB, the x86-64 and AArch64 huge page.
pub(crate) const HUGE_ALIGN: usize = 2 << 20;

/// A fixed-length, zero-initialised array of `T`, the storage of the Bloom family's bits.
///
/// Small arrays (and every array off Linux) are a plain `Vec`. On Linux an array of at least
/// [`HUGE_THRESHOLD`] bytes is allocated 2 MiB-aligned and advised `MADV_HUGEPAGE` *before* its
/// pages are first touched, so that with transparent huge pages in `madvise` mode (a common
/// default) the kernel backs it with 2 MiB pages. Random probes into a filter of hundreds of MB
/// then miss the TLB far less often: on the benchmark VM the prefetching batch query of a
/// 1.24 GB `BlockedBloom` ran 3.04× faster per key than single queries, where a 160 MB Bloom
/// filter on 4 KiB pages had gained 1.02× (`docs/BENCHMARKS.md`, batch experiment). The contents are the same whichever way the memory
/// was obtained: the allocation is zeroed explicitly, and only the page size differs.
pub(crate) struct Storage<T: Zeroable> {
    repr: Repr<T>,
}

enum Repr<T> {
    Plain(Vec<T>),
    /// `len` values at `ptr`, allocated with [`huge_layout`]`::<T>(len)` through the global
    /// allocator; owned, freed in `Drop`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Huge {
        ptr: core::ptr::NonNull<T>,
        len: usize,
    },
}

// SAFETY: `Storage<T>` owns its values like a `Vec<T>` does (the raw pointer is unique and never
// shared outside `&self`/`&mut self` borrows), so it is `Send`/`Sync` exactly when `T` is.
unsafe impl<T: Zeroable + Send> Send for Storage<T> {}
// SAFETY: as above: shared access only gives `&[T]`.
unsafe impl<T: Zeroable + Sync> Sync for Storage<T> {}

/// The layout of a huge-page array of `len` values of `T` (2 MiB-aligned; size not rounded, so
/// the allocator counts exactly the array's bytes).
fn huge_layout<T>(len: usize) -> Option<core::alloc::Layout> {
    let bytes = len.checked_mul(core::mem::size_of::<T>())?;
    core::alloc::Layout::from_size_align(bytes, HUGE_ALIGN.max(core::mem::align_of::<T>())).ok()
}

impl<T: Zeroable> Storage<T> {
    /// `len` zero values: huge-page-friendly if large (Linux), else a plain `Vec`. Absurd sizes
    /// give [`Error::CapacityExceeded`], a failed allocation [`Error::OutOfMemory`].
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        let bytes = (len as u128) * core::mem::size_of::<T>() as u128;
        if bytes > MAX_BYTES || bytes > isize::MAX as u128 {
            return Err(Error::CapacityExceeded {
                requested_bytes: bytes,
                limit_bytes: MAX_BYTES.min(isize::MAX as u128),
            });
        }
        if cfg!(target_os = "linux") && bytes >= HUGE_THRESHOLD as u128 {
            Self::zeroed_huge(len)
        } else {
            Self::zeroed_plain(len)
        }
    }

    /// `len` zero values in a plain `Vec`.
    pub(crate) fn zeroed_plain(len: usize) -> Result<Self> {
        let bytes = len.saturating_mul(core::mem::size_of::<T>());
        let mut v: Vec<T> = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { bytes })?;
        v.resize_with(len, T::default);
        Ok(Storage { repr: Repr::Plain(v) })
    }

    /// `len` zero values, 2 MiB-aligned and advised for huge pages (Linux; a plain `Vec`
    /// elsewhere).
    pub(crate) fn zeroed_huge(len: usize) -> Result<Self> {
        #[cfg(target_os = "linux")]
        {
            let bytes = len.saturating_mul(core::mem::size_of::<T>());
            let Some(layout) = huge_layout::<T>(len) else {
                return Err(Error::CapacityExceeded {
                    requested_bytes: bytes as u128,
                    limit_bytes: MAX_BYTES,
                });
            };
            if layout.size() == 0 {
                return Self::zeroed_plain(len);
            }
            // SAFETY: the layout has a non-zero size (checked above).
            let raw = unsafe { std::alloc::alloc(layout) };
            let Some(ptr) = core::ptr::NonNull::new(raw as *mut T) else {
                return Err(Error::OutOfMemory { bytes });
            };
            // The advice must come before the first write: pages faulted in as 4 KiB stay so
            // until khugepaged (slowly) collapses them. It is only a hint; failure (THP disabled,
            // an old kernel) leaves ordinary pages, which is still correct.
            // SAFETY: `raw` is 2 MiB-aligned (so page-aligned) and the `bytes` after it belong to
            // this allocation; madvise only changes the paging policy of that range.
            unsafe {
                libc::madvise(raw as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
            }
            // SAFETY: `raw` is valid for `bytes` bytes of writes; zero bytes are a valid `T`
            // (`T: Zeroable`), so afterwards the allocation holds `len` initialised values.
            unsafe { core::ptr::write_bytes(raw, 0, bytes) };
            Ok(Storage { repr: Repr::Huge { ptr, len } })
        }
        #[cfg(not(target_os = "linux"))]
        Self::zeroed_plain(len)
    }

    /// A plain-`Vec` copy of `values` (tests compare both kinds of storage).
    #[cfg(test)]
    pub(crate) fn plain_from(values: &[T]) -> Result<Self>
    where
        T: Copy,
    {
        let mut s = Self::zeroed_plain(values.len())?;
        s.copy_from_slice(values);
        Ok(s)
    }

    /// Wraps an existing vector (plain storage).
    #[cfg(test)]
    pub(crate) fn from_vec(v: Vec<T>) -> Self {
        Storage { repr: Repr::Plain(v) }
    }

    /// The values of `v` in the storage [`Storage::zeroed`] would pick for their length: a large
    /// array is copied into huge-page memory (and `v` freed), a small one kept as it is.
    pub(crate) fn adopt(v: Vec<T>) -> Result<Self>
    where
        T: Copy,
    {
        let bytes = v.len().saturating_mul(core::mem::size_of::<T>());
        if cfg!(target_os = "linux") && bytes >= HUGE_THRESHOLD {
            let mut s = Self::zeroed_huge(v.len())?;
            s.copy_from_slice(&v);
            return Ok(s);
        }
        Ok(Storage { repr: Repr::Plain(v) })
    }

    /// The same allocation viewed as `len` values of `U`, without copying (a filter converted
    /// between its plain and atomic forms keeps its memory instead of needing twice as much).
    ///
    /// # Panics
    /// If `T` and `U` differ in size or alignment (a programming error, caught by the tests).
    ///
    /// # Safety
    /// Every value of `T` that can be stored here must be a valid `U` with the same meaning
    /// (plain and atomic integers of one width, or arrays of them).
    pub(crate) unsafe fn reinterpret<U: Zeroable>(self) -> Storage<U> {
        assert!(
            core::mem::size_of::<T>() == core::mem::size_of::<U>()
                && core::mem::align_of::<T>() == core::mem::align_of::<U>(),
            "reinterpret needs equal size and alignment"
        );
        // Ownership moves to the result: `self` must not free the allocation.
        let this = core::mem::ManuallyDrop::new(self);
        match &this.repr {
            Repr::Plain(v) => {
                // SAFETY: `this` is never used or dropped again, so reading the vector out of it
                // moves it (no double free).
                let v = core::mem::ManuallyDrop::new(unsafe { core::ptr::read(v) });
                let (ptr, len, cap) = (v.as_ptr() as *mut U, v.len(), v.capacity());
                // SAFETY: the buffer was allocated by a `Vec<T>` with capacity `cap`; `U` has the
                // size and alignment of `T` (asserted), so the layout `Vec<U>` will free with is
                // the one it was allocated with, and the `len` values are valid `U`s (caller).
                Storage { repr: Repr::Plain(unsafe { Vec::from_raw_parts(ptr, len, cap) }) }
            }
            // `huge_layout::<U>(len)` equals `huge_layout::<T>(len)` (same size and alignment),
            // so `Drop` of the result frees with the layout of the allocation.
            Repr::Huge { ptr, len } => Storage { repr: Repr::Huge { ptr: ptr.cast::<U>(), len: *len } },
        }
    }

    /// Whether this array is in the huge-page-advised allocation.
    pub(crate) fn is_huge(&self) -> bool {
        matches!(self.repr, Repr::Huge { .. })
    }
}

/// The length and the allocation kind, not the contents (a filter's table can be gigabytes).
impl<T: Zeroable> core::fmt::Debug for Storage<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Storage({} elements, huge pages: {})", self.len(), self.is_huge())
    }
}

impl<T: Zeroable> core::ops::Deref for Storage<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        match &self.repr {
            Repr::Plain(v) => v,
            // SAFETY: `ptr` points to `len` initialised `T`s owned by `self` (see `zeroed_huge`),
            // and the shared borrow of `self` keeps them alive and unmodified through `&mut`.
            Repr::Huge { ptr, len } => unsafe { core::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Zeroable> core::ops::DerefMut for Storage<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.repr {
            Repr::Plain(v) => v,
            // SAFETY: as in `deref`; the exclusive borrow of `self` makes the slice unaliased.
            Repr::Huge { ptr, len } => unsafe { core::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Zeroable> Drop for Storage<T> {
    fn drop(&mut self) {
        if let Repr::Huge { ptr, len } = self.repr {
            // A snapshot still reading the array keeps it: its guard frees it when done.
            if let Some(g) = guard_of(ptr.as_ptr() as usize) {
                let layout = huge_layout::<T>(len).expect("the layout was valid at allocation");
                let addr = ptr.as_ptr() as usize;
                let free = move || {
                    // SAFETY: as below; the guard calls this once, after its last read.
                    unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
                };
                g.state.lock().unwrap_or_else(|e| e.into_inner()).orphan = Some(Box::new(free));
                return;
            }
            let layout = huge_layout::<T>(len).expect("the layout was valid at allocation");
            // SAFETY: `ptr` was returned by `std::alloc::alloc(layout)` for this very layout in
            // `zeroed_huge` and is freed only here. `T: Zeroable` types used here have no drop
            // glue beyond their bytes (integers, atomics), so no destructor is skipped.
            unsafe { std::alloc::dealloc(ptr.as_ptr() as *mut u8, layout) };
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fill estimates of large arrays from a sample
// ---------------------------------------------------------------------------------------------

/// Bytes a sampled fill estimate reads at most ([`sample_runs`]): 4 MiB, about half a
/// millisecond of popcount, while a whole gigabyte takes a tenth of a second or more, which a
/// server would spend holding the lock of the key it reads.
pub const FILL_SAMPLE_BYTES: usize = 4 << 20;

/// Bytes of one contiguous run of a sample: a page, so that a sample reads whole cache lines
/// and pages rather than one word per line.
pub const FILL_SAMPLE_RUN: usize = 4 << 10;

/// The ranges of units (`0..len`) a fill estimate reads: all of them when there are at most
/// `max`, otherwise `max / run` runs of `run` consecutive units, evenly spaced from the first
/// unit to the last. The sample is deterministic: the same array gives the same estimate.
///
/// Every filter that sets bits (or counters) at positions drawn uniformly from its hash sees the
/// same fill in every run in expectation, so the fraction set in the sample is an unbiased
/// estimate of the whole's; with `s` sampled bits and a true fill `f` its standard deviation is
/// at most `sqrt(f (1 - f) / s)` (sampling without replacement has less), about `1.7e-4` for
/// the 32 Mi bits of [`FILL_SAMPLE_BYTES`].
pub fn sample_runs(len: usize, run: usize, max: usize) -> impl Iterator<Item = core::ops::Range<usize>> {
    let whole = len <= max;
    let run = run.clamp(1, len.max(1));
    let runs = if whole { 1 } else { (max / run).max(1) };
    (0..runs).map(move |i| {
        if whole {
            return 0..len;
        }
        // Evenly spaced starts: run i begins at i·(len − run)/(runs − 1), the last at len − run.
        let span = (len - run) as u128;
        let start = if runs == 1 { 0 } else { (span * i as u128 / (runs - 1) as u128) as usize };
        start..start + run
    })
}

// ---------------------------------------------------------------------------------------------
// Copy-on-write snapshots of large arrays
// ---------------------------------------------------------------------------------------------

/// Bytes of a guarded array a writer copies aside before its first change to them.
pub const COW_PIECE: usize = 256 << 10;

/// The copy-on-write tests' measure of what a write changed: the pieces (of [`COW_PIECE`] bytes,
/// in order) in which an array's live elements differ from a copy taken at the freeze.
#[cfg(test)]
pub(crate) fn pieces_differing<T: PartialEq>(live: &[T], at_freeze: &[T]) -> Vec<usize> {
    assert_eq!(live.len(), at_freeze.len(), "the same array");
    let size = std::mem::size_of::<T>();
    let mut pieces: Vec<usize> = live
        .iter()
        .zip(at_freeze)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i * size / COW_PIECE)
        .collect();
    pieces.dedup();
    pieces
}

/// Number of guarded arrays: writers look a guard up only when it is not 0.
static GUARDED: AtomicUsize = AtomicUsize::new(0);
/// The guards, by the address of the array they guard (a few at a time: one per large array a
/// snapshot is reading).
static GUARDS: Mutex<Vec<(usize, Arc<CowGuard>)>> = Mutex::new(Vec::new());

fn guards() -> MutexGuard<'static, Vec<(usize, Arc<CowGuard>)>> {
    GUARDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The guard of the array at `addr`, if a snapshot is reading it.
fn guard_of(addr: usize) -> Option<Arc<CowGuard>> {
    if GUARDED.load(Ordering::Acquire) == 0 {
        return None;
    }
    guards().iter().find(|(a, _)| *a == addr).map(|(_, g)| g.clone())
}

/// A piece of a guarded array, as the snapshot will see it.
enum Piece {
    /// Unchanged since the snapshot began: the snapshot reads the live bytes.
    Live,
    /// A writer changed it; these are its bytes from before.
    Saved(SavedBytes),
    /// The snapshot has read it; writers may change it freely.
    Read,
}

/// The bytes a writer saved aside: freed by the snapshot once read, after the guard's lock.
struct SavedBytes(Box<[u8]>);

#[cfg(test)]
impl Drop for SavedBytes {
    fn drop(&mut self) {
        tests::saved_bytes_freed();
    }
}

struct CowState {
    pieces: Vec<Piece>,
    /// The array's owner dropped it while the snapshot still read it: how to free it.
    orphan: Option<Box<dyn FnOnce() + Send>>,
}

/// What lets a snapshot read a large array as it was at one moment while writers keep changing
/// it, without copying it whole: the array is cut in [`COW_PIECE`] pieces, and the first change
/// to a piece the snapshot has not read yet copies that piece aside first. A writer therefore
/// waits at most for the copy of the pieces it touches, and for the snapshot's copy of one piece.
///
/// Every write to a guarded array happens under the guard's lock, and the snapshot reads live
/// bytes only under it, so no read of the snapshot overlaps a write.
pub struct CowGuard {
    addr: usize,
    len: usize,
    state: Mutex<CowState>,
}

impl core::fmt::Debug for CowGuard {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CowGuard({} bytes)", self.len)
    }
}

/// The lock a writer holds while it changes a guarded array (see [`CowWriter::before_write`]).
pub(crate) struct CowWriter<'g> {
    state: MutexGuard<'g, CowState>,
}

impl CowWriter<'_> {
    /// Saves the pieces holding `bytes[range]` that the snapshot has not read yet; call before
    /// changing those bytes. `bytes` is the guarded array.
    pub(crate) fn before_write(&mut self, bytes: &[u8], range: core::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        for p in range.start / COW_PIECE..=(range.end - 1) / COW_PIECE {
            if let Some(piece @ Piece::Live) = self.state.pieces.get_mut(p) {
                let end = ((p + 1) * COW_PIECE).min(bytes.len());
                *piece = Piece::Saved(SavedBytes(bytes[p * COW_PIECE..end].into()));
            }
        }
    }

    /// [`CowWriter::before_write`] for values `range` of a guarded array of `T`s: saves the
    /// pieces holding their bytes.
    #[inline]
    pub(crate) fn before_write_values<T: Zeroable + Copy>(
        &mut self,
        values: &[T],
        range: core::ops::Range<usize>,
    ) {
        let size = core::mem::size_of::<T>();
        self.before_write(as_bytes(values), range.start * size..range.end * size);
    }
}

/// The bytes of `values` in memory.
pub(crate) fn as_bytes<T: Zeroable + Copy>(values: &[T]) -> &[u8] {
    // SAFETY: `T: Zeroable` has no padding bytes (the trait's contract), so every byte of the
    // slice is initialised; `u8` has alignment 1, and the length is the slice's size in bytes.
    // The borrow of `values` keeps the bytes alive and unchanged for the result's lifetime.
    unsafe { core::slice::from_raw_parts(values.as_ptr() as *const u8, core::mem::size_of_val(values)) }
}

impl CowGuard {
    /// The lock a writer takes before changing the array.
    pub(crate) fn writer(&self) -> CowWriter<'_> {
        CowWriter { state: self.state.lock().unwrap_or_else(|e| e.into_inner()) }
    }

    /// Length of the guarded array in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the guarded array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pieces a writer has saved aside so far (tests check that a write copies only the pieces
    /// it touches).
    #[cfg(test)]
    pub(crate) fn saved_pieces(&self) -> usize {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.pieces.iter().filter(|p| matches!(p, Piece::Saved(_))).count()
    }

    /// Appends bytes `from..from + n` of the array as they were when the guard was made. Each
    /// piece is read once: the snapshot reads the array front to back, in any chunk sizes.
    pub fn read(&self, from: usize, n: usize, out: &mut Vec<u8>) {
        let end = (from + n).min(self.len);
        let mut at = from;
        while at < end {
            let p = at / COW_PIECE;
            let (start, stop) = (p * COW_PIECE, ((p + 1) * COW_PIECE).min(self.len));
            let upto = stop.min(end);
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match &st.pieces[p] {
                // A saved piece read to its end is not needed again: it is taken out, then
                // copied and freed after the lock (a free can make the allocator hand memory
                // back to the system: milliseconds of `madvise`, which every writer of the
                // array would wait for).
                Piece::Saved(_) if upto == stop => {
                    let saved = core::mem::replace(&mut st.pieces[p], Piece::Read);
                    drop(st);
                    if let Piece::Saved(b) = saved {
                        out.extend_from_slice(&b.0[at - start..upto - start]);
                    }
                }
                Piece::Saved(b) => out.extend_from_slice(&b.0[at - start..upto - start]),
                // SAFETY: `addr..addr + len` is the guarded array, alive until the guard frees
                // it (an owner that drops it first hands it to the guard, see `Storage::drop`).
                // Writers change it only under this lock, which we hold, and only pieces that
                // are `Saved` or `Read`: this one is `Live`, so nobody changes these bytes.
                Piece::Live => {
                    out.extend_from_slice(unsafe {
                        core::slice::from_raw_parts((self.addr + at) as *const u8, upto - at)
                    });
                    if upto == stop {
                        st.pieces[p] = Piece::Read;
                    }
                }
                Piece::Read => panic!("piece {p} of a guarded array read twice"),
            }
            at = upto;
        }
    }
}

/// A snapshot's hold on a guarded array: dropping it ends the guard (and frees the array if
/// its owner dropped it meanwhile).
#[derive(Debug)]
pub struct CowHandle(Arc<CowGuard>);

impl core::ops::Deref for CowHandle {
    type Target = CowGuard;
    fn deref(&self) -> &CowGuard {
        &self.0
    }
}

impl Drop for CowHandle {
    fn drop(&mut self) {
        let mut all = guards();
        if let Some(i) = all.iter().position(|(_, g)| Arc::ptr_eq(g, &self.0)) {
            all.swap_remove(i);
            GUARDED.fetch_sub(1, Ordering::AcqRel);
        }
        drop(all);
        let orphan = self.0.state.lock().unwrap_or_else(|e| e.into_inner()).orphan.take();
        if let Some(free) = orphan {
            free();
        }
    }
}

impl<T: Zeroable + Copy> Storage<T> {
    /// A guard for reading this array's bytes (its values as they lie in memory) as they are
    /// now while the values keep changing, when it is large (in its own huge-page allocation)
    /// and not guarded already; `None` otherwise (the caller copies it). Writers must then take
    /// [`Storage::cow_guard`]'s lock for every change, and save the values they change first
    /// ([`CowWriter::before_write_values`]).
    pub fn freeze(&self) -> Option<CowHandle> {
        let Repr::Huge { ptr, len } = self.repr else { return None };
        let len = len * core::mem::size_of::<T>();
        let addr = ptr.as_ptr() as usize;
        let mut all = guards();
        if all.iter().any(|(a, _)| *a == addr) {
            return None;
        }
        let pieces = (0..len.div_ceil(COW_PIECE)).map(|_| Piece::Live).collect();
        let g = Arc::new(CowGuard { addr, len, state: Mutex::new(CowState { pieces, orphan: None }) });
        all.push((addr, g.clone()));
        GUARDED.fetch_add(1, Ordering::AcqRel);
        Some(CowHandle(g))
    }

    /// The guard of this array, if a snapshot is reading it: one atomic load when none is.
    #[inline]
    pub(crate) fn cow_guard(&self) -> Option<Arc<CowGuard>> {
        match self.repr {
            Repr::Huge { ptr, .. } => guard_of(ptr.as_ptr() as usize),
            Repr::Plain(_) => None,
        }
    }
}

impl<T: Zeroable + Copy> Clone for Storage<T> {
    /// A copy in the same kind of storage. Cloning is infallible by `Clone`'s signature, so an
    /// allocation failure here aborts, as it does for `Vec::clone`.
    fn clone(&self) -> Self {
        let mut s =
            if self.is_huge() { Self::zeroed_huge(self.len()) } else { Self::zeroed_plain(self.len()) }
                .unwrap_or_else(|_| {
                    std::alloc::handle_alloc_error(
                        core::alloc::Layout::array::<T>(self.len())
                            .unwrap_or(core::alloc::Layout::new::<T>()),
                    )
                });
        s.copy_from_slice(self);
        s
    }
}

impl<T: Zeroable + PartialEq> PartialEq for Storage<T> {
    /// Equal contents, whatever the kind of storage.
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Zeroable + Eq> Eq for Storage<T> {}

impl<'a, T: Zeroable> IntoIterator for &'a Storage<T> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Hints the CPU to bring the cache line holding `ptr` into L1 ahead of use. A no-op on targets
/// without a prefetch instruction.
#[inline(always)]
pub(crate) fn prefetch<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it never faults, whatever the address, and SSE is part of
    // the x86_64 baseline. The fallback on other targets is to do nothing, which is always correct.
    unsafe {
        core::arch::x86_64::_mm_prefetch(ptr as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Position of the `k`-th (0-based) set bit of `x`, or 64 if `x` has at most `k` set bits: the
/// *select* of a rank-and-select bit vector (the quotient filter's run ends).
///
/// With BMI2 (detected at run time) this is `tzcnt(pdep(1 << k, x))` (Pandey, Bender & Johnson,
/// "A fast x86 implementation of select", 2017); elsewhere [`select64_portable`], which gives the
/// same answer (tested below on random words and every `k`).
#[inline]
pub(crate) fn select64(x: u64, k: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("bmi2") {
            // SAFETY: the CPU supports BMI2 (checked just above; the result of the detection is
            // cached by std, so the check is one load and a branch), which is the only
            // requirement of `select64_bmi2`.
            return unsafe { select64_bmi2(x, k) };
        }
    }
    select64_portable(x, k)
}

/// [`select64`] with the BMI2 `pdep` instruction: deposit a single 1 at the `k`-th set bit of `x`.
/// Inlined into callers compiled with BMI2 (the quotient filter's POPCNT/BMI2 paths), where
/// a call would cost more than the two instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
#[inline]
unsafe fn select64_bmi2(x: u64, k: u32) -> u32 {
    if k >= 64 {
        return 64;
    }
    // `_pdep_u64` is safe to call inside a function compiled with BMI2 enabled.
    core::arch::x86_64::_pdep_u64(1u64 << k, x).trailing_zeros()
}

/// [`select64`] without special instructions: halve the word by population counts down to a
/// byte, then clear the lowest set bits of that byte.
#[inline]
pub(crate) fn select64_portable(x: u64, k: u32) -> u32 {
    if k >= x.count_ones() {
        return 64;
    }
    let (mut k, mut pos) = (k, 0u32);
    let c = (x as u32).count_ones();
    if k >= c {
        k -= c;
        pos = 32;
    }
    let c = ((x >> pos) as u16).count_ones();
    if k >= c {
        k -= c;
        pos += 16;
    }
    let c = ((x >> pos) as u8).count_ones();
    if k >= c {
        k -= c;
        pos += 8;
    }
    let mut y = (x >> pos) as u8;
    for _ in 0..k {
        y &= y - 1;
    }
    pos + y.trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_evenly_spaced_runs_from_the_first_unit_to_the_last() {
        let one = |len, run, max| {
            let all: Vec<_> = sample_runs(len, run, max).collect();
            assert_eq!(all.len(), 1, "{len} {run} {max}");
            all[0].clone()
        };
        assert_eq!(one(10, 4, 10), 0..10, "small: the whole");
        assert_eq!(one(0, 4, 10), 0..0);
        assert_eq!(one(3, 8, 2), 0..3, "a run longer than the array");
        for (len, run, max) in [(1_000_003usize, 64, 4096), (1 << 30, 4096, 4 << 20), (8194, 4096, 8192)] {
            let runs: Vec<_> = sample_runs(len, run, max).collect();
            assert_eq!(runs.len(), max / run, "{len}");
            assert_eq!(runs[0].start, 0);
            assert_eq!(runs.last().unwrap().end, len, "the last run ends at the last unit");
            assert!(runs.iter().all(|r| r.len() == run));
            assert!(runs.windows(2).all(|w| w[0].end <= w[1].start), "sorted, disjoint: {len}");
            let gaps: Vec<usize> = runs.windows(2).map(|w| w[1].start - w[0].start).collect();
            let (lo, hi) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
            assert!(hi - lo <= 1, "evenly spaced: gaps {lo}..={hi}");
        }
    }

    thread_local! {
        /// The guard whose saved pieces this thread's test watches, and how many of them were
        /// freed with its lock free and held.
        static WATCHED: std::cell::RefCell<Option<(Arc<CowGuard>, usize, usize)>> =
            const { std::cell::RefCell::new(None) };
    }

    /// Called when saved bytes are dropped (see `SavedBytes`).
    pub(super) fn saved_bytes_freed() {
        WATCHED.with(|w| {
            if let Some((g, free, held)) = w.borrow_mut().as_mut() {
                match g.state.try_lock() {
                    Ok(_) => *free += 1,
                    Err(_) => *held += 1,
                }
            }
        });
    }

    /// The snapshot frees a piece a writer saved after it lets go of the guard's lock: a free
    /// can hand memory back to the system (`madvise`, `munmap`: 40 ms and more were seen with
    /// a gigabyte of saved pieces), and every writer of the array waits for that lock.
    #[test]
    fn a_saved_piece_is_freed_after_the_guards_lock() {
        let n = 3 * COW_PIECE / 8;
        let mut s: Storage<u64> = Storage::zeroed_huge(n).unwrap();
        let Some(h) = s.freeze() else {
            if cfg!(target_os = "linux") {
                panic!("huge storage freezes on Linux");
            }
            return;
        };
        for i in [0, n / 2] {
            let g = s.cow_guard().expect("guarded");
            let mut w = g.writer();
            w.before_write_values(&s, i..i + 1);
            drop(w);
            s[i] = 7;
        }
        WATCHED.with(|w| *w.borrow_mut() = Some((h.0.clone(), 0, 0)));
        let mut out = Vec::new();
        h.read(0, 3 * COW_PIECE, &mut out);
        let (_, free, held) = WATCHED.with(|w| w.borrow_mut().take()).unwrap();
        assert_eq!((free, held), (2, 0), "both saved pieces freed, neither under the lock");
        assert!(out.len() == 3 * COW_PIECE && out.iter().all(|&b| b == 0), "the bytes of the freeze");
    }

    #[test]
    fn set_get_count() {
        let mut b = BitVec::zeroed(130).unwrap();
        assert!(b.set(0));
        assert!(!b.set(0));
        assert!(b.set(129));
        assert!(b.get(129) && b.get(0) && !b.get(64));
        assert_eq!(b.count_ones(), 2);
    }

    #[test]
    fn byte_image_round_trip_and_layout() {
        let mut b = BitVec::zeroed(100).unwrap();
        b.set(9);
        let mut out = Vec::new();
        b.write_le(&mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(out[1], 0b10, "bit 9 is bit 1 of byte 1");
        assert_eq!(BitVec::from_le_bytes(100, &out).unwrap(), b);
        out[15] = 0x80; // bit 127, past the end
        assert!(BitVec::from_le_bytes(100, &out).is_err());
        assert!(BitVec::from_le_bytes(100, &out[..8]).is_err());
    }

    #[test]
    fn absurd_sizes_are_errors() {
        assert!(matches!(BitVec::zeroed(u64::MAX), Err(Error::CapacityExceeded { .. })));
        assert!(matches!(try_zeroed::<u64>(usize::MAX / 4), Err(Error::CapacityExceeded { .. })));
    }

    #[test]
    fn huge_and_plain_storage_agree() {
        // 5 MiB of words: above the threshold, so on Linux `zeroed` picks the huge kind.
        let n = (5 << 20) / 8;
        let auto: Storage<u64> = Storage::zeroed(n).unwrap();
        assert_eq!(auto.is_huge(), cfg!(target_os = "linux"));
        let mut huge: Storage<u64> = Storage::zeroed_huge(n).unwrap();
        let mut plain: Storage<u64> = Storage::zeroed_plain(n).unwrap();
        assert_eq!(huge.len(), n);
        assert!(huge.iter().all(|&w| w == 0));
        if huge.is_huge() {
            assert_eq!(huge.as_ptr() as usize % HUGE_ALIGN, 0, "huge storage is 2 MiB-aligned");
        }
        assert!(huge == plain);
        let mut st = 7u64;
        for _ in 0..100_000 {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let i = (st >> 33) as usize % n;
            huge[i] |= st;
            plain[i] |= st;
        }
        assert!(huge == plain);
        let c = huge.clone();
        assert_eq!(c.is_huge(), huge.is_huge());
        assert!(c == plain);
        // Bit arrays: a big one uses huge storage and matches its plain copy bit for bit.
        let mut b = BitVec::zeroed(64 * n as u64).unwrap();
        assert_eq!(b.is_huge(), cfg!(target_os = "linux"));
        let mut p = b.with_plain_storage();
        assert!(!p.is_huge());
        for i in (0..64 * n as u64).step_by(997) {
            assert_eq!(b.set(i), p.set(i));
        }
        assert_eq!(b, p);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        b.write_le(&mut x);
        p.write_le(&mut y);
        assert_eq!(x, y);
        // Small arrays stay plain.
        assert!(!Storage::<u64>::zeroed(1000).unwrap().is_huge());
        assert!(Storage::<u64>::zeroed(0).unwrap().is_empty());
        assert!(Storage::<u64>::zeroed_huge(0).unwrap().is_empty());
    }

    #[test]
    fn absurd_storage_sizes_are_errors() {
        assert!(matches!(Storage::<u64>::zeroed(usize::MAX / 4), Err(Error::CapacityExceeded { .. })));
        assert!(Storage::<u64>::zeroed_huge(usize::MAX / 4).is_err());
    }

    #[test]
    fn select64_fast_and_portable_agree() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut words = vec![0u64, 1, u64::MAX, 1 << 63, 0x8000_0000_0000_0001];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Sparse and dense words as well as uniform ones.
            words.push(x);
            words.push(x & x.rotate_left(17) & x.rotate_left(41));
            words.push(x | x.rotate_left(23));
        }
        for &w in &words {
            let mut y = w;
            for k in 0..66u32 {
                let want = if y == 0 { 64 } else { y.trailing_zeros() };
                assert_eq!(select64_portable(w, k), want, "portable {w:#x} k {k}");
                assert_eq!(select64(w, k), want, "dispatched {w:#x} k {k}");
                y &= y.wrapping_sub(1);
            }
        }
    }
}
