//! A filter's sift file as it was at one moment, written later while the filter keeps changing
//! (a server's background snapshot): the header and the small parts are copied at the freeze,
//! the large arrays are read afterwards through copy-on-write guards ([`crate::bits::CowGuard`]),
//! and the CRC is computed as the bytes go out.

use std::io::{self, Write};

use super::{Encoder, FilterKind, StreamEncoder, TRAILER_LEN};
use crate::bits::CowHandle;
use crate::hash::Hasher;

/// Bytes of a guarded array read at a time while a frozen file is written: the guard is taken
/// once per piece anyway, and a small buffer keeps the writer's extra memory small.
const READ_BUF: usize = 1 << 20;

/// A sift file frozen at one moment ([`crate::BlockedBloom::freeze`],
/// [`crate::ScalableBloom::freeze`], [`crate::AgingBloom::freeze`], ...): [`FrozenFile::write_to`] writes the bytes
/// [`crate::Persist::to_bytes`] gave at the freeze, however the filter changed since. Dropping
/// it ends the copy-on-write.
#[derive(Debug)]
pub struct FrozenFile {
    kind: FilterKind,
    hasher: Hasher,
    params: Vec<u8>,
    parts: Vec<Part>,
}

/// One part of a frozen file's payload.
#[derive(Debug)]
pub(crate) enum Part {
    /// An array of 64-bit words in memory order, guarded while the snapshot reads it; written
    /// little-endian.
    Words(CowHandle),
    /// An array of 32-bit words in memory order (the rows of the aging filters), guarded while
    /// the snapshot reads it; written little-endian.
    Words32(CowHandle),
    /// The first `len` bytes of a guarded byte array (a cuckoo table without its guard bytes).
    Prefix(CowHandle, u64),
    /// The first `len` bytes (a whole number of words) of a guarded array of 64-bit words in
    /// memory order (a quotient table without its guard word); written little-endian.
    WordsPrefix(CowHandle, u64),
    /// An array of 64-bit words in memory order, guarded while the snapshot reads it; written
    /// big-endian (Guava's `long[]` as Java's `DataOutputStream` writes it).
    WordsBigEndian(CowHandle),
    /// Payload bytes copied at the freeze.
    Bytes(Vec<u8>),
    /// A member file of a chain, preceded by its length as a `u64`.
    Member(FrozenFile),
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Words(g) | Part::Words32(g) | Part::WordsBigEndian(g) => g.len() as u64,
            Part::Prefix(g, len) | Part::WordsPrefix(g, len) => (*len).min(g.len() as u64),
            Part::Bytes(b) => b.len() as u64,
            Part::Member(f) => 8 + f.len(),
        }
    }
}

/// The payload side of a [`StreamEncoder`]: what a member file inside a chain writes to.
struct Payload<'a, W: Write>(&'a mut StreamEncoder<W>);

