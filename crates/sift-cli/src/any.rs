//! Any filter a `sift` file can hold is the library's [`sift::AnyFilter`]; this module adds what
//! the command line needs of it: loading a file with its messages, inserting a key unless it is
//! present (with the hints of a full filter), and what `inspect` prints.

use anyhow::{anyhow, bail, Context, Result};
use sift::format;
use sift::hash::Digest;
use sift::prelude::*;
pub use sift::AnyFilter;

/// What the command line does with a filter of any kind, beyond the library's own methods.
pub trait AnyFilterExt: Sized {
    /// Decodes a `sift` file of any kind (header first, then the family's own verified
    /// decoder).
    fn decode(bytes: &[u8]) -> Result<Self>;

    /// Loads a `sift` file.
    fn load(path: &std::path::Path) -> Result<Self>;

    /// Whether the key with this digest (from [`AnyFilter::hasher`]) may be present, at time
    /// `now` for a window by time (the other kinds do not depend on it).
    fn digest_present(&self, d: Digest, now: u64) -> bool;

    /// Whether the key may be present, at time `now` for a window by time.
    fn present_at(&self, key: &[u8], now: u64) -> bool;

    /// The filter's own clock (the time of its last insertion) for a window by time.
    fn timed_clock(&self) -> Option<u64>;

    /// Inserts the key unless the filter already reports it: `Ok(true)` if it was new. A full
    /// fixed-size filter is an error.
    fn insert_new(&mut self, key: &[u8], digest: Option<Digest>) -> Result<bool>;

    /// [`AnyFilterExt::insert_new`] for every key of a chunk, in order, appending to `out`
    /// whether each was new. The same answers as calling `insert_new` key by key (the family
    /// is matched once per chunk, not once per key).
    fn insert_new_chunk(&mut self, c: &crate::input::Chunk, out: &mut Vec<bool>) -> Result<()>;

    /// Moves a window by time's clock to `now` (slices retire, generations start), so that
    /// the insertions that follow are at `now`; the other kinds do not depend on time.
    fn advance_to(&mut self, now: u64);

    /// What [`AnyFilter::current_fpr`] is computed from, for `inspect`.
    fn fpr_basis(&self) -> &'static str;

    /// How many distinct keys the bits set say a fixed-size Bloom-family filter holds (Swamidass
    /// & Baldi's estimate; infinite once every bit is set). `None` for the families that store
    /// and count each item (and refuse inserts when full) or grow.
    fn estimated_distinct(&self) -> Option<f64>;

    /// Kind-specific parameters and state, as `(name, value)` pairs for `inspect`; a window by
    /// time is described as of time `now`.
    fn details(&self, now: u64) -> Vec<(&'static str, serde_json::Value)>;
}

impl AnyFilterExt for AnyFilter {
    fn decode(bytes: &[u8]) -> Result<AnyFilter> {
        Ok(AnyFilter::from_bytes(bytes)?)
    }

    fn load(path: &std::path::Path) -> Result<AnyFilter> {
        let bytes = crate::input::read_file(path)?;
        let p = path.display();
        if !bytes.starts_with(&format::MAGIC) {
            bail!(
                "{p} is not a sift file (it does not start with SIFT): `sift inspect {p}` tells what it holds, and `sift convert {p} -o F.sift` makes a sift file of a RedisBloom, RDB, Guava or Parquet filter"
            );
        }
        AnyFilter::decode(&bytes).with_context(|| format!("{p}: not a valid sift file"))
    }

    fn digest_present(&self, d: Digest, now: u64) -> bool {
        match self {
            AnyFilter::TimeLimited(f) => f.contains_digest_at(d, now),
            other => other.contains_digest(d).expect("digests only for native filters"),
        }
    }

    fn present_at(&self, key: &[u8], now: u64) -> bool {
        match self {
            AnyFilter::TimeLimited(f) => f.contains_at(key, now),
            other => other.contains(key),
        }
    }

    fn timed_clock(&self) -> Option<u64> {
        match self {
            AnyFilter::TimeLimited(f) => Some(f.clock()),
            _ => None,
        }
    }

