//! Where a filter's bits live in Redis: key names, the metadata records, and the mapping from an
//! item to one key and the bit offsets inside it. `docs/REDIS_LAYOUT.md` describes the same thing
//! byte by byte for other languages; the tests here pin the examples given there.

use sift::filters::blocked_bloom::item_bits;
use sift::{Digest, HashKind, Hasher};

use crate::error::{Error, Result};

/// The layout version this crate reads and writes (the `layout` field of a record, and the
/// number in the pointer value).
pub const LAYOUT_VERSION: u64 = 1;

/// The pointer value is this prefix followed by the instance id.
pub const POINTER_PREFIX: &str = "sift-bitmap-bloom:1:";

/// The `format` field of every record.
pub const RECORD_FORMAT: &str = "sift-bitmap-bloom";

/// Bytes per block (one cache line, 512 bits).
pub const BLOCK_BYTES: u64 = 64;

/// Default size of a sub-bitmap: 4 MiB less one block. Redis allocates a string of `n` bytes
/// with a few bytes of header in jemalloc's size class above `n + header`; at exactly 4 MiB the
/// header would push every sub-bitmap into the 5 MiB class (25% wasted), one block less keeps it
/// in the 4 MiB class.
pub const DEFAULT_KEY_BYTES: u64 = 4 * 1024 * 1024 - BLOCK_BYTES;

/// The largest sub-bitmap: Redis strings hold at most 512 MB (`proto-max-bulk-len`), and bit
/// offsets must stay below 2^32.
pub const MAX_KEY_BYTES: u64 = 512 * 1024 * 1024 - BLOCK_BYTES;

/// Integers in records stay below 2^53, so that every JSON reader (JavaScript's and Go's
/// `float64` included) reads them exactly.
pub const MAX_JSON_INT: u64 = 1 << 53;

/// Checks a filter name: non-empty, at most 1024 bytes, and without `{` or `}` (the names of the
/// filter's keys put it inside a Redis Cluster hash tag, which a brace would cut short).
pub fn check_name(name: &[u8]) -> Result<()> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > 1024 {
        "it is longer than 1024 bytes"
    } else if name.iter().any(|&b| b == b'{' || b == b'}') {
        "it contains '{' or '}' (the filter's keys put the name inside a Redis Cluster hash tag)"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName { name: String::from_utf8_lossy(name).into_owned(), reason })
}

/// The key names of one filter instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    name: Vec<u8>,
}

impl Names {
    /// The names of filter `name` (checked with [`check_name`]).
    pub fn new(name: &[u8]) -> Result<Names> {
        check_name(name)?;
        Ok(Names { name: name.to_vec() })
    }

    /// The filter's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The name for messages.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// The pointer key: the name itself. Its value is [`POINTER_PREFIX`] + the instance id.
    pub fn pointer(&self) -> Vec<u8> {
        self.name.clone()
    }

    /// Record `rev` of instance `instance`: `{name}:instance:rev` (same slot as the pointer).
    pub fn record(&self, instance: &str, rev: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.name.len() + instance.len() + 24);
        k.push(b'{');
        k.extend_from_slice(&self.name);
        k.extend_from_slice(b"}:");
        k.extend_from_slice(instance.as_bytes());
        k.push(b':');
        k.extend_from_slice(rev.to_string().as_bytes());
        k
    }

    /// Sub-bitmap `index` of generation `gen`: `{name:instance:gen:index}`. The whole key is the
    /// hash tag, so the sub-bitmaps of a filter spread over the slots of a cluster.
    pub fn data(&self, instance: &str, gen: u64, index: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.name.len() + instance.len() + 48);
        k.push(b'{');
        k.extend_from_slice(&self.name);
        k.push(b':');
        k.extend_from_slice(instance.as_bytes());
        k.push(b':');
        k.extend_from_slice(gen.to_string().as_bytes());
        k.push(b':');
        k.extend_from_slice(index.to_string().as_bytes());
        k.push(b'}');
        k
    }
}

/// Redis Cluster's slot of a key: CRC16/XMODEM of the hash tag (the bytes between the first `{`
/// and the next `}`, when that is not empty) or of the whole key, modulo 16384.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % 16384
}

