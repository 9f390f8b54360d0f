//! The append-only log: segment files of framed, checksummed records, one per applied write
//! command, and the scan that reads them back, tells a torn tail from corruption, and proves
//! where a segment ends.
//!
//! ```text
//! segment header, version 2 (64 bytes)
//!      0   8  magic "SIFTLOG\0"
//!      8   2  version (u16, 2)
//!     10   2  flags: bit 0 = group marks (see below)
//!     12   8  segment id (u64)
//!     20   4  CRC32C of bytes 0..20
//!     24  16  size claim, slot 0 ┐ each: sequence (u32, 0 = unused), size (u64),
//!     40  16  size claim, slot 1 ┘ CRC32C (u32) of the segment id (8 bytes) and bytes 0..12
//!     56   8  reserved (0)
//! records, back to back, each:
//!      0   4  payload length N (u32)
//!      4   4  !N (bitwise complement: a damaged length is detected before it is trusted)
//!      8   4  CRC32C of the payload
//!     12   N  payload: argc (u32), then argc × (length u32, bytes)
//! ```
//!
//! Version 1 segments (a 24-byte header: bytes 0..24 above, flags 0, no claims, no marks) are
//! still read. Everything is little-endian. A command payload is the command's argument vector
//! as it must be replayed (`EXPIRE` already rewritten to `PEXPIREAT`, `SET ... EX` to
//! `SET ... PXAT`).
//!
//! # Transactions
//!
//! The writes of an EXEC, or of a script, that wrote more than one record are framed as in
//! Redis's AOF: a record holding the single argument `MULTI` before them and one holding `EXEC`
//! after, all appended as one contiguous unit (no other client's record in between). Recovery
//! applies a frame's records only once its `EXEC` record is read; a log whose last segment ends
//! inside a frame (a crash while the transaction's bytes were being written) loses the whole
//! unacknowledged transaction, and the log is cut back to where its `MULTI` record starts.
//! A write is never logged as a lone `MULTI` or `EXEC` (neither is a write command).
//!
//! # Where a segment ends, provably
//!
//! * **Size claims.** The writer preallocates a segment ahead of its records by writing zeros
//!   and syncing them (see [`super::disk`]); only then does it record the new size in a header
//!   slot (the two slots alternate, the valid one with the higher sequence counts, so a torn
//!   slot write leaves the previous claim). A file shorter than its claim was cut: the records
//!   that were in the missing bytes, if any, are lost ([`SegmentRead::missing`]).
//! * **Segment-end record.** When the log moves to the next segment, the old one gets a last
//!   record, written and synced before anything is written to the next: it counts the records
//!   before it. A closed segment without it, followed by a segment holding records, lost its end.
//! * **Group marks** (flag bit 0, set with `appendfsync always`): every write of records ends
//!   with a group-end record naming the offset where that write started. Each group is synced
//!   before the next is written, so only the last group can be torn by a crash, and the marks
//!   say where it starts: damage inside it that shows bytes never written (a run of zeros where
//!   a record should be: the write did not reach that part of the preallocated space, so its
//!   fdatasync never completed and nothing in it was acknowledged) is cut at start-up, even
//!   when a record of the same group reached the disk whole after the damage.
//!
//! Marks and segment-end records are records whose payload starts with an argument count of 0
//! (no command has that), then a kind (u32: 1 group end, 2 segment end), the offset where the
//! write they end started (u64) and, for a segment end, the number of command records before
//! it (u64).
//!
//! # Preallocated space, torn tail, corruption
//!
//! A segment normally ends with zeros after its last record: [`ScanEnd::ZeroTail`], the end of
//! the log, not an error. A crash in the middle of an append leaves a partial last group of
//! records that was never acknowledged (no reply goes out before the fdatasync that covers it):
//! fewer bytes than a header announces, a header or payload partly zeros (pages of the write
//! that never reached the disk, in preallocated space even before later pages that did), or a
//! payload whose checksum fails. [`scan`] reports a damaged record as [`ScanEnd::Torn`], with
//! the offset where the complete records end, when no valid record follows it, or when the group
//! marks place it inside the last group written and it shows a run of zeros. Otherwise the
//! damaged record may be an acknowledged record in the middle of the log: [`ScanEnd::Corrupt`],
//! never skipped. The limits: damage to the very last record looks exactly like a torn append
//! and is cut (with a warning) as one, and so is damage in the last group written to a record
//! whose own data holds a run of zeros (a new filter's chunk); without group marks (`everysec`,
//! `no`, version 1), a torn group whose later record reached the disk whole while an earlier
//! one did not is reported as corruption (the start is refused: a false alarm, not a loss).

use bytes::Bytes;

/// Segment file magic.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SIFTLOG\0";
/// The segment format version this build writes (it reads 1 and 2).
pub const SEGMENT_VERSION: u16 = 2;
/// Size of the header this build writes (version 2).
pub const SEGMENT_HEADER_LEN: usize = 64;
/// Size of a version 1 header.
pub const SEGMENT_HEADER_LEN_V1: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 12;
/// Header flag: the segment has group marks.
const FLAG_GROUP_MARKS: u16 = 1;
/// Offsets of the two size-claim slots, and their size.
const CLAIM_AT: [usize; 2] = [24, 40];
const CLAIM_LEN: usize = 16;
/// Marker kinds.
const MARK_GROUP_END: u32 = 1;
const MARK_SEGMENT_END: u32 = 2;

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment id (equal to the one in the file name).
    pub id: u64,
    /// Format version (1 or 2).
    pub version: u16,
    /// Every write of records ends with a group-end record (version 2, `appendfsync always`).
    pub group_marks: bool,
    /// Where the records start.
    pub len: usize,
    /// The size the file is known to have reached on disk (version 2), and the sequence of
    /// that claim (the next one uses the next sequence).
    pub claim: Option<(u32, u64)>,
}

