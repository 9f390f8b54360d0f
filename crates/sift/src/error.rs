//! The one error type of the library.
//!
//! Every fallible operation returns [`Error`]. Variants are structured so that callers can match
//! on them (a server maps them to protocol replies, a CLI to exit codes) and their messages say how
//! to fix the problem.

use crate::kind::FilterKind;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Everything that can go wrong in `sift`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A construction parameter is out of its domain (n = 0, p outside (0, 1), NaN, k = 0 ...).
    #[error("invalid parameter `{name}` = {value}: {expected}")]
    InvalidParameter {
        /// Name of the parameter, as in the constructor's signature (`expected_items`, `fpr`, ...).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What a valid value looks like.
        expected: &'static str,
    },

    /// The requested filter is larger than this platform can address, or larger than a hard
    /// limit of the filter family.
    #[error(
        "a filter of {requested_bytes} bytes is too large (limit {limit_bytes} bytes); \
         lower the expected item count or raise the false-positive rate"
    )]
    CapacityExceeded {
        /// Bytes the parameters would need (saturating).
        requested_bytes: u128,
        /// The largest size allowed here.
        limit_bytes: u128,
    },

    /// The allocator refused the memory for a filter (`try_reserve` failed).
    #[error("could not allocate {bytes} bytes for the filter: out of memory")]
    OutOfMemory {
        /// Bytes that were requested.
        bytes: usize,
    },

    /// The filter cannot take more items (a non-scaling or fixed-capacity filter is full).
    #[error("the filter is full ({len} items); build a larger one or use a scalable filter")]
    Full {
        /// Items the filter holds.
        len: usize,
    },

    /// Two filters cannot be combined (union, intersection, merge) because their shapes differ.
    #[error(
        "filters are incompatible: {reason}; both must have the same size, hash count and hash function"
    )]
    Incompatible {
        /// Which property differs.
        reason: &'static str,
    },

    /// A static filter (xor, binary fuse) could not be built: peeling failed for every seed
    /// tried. With distinct keys this happens with negligible probability; it means the input
    /// hashes are not well distributed (e.g. a caller-supplied hash that is constant).
    #[error(
        "construction failed after {attempts} seeds: {reason}; check that the item hashes are well distributed"
    )]
    ConstructionFailed {
        /// Number of seeds tried.
        attempts: u32,
        /// What went wrong.
        reason: &'static str,
    },

    /// A static filter (xor, binary fuse, Golomb-coded set) was asked to insert: it is built
    /// once from the whole set.
    #[error("a {kind} filter is static: it is built once from the whole set and takes no inserts")]
    Static {
        /// The kind of the filter.
        kind: FilterKind,
    },

    /// A filter of a kind that cannot delete was asked to remove an item (counting Bloom, the
    /// cuckoo kinds and quotient can).
    #[error("a {kind} filter cannot remove items (counting Bloom, cuckoo and quotient filters can)")]
    CannotRemove {
        /// The kind of the filter.
        kind: FilterKind,
    },

    /// A filter of another system's format refused an insert for that system's reason (a
    /// RedisBloom chain that is full and does not scale, say).
    #[error("the {kind} filter refused the insert: {reason}")]
    InsertRefused {
        /// The kind of the filter.
        kind: FilterKind,
        /// The reason, as that system words it.
        reason: String,
    },

    /// Bytes could not be decoded as a filter.
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// Why a byte string is not a valid `sift` filter file (see `docs/FORMAT.md`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The bytes do not start with the `SIFT` magic: not a sift file.
    #[error("not a sift filter: bad magic bytes {found:02x?} (expected \"SIFT\")")]
    BadMagic {
        /// The first bytes found.
        found: [u8; 4],
    },

    /// The file was written by a format version this build does not read.
    #[error(
        "unsupported format version {got}: this build of sift reads version {expected}; \
         upgrade sift to read this file"
    )]
    UnsupportedVersion {
        /// The version this build writes and reads.
        expected: u16,
        /// The version found in the file.
        got: u16,
    },

    /// The file holds another kind of filter than the one asked for.
    #[error("wrong filter kind: expected {expected}, the file holds {got}")]
    WrongKind {
        /// The kind the caller asked for.
        expected: FilterKind,
        /// The kind code found in the file (printed by name when known).
        got: KindCode,
    },

    /// The header's filter-kind code is not one this build knows.
    #[error("unknown filter kind code {0} (written by a newer sift?)")]
    UnknownKind(u16),

    /// The hash function id in the header is not known to this build.
    #[error("unknown hash function id {0} in header")]
    UnknownHash(u8),

    /// The bytes end before the structure they describe.
    #[error("truncated: {what} needs {needed} bytes, only {available} available")]
    Truncated {
        /// Which part was cut off.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        available: u64,
    },

    /// There are bytes after the end of the filter.
    #[error("{extra} unexpected bytes after the end of the filter")]
    TrailingBytes {
        /// How many extra bytes.
        extra: u64,
    },

    /// The CRC32C trailer does not match the contents: the file is corrupted.
    #[error(
        "checksum mismatch: stored CRC32C {stored:#010x}, computed {computed:#010x}; the file is corrupted"
    )]
    ChecksumMismatch {
        /// CRC stored in the trailer.
        stored: u32,
        /// CRC computed over the bytes.
        computed: u32,
    },

    /// The header is well formed but its parameters are inconsistent or out of range.
    #[error("invalid parameters in header: {0}")]
    InvalidParams(&'static str),
}

/// A raw filter-kind code from a header, displayed by name when this build knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindCode(pub u16);

impl core::fmt::Display for KindCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match FilterKind::from_code(self.0) {
            Some(k) => write!(f, "{k}"),
            None => write!(f, "unknown kind {}", self.0),
        }
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub(crate) fn param(name: &'static str, value: impl core::fmt::Display, expected: &'static str) -> Self {
        Error::InvalidParameter { name, value: value.to_string(), expected }
    }
}

/// Validates an expected item count: at least 1.
pub(crate) fn check_items(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::param("expected_items", n, "at least 1"));
    }
    Ok(())
}

/// Validates a false-positive rate: a finite number strictly between 0 and 1.
pub(crate) fn check_fpr(p: f64) -> Result<()> {
    if !(p > 0.0 && p < 1.0) {
        return Err(Error::param("fpr", p, "a number strictly between 0 and 1, e.g. 0.01"));
    }
    Ok(())
}