/// A new random instance id: 16 lower-case hex digits.
pub fn new_instance_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// A new random generation id for a static filter (below 2^53, see [`MAX_JSON_INT`]).
pub fn new_generation_id() -> u64 {
    rand::random::<u64>() % MAX_JSON_INT
}

/// A time window: generation `t / period_ms` takes the writes made at time `t` (ms since the
/// Unix epoch), and reads look at the last `keep` generations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Length of a generation, in milliseconds.
    pub period_ms: u64,
    /// Generations read (the current one included).
    pub keep: u32,
}

impl Window {
    /// The generation (period number) of time `now_ms`.
    pub fn period(&self, now_ms: u64) -> u64 {
        now_ms / self.period_ms
    }

    /// When the keys of period `p` stop being read: the start of period `p + keep`.
    pub fn end_of_reads(&self, p: u64) -> u64 {
        p.saturating_add(self.keep as u64).saturating_mul(self.period_ms)
    }
}

/// One generation of a filter: a full set of sub-bitmaps of one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Its id: in a static filter any number unique in the instance (in key names); in a
    /// windowed filter the first period that has this shape.
    pub id: u64,
    /// Blocks of 512 bits.
    pub blocks: u64,
    /// Bits per item (1 to 16).
    pub k: u32,
    /// The item count it was sized for.
    pub capacity: u64,
    /// The false-positive rate it was sized for (at `capacity` items).
    pub fpr: f64,
    /// Static filters: the time (ms) after which readers ignore it and its keys expire; 0 =
    /// never. Always 0 in windowed filters.
    pub retire_ms: u64,
}

/// One metadata record: the complete state of a filter instance at one revision. Records are
/// written once (`SET NX`) and never changed; a change is a new record with the next revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The instance id (16 hex digits), also in every key name of the instance.
    pub instance: String,
    /// The revision: 0 for the record made at creation.
    pub rev: u64,
    /// The hash function and seed items are hashed with.
    pub hasher: Hasher,
    /// Bytes per sub-bitmap (a multiple of 64); the last one of a generation may be shorter.
    pub key_bytes: u64,
    /// Time generations, or `None` for a static filter.
    pub window: Option<Window>,
    /// The generations, oldest first; writes go to the last (static) or to the current period
    /// with the shape of the last generation whose id is not after it (windowed).
    pub gens: Vec<Generation>,
}

fn hash_name(kind: HashKind) -> &'static str {
    kind.name()
}

fn hash_from_name(name: &str) -> Option<HashKind> {
    [HashKind::Xxh3_64, HashKind::Xxh3_128, HashKind::Xxh64, HashKind::Murmur64A, HashKind::Murmur3_128]
        .into_iter()
        .find(|k| k.name() == name)
}

/// Whether a hash function can be used (SipHash needs a second key half that records do not hold).
pub fn check_hasher(h: Hasher) -> Result<()> {
    if hash_from_name(hash_name(h.kind())).is_none() {
        return Err(Error::Unsupported(format!(
            "hash {} cannot be kept in Redis (supported: xxh3-64, xxh3-128, xxh64, murmur64a, murmur3-128)",
            h.kind().name()
        )));
    }
    Ok(())
}