/// The version 2 header of segment `id`, claiming the file is at least `size` bytes.
pub fn segment_header(id: u64, group_marks: bool, size: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..10].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    let flags = if group_marks { FLAG_GROUP_MARKS } else { 0 };
    h[10..12].copy_from_slice(&flags.to_le_bytes());
    h[12..20].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    let (at, slot) = size_claim(id, 1, size);
    h[at..at + CLAIM_LEN].copy_from_slice(&slot);
    h
}

/// Claim `seq` (≥ 1) that segment `id` is at least `size` bytes: the bytes, and the offset in
/// the file where they go (the slots alternate with the sequence).
pub fn size_claim(id: u64, seq: u32, size: u64) -> (usize, [u8; CLAIM_LEN]) {
    let mut s = [0u8; CLAIM_LEN];
    s[0..4].copy_from_slice(&seq.to_le_bytes());
    s[4..12].copy_from_slice(&size.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&id.to_le_bytes()), &s[..12]);
    s[12..16].copy_from_slice(&crc.to_le_bytes());
    (CLAIM_AT[(seq % 2) as usize], s)
}

fn read_claim(id: u64, slot: &[u8]) -> Option<(u32, u64)> {
    let seq = u32::from_le_bytes(slot[0..4].try_into().expect("4 bytes"));
    let size = u64::from_le_bytes(slot[4..12].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(slot[12..16].try_into().expect("4 bytes"));
    let crc = crc32c::crc32c_append(crc32c::crc32c(&id.to_le_bytes()), &slot[..12]);
    (seq != 0 && crc == stored).then_some((seq, size))
}

/// Checks a segment header (version 1 or 2).
pub fn parse_segment_header(bytes: &[u8]) -> Result<SegmentHeader, String> {
    if bytes.len() < SEGMENT_HEADER_LEN_V1 {
        return Err(format!("header truncated ({} of {SEGMENT_HEADER_LEN_V1} bytes)", bytes.len()));
    }
    if bytes[0..8] != SEGMENT_MAGIC {
        return Err("not a sift log segment (bad magic)".into());
    }
    let stored = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..20]) != stored {
        return Err("header checksum mismatch".into());
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let flags = u16::from_le_bytes([bytes[10], bytes[11]]);
    let id = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    match version {
        1 if flags == 0 => {
            Ok(SegmentHeader { id, version, group_marks: false, len: SEGMENT_HEADER_LEN_V1, claim: None })
        }
        2 if flags & !FLAG_GROUP_MARKS == 0 => {
            if bytes.len() < SEGMENT_HEADER_LEN {
                return Err(format!("header truncated ({} of {SEGMENT_HEADER_LEN} bytes)", bytes.len()));
            }
            let claim = CLAIM_AT
                .iter()
                .filter_map(|&at| read_claim(id, &bytes[at..at + CLAIM_LEN]))
                .max_by_key(|&(seq, _)| seq);
            if claim.is_none() {
                return Err("both size claims of the header are damaged".into());
            }
            Ok(SegmentHeader {
                id,
                version,
                group_marks: flags & FLAG_GROUP_MARKS != 0,
                len: SEGMENT_HEADER_LEN,
                claim,
            })
        }
        1 | 2 => Err(format!("unknown header flags {flags:#x}")),
        _ => Err(format!(
            "segment format version {version}, this build reads versions 1 and {SEGMENT_VERSION}"
        )),
    }
}

/// Appends one record holding `argv` to `out`.
pub fn encode_record(argv: &[Bytes], out: &mut Vec<u8>) {
    let payload_len = 4 + argv.iter().map(|a| 4 + a.len()).sum::<usize>();
    // A single argument is at most 512 MiB (the protocol limit), but a command with many could
    // exceed 4 GiB in theory; such a record cannot be framed, which `u32::try_from` would turn
    // into a panic. The protocol limits (1M arguments × 512 MiB) make it reachable only by a
    // client sending terabytes, so treat it as an invariant.
    let n = u32::try_from(payload_len).expect("a logged command is below 4 GiB");
    out.reserve(RECORD_HEADER_LEN + payload_len);
    let start = out.len();
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(!n).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(argv.len() as u32).to_le_bytes());
    for a in argv {
        out.extend_from_slice(&(a.len() as u32).to_le_bytes());
        out.extend_from_slice(a);
    }
    let crc = crc32c::crc32c(&out[start + RECORD_HEADER_LEN..]);
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
}