impl<W: Write> Write for Payload<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.payload(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl FrozenFile {
    /// A file of `kind` hashed by `hasher` with the parameter block `params` and `parts` as its
    /// payload.
    pub(crate) fn new(kind: FilterKind, hasher: Hasher, params: &[u8], parts: Vec<Part>) -> FrozenFile {
        FrozenFile { kind, hasher, params: params.to_vec(), parts }
    }

    fn payload_len(&self) -> u64 {
        self.parts.iter().map(Part::len).sum()
    }

    /// Length of the file in bytes.
    pub fn len(&self) -> u64 {
        let head = Encoder::new(self.kind, self.hasher, &self.params, 0).out.len() as u64;
        head + self.payload_len() + TRAILER_LEN as u64
    }

    /// Whether some array of the file is guarded rather than copied (a frozen filter with none
    /// is only a copy).
    pub(crate) fn is_guarded(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Words(_)
            | Part::Words32(_)
            | Part::Prefix(..)
            | Part::WordsPrefix(..)
            | Part::WordsBigEndian(_) => true,
            Part::Bytes(_) => false,
            Part::Member(f) => f.is_guarded(),
        })
    }

    /// The guard of the `i`-th guarded array, depth first (tests count the pieces it saved).
    #[cfg(test)]
    pub(crate) fn guard(&self, i: usize) -> &crate::bits::CowGuard {
        fn all<'a>(f: &'a FrozenFile, out: &mut Vec<&'a crate::bits::CowGuard>) {
            for p in &f.parts {
                match p {
                    Part::Words(g)
                    | Part::Words32(g)
                    | Part::Prefix(g, _)
                    | Part::WordsPrefix(g, _)
                    | Part::WordsBigEndian(g) => out.push(g),
                    Part::Bytes(_) => {}
                    Part::Member(m) => all(m, out),
                }
            }
        }
        let mut out = Vec::new();
        all(self, &mut out);
        out[i]
    }

    /// The whole file in memory.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out).expect("writing to memory");
        assert_eq!(out.len() as u64, self.len());
        out
    }

    /// Never: a file has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the file. Each guarded array is read once, front to back: call it once.
    pub fn write_to<W: Write>(&self, mut out: W) -> io::Result<()> {
        self.write_dyn(&mut out)
    }

    /// [`FrozenFile::write_to`] through a trait object (a chain's members write into the
    /// chain's encoder: one function for every depth).
    fn write_dyn(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut enc = StreamEncoder::new(out, self.kind, self.hasher, &self.params, self.payload_len())?;
        let mut buf = Vec::new();
        for part in &self.parts {
            match part {
                Part::Bytes(b) => enc.payload(b)?,
                Part::Member(f) => {
                    enc.payload(&f.len().to_le_bytes())?;
                    f.write_dyn(&mut Payload(&mut enc))?;
                }
                Part::Words(g)
                | Part::Words32(g)
                | Part::Prefix(g, _)
                | Part::WordsPrefix(g, _)
                | Part::WordsBigEndian(g) => {
                    // Bytes of a word to put in little-endian order (1: bytes as they are).
                    let word = match part {
                        Part::Words(_) | Part::WordsPrefix(..) => 8,
                        Part::Words32(_) => 4,
                        _ => 1,
                    };
                    // Words to put in big-endian order instead: reversed on a little-endian host.
                    let big = matches!(part, Part::WordsBigEndian(_));
                    let len = part.len() as usize;
                    buf.reserve(READ_BUF.min(len));
                    let mut at = 0;
                    while at < len {
                        let n = READ_BUF.min(len - at);
                        buf.clear();
                        g.read(at, n, &mut buf);
                        if cfg!(target_endian = "big") && word > 1 {
                            for w in buf.chunks_exact_mut(word) {
                                w.reverse();
                            }
                        }
                        if big && cfg!(target_endian = "little") {
                            for w in buf.chunks_exact_mut(8) {
                                w.reverse();
                            }
                        }
                        enc.payload(&buf)?;
                        at += n;
                    }
                }
            }
        }
        enc.finish()?;
        Ok(())
    }
}

/// A kind of write, by name, for [`assert_each_write_keeps_frozen`] and [`assert_each_write_keeps`].
#[cfg(test)]
pub(crate) type NamedWrite<'a, F> = (&'static str, Box<dyn Fn(&mut F) + 'a>);

/// The filters' copy-on-write test: each write, alone on a fresh large filter from `make` frozen
/// just before it, must change the live filter and leave the frozen file as it was at the
/// freeze, whether the filter is dropped before the file is written or not. One write at a
/// time, so that a write skipping its guard changes pieces no other write saved, and fails.
#[cfg(test)]
pub(crate) fn assert_each_write_keeps_frozen<F>(
    make: &dyn Fn() -> F,
    to_bytes: fn(&F) -> Vec<u8>,
    freeze: fn(&F) -> Option<FrozenFile>,
    ops: &[NamedWrite<'_, F>],
) {
    assert_each_write_keeps(make, &to_bytes, &freeze, &FrozenFile::to_vec, ops);
}

/// [`assert_each_write_keeps_frozen`] for any frozen view `Z` of a value `F` (a sketch's frozen
/// counters, buckets or nodes), `read` and `read_frozen` being what a snapshot would write of
/// the live value and of the frozen view.
#[cfg(test)]
pub(crate) fn assert_each_write_keeps<F, Z>(
    make: &dyn Fn() -> F,
    read: &dyn Fn(&F) -> Vec<u8>,
    freeze: &dyn Fn(&F) -> Option<Z>,
    read_frozen: &dyn Fn(&Z) -> Vec<u8>,
    ops: &[NamedWrite<'_, F>],
) {
    for (name, op) in ops {
        for drop_first in [false, true] {
            let mut f = make();
            let before = read(&f);
            let frozen = freeze(&f).expect("a large value freezes");
            assert!(freeze(&f).is_none(), "frozen already");
            op(&mut f);
            assert_ne!(read(&f), before, "{name} changed the value");
            if drop_first {
                drop(f);
            }
            assert!(
                read_frozen(&frozen) == before,
                "{name} changed the frozen dump (drop first: {drop_first})"
            );
        }
    }
}