impl Record {
    /// The JSON text of the record (keys in a fixed order; no whitespace).
    pub fn to_json(&self) -> String {
        use serde_json::json;
        let gens: Vec<serde_json::Value> = self
            .gens
            .iter()
            .map(|g| {
                json!({
                    "id": g.id, "blocks": g.blocks, "k": g.k, "capacity": g.capacity,
                    "fpr": g.fpr, "retire_ms": g.retire_ms,
                })
            })
            .collect();
        let (window_ms, keep) = self.window.map_or((0, 1), |w| (w.period_ms, w.keep));
        // serde_json's map keeps insertion order only with `preserve_order`; write the object by
        // hand so the text is the same everywhere (the document shows it).
        let mut s = String::with_capacity(256);
        s.push('{');
        let fields: [(&str, serde_json::Value); 10] = [
            ("format", json!(RECORD_FORMAT)),
            ("layout", json!(LAYOUT_VERSION)),
            ("instance", json!(self.instance)),
            ("rev", json!(self.rev)),
            ("hash", json!(hash_name(self.hasher.kind()))),
            ("seed", json!(self.hasher.seed().to_string())),
            ("key_bytes", json!(self.key_bytes)),
            ("window_ms", json!(window_ms)),
            ("keep", json!(keep)),
            ("gens", serde_json::Value::Array(vec![])),
        ];
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&serde_json::to_string(k).expect("a string"));
            s.push(':');
            if *k == "gens" {
                s.push('[');
                for (j, g) in gens.iter().enumerate() {
                    if j > 0 {
                        s.push(',');
                    }
                    let o = g.as_object().expect("an object");
                    s.push('{');
                    for (n, key) in ["id", "blocks", "k", "capacity", "fpr", "retire_ms"].iter().enumerate() {
                        if n > 0 {
                            s.push(',');
                        }
                        s.push_str(&format!("\"{key}\":{}", o[*key]));
                    }
                    s.push('}');
                }
                s.push(']');
            } else {
                s.push_str(&v.to_string());
            }
        }
        s.push('}');
        s
    }

    /// Parses and validates a record read from `key`.
    pub fn from_json(key: &[u8], text: &[u8]) -> Result<Record> {
        let foreign =
            |reason: String| Error::Foreign { key: String::from_utf8_lossy(key).into_owned(), reason };
        let v: serde_json::Value =
            serde_json::from_slice(text).map_err(|e| foreign(format!("not a JSON metadata record: {e}")))?;
        let o = v.as_object().ok_or_else(|| foreign("not a JSON object".into()))?;
        if o.get("format").and_then(|f| f.as_str()) != Some(RECORD_FORMAT) {
            return Err(foreign(format!("its \"format\" is not \"{RECORD_FORMAT}\"")));
        }
        let layout =
            o.get("layout").and_then(|l| l.as_u64()).ok_or_else(|| foreign("no \"layout\"".into()))?;
        if layout != LAYOUT_VERSION {
            return Err(Error::UnsupportedLayout { found: layout, supported: LAYOUT_VERSION });
        }
        let int = |o: &serde_json::Map<String, serde_json::Value>, f: &str| -> Result<u64> {
            let n = o
                .get(f)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| foreign(format!("\"{f}\" is missing or not a non-negative integer")))?;
            if n >= MAX_JSON_INT {
                return Err(foreign(format!("\"{f}\" is {n}, not below 2^53")));
            }
            Ok(n)
        };
        let instance = o
            .get("instance")
            .and_then(|x| x.as_str())
            .filter(|s| s.len() == 16 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .ok_or_else(|| foreign("\"instance\" is not 16 lower-case hex digits".into()))?
            .to_string();
        let rev = int(o, "rev")?;
        let hash = o
            .get("hash")
            .and_then(|x| x.as_str())
            .and_then(hash_from_name)
            .ok_or_else(|| foreign("\"hash\" is not a supported hash name".into()))?;
        let seed: u64 = o
            .get("seed")
            .and_then(|x| x.as_str())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| foreign("\"seed\" is not a decimal u64 in a string".into()))?;
        let key_bytes = int(o, "key_bytes")?;
        if key_bytes == 0 || key_bytes % BLOCK_BYTES != 0 || key_bytes > MAX_KEY_BYTES {
            return Err(foreign(format!(
                "\"key_bytes\" {key_bytes} is not a multiple of 64 up to {MAX_KEY_BYTES}"
            )));
        }
        let window_ms = int(o, "window_ms")?;
        let keep = int(o, "keep")?;
        if keep == 0 || keep > 100_000 {
            return Err(foreign(format!("\"keep\" {keep} is not between 1 and 100000")));
        }
        let window = (window_ms > 0).then_some(Window { period_ms: window_ms, keep: keep as u32 });
        let list = o
            .get("gens")
            .and_then(|g| g.as_array())
            .filter(|g| !g.is_empty())
            .ok_or_else(|| foreign("\"gens\" is not a non-empty array".into()))?;
        let mut gens = Vec::with_capacity(list.len());
        for g in list {
            let g = g.as_object().ok_or_else(|| foreign("a generation is not an object".into()))?;
            let k = int(g, "k")?;
            let blocks = int(g, "blocks")?;
            if !(1..=16).contains(&k) || blocks == 0 {
                return Err(foreign(format!(
                    "a generation has blocks {blocks}, k {k} (need blocks ≥ 1, 1 ≤ k ≤ 16)"
                )));
            }
            let fpr = g
                .get("fpr")
                .and_then(|x| x.as_f64())
                .filter(|p| *p > 0.0 && *p < 1.0)
                .ok_or_else(|| foreign("a generation's \"fpr\" is not in (0, 1)".into()))?;
            gens.push(Generation {
                id: int(g, "id")?,
                blocks,
                k: k as u32,
                capacity: int(g, "capacity")?,
                fpr,
                retire_ms: int(g, "retire_ms")?,
            });
        }
        for (i, g) in gens.iter().enumerate() {
            if gens[..i].iter().any(|h| h.id == g.id) {
                return Err(foreign(format!("generation id {} appears twice", g.id)));
            }
            if window.is_some() && i > 0 && gens[i - 1].id >= g.id {
                return Err(foreign("a windowed filter's generations are not in increasing order".into()));
            }
        }
        Ok(Record { instance, rev, hasher: Hasher::new(hash, seed), key_bytes, window, gens })
    }

    /// Blocks per sub-bitmap.
    pub fn blocks_per_key(&self) -> u64 {
        self.key_bytes / BLOCK_BYTES
    }

    /// The generation taking writes at `now_ms`, with the id its keys are named with (the period
    /// in a windowed filter).
    pub fn write_target(&self, now_ms: u64) -> (u64, &Generation) {
        match self.window {
            None => {
                let g = self.gens.last().expect("validated: at least one generation");
                (g.id, g)
            }
            Some(w) => {
                let p = w.period(now_ms);
                (p, self.shape_of_period(p))
            }
        }
    }

    /// The shape of period `p` of a windowed filter: the last generation starting at or before
    /// it (the first one for periods before it, which only a client whose clock runs behind the
    /// creator's writes to).
    fn shape_of_period(&self, p: u64) -> &Generation {
        self.gens.iter().rev().find(|g| g.id <= p).unwrap_or(&self.gens[0])
    }

    /// The generations reads look at `now_ms`, newest first, each with the id its keys are named
    /// with: the live generations of a static filter (not retired), or the last `keep` periods.
    pub fn read_targets(&self, now_ms: u64) -> Vec<(u64, &Generation)> {
        match self.window {
            None => self
                .gens
                .iter()
                .rev()
                .enumerate()
                // The write generation is always read, even if someone retired it.
                .filter(|(i, g)| *i == 0 || g.retire_ms == 0 || g.retire_ms > now_ms)
                .map(|(_, g)| (g.id, g))
                .collect(),
            Some(w) => {
                let p = w.period(now_ms);
                (0..w.keep as u64)
                    .filter_map(|back| p.checked_sub(back))
                    .map(|q| (q, self.shape_of_period(q)))
                    .collect()
            }
        }
    }
}