fn encode_mark(fields: &[u64], kind: u32, out: &mut Vec<u8>) {
    let n = (8 + 8 * fields.len()) as u32;
    let start = out.len();
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(!n).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    for f in fields {
        out.extend_from_slice(&f.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[start + RECORD_HEADER_LEN..]);
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
}

/// Appends the group-end record of a write that starts at offset `start` of its segment.
pub fn encode_group_end(start: u64, out: &mut Vec<u8>) {
    encode_mark(&[start], MARK_GROUP_END, out);
}

/// Appends the segment-end record: it ends a write that starts at `start` and follows
/// `records` command records.
pub fn encode_segment_end(start: u64, records: u64, out: &mut Vec<u8>) {
    encode_mark(&[start, records], MARK_SEGMENT_END, out);
}

/// The argument of the record that opens a transaction's frame.
pub const FRAME_BEGIN: &[u8] = b"MULTI";
/// The argument of the record that closes it.
pub const FRAME_END: &[u8] = b"EXEC";

/// Is `argv` the frame record `which` ([`FRAME_BEGIN`] or [`FRAME_END`])?
pub fn is_frame(argv: &[Bytes], which: &[u8]) -> bool {
    argv.len() == 1 && argv[0].eq_ignore_ascii_case(which)
}

/// Appends the records of one transaction, framed by a `MULTI` and an `EXEC` record, to `out`.
pub fn encode_transaction(cmds: &[Vec<Bytes>], out: &mut Vec<u8>) {
    encode_record(&[Bytes::from_static(FRAME_BEGIN)], out);
    for c in cmds {
        encode_record(c, out);
    }
    encode_record(&[Bytes::from_static(FRAME_END)], out);
}

/// Parses a record payload (whose checksum matched) into its arguments, borrowing from `data`.
pub fn decode_payload(data: &Bytes) -> Result<Vec<Bytes>, &'static str> {
    let u32_at = |at: usize| -> Option<usize> {
        data.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
    };
    let argc = u32_at(0).ok_or("payload shorter than its argument count")?;
    if argc == 0 {
        return Err("empty command");
    }
    // Each argument takes at least 4 bytes: bounds the allocation by the payload's size.
    if argc > (data.len() - 4) / 4 {
        return Err("argument count larger than the payload");
    }
    let mut argv = Vec::with_capacity(argc);
    let mut at = 4;
    for _ in 0..argc {
        let len = u32_at(at).ok_or("argument length past the payload")?;
        at += 4;
        let end = at.checked_add(len).filter(|&e| e <= data.len()).ok_or("argument past the payload")?;
        argv.push(data.slice(at..end));
        at = end;
    }
    if at != data.len() {
        return Err("bytes after the last argument");
    }
    Ok(argv)
}

/// A record's payload, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Payload {
    Command(Vec<Bytes>),
    /// A group-end record: the write it ends started at this offset.
    GroupEnd(u64),
    /// A segment-end record: the write it ends started at `start`; `records` command records
    /// precede it.
    SegmentEnd {
        start: u64,
        records: u64,
    },
}

impl Payload {
    fn is_mark(&self) -> bool {
        !matches!(self, Payload::Command(_))
    }
}

/// Decodes a payload; marks exist only in version 2 segments.
fn decode_any(data: &Bytes, marks: bool) -> Result<Payload, &'static str> {
    let word = |at: usize| data.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if marks && data.len() >= 8 && data[0..4] == [0; 4] {
        let kind = u32::from_le_bytes(data[4..8].try_into().expect("4 bytes"));
        return match (kind, data.len()) {
            (MARK_GROUP_END, 16) => Ok(Payload::GroupEnd(word(8).expect("16 bytes"))),
            (MARK_SEGMENT_END, 24) => Ok(Payload::SegmentEnd {
                start: word(8).expect("24 bytes"),
                records: word(16).expect("24 bytes"),
            }),
            _ => Err("unknown log mark"),
        };
    }
    decode_payload(data).map(Payload::Command)
}

/// How a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// Every byte belongs to a complete, valid record.
    Clean,
    /// The complete records end at `valid_end` and only zeros follow: space preallocated
    /// ahead of the writes (or a grown file whose data never reached the disk). The end of the
    /// log; new records go at `valid_end`.
    ZeroTail {
        /// Offset (from the start of the segment) where the records end.
        valid_end: u64,
    },
    /// The complete records end at `valid_end`; what follows is a partial group of records from
    /// a crash in the middle of an append (no valid record follows it, or the group marks show
    /// it lies in the last group written).
    Torn {
        /// Offset (from the start of the segment) where the complete records end.
        valid_end: u64,
        /// What is wrong with the tail.
        reason: &'static str,
    },
    /// The record at `offset` is damaged and a valid record follows it (or its structure is
    /// wrong).
    Corrupt {
        /// Offset of the damaged record.
        offset: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// What [`scan`] found besides the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// How it ended.
    pub end: ScanEnd,
    /// Command records read before the end (frame records included, marks not).
    pub records: u64,
    /// Offset of the segment-end record, if the segment has one.
    pub sealed_at: Option<u64>,
}

/// The record at `off`, if one that checks out completely starts there: (its length, payload).
fn valid_record_at(data: &Bytes, off: usize) -> Option<(usize, Bytes)> {
    let rest = data.get(off..)?;
    if rest.len() < RECORD_HEADER_LEN {
        return None;
    }
    let n = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
    let check = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
    // The smallest payload is an argument count and one argument length (8 bytes): this also
    // keeps zeros from ever looking like a record.
    if check != !n || n < 8 || RECORD_HEADER_LEN as u64 + n as u64 > rest.len() as u64 {
        return None;
    }
    let end = RECORD_HEADER_LEN + n as usize;
    let stored = u32::from_le_bytes(rest[8..12].try_into().expect("4 bytes"));
    let payload = data.slice(off + RECORD_HEADER_LEN..off + end);
    (crc32c::crc32c(&payload) == stored).then_some((end, payload))
}

/// A record that checks out completely and parses: (its length, payload).
fn parsed_record_at(data: &Bytes, off: usize, marks: bool) -> Option<(usize, Payload)> {
    let (len, payload) = valid_record_at(data, off)?;
    decode_any(&payload, marks).ok().map(|p| (len, p))
}