    fn insert_new(&mut self, key: &[u8], digest: Option<Digest>) -> Result<bool> {
        let d = match (digest, self.hasher()) {
            (Some(d), _) => Some(d),
            (None, Some(h)) => Some(h.digest(key)),
            (None, None) => None,
        };
        let full = |len: usize| {
            anyhow!(
                "the filter is full ({len} items); build a larger one (-n/--items) or use scalable-cuckoo (grows, keeps deletes) or scalable-bloom"
            )
        };
        Ok(match self {
            AnyFilter::Bloom(f) => f.insert_digest(d.expect("native")),
            AnyFilter::Blocked(f) => f.insert_digest(d.expect("native")),
            AnyFilter::SplitBlock(f) => f.insert_digest(d.expect("native")),
            AnyFilter::Counting(f) => {
                let d = d.expect("native");
                !f.contains_digest(d) && f.insert_digest(d)
            }
            AnyFilter::Scalable(f) => f.try_insert_digest(d.expect("native"))?,
            AnyFilter::Cuckoo(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|_| full(f.len()))?
                }
            }
            AnyFilter::ScalableCuckoo(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|e| match e {
                        sift::Error::Full { len } => anyhow!(
                            "the scalable cuckoo filter reached its growth limit ({len} items, {} tables); \
                             give a larger --items or use scalable-bloom (no deletes, no limit)",
                            f.num_tables()
                        ),
                        e => anyhow!("{e}"),
                    })?
                }
            }
            AnyFilter::Quotient(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|_| full(f.len()))?
                }
            }
            AnyFilter::RedisBf(f) => f.add(key).map_err(|e| anyhow!("RedisBloom filter: {e}"))?,
            AnyFilter::RedisCf(f) => {
                f.insert_unique(key).map_err(|e| anyhow!("RedisBloom cuckoo filter: {e}"))?
            }
            AnyFilter::Guava(f) => !f.might_contain(key) && f.put(key),
            AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_) => {
                bail!("{} filters are static: they are built once from the whole set", self.kind())
            }
            // Written into the k youngest slices even when present: a repeat is recent again.
            AnyFilter::Aging(f) => f.insert_digest(d.expect("native")),
            // At the filter's clock, which the caller moved to the time of the insertions
            // (`Timed::advance`).
            AnyFilter::TimeLimited(f) => {
                let now = f.clock();
                f.insert_digest_at(d.expect("native"), now)
            }
        })
    }

    fn insert_new_chunk(&mut self, c: &crate::input::Chunk, out: &mut Vec<bool>) -> Result<()> {
        out.reserve(c.len());
        match self {
            AnyFilter::Bloom(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::Blocked(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::SplitBlock(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::Scalable(f) => {
                for &d in &c.digests {
                    out.push(f.try_insert_digest(d)?);
                }
            }
            other => {
                for i in 0..c.len() {
                    out.push(other.insert_new(c.key(i), c.digests.get(i).copied())?);
                }
            }
        }
        Ok(())
    }

    fn advance_to(&mut self, now: u64) {
        if let AnyFilter::TimeLimited(f) = self {
            f.advance(now);
        }
    }

    fn fpr_basis(&self) -> &'static str {
        match self {
            AnyFilter::Bloom(_)
            | AnyFilter::Blocked(_)
            | AnyFilter::SplitBlock(_)
            | AnyFilter::Scalable(_)
            | AnyFilter::RedisBf(_)
            | AnyFilter::Guava(_) => "the bits set",
            AnyFilter::Counting(_) => "the counters set",
            AnyFilter::Cuckoo(_)
            | AnyFilter::ScalableCuckoo(_)
            | AnyFilter::Quotient(_)
            | AnyFilter::RedisCf(_) => "the items stored",
            AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_) => {
                "the fingerprint width (static)"
            }
            AnyFilter::Aging(_) | AnyFilter::TimeLimited(_) => "the sizes of the live slices",
        }
    }

    fn estimated_distinct(&self) -> Option<f64> {
        Some(match self {
            AnyFilter::Bloom(f) => f.estimated_items(),
            AnyFilter::Blocked(f) => f.estimated_items(),
            AnyFilter::SplitBlock(f) => f.estimated_items(),
            AnyFilter::Counting(f) => sift::math::bloom_estimate_items(
                f.num_counters() as f64,
                f.num_hashes() as f64,
                f.nonzero_counters() as f64,
            ),
            AnyFilter::Guava(f) => sift::math::bloom_estimate_items(
                f.bit_size() as f64,
                f.num_hashes() as f64,
                f.bit_count() as f64,
            ),
            _ => return None,
        })
    }

    fn details(&self, now: u64) -> Vec<(&'static str, serde_json::Value)> {
        use serde_json::json;
        match self {
            AnyFilter::Bloom(f) => vec![
                ("bits", json!(f.num_bits())),
                ("hashes", json!(f.num_hashes())),
                ("fill_ratio", json!(f.fill_ratio())),
                ("estimated_items", estimate(f.estimated_items())),
            ],
            AnyFilter::Blocked(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bits", json!(f.num_bits())),
                ("hashes", json!(f.num_hashes())),
                ("fill_ratio", json!(f.fill_ratio())),
                ("estimated_items", estimate(f.estimated_items())),
            ],
            AnyFilter::SplitBlock(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bytes", json!(f.num_bytes())),
                ("hashes", json!(8)),
                ("parquet_size", json!(f.is_parquet_size())),
                ("estimated_items", estimate(f.estimated_items())),
            ],
            AnyFilter::Counting(f) => vec![
                ("counters", json!(f.num_counters())),
                ("hashes", json!(f.num_hashes())),
                ("nonzero_counters", json!(f.nonzero_counters())),
                ("fill_ratio", json!(f.nonzero_counters() as f64 / f.num_counters() as f64)),
                ("saturated_counters", json!(f.saturated_counters())),
            ],
            AnyFilter::Scalable(f) => vec![
                ("layers", json!(f.num_layers())),
                ("initial_capacity", json!(f.initial_capacity())),
                ("growth", json!(f.growth())),
                ("tightening", json!(f.tightening())),
                ("layer_fill_ratios", json!(f.layers().iter().map(|l| l.fill_ratio()).collect::<Vec<_>>())),
            ],
            AnyFilter::Cuckoo(f) => vec![
                ("buckets", json!(f.num_buckets())),
                ("fingerprint_bits", json!(f.fingerprint_bits())),
                ("load_factor", json!(f.load_factor())),
                ("stash", json!(f.stash_len())),
            ],
            AnyFilter::ScalableCuckoo(f) => vec![
                ("tables", json!(f.num_tables())),
                ("growth", json!(f.growth())),
                ("tightening", json!(f.tightening())),
                (
                    "table_fingerprint_bits",
                    json!(f.tables().iter().map(|t| t.fingerprint_bits()).collect::<Vec<_>>()),
                ),
                ("table_load_factors", json!(f.tables().iter().map(|t| t.load_factor()).collect::<Vec<_>>())),
            ],
            AnyFilter::Quotient(f) => vec![
                ("quotients", json!(f.num_quotients())),
                ("slots", json!(f.num_slots())),
                ("remainder_bits", json!(f.remainder_bits())),
                ("load_factor", json!(f.load_factor())),
            ],
            AnyFilter::Xor8(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Fuse8(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("segment_length", json!(f.segment_length())),
                ("segments", json!(f.segment_count())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Fuse16(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("segment_length", json!(f.segment_length())),
                ("segments", json!(f.segment_count())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Gcs(f) => vec![
                ("p_bits", json!(f.p_bits())),
                ("modulus", json!(f.modulus())),
                ("coded_bytes", json!(f.coded_bytes().len())),
                ("coded_bits_per_key", json!(f.coded_bits_per_key())),
            ],
            AnyFilter::RedisBf(f) => {
                let i = f.info();
                vec![
                    ("links", json!(i.filters)),
                    ("capacity", json!(i.capacity)),
                    ("expansion", json!(i.expansion)),
                    ("options", json!(f.options())),
                    ("bf_debug", json!(f.debug_lines())),
                ]
            }
            AnyFilter::RedisCf(f) => {
                let i = f.info();
                vec![
                    ("sub_filters", json!(i.filters)),
                    ("buckets", json!(i.buckets)),
                    ("bucket_size", json!(i.bucket_size)),
                    ("deletes", json!(i.deletes)),
                    ("expansion", json!(i.expansion)),
                    ("max_iterations", json!(i.max_iterations)),
                    ("cf_debug", json!(f.debug_line())),
                ]
            }
            AnyFilter::Guava(f) => vec![
                ("strategy", json!(f.strategy().name())),
                ("hashes", json!(f.num_hashes())),
                ("bit_size", json!(f.bit_size())),
                ("bit_count", json!(f.bit_count())),
                ("fill_ratio", json!(f.bit_count() as f64 / f.bit_size() as f64)),
            ],
            AnyFilter::Aging(f) => {
                let (n, g) = (f.window(), f.generation_size());
                // An item keeps its run of k slices for l = slices - k shifts after its own
                // generation and loses it at the next one.
                let l = u64::from(f.num_slices() - f.num_hashes());
                vec![
                    ("window", json!(n)),
                    (
                        "forgets",
                        json!(format!(
                            "the last {} insertions are always members (at least the window of {n}); an insertion is forgotten at most {} insertions after it, then answers like a key never inserted (repeats of a member do not count: they do not move the window)",
                            l.saturating_mul(g),
                            (l + 1).saturating_mul(g)
                        )),
                    ),
                    ("generation_size", json!(g)),
                    ("current_generation_items", json!(f.current_generation())),
                    ("slices", json!(f.num_slices())),
                    ("live_slices", json!(f.live_slices())),
                    ("hashes", json!(f.num_hashes())),
                    ("rows", json!(f.num_rows())),
                    ("remembers_back_insertions", json!(f.oldest_slice_age())),
                ]
            }
            AnyFilter::TimeLimited(f) => {
                let (ttl, span, clock) = (f.ttl(), f.generation_span(), f.clock());
                let read_at = now.max(clock);
                let ms = crate::clock::is_unix_ms(clock) || (clock == 0 && crate::clock::is_unix_ms(read_at));
                let when =
                    |t: u64| if ms { format!("{t} ({})", crate::clock::utc(t)) } else { t.to_string() };
                let dur =
                    |t: u64| if ms { format!("{t} ({})", crate::clock::span(t)) } else { t.to_string() };
                let mut v = vec![
                    ("ttl", json!(dur(ttl))),
                    ("generation_span", json!(dur(span))),
                    ("clock", json!(when(clock))),
                    ("read_at", json!(when(read_at))),
                    ("forgets", json!(forgets_by_time(read_at, ttl, span, &when))),
                    ("generation_size", json!(f.generation_size())),
                    ("current_generation_items", json!(f.current_generation())),
                    ("slices", json!(f.num_slices())),
                    ("live_slices_at_clock", json!(f.live_slices())),
                    ("hashes", json!(f.num_hashes())),
                    ("rows", json!(f.num_rows())),
                    ("remembers_back", json!(dur(f.oldest_slice_age_at(read_at)))),
                ];
                if now < clock {
                    v.push((
                        "note",
                        json!(format!(
                            "the time asked ({now}) is before the filter's clock: it is read at its clock (it never remembers again what it forgot)"
                        )),
                    ));
                }
                v
            }
        }
    }
}

/// What a window by time read at `at` remembers: items inserted at or after `at - ttl` are
/// members, before `at - ttl - span` forgotten, fading in between (as their slices retire).
fn forgets_by_time(at: u64, ttl: u64, span: u64, when: &dyn Fn(u64) -> String) -> String {
    if at < ttl {
        return format!(
            "every item inserted so far is a member (the time read at is within the first TTL); an item inserted at t is forgotten after t + {ttl} + {span}"
        );
    }
    let from = at - ttl;
    if from < span {
        return format!(
            "items inserted at or after {} are members; older ones fade as their slices retire",
            when(from)
        );
    }
    format!(
        "items inserted at or after {} are members; items inserted before {} are forgotten (answer like keys never inserted; when the filter took more than 1.25x its planned rate, later); between the two they fade as their slices retire",
        when(from),
        when(from - span)
    )
}

/// An estimate of the distinct items from the bits set: a number, or what an infinite one means.
fn estimate(items: f64) -> serde_json::Value {
    if items.is_finite() {
        serde_json::json!(items.round())
    } else {
        serde_json::json!("every bit is set: more than can be estimated")
    }
}