/// The sub-bitmaps of one generation: how many, and how long each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Blocks of the generation.
    pub blocks: u64,
    /// Blocks per sub-bitmap (the last may hold fewer).
    pub per_key: u64,
}

impl Split {
    /// The split of `blocks` blocks into keys of `key_bytes` bytes.
    pub fn new(blocks: u64, key_bytes: u64) -> Split {
        Split { blocks, per_key: (key_bytes / BLOCK_BYTES).max(1) }
    }

    /// Number of sub-bitmaps.
    pub fn keys(&self) -> u64 {
        self.blocks.div_ceil(self.per_key)
    }

    /// Length in bytes of sub-bitmap `i`.
    pub fn key_len(&self, i: u64) -> u64 {
        (self.blocks - i * self.per_key).min(self.per_key) * BLOCK_BYTES
    }

    /// Sub-bitmap and block inside it of the filter's block `block`.
    pub fn locate(&self, block: u64) -> (u64, u64) {
        (block / self.per_key, block % self.per_key)
    }
}

/// Where one item's bits are in one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spot {
    /// The sub-bitmap.
    pub key: u64,
    /// The block inside the sub-bitmap.
    pub block: u64,
    /// The item's bits as masks over the block's eight little-endian words.
    pub masks: [u64; 8],
}