/// The valid records after a damaged one at `off`, in order: (offset, end, payload). Each run
/// of consecutive records is found by a linear search for its first record (the checksum is
/// computed only where a length and its complement match), then followed record by record.
fn valid_records_after(data: &Bytes, off: usize, marks: bool) -> Vec<(usize, usize, Payload)> {
    let mut found = Vec::new();
    let mut at = off + 1;
    while at + RECORD_HEADER_LEN <= data.len() {
        let Some((len, p)) = parsed_record_at(data, at, marks) else {
            at += 1;
            continue;
        };
        found.push((at, at + len, p));
        at += len;
        while let Some((len, p)) = parsed_record_at(data, at, marks) {
            found.push((at, at + len, p));
            at += len;
        }
        at += 1;
    }
    found
}

/// The length of a run of zeros that marks bytes never written (a record has at most three
/// zeros in a row outside its arguments' data).
const HOLE: usize = 8;

/// Does `bytes` hold a run of [`HOLE`] zeros: bytes of preallocated space that a write did not
/// reach?
fn has_hole(bytes: &[u8]) -> bool {
    let mut run = 0;
    bytes.iter().any(|&b| {
        run = if b == 0 { run + 1 } else { 0 };
        run >= HOLE
    })
}

/// Scans the records of a segment (`data` is the whole file, `header` its parsed header),
/// calling `on_record(offset, argv)` for each complete command record in order. Never panics,
/// whatever the bytes.
pub fn scan(data: &Bytes, header: &SegmentHeader, mut on_record: impl FnMut(u64, Vec<Bytes>)) -> Scan {
    let marks = header.version >= 2;
    let mut off = header.len.min(data.len());
    let mut records = 0u64;
    let mut sealed_at = None;
    // Where the write of the last group-end or segment-end record read so far ends.
    let mut last_mark_end = header.len;
    let done = |end, records, sealed_at| Scan { end, records, sealed_at };
    while off < data.len() {
        let rest = &data[off..];
        if rest.iter().all(|&b| b == 0) {
            return done(ScanEnd::ZeroTail { valid_end: off as u64 }, records, sealed_at);
        }
        if sealed_at.is_some() {
            let end = ScanEnd::Corrupt { offset: off as u64, reason: "data after the segment-end record" };
            return done(end, records, sealed_at);
        }
        let damaged = |reason| {
            let after = valid_records_after(data, off, marks);
            if after.is_empty() {
                return ScanEnd::Torn { valid_end: off as u64, reason };
            }
            if !header.group_marks {
                return ScanEnd::Corrupt { offset: off as u64, reason };
            }
            // Where the last group written starts. Each group was synced before the next one
            // was written, so every earlier group was synced.
            let last_group = match after.iter().rposition(|(_, _, p)| p.is_mark()) {
                // Commands after the last mark: a group whose mark never reached the disk.
                Some(i) if after[i + 1..].iter().any(|(_, _, p)| !p.is_mark()) => after[i].1,
                Some(i) => match after[i].2 {
                    Payload::GroupEnd(start) | Payload::SegmentEnd { start, .. } => start as usize,
                    Payload::Command(_) => last_mark_end,
                },
                None => last_mark_end,
            };
            // In the last group, and bytes there were never written (zeros where a record should
            // be): an unfinished write. A flipped byte in a group that did complete is not one.
            if off >= last_group && has_hole(&data[off..after[0].0]) {
                ScanEnd::Torn { valid_end: off as u64, reason }
            } else {
                ScanEnd::Corrupt { offset: off as u64, reason }
            }
        };
        if rest.len() < RECORD_HEADER_LEN {
            return done(damaged("record header cut short"), records, sealed_at);
        }
        let n = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
        let check = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if check != !n {
            return done(damaged("record length damaged"), records, sealed_at);
        }
        if RECORD_HEADER_LEN as u64 + n as u64 > rest.len() as u64 {
            return done(damaged("record cut short"), records, sealed_at);
        }
        if n < 8 {
            let end = ScanEnd::Corrupt { offset: off as u64, reason: "record shorter than a command" };
            return done(end, records, sealed_at);
        }
        let Some((end, payload)) = valid_record_at(data, off) else {
            return done(damaged("record checksum mismatch"), records, sealed_at);
        };
        // A payload whose checksum matches was written whole: if it does not parse, this is
        // not a torn append.
        let corrupt = |reason| ScanEnd::Corrupt { offset: off as u64, reason };
        match decode_any(&payload, marks) {
            Ok(Payload::Command(argv)) => {
                on_record(off as u64, argv);
                records += 1;
            }
            Ok(Payload::GroupEnd(start)) | Ok(Payload::SegmentEnd { start, .. })
                if start as usize > off || (start as usize) < header.len =>
            {
                return done(corrupt("log mark names a start outside the segment"), records, sealed_at);
            }
            Ok(Payload::GroupEnd(_)) => last_mark_end = off + end,
            Ok(Payload::SegmentEnd { records: n, .. }) if n != records => {
                return done(
                    corrupt("segment-end record counts another number of records"),
                    records,
                    sealed_at,
                );
            }
            Ok(Payload::SegmentEnd { .. }) => {
                last_mark_end = off + end;
                sealed_at = Some(off as u64);
            }
            Err(reason) => return done(corrupt(reason), records, sealed_at),
        }
        off += end;
    }
    done(ScanEnd::Clean, records, sealed_at)
}

