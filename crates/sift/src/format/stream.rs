//! Writing a filter file to an `io::Write` piece by piece, with the CRC32C computed as the bytes
//! go out: the same bytes as [`Encoder`](super::Encoder), without holding a second copy of a
//! large payload in memory (a 1 GB filter would otherwise need 2 GB to be saved).

use std::io::{self, Write};

use super::{Encoder, FilterKind, HEADER_LEN};
use crate::hash::Hasher;

/// Offset of the payload length field (`u64`) in the header (see the layout in [`super`]).
const PAYLOAD_LEN_AT: usize = 24;

/// Writes one filter file to `W`: the header and parameters at [`StreamEncoder::new`], the
/// payload through [`StreamEncoder::payload`] in as many pieces as wanted, the CRC32C trailer at
/// [`StreamEncoder::finish`]. The bytes are exactly those [`Encoder`](super::Encoder) produces
/// for the same header and payload.
///
/// ```
/// use sift::format::{decode, Encoder, FilterKind, ParamWriter, StreamEncoder};
/// use sift::hash::Hasher;
/// let mut p = ParamWriter::new();
/// p.u64(42);
/// let mut out = Vec::new();
/// let mut s = StreamEncoder::new(&mut out, FilterKind::Bloom, Hasher::default(), p.as_bytes(), 3)?;
/// s.payload(&[1, 2])?;
/// s.payload(&[3])?;
/// s.finish()?;
/// let mut e = Encoder::new(FilterKind::Bloom, Hasher::default(), p.as_bytes(), 3);
/// e.payload().extend_from_slice(&[1, 2, 3]);
/// assert_eq!(out, e.finish());
/// decode(&out).unwrap().verify().unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct StreamEncoder<W: Write> {
    out: W,
    crc: u32,
    payload_len: u64,
    written: u64,
}