impl Spot {
    /// Where digest `d` lives in a generation of `blocks` blocks, `k` bits per item, split as
    /// `split`.
    pub fn of(d: Digest, g: &Generation, split: Split) -> Spot {
        // Records are validated (blocks ≥ 1, 1 ≤ k ≤ 16), so item_bits cannot fail; a zero
        // block would be a bug, answered as block 0 rather than a panic.
        let (block, masks) = item_bits(d, g.blocks, g.k).unwrap_or((0, [0; 8]));
        let (key, block) = split.locate(block);
        Spot { key, block, masks }
    }

    /// The item's bits as positions inside its 64-byte block in Redis's bit order (bit 0 is the
    /// most significant bit of byte 0), in increasing order.
    pub fn redis_bits(&self) -> impl Iterator<Item = u32> {
        // Bit j of word w is bit j % 8 (least significant first) of byte 8w + j / 8; Redis
        // numbers the bits of a byte from the most significant. An item has at most 16 bits.
        let mut bits = [0u32; 64];
        let mut n = 0;
        for (w, &m) in self.masks.iter().enumerate() {
            let mut rest = m;
            while rest != 0 && n < bits.len() {
                let j = rest.trailing_zeros();
                rest &= rest - 1;
                bits[n] = (w as u32 * 8 + j / 8) * 8 + (7 - j % 8);
                n += 1;
            }
        }
        bits[..n].sort_unstable();
        bits.into_iter().take(n)
    }