/// What reading one whole segment found (see [`read_segment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRead {
    /// Its header.
    pub header: SegmentHeader,
    /// The file's size.
    pub size: u64,
    /// Command records read (frame records included, marks not).
    pub records: u64,
    /// Those of them before `records_end` (a transaction without its `EXEC` record is not kept).
    pub kept_records: u64,
    /// Offset of the last command record read, if any.
    pub last_record_at: Option<u64>,
    /// Where the kept records end: new records go here.
    pub records_end: u64,
    /// Offset just past the last byte that is not zero (`records_end` when nothing is cut).
    pub data_end: u64,
    /// A torn tail or a transaction without its `EXEC` record, to cut at `records_end`: what
    /// it is.
    pub torn: Option<String>,
    /// The segment-end record was read.
    pub sealed: bool,
}

impl SegmentRead {
    /// Bytes provably missing from the end of the file: its size claim is larger than the
    /// file (and no segment-end record proves the records complete).
    pub fn missing(&self) -> Option<u64> {
        match self.header.claim {
            Some((_, claimed)) if claimed > self.size && !self.sealed => Some(claimed - self.size),
            _ => None,
        }
    }

    /// Does the segment hold any record that is kept?
    pub fn holds_records(&self) -> bool {
        self.records_end > self.header.len as u64
    }
}

