//! Error reply texts of the BF.* and CF.* commands, byte-exact to the spec
//! (`shared/spec/redisbloom.md` §2.2, §8 and §10). Every error a BF/CF command sends is built here.

/// *WRONGTYPE* (spec §2.2).
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// *not found* (spec §2.2).
pub const NOT_FOUND: &str = "ERR not found";
/// *item exists* (spec §2.2).
pub const ITEM_EXISTS: &str = "ERR item exists";

// --- RedisBloom BF.* (spec §8; current RedisBloom, §9) ---

/// BF.RESERVE: the error rate is not a number.
pub const BF_BAD_ERROR_RATE: &str = "ERR bad error rate";
/// BF.RESERVE: the error rate is outside (0, 1).
pub const BF_ERROR_RATE_RANGE: &str = "ERR error rate must be in the range (0.000000, 1.000000)";
/// BF.RESERVE: the capacity is not an integer.
pub const BF_BAD_CAPACITY: &str = "ERR bad capacity";
/// BF.RESERVE: the capacity is outside [1, 2^30].
pub const BF_CAPACITY_RANGE: &str = "ERR capacity must be in the range [1, 1073741824]";
/// BF.RESERVE: `EXPANSION` is the last argument.
pub const BF_NO_EXPANSION: &str = "ERR no expansion";
/// BF.RESERVE: the expansion is not an integer.
pub const BF_BAD_EXPANSION: &str = "ERR bad expansion";
/// BF.RESERVE: the expansion is outside [0, 32768].
pub const BF_EXPANSION_RANGE: &str = "ERR expansion must be in the range [0, 32768]";
/// BF.RESERVE: `NONSCALING` with a non-zero `EXPANSION` (no `ERR` prefix).
pub const BF_NONSCALING_EXPAND: &str = "Nonscaling filters cannot expand";
/// A Bloom chain's first link is invalid.
pub const BF_COULD_NOT_CREATE: &str = "ERR could not create filter";
/// A new filter (BF or CF) could not be allocated.
pub const INSUFFICIENT_MEMORY_CREATE: &str = "ERR Insufficient memory to create filter";
/// BF.ADD and friends: a full non-scaling chain (code −2).
pub const BF_NONSCALING_FULL: &str = "ERR non scaling filter is full";
/// BF.ADD and friends: the chain could not grow (code −1).
pub const BF_PROBLEM_INSERTING: &str = "ERR problem inserting into filter";
/// BF.INSERT: a bad `ERROR` value.
pub const BF_INSERT_BAD_ERROR_RATE: &str = "Bad error rate";
/// BF.INSERT: a bad `EXPANSION` value.
pub const BF_INSERT_BAD_EXPANSION: &str = "Bad expansion";
/// BF.INSERT / CF.INSERT / CF.RESERVE: a bad capacity.
pub const BAD_CAPACITY: &str = "Bad capacity";
/// BF.INSERT / CF.INSERT: a token that is no option.
pub const UNKNOWN_ARGUMENT: &str = "Unknown argument received";
/// BF.INFO: an unknown field.
pub const BF_INVALID_INFO: &str = "Invalid information value";
/// BF.SCANDUMP: a non-integer iterator (no `ERR` prefix).
pub const BF_SCANDUMP_NOT_NUMERIC: &str = "Second argument must be numeric";
/// BF.LOADCHUNK: a non-integer iterator (with `ERR`, unlike SCANDUMP).
pub const BF_LOADCHUNK_NOT_NUMERIC: &str = "ERR Second argument must be numeric";
/// BF.LOADCHUNK: a bad header or iterator.
pub const BF_BAD_DATA: &str = "ERR received bad data";
/// BF.LOADCHUNK: the chunk starts in no link.
pub const BF_NO_LINK: &str = "ERR invalid offset - no link found";
/// BF.LOADCHUNK: the chunk runs past its link.
pub const BF_CHUNK_TOO_BIG: &str = "ERR invalid chunk - Too big for current filter";

// --- RedisBloom CF.* ---

/// CF.RESERVE: MAXITERATIONS is not an integer (or has no value).
pub const CF_PARSE_MAXITERATIONS: &str = "Couldn't parse MAXITERATIONS";
/// CF.RESERVE: MAXITERATIONS is outside [1, 65535].
pub const CF_MAXITERATIONS_RANGE: &str = "MAXITERATIONS: value must be in the range [1, 65535]";
/// CF.RESERVE: BUCKETSIZE is not an integer (or has no value).
pub const CF_PARSE_BUCKETSIZE: &str = "Couldn't parse BUCKETSIZE";
/// CF.RESERVE: EXPANSION is not an integer (or has no value).
pub const CF_PARSE_EXPANSION: &str = "Couldn't parse EXPANSION";
/// CF.RESERVE: EXPANSION is outside [0, 32768].
pub const CF_EXPANSION_RANGE: &str = "EXPANSION: value must be in the range [0, 32768]";
/// CF.RESERVE: the capacity is below `2·BUCKETSIZE` or above 2^30 (literal text).
pub const CF_RESERVE_CAPACITY_RANGE: &str = "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]";
/// CF.INSERT: CAPACITY outside [lower bound of cf-initial-size, 2^30] (literal text).
pub const CF_INSERT_CAPACITY_RANGE: &str = "Capacity must be in the range [cf-bucket-size * 2, 1073741824]";
/// A cuckoo filter could not be created for another reason than memory (capital C).
pub const CF_COULD_NOT_CREATE: &str = "ERR Could not create filter";
/// CF writes: the filter already has `cf-max-expansions` sub-filters.
pub const CF_MAX_EXPANSIONS: &str = "Maximum expansions reached";
/// CF.ADD / CF.ADDNX: no room and no expansion.
pub const CF_FULL: &str = "Filter is full";
/// CF.ADD / CF.ADDNX: the filter could not grow.
pub const CF_INSUFFICIENT_MEMORY: &str = "ERR Insufficient memory";
/// CF.DEL on a missing key or another type.
pub const CF_DEL_NOT_FOUND: &str = "Not found";
/// CF.COMPACT on a missing key or another type.
pub const CF_COMPACT_NOT_FOUND: &str = "Cuckoo filter was not found";
/// CF.SCANDUMP / CF.LOADCHUNK: a bad position.
pub const CF_INVALID_POSITION: &str = "Invalid position";
/// CF.LOADCHUNK: a header that is not 38 bytes.
pub const CF_INVALID_HEADER: &str = "Invalid header";
/// CF.LOADCHUNK: a header that fails validation or allocation.
pub const CF_COULD_NOT_CREATE_LOAD: &str = "Couldn't create filter!";
/// CF.LOADCHUNK: a chunk that does not fit.
pub const CF_COULD_NOT_LOAD_CHUNK: &str = "Couldn't load chunk!";

/// CF.RESERVE: BUCKETSIZE outside [1, `max`], `max` being the current upper bound of
/// `cf-bucket-size` (spec §3).
pub fn cf_bucketsize_range(max: i64) -> String {
    format!("BUCKETSIZE: value must be in the range [1, {max}]")
}

/// *arity(name)*: `name` is the registered lower-case name (`bf.add`, `client|setname`).
pub fn arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}