    /// The item's bits as Redis bit offsets inside its sub-bitmap.
    pub fn redis_offsets(&self) -> impl Iterator<Item = u64> + '_ {
        let base = self.block * BLOCK_BYTES * 8;
        self.redis_bits().map(move |b| base + b as u64)
    }

    /// Byte offset of the block inside its sub-bitmap.
    pub fn byte_offset(&self) -> u64 {
        self.block * BLOCK_BYTES
    }

    /// Whether all the item's bits are set in `block`, the 64 bytes of its block (a shorter
    /// slice reads as followed by zeros: Redis returns a missing or short key that way).
    pub fn all_set_in(&self, block: &[u8]) -> bool {
        self.masks.iter().enumerate().all(|(w, &m)| {
            let mut word = [0u8; 8];
            let from = (w * 8).min(block.len());
            let to = (w * 8 + 8).min(block.len());
            word[..to - from].copy_from_slice(&block[from..to]);
            u64::from_le_bytes(word) & m == m
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift::prelude::*;
    use sift::BlockedBloom;

    fn record() -> Record {
        Record {
            instance: "00000000000000ff".into(),
            rev: 0,
            hasher: Hasher::default(),
            key_bytes: 128,
            window: None,
            gens: vec![Generation { id: 0, blocks: 5, k: 7, capacity: 100, fpr: 0.01, retire_ms: 0 }],
        }
    }

    #[test]
    fn names_and_slots() {
        let n = Names::new(b"users").unwrap();
        assert_eq!(n.pointer(), b"users");
        assert_eq!(n.record("00000000000000ff", 3), b"{users}:00000000000000ff:3");
        assert_eq!(n.data("00000000000000ff", 7, 12), b"{users:00000000000000ff:7:12}");
        // The pointer and the records share a slot; the examples of docs/REDIS_LAYOUT.md.
        assert_eq!(slot(b"users"), slot(b"{users}:00000000000000ff:3"));
        assert_eq!(slot(b"users"), 14124);
        assert_eq!(slot(b"{users:00000000000000ff:0:0}"), slot(b"users:00000000000000ff:0:0"));
        assert_eq!(slot(b"123456789"), 12739, "CRC16/XMODEM check value 0x31C3 mod 16384");
        // Redis Cluster specification's examples: an empty tag hashes the whole key; the tag
        // ends at the first '}' after the first '{'.
        assert_eq!(slot(b"{}x"), 10595);
        assert_eq!(slot(b"foo{}{bar}"), 8363);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        for bad in [&b""[..], b"a{b", b"a}b"] {
            assert!(matches!(Names::new(bad), Err(Error::InvalidName { .. })));
        }
        assert!(Names::new(&[b'x'; 1025]).is_err());
    }

    #[test]
    fn records_round_trip_and_refuse_what_they_do_not_know() {
        let mut r = record();
        r.hasher = Hasher::new(HashKind::Xxh3_64, u64::MAX);
        let text = r.to_json();
        assert_eq!(
            text,
            "{\"format\":\"sift-bitmap-bloom\",\"layout\":1,\"instance\":\"00000000000000ff\",\"rev\":0,\
             \"hash\":\"xxh3-64\",\"seed\":\"18446744073709551615\",\"key_bytes\":128,\"window_ms\":0,\"keep\":1,\
             \"gens\":[{\"id\":0,\"blocks\":5,\"k\":7,\"capacity\":100,\"fpr\":0.01,\"retire_ms\":0}]}"
        );
        assert_eq!(Record::from_json(b"k", text.as_bytes()).unwrap(), r);
        let mut w = record();
        w.window = Some(Window { period_ms: 3_600_000, keep: 24 });
        w.gens.push(Generation { id: 7, ..w.gens[0].clone() });
        assert_eq!(Record::from_json(b"k", w.to_json().as_bytes()).unwrap(), w);
        let bad = |from: &str, to: &str| {
            let t = text.replacen(from, to, 1);
            assert_ne!(t, text, "{from}");
            Record::from_json(b"k", t.as_bytes())
        };
        assert!(matches!(
            bad("\"layout\":1", "\"layout\":2"),
            Err(Error::UnsupportedLayout { found: 2, .. })
        ));
        for (from, to) in [
            ("sift-bitmap-bloom", "other"),
            ("xxh3-64", "siphash24"),
            ("\"key_bytes\":128", "\"key_bytes\":100"),
            ("\"k\":7", "\"k\":17"),
            ("\"blocks\":5", "\"blocks\":0"),
            ("\"fpr\":0.01", "\"fpr\":1.0"),
            ("\"keep\":1", "\"keep\":0"),
            ("00000000000000ff", "00000000000000FF"),
            ("\"capacity\":100", "\"capacity\":9007199254740992"),
            ("\"seed\":\"18446744073709551615\"", "\"seed\":1"),
        ] {
            assert!(matches!(bad(from, to), Err(Error::Foreign { .. })), "{from} -> {to}");
        }
        assert!(matches!(Record::from_json(b"k", b"\x00\xff"), Err(Error::Foreign { .. })));
        assert!(matches!(Record::from_json(b"k", b"[1]"), Err(Error::Foreign { .. })));
    }

    #[test]
    fn static_and_windowed_targets() {
        let mut r = record();
        r.gens.push(Generation { id: 99, blocks: 9, retire_ms: 0, ..r.gens[0].clone() });
        r.gens[0].retire_ms = 1000;
        assert_eq!(r.write_target(5).0, 99);
        assert_eq!(r.read_targets(999).iter().map(|t| t.0).collect::<Vec<_>>(), [99, 0]);
        assert_eq!(r.read_targets(1000).iter().map(|t| t.0).collect::<Vec<_>>(), [99]);
        r.window = Some(Window { period_ms: 10, keep: 3 });
        r.gens = vec![
            Generation { id: 5, blocks: 1, retire_ms: 0, ..r.gens[0].clone() },
            Generation { id: 8, blocks: 2, retire_ms: 0, ..r.gens[0].clone() },
        ];
        let (p, g) = r.write_target(85);
        assert_eq!((p, g.blocks), (8, 2));
        let reads: Vec<(u64, u64)> = r.read_targets(85).iter().map(|(p, g)| (*p, g.blocks)).collect();
        assert_eq!(reads, [(8, 2), (7, 1), (6, 1)]);
        assert_eq!(r.write_target(30).1.blocks, 1, "before the first generation: its shape");
        assert_eq!(r.read_targets(5).len(), 1, "no periods before 0");
        assert_eq!(Window { period_ms: 10, keep: 3 }.end_of_reads(8), 110);
    }

    #[test]
    fn splits() {
        let s = Split::new(10, 256);
        assert_eq!((s.per_key, s.keys(), s.key_len(0), s.key_len(2)), (4, 3, 256, 128));
        assert_eq!(s.locate(9), (2, 1));
        assert_eq!(Split::new(8, 256).keys(), 2);
    }

    /// The Redis bits of an item, read back from the file bytes of a `BlockedBloom` holding it,
    /// are set; and setting exactly those bits in a zeroed payload gives that filter's payload.
    #[test]
    fn redis_bits_are_the_file_bits() {
        for k in [1u32, 7, 8, 12, 16] {
            let g = Generation { id: 0, blocks: 11, k, capacity: 10, fpr: 0.01, retire_ms: 0 };
            let split = Split::new(11, 4 * 64);
            let mut f = BlockedBloom::with_params(11, k, Hasher::default()).unwrap();
            let mut payload = vec![0u8; 11 * 64];
            for i in 0..200u32 {
                let d = Hasher::default().digest(&i.to_le_bytes());
                f.insert_digest(d);
                let s = Spot::of(d, &g, split);
                let base = (s.key * split.per_key + s.block) * 64;
                let offs: Vec<u64> = s.redis_offsets().collect();
                assert!(offs.windows(2).all(|w| w[0] < w[1]));
                assert!(offs.len() as u32 <= k && !offs.is_empty());
                for (o, b) in offs.iter().zip(s.redis_bits()) {
                    assert_eq!(*o, s.block * 512 + b as u64);
                    assert!(*o < split.key_len(s.key) * 8);
                    payload[(base + b as u64 / 8) as usize] |= 0x80 >> (b % 8);
                }
                assert!(s.all_set_in(&payload[base as usize..base as usize + 64]));
            }
            let bytes: Vec<u8> = f.words().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(bytes, payload, "k {k}");
        }
    }

    /// The worked example of docs/REDIS_LAYOUT.md, number for number.
    #[test]
    fn the_documented_example() {
        let d = Hasher::default().digest(b"hello");
        assert_eq!((d.h1, d.h2), (0x9555_e855_5c62_dcfd, 0x0bb1_d0a7_6da9_bfc0));
        let g = Generation { id: 0, blocks: 100_000, k: 7, capacity: 50_000, fpr: 0.01, retire_ms: 0 };
        let split = Split::new(g.blocks, DEFAULT_KEY_BYTES);
        assert_eq!(
            (split.per_key, split.keys(), split.key_len(0), split.key_len(1)),
            (65_535, 2, 4_194_240, 2_205_760)
        );
        assert_eq!(sift::hash::fastrange(d.h1, g.blocks), 58_334);
        let s = Spot::of(d, &g, split);
        assert_eq!((s.key, s.block, s.byte_offset()), (0, 58_334, 3_733_376));
        assert_eq!(s.masks, [1, 1 << 63, 1 << 27, 1 << 42, 1 << 45, 1 << 29, 1 << 10, 0]);
        assert_eq!(s.redis_bits().collect::<Vec<_>>(), [7, 120, 156, 237, 298, 346, 397]);
        assert_eq!(
            s.redis_offsets().collect::<Vec<_>>(),
            [29_867_015, 29_867_128, 29_867_164, 29_867_245, 29_867_306, 29_867_354, 29_867_405]
        );
        let s12 = Spot::of(d, &Generation { k: 12, ..g }, split);
        assert_eq!(
            s12.redis_bits().collect::<Vec<_>>(),
            [7, 90, 120, 156, 181, 205, 237, 262, 298, 346, 397, 499]
        );
        let n = Names::new(b"users").unwrap();
        assert_eq!(n.data("0123456789abcdef", 0, 0), b"{users:0123456789abcdef:0:0}");
        assert_eq!(n.record("0123456789abcdef", 0), b"{users}:0123456789abcdef:0");
    }

    #[test]
    fn short_blocks_read_as_zeros() {
        let s = Spot { key: 0, block: 0, masks: [1, 0, 0, 0, 0, 0, 0, 1 << 63] };
        let mut b = [0u8; 64];
        b[0] = 1;
        b[63] = 0x80;
        assert!(s.all_set_in(&b));
        assert!(!s.all_set_in(&b[..63]));
        assert!(!s.all_set_in(&[]));
        assert!(Spot { key: 0, block: 0, masks: [0; 8] }.all_set_in(&[]));
        assert_eq!(s.redis_bits().collect::<Vec<_>>(), [7, 504]);
    }
}