impl<W: Write> core::fmt::Debug for StreamEncoder<W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StreamEncoder")
            .field("payload_len", &self.payload_len)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<W: Write> StreamEncoder<W> {
    /// Writes the header of a file of `kind` hashed by `hasher`, with the given parameter block
    /// and a payload of exactly `payload_len` bytes to come.
    pub fn new(
        mut out: W,
        kind: FilterKind,
        hasher: Hasher,
        params: &[u8],
        payload_len: u64,
    ) -> io::Result<Self> {
        // The one header writer is `Encoder::new`; asked for an empty payload it allocates only
        // the header and parameters, and the real payload length goes in its field.
        let mut head = Encoder::new(kind, hasher, params, 0).out;
        debug_assert!(head.len() >= HEADER_LEN);
        head[PAYLOAD_LEN_AT..PAYLOAD_LEN_AT + 8].copy_from_slice(&payload_len.to_le_bytes());
        out.write_all(&head)?;
        Ok(StreamEncoder { out, crc: crc32c::crc32c(&head), payload_len, written: 0 })
    }

    /// Writes the next piece of the payload.
    pub fn payload(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Writes the CRC trailer and returns the writer (not flushed).
    ///
    /// # Panics
    /// If the payload written differs from the length declared in [`StreamEncoder::new`]: a bug
    /// in the filter's writer, as for [`Encoder::finish`](super::Encoder::finish).
    pub fn finish(mut self) -> io::Result<W> {
        assert_eq!(self.written, self.payload_len, "stream encoder wrote a payload of the wrong length");
        self.out.write_all(&self.crc.to_le_bytes())?;
        Ok(self.out)
    }
}

/// Bytes `from .. from + len` (fewer at the end) of the file a [`StreamEncoder`] writes for a
/// file of `kind` hashed by `hasher` with parameter block `params` and a payload of `words`
/// 64-bit words, little-endian, word `i` being `word(i)`: the file of a filter whose payload is
/// an array is addressed by offset, without encoding the bytes before `from` (the header is a
/// few dozen bytes). O(`len`), but for a range that reaches the 4-byte CRC trailer: the CRC
/// covers the whole file, so that range reads every word once. Returns the bytes and the
/// file's length.
pub(crate) fn words_file_range(
    kind: FilterKind,
    hasher: Hasher,
    params: &[u8],
    words: u64,
    word: impl Fn(u64) -> u64,
    from: u64,
    len: usize,
) -> (Vec<u8>, u64) {
    let payload_len = words * 8;
    let mut head = Encoder::new(kind, hasher, params, 0).out;
    head[PAYLOAD_LEN_AT..PAYLOAD_LEN_AT + 8].copy_from_slice(&payload_len.to_le_bytes());
    let head_len = head.len() as u64;
    let payload_end = head_len + payload_len;
    let total = payload_end + 4;
    let end = from.saturating_add(len as u64).min(total);
    let mut out = Vec::with_capacity(end.saturating_sub(from) as usize);
    if from >= end {
        return (out, total);
    }
    if from < head_len {
        out.extend_from_slice(&head[from as usize..end.min(head_len) as usize]);
    }
    let (a, b) = (from.max(head_len) - head_len, end.min(payload_end).saturating_sub(head_len));
    if a < b {
        for i in a / 8..b.div_ceil(8) {
            let bytes = word(i).to_le_bytes();
            let at = i * 8;
            out.extend_from_slice(&bytes[(a.max(at) - at) as usize..(b.min(at + 8) - at) as usize]);
        }
    }
    if end > payload_end {
        let mut crc = crc32c::crc32c(&head);
        let mut buf = Vec::with_capacity(WORD_BUFFER);
        for i in 0..words {
            buf.extend_from_slice(&word(i).to_le_bytes());
            if buf.len() == WORD_BUFFER {
                crc = crc32c::crc32c_append(crc, &buf);
                buf.clear();
            }
        }
        crc = crc32c::crc32c_append(crc, &buf);
        let t = crc.to_le_bytes();
        out.extend_from_slice(
            &t[(from.max(payload_end) - payload_end) as usize..(end - payload_end) as usize],
        );
    }
    (out, total)
}

/// Payloads of 64-bit words go out through a buffer of this many bytes.
pub(crate) const WORD_BUFFER: usize = 1 << 16;

/// Writes `words` as the payload, little-endian, through a [`WORD_BUFFER`]-byte buffer.
pub(crate) fn write_words<W: Write>(
    enc: &mut StreamEncoder<W>,
    words: impl Iterator<Item = u64>,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(WORD_BUFFER);
    for w in words {
        buf.extend_from_slice(&w.to_le_bytes());
        if buf.len() == WORD_BUFFER {
            enc.payload(&buf)?;
            buf.clear();
        }
    }
    enc.payload(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{decode, ParamWriter};
    use crate::hash::HashKind;

    /// A writer that takes at most `max` bytes per call, to cross every piece boundary.
    struct Trickle<'a> {
        out: &'a mut Vec<u8>,
        max: usize,
    }

    impl Write for Trickle<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.max);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn same_bytes_as_the_encoder_for_any_pieces() {
        for params_len in [0usize, 1, 7, 8, 12, 33] {
            for payload_len in [0usize, 1, 5, 64, 1000] {
                let mut p = ParamWriter::new();
                for i in 0..params_len {
                    p.u8(i as u8);
                }
                let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7 + 3) as u8).collect();
                let hasher = Hasher::new(HashKind::Xxh3_64, 0x1234);
                let mut e = Encoder::new(FilterKind::BlockedBloom, hasher, p.as_bytes(), payload_len as u64);
                e.payload().extend_from_slice(&payload);
                let want = e.finish();
                for piece in [1usize, 3, 64, 4096] {
                    let mut got = Vec::new();
                    let w = Trickle { out: &mut got, max: 5 };
                    let mut s = StreamEncoder::new(
                        w,
                        FilterKind::BlockedBloom,
                        hasher,
                        p.as_bytes(),
                        payload_len as u64,
                    )
                    .unwrap();
                    for c in payload.chunks(piece) {
                        s.payload(c).unwrap();
                    }
                    s.finish().unwrap();
                    assert_eq!(got, want, "params {params_len}, payload {payload_len}, piece {piece}");
                    decode(&got).unwrap().verify().unwrap();
                }
            }
        }
    }

    #[test]
    fn words_cross_the_buffer() {
        let n = WORD_BUFFER / 8 * 2 + 3;
        let words: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut e = Encoder::new(FilterKind::Bloom, Hasher::default(), &[], n as u64 * 8);
        for w in &words {
            e.payload().extend_from_slice(&w.to_le_bytes());
        }
        let want = e.finish();
        let mut got = Vec::new();
        let mut s =
            StreamEncoder::new(&mut got, FilterKind::Bloom, Hasher::default(), &[], n as u64 * 8).unwrap();
        write_words(&mut s, words.iter().copied()).unwrap();
        s.finish().unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn write_errors_are_returned() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let err = StreamEncoder::new(Full, FilterKind::Bloom, Hasher::default(), &[], 8).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }

    #[test]
    #[should_panic(expected = "wrong length")]
    fn a_short_payload_is_a_bug() {
        let s = StreamEncoder::new(Vec::new(), FilterKind::Bloom, Hasher::default(), &[], 8).unwrap();
        let _ = s.finish();
    }
}
