//! Pieces shared by the two `SCANDUMP` / `LOADCHUNK` formats (spec §7): the chunk size, limits
//! for loading untrusted headers, and little-endian field access on packed headers.

/// Largest chunk `SCANDUMP` returns: 16 MiB (§7).
pub const MAX_CHUNK: usize = 16 * 1024 * 1024;

/// Length of a cuckoo `SCANDUMP` header (§7.2).
pub const CF_HEADER_LEN: usize = 38;

/// Bounds applied when a filter is rebuilt from an untrusted `LOADCHUNK` header.
///
/// RedisBloom allocates whatever a header declares. A server must not: a 60-byte header can
/// declare petabytes. `max_bytes` caps the total of the bit arrays or slot arrays a header may
/// ask for (a server passes what its memory budget allows); a larger header is refused before
/// anything is allocated, as if the allocation had failed (which is how RedisBloom would refuse it
/// on a machine without that much memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// Largest total payload (all links' bitmaps, or all sub-filters' slot arrays) in bytes.
    pub max_bytes: u64,
    /// Upper bound of a cuckoo header's `bucketSize`: the current upper bound of the
    /// `cf-bucket-size` configuration parameter, `min(cf-initial-size / 2, 255)` (§3, §7.2).
    pub cf_max_bucket_size: u16,
}

impl LoadLimits {
    /// The default budget: 4 GiB of payload, bucket sizes up to 255.
    pub const DEFAULT: LoadLimits = LoadLimits { max_bytes: 1 << 32, cf_max_bucket_size: 255 };
}

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits::DEFAULT
    }
}

/// Reads fixed-width little-endian fields from a packed header whose length was checked first.
pub(crate) struct Fields<'a>(pub(crate) &'a [u8]);

impl Fields<'_> {
    pub(crate) fn u8(&self, at: usize) -> u8 {
        self.0[at]
    }
    pub(crate) fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.0[at..at + 2].try_into().expect("2 bytes"))
    }
    pub(crate) fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().expect("4 bytes"))
    }
    pub(crate) fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }
    pub(crate) fn f64(&self, at: usize) -> f64 {
        f64::from_bits(self.u64(at))
    }
}

/// A filter's byte array (a Bloom link's bitmap, a cuckoo sub-filter's slots) as it was when a
/// snapshot froze it: a small array copied at once, a large one (in its own huge-page
/// allocation) guarded piece by piece, its writers copying aside only the pieces they reach
/// before the snapshot has read them ([`crate::bits::CowGuard`]).
#[derive(Debug)]
pub(crate) enum FrozenBytes {
    Copied(Vec<u8>),
    Guarded(crate::bits::CowHandle),
}

impl FrozenBytes {
    /// Freezes `bytes`: guarded when it can be, else copied.
    pub(crate) fn of(bytes: &crate::bits::Storage<u8>) -> Self {
        match bytes.freeze() {
            Some(h) => FrozenBytes::Guarded(h),
            None => FrozenBytes::Copied(bytes.to_vec()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            FrozenBytes::Copied(v) => v.len(),
            FrozenBytes::Guarded(g) => g.len(),
        }
    }

    /// Appends bytes `from..from + n` as they were when frozen. A guarded array's bytes are read
    /// once each (see [`crate::bits::CowGuard::read`]).
    pub(crate) fn read(&self, from: usize, n: usize, out: &mut Vec<u8>) {
        // Grown here, not while a piece is read under the guard's lock.
        out.reserve(n);
        match self {
            FrozenBytes::Copied(v) => out.extend_from_slice(&v[from..from + n]),
            FrozenBytes::Guarded(g) => g.read(from, n, out),
        }
    }
}