/// A segment damaged in a way that may hide an acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentError {
    /// What is wrong, and where.
    pub message: String,
    /// The records before the damage, which are intact (`torn` is `None`, `records_end` where
    /// they end, never inside a transaction); `None` when the header itself is damaged.
    pub intact: Option<Box<SegmentRead>>,
}

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Reads segment `id` (`data` is the whole file): checks its header, scans its records and
/// calls `apply` with each command to replay, in order, applying a transaction's records only
/// when its `EXEC` record is read. `Err` (with the offset) when it is damaged in a way that may
/// hide an acknowledged record.
pub fn read_segment(
    data: &Bytes,
    id: u64,
    mut apply: impl FnMut(&[Bytes]),
) -> Result<SegmentRead, SegmentError> {
    let header_error = |message| SegmentError { message, intact: None };
    let header = parse_segment_header(data).map_err(header_error)?;
    if header.id != id {
        return Err(header_error(format!("header names segment {}", header.id)));
    }
    // An open transaction frame: where its MULTI record starts, the number of records before
    // it, and its records so far.
    let mut frame: Option<(u64, u64, Vec<Vec<Bytes>>)> = None;
    let mut count = 0u64;
    // A record that breaks the frame structure: its offset, what is wrong, and where the intact
    // records end (the open frame's start, if any) with their number.
    let mut bad_frame: Option<(u64, &'static str, u64, u64)> = None;
    let mut last_record_at = None;
    let scan = scan(data, &header, |off, argv| {
        last_record_at = Some(off);
        count += 1;
        if bad_frame.is_some() {
            return;
        }
        if is_frame(&argv, FRAME_BEGIN) {
            if let Some((start, before, _)) = frame {
                bad_frame = Some((off, "transaction opened inside a transaction", start, before));
            }
            frame = Some((off, count - 1, Vec::new()));
        } else if is_frame(&argv, FRAME_END) {
            match frame.take() {
                Some((_, _, cmds)) => cmds.iter().for_each(|c| apply(c)),
                None => bad_frame = Some((off, "transaction end without its start", off, count - 1)),
            }
        } else if let Some((_, _, cmds)) = frame.as_mut() {
            cmds.push(argv);
        } else {
            apply(&argv);
        }
    });
    let data_end = data.iter().rposition(|&b| b != 0).map_or(0, |i| i as u64 + 1).max(header.len as u64);
    let intact = |records_end, kept_records| SegmentRead {
        header,
        size: data.len() as u64,
        records: kept_records,
        kept_records,
        last_record_at: None,
        records_end,
        data_end,
        torn: None,
        sealed: false,
    };
    if let Some((offset, reason, end, before)) = bad_frame {
        let message = format!("record at offset {offset}: {reason}");
        return Err(SegmentError { message, intact: Some(Box::new(intact(end, before))) });
    }
    let mut kept_records = scan.records;
    let (mut records_end, mut torn) = match scan.end {
        ScanEnd::Clean => (data.len() as u64, None),
        ScanEnd::ZeroTail { valid_end } => (valid_end, None),
        ScanEnd::Torn { valid_end, reason } => {
            (valid_end, Some(format!("torn last record at offset {valid_end} ({reason})")))
        }
        ScanEnd::Corrupt { offset, reason } => {
            let message = format!("corrupted record at offset {offset} ({reason})");
            let (end, before) = match &frame {
                Some((start, before, _)) => (*start, *before),
                None => (offset, scan.records),
            };
            return Err(SegmentError { message, intact: Some(Box::new(intact(end, before))) });
        }
    };
    if let Some((start, before, cmds)) = frame {
        // The segment ends inside a transaction: its EXEC record never reached the disk, so the
        // transaction was never acknowledged. None of it is applied.
        torn = Some(format!(
            "a transaction of {} records at offset {start} has no EXEC record (a crash while it was written)",
            cmds.len()
        ));
        records_end = start;
        kept_records = before;
    }
    Ok(SegmentRead {
        header,
        size: data.len() as u64,
        records: scan.records,
        kept_records,
        last_record_at,
        records_end,
        data_end,
        torn,
        sealed: scan.sealed_at.is_some() && records_end > scan.sealed_at.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn argv(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
    }

    fn header(marks: bool) -> SegmentHeader {
        parse_segment_header(&segment_header(7, marks, 1 << 20)).unwrap()
    }

    /// A segment (without group marks) holding `cmds`.
    fn segment(cmds: &[Vec<Bytes>]) -> Vec<u8> {
        let mut out = segment_header(7, false, 1 << 20).to_vec();
        for c in cmds {
            encode_record(c, &mut out);
        }
        out
    }

    /// A segment with group marks, one write per element of `groups`.
    fn marked(groups: &[&[Vec<Bytes>]]) -> Vec<u8> {
        let mut out = segment_header(7, true, 1 << 20).to_vec();
        for g in groups {
            let start = out.len() as u64;
            for c in *g {
                encode_record(c, &mut out);
            }
            encode_group_end(start, &mut out);
        }
        out
    }

    fn collect(data: &[u8]) -> (Vec<Vec<Bytes>>, ScanEnd) {
        let data = Bytes::copy_from_slice(data);
        let Ok(h) = parse_segment_header(&data) else { return (Vec::new(), ScanEnd::Clean) };
        let mut got = Vec::new();
        let end = scan(&data, &h, |_, a| got.push(a)).end;
        (got, end)
    }

    /// The version 1 header (24 bytes) of segment `id`.
    fn header_v1(id: u64) -> Vec<u8> {
        let mut h = vec![0u8; SEGMENT_HEADER_LEN_V1];
        h[0..8].copy_from_slice(&SEGMENT_MAGIC);
        h[8..10].copy_from_slice(&1u16.to_le_bytes());
        h[12..20].copy_from_slice(&id.to_le_bytes());
        let crc = crc32c::crc32c(&h[..20]);
        h[20..24].copy_from_slice(&crc.to_le_bytes());
        h
    }

    #[test]
    fn round_trip_and_header() {
        let cmds = vec![argv(&["SET", "k", "v"]), argv(&["DEL", "a", "b", ""]), argv(&["FLUSHALL"])];
        let data = segment(&cmds);
        let h = parse_segment_header(&data).unwrap();
        assert_eq!(
            h,
            SegmentHeader { id: 7, version: 2, group_marks: false, len: 64, claim: Some((1, 1 << 20)) }
        );
        assert_eq!(collect(&data), (cmds.clone(), ScanEnd::Clean));
        let mut bad = data.clone();
        bad[13] ^= 1;
        assert!(parse_segment_header(&bad).unwrap_err().contains("checksum"));
        let mut newer = segment_header(7, false, 0);
        newer[8] = 3;
        let crc = crc32c::crc32c(&newer[..20]);
        newer[20..24].copy_from_slice(&crc.to_le_bytes());
        assert!(parse_segment_header(&newer).unwrap_err().contains("version 3"));
        assert!(parse_segment_header(&data[..40]).unwrap_err().contains("40 of 64"));
        // Version 1 segments, written before size claims and marks, still read.
        let mut v1 = header_v1(7);
        for c in &cmds {
            encode_record(c, &mut v1);
        }
        let h1 = parse_segment_header(&v1).unwrap();
        assert_eq!((h1.version, h1.len, h1.claim, h1.group_marks), (1, 24, None, false));
        assert_eq!(collect(&v1), (cmds, ScanEnd::Clean));
    }

    /// A claim goes to the slot of its sequence; the valid claim with the highest sequence
    /// counts, so a torn claim write leaves the previous one.
    #[test]
    fn size_claims_alternate_and_survive_a_torn_write() {
        let mut h = segment_header(9, true, 100).to_vec();
        for (seq, size) in [(2u32, 200u64), (3, 300), (4, 400)] {
            let (at, slot) = size_claim(9, seq, size);
            h[at..at + 16].copy_from_slice(&slot);
            assert_eq!(parse_segment_header(&h).unwrap().claim, Some((seq, size)));
            for byte in 0..16 {
                let mut torn = h.clone();
                torn[at + byte] ^= 0x10;
                assert_eq!(
                    parse_segment_header(&torn).unwrap().claim,
                    Some((seq - 1, size - 100)),
                    "{seq} {byte}"
                );
            }
        }
        // A claim of another segment does not validate here.
        let (at, slot) = size_claim(8, 5, 999);
        h[at..at + 16].copy_from_slice(&slot);
        assert_eq!(parse_segment_header(&h).unwrap().claim, Some((4, 400)));
        h[24..56].fill(0xAA);
        assert!(parse_segment_header(&h).unwrap_err().contains("size claims"));
    }

    #[test]
    fn a_transaction_is_framed_by_multi_and_exec_records() {
        let cmds = vec![argv(&["SET", "a", "1"]), argv(&["SET", "b", "2"])];
        let mut data = segment(&[]);
        encode_transaction(&cmds, &mut data);
        let (got, end) = collect(&data);
        assert_eq!(end, ScanEnd::Clean);
        assert_eq!(got, [vec![argv(&["MULTI"])], cmds.clone(), vec![argv(&["EXEC"])]].concat());
        assert!(is_frame(&got[0], FRAME_BEGIN) && is_frame(&got[3], FRAME_END));
        assert!(!is_frame(&got[1], FRAME_BEGIN) && !is_frame(&argv(&["EXEC", "x"]), FRAME_END));
    }

    #[test]
    fn every_truncation_is_torn_at_the_last_complete_record() {
        let cmds = vec![argv(&["SET", "key", "value"]), argv(&["SET", "other", "x"])];
        let data = segment(&cmds);
        let first_end = SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 4 + 4 + 3 + 4 + 3 + 4 + 5;
        for cut in SEGMENT_HEADER_LEN + 1..data.len() {
            let (got, end) = collect(&data[..cut]);
            let complete = if cut >= first_end { 1 } else { 0 };
            assert_eq!(got.len(), complete, "cut {cut}");
            let valid = if complete == 1 { first_end } else { SEGMENT_HEADER_LEN };
            if cut == valid {
                assert_eq!(end, ScanEnd::Clean);
            } else {
                assert!(
                    matches!(end, ScanEnd::Torn { valid_end, .. } if valid_end == valid as u64),
                    "{end:?}"
                );
            }
        }
        // A zero-filled tail after complete records: preallocated space, the end of the log.
        let mut zeros = data.clone();
        zeros.extend_from_slice(&[0; 40]);
        assert_eq!(collect(&zeros), (cmds.clone(), ScanEnd::ZeroTail { valid_end: data.len() as u64 }));
    }

    #[test]
    fn a_flipped_byte_before_the_last_record_is_corruption() {
        let cmds: Vec<_> = (0..5).map(|i| argv(&["SET", &format!("k{i}"), "v"])).collect();
        for data in [segment(&cmds), marked(&[&cmds[..2], &cmds[2..4], &cmds[4..]])] {
            let first_of_last_group = segment(&cmds[..4]).len();
            // Every byte of every record before the last group.
            for at in SEGMENT_HEADER_LEN..first_of_last_group {
                let mut bad = data.clone();
                bad[at] ^= 0x20;
                let (_, end) = collect(&bad);
                assert!(matches!(end, ScanEnd::Corrupt { .. }), "byte {at}: {end:?}");
            }
        }
    }

    /// In preallocated space a crash can leave any mix of a last group's bytes and zeros (pages
    /// that reached the disk and pages that did not), with zeros after it: torn, at the end of
    /// the complete records, whatever the mix — except, without group marks, when a whole
    /// record of the group follows the hole (a false alarm that stops the start). A flipped
    /// byte before the last group stays corruption with the zero tail too.
    #[test]
    fn a_torn_group_in_preallocated_space_is_torn() {
        let cmds: Vec<_> = (0..4).map(|i| argv(&["SET", &format!("key{i}"), "some value"])).collect();
        for marks in [false, true] {
            let build = |groups: &[&[Vec<Bytes>]]| {
                if marks {
                    marked(groups)
                } else {
                    segment(&groups.concat())
                }
            };
            let synced = build(&[&cmds[..2]]);
            let full = build(&[&cmds[..2], &cmds[2..]]);
            let (group_start, group_end) = (synced.len(), full.len());
            let mut clean = full.clone();
            clean.resize(group_end + 4096, 0);
            assert_eq!(collect(&clean), (cmds.clone(), ScanEnd::ZeroTail { valid_end: group_end as u64 }));
            let record3_end = group_start + (segment(&cmds[..3]).len() - segment(&cmds[..2]).len());
            // Every way to lose one 8-byte-aligned "page" range of the last group (2 records and
            // its mark), and every suffix of it.
            for lost_from in (group_start..group_end).step_by(8) {
                for lost_to in [lost_from + 8, group_end] {
                    let mut data = clean.clone();
                    data[lost_from..lost_to.min(group_end)].fill(0);
                    if data == clean {
                        continue; // bytes that were zeros already (a mark's high bytes)
                    }
                    let (got, end) = collect(&data);
                    let complete = got.len();
                    assert!(complete >= 2, "{lost_from}..{lost_to}");
                    assert_eq!(got[..], cmds[..complete]);
                    if !marks && lost_from < record3_end && lost_to <= record3_end {
                        // The group's second record survived whole after the hole: without marks
                        // it may as well be an acknowledged record after a damaged one.
                        assert!(
                            matches!(end, ScanEnd::Corrupt { offset, .. } if offset as usize == group_start),
                            "{lost_from}..{lost_to}: {end:?}"
                        );
                        continue;
                    }
                    match end {
                        ScanEnd::Torn { valid_end, .. } => assert!(valid_end as usize <= lost_from),
                        ScanEnd::ZeroTail { valid_end } => assert!(valid_end as usize <= lost_from),
                        other => panic!("marks {marks}, {lost_from}..{lost_to}: {other:?}"),
                    }
                }
            }
            // A flipped byte in a synced record, zeros after the log: corruption.
            for at in SEGMENT_HEADER_LEN..group_start {
                let mut bad = clean.clone();
                bad[at] ^= 0x20;
                assert!(matches!(collect(&bad).1, ScanEnd::Corrupt { .. }), "byte {at}");
            }
            // A partial header after the zero tail (a torn write past preallocated zeros).
            let mut past = clean.clone();
            past.extend_from_slice(b"\x1b\x00\x00\x00\xe4\xff");
            assert!(
                matches!(collect(&past).1, ScanEnd::Torn { valid_end, .. } if valid_end == group_end as u64)
            );
        }
    }

    /// With marks, a torn last group whose mark was lost is recognised even when the damage
    /// comes before whole records of that group; a later group proves the earlier one synced.
    #[test]
    fn marks_place_the_damage_in_the_last_group_or_before_it() {
        let cmds: Vec<_> = (0..6).map(|i| argv(&["SET", &format!("k{i}"), "v"])).collect();
        let two = marked(&[&cmds[..2], &cmds[2..4]]);
        let second_start = marked(&[&cmds[..2]]).len();
        // The third group's first record lost, its second whole, its mark lost: torn.
        let mut three = marked(&[&cmds[..2], &cmds[2..4], &cmds[4..]]);
        let third_start = two.len();
        let rec = segment(&cmds[..5]).len() - segment(&cmds[..4]).len();
        three[third_start..third_start + rec].fill(0);
        let mark_at = third_start + 2 * rec;
        three[mark_at..].fill(0);
        assert_eq!(
            collect(&three).1,
            ScanEnd::Torn { valid_end: third_start as u64, reason: "record length damaged" }
        );
        // A flipped byte (no hole) in the last group's first record, a whole record after it:
        // the group may have been synced and acknowledged, so this is corruption.
        let mut flipped = marked(&[&cmds[..2], &cmds[2..4], &cmds[4..]]);
        flipped[third_start + 20] ^= 0x40;
        assert!(
            matches!(collect(&flipped).1, ScanEnd::Corrupt { offset, .. } if offset as usize == third_start)
        );
        // The same hole in the second group, followed by the (whole) third group: corruption.
        let mut middle = marked(&[&cmds[..2], &cmds[2..4], &cmds[4..]]);
        middle[second_start..second_start + rec].fill(0);
        assert!(
            matches!(collect(&middle).1, ScanEnd::Corrupt { offset, .. } if offset as usize == second_start)
        );
    }

    #[test]
    fn the_segment_end_record_counts_the_records() {
        let cmds: Vec<_> = (0..3).map(|i| argv(&["SET", &format!("k{i}"), "v"])).collect();
        let mut data = marked(&[&cmds[..2]]);
        let start = data.len() as u64;
        encode_record(&cmds[2], &mut data);
        encode_segment_end(start, 3, &mut data);
        let h = header(true);
        let b = Bytes::from(data.clone());
        let s = scan(&b, &h, |_, _| {});
        assert_eq!((s.end, s.records), (ScanEnd::Clean, 3));
        assert!(s.sealed_at.is_some());
        let read = read_segment(&b, 7, |_| {}).unwrap();
        assert!(read.sealed && read.missing().is_none(), "{read:?}");
        // A record count that does not match, or anything after it: corruption.
        let mut wrong = marked(&[&cmds[..2]]);
        encode_segment_end(start, 5, &mut wrong);
        assert!(matches!(collect(&wrong).1, ScanEnd::Corrupt { .. }));
        let mut after = data.clone();
        encode_record(&cmds[0], &mut after);
        assert!(matches!(
            collect(&after).1,
            ScanEnd::Corrupt { reason: "data after the segment-end record", .. }
        ));
        // A version 1 segment has no marks: an argument count of 0 is corruption there.
        let mut v1 = header_v1(7);
        encode_group_end(24, &mut v1);
        encode_record(&cmds[0], &mut v1);
        assert!(matches!(collect(&v1).1, ScanEnd::Corrupt { reason: "empty command", .. }));
    }

    #[test]
    fn read_segment_drops_a_transaction_without_exec_and_reports_a_short_file() {
        let cmds = vec![argv(&["SET", "a", "1"]), argv(&["SET", "b", "2"])];
        let mut data = segment(&[argv(&["SET", "x", "0"])]);
        let frame_at = data.len() as u64;
        encode_transaction(&cmds, &mut data);
        let whole = data.len();
        data.truncate(whole - 10);
        let mut applied = Vec::new();
        let read = read_segment(&Bytes::from(data.clone()), 7, |a| applied.push(a.to_vec())).unwrap();
        assert_eq!(applied, vec![argv(&["SET", "x", "0"])]);
        assert_eq!((read.records_end, read.kept_records, read.records), (frame_at, 1, 4));
        assert!(read.torn.as_deref().unwrap().contains("no EXEC record"), "{read:?}");
        // The header claims 1 MiB: the file was cut.
        assert_eq!(read.missing(), Some((1 << 20) - data.len() as u64));
        assert!(read_segment(&Bytes::from(data), 8, |_| {}).unwrap_err().message.contains("names segment 7"));
        // Damage before the end: the intact records end where it starts, or where the open
        // transaction around it started.
        let mut data = segment(&[argv(&["SET", "x", "0"])]);
        encode_transaction(&cmds, &mut data);
        encode_record(&argv(&["SET", "y", "1"]), &mut data);
        let in_frame = frame_at as usize + 30;
        data[in_frame] ^= 1;
        let e = read_segment(&Bytes::from(data.clone()), 7, |_| {}).unwrap_err();
        let intact = e.intact.unwrap();
        assert!(e.message.contains("corrupted record"), "{}", e.message);
        assert_eq!((intact.records_end, intact.kept_records), (frame_at, 1));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600), marks: bool) {
            let _ = parse_segment_header(&body);
            for mut data in [segment_header(1, marks, 0).to_vec(), header_v1(1)] {
                data.extend_from_slice(&body);
                let _ = collect(&data);
                let _ = read_segment(&Bytes::from(data), 1, |_| {});
            }
            let _ = collect(&body);
            let _ = decode_payload(&Bytes::from(body));
        }

        #[test]
        fn records_round_trip(cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..5), 0..10)) {
            let cmds: Vec<Vec<Bytes>> = cmds.into_iter().map(|c| c.into_iter().map(Bytes::from).collect()).collect();
            let data = segment(&cmds);
            prop_assert_eq!(collect(&data), (cmds.clone(), ScanEnd::Clean));
            let data = marked(&[&cmds]);
            prop_assert_eq!(collect(&data), (cmds, ScanEnd::Clean));
        }
    }
}
