//! The append-only log: segment files of framed, checksummed records, one per applied write
//! command, and the scan that reads them back and tells a torn tail from corruption.
//!
//! ```text
//! segment header (24 bytes)
//!      0   8  magic "SIFTLOG\0"
//!      8   2  version (u16, 1)
//!     10   2  reserved (0)
//!     12   8  segment id (u64)
//!     20   4  CRC32C of bytes 0..20
//! records, back to back, each:
//!      0   4  payload length N (u32)
//!      4   4  !N (bitwise complement: a damaged length is detected before it is trusted)
//!      8   4  CRC32C of the payload
//!     12   N  payload: argc (u32), then argc × (length u32, bytes)
//! ```
//!
//! Everything is little-endian. The payload is the command's argument vector as it must be
//! replayed (`EXPIRE` already rewritten to `PEXPIREAT`, `SET ... EX` to `SET ... PXAT`).
//!
//! # Transactions
//!
//! The writes of an EXEC, or of a script, that wrote more than one record are framed as in
//! Redis's AOF: a record holding the single argument `MULTI` before them and one holding `EXEC`
//! after, all appended as one contiguous unit (no other client's record in between). Recovery
//! applies a frame's records only once its `EXEC` record is read; a log whose last segment ends
//! inside a frame (a crash while the transaction's bytes were being written) loses the whole
//! unacknowledged transaction, and the log is cut back to where its `MULTI` record starts.
//! A write is never logged as a lone `MULTI` or `EXEC` (neither is a write command), and logs
//! of versions without frames simply contain none, so the segment version is unchanged.
//!
//! # Preallocated space, torn tail, corruption
//!
//! The writer preallocates the segment ahead of its records by writing zeros (see
//! [`super::disk`]), so a segment normally ends with zeros after its last record:
//! [`ScanEnd::ZeroTail`], the end of the log, not an error.
//!
//! A crash in the middle of an append leaves a partial last group of records that was never
//! acknowledged (no reply goes out before the fdatasync that covers it): fewer bytes than a
//! header announces, a header or payload partly zeros (pages of the write that never reached
//! the disk, in preallocated space even before later pages that did), or a payload whose checksum
//! fails. [`scan`] reports a damaged record as [`ScanEnd::Torn`], with the offset where the
//! complete records end, when **no valid record follows it** anywhere in the segment (a record
//! whose length, complement and checksum check out and whose payload parses), so recovery can cut
//! the tail. If a valid record does follow, the damaged one may be an acknowledged record in the
//! middle of the log: [`ScanEnd::Corrupt`], never skipped. The limits of the rule: damage to
//! the very last record before the zero tail looks exactly like a torn append, and is cut (with
//! a warning) as one; a torn group whose later record reached the disk whole while an earlier
//! one did not is reported as corruption (the start is refused: a false alarm, not a loss).

use bytes::Bytes;

/// Segment file magic.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SIFTLOG\0";
/// The segment format version this build writes and reads.
pub const SEGMENT_VERSION: u16 = 1;
/// Size of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 12;

/// The header of segment `id`.
pub fn segment_header(id: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..10].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment header; returns the segment id it names.
pub fn check_segment_header(bytes: &[u8]) -> Result<u64, String> {
    if bytes.len() < SEGMENT_HEADER_LEN {
        return Err(format!("header truncated ({} of {SEGMENT_HEADER_LEN} bytes)", bytes.len()));
    }
    if bytes[0..8] != SEGMENT_MAGIC {
        return Err("not a sift log segment (bad magic)".into());
    }
    let stored = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..20]) != stored {
        return Err("header checksum mismatch".into());
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != SEGMENT_VERSION {
        return Err(format!("segment format version {version}, this build reads version {SEGMENT_VERSION}"));
    }
    Ok(u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")))
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
    /// The complete records end at `valid_end`; what follows is a partial record from a crash
    /// in the middle of an append (no valid record follows it).
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

/// Does a valid record start anywhere after `off`? (Only called on a damaged record: a linear
/// pass over the rest of the segment, the checksum computed only where a length and its
/// complement match.)
fn valid_record_after(data: &Bytes, off: usize) -> bool {
    (off + 1..data.len().saturating_sub(RECORD_HEADER_LEN - 1))
        .any(|at| valid_record_at(data, at).is_some_and(|(_, payload)| decode_payload(&payload).is_ok()))
}

/// Scans the records of a segment (`data` is the whole file, header included, already checked
/// with [`check_segment_header`]), calling `on_record(offset, argv)` for each complete record in
/// order. Never panics, whatever the bytes.
pub fn scan(data: &Bytes, mut on_record: impl FnMut(u64, Vec<Bytes>)) -> ScanEnd {
    let mut off = SEGMENT_HEADER_LEN.min(data.len());
    while off < data.len() {
        let rest = &data[off..];
        if rest.iter().all(|&b| b == 0) {
            return ScanEnd::ZeroTail { valid_end: off as u64 };
        }
        let damaged = |reason| {
            if valid_record_after(data, off) {
                ScanEnd::Corrupt { offset: off as u64, reason }
            } else {
                ScanEnd::Torn { valid_end: off as u64, reason }
            }
        };
        if rest.len() < RECORD_HEADER_LEN {
            return damaged("record header cut short");
        }
        let n = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
        let check = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if check != !n {
            return damaged("record length damaged");
        }
        if RECORD_HEADER_LEN as u64 + n as u64 > rest.len() as u64 {
            return damaged("record cut short");
        }
        if n < 8 {
            return ScanEnd::Corrupt { offset: off as u64, reason: "record shorter than a command" };
        }
        let Some((end, payload)) = valid_record_at(data, off) else {
            return damaged("record checksum mismatch");
        };
        match decode_payload(&payload) {
            Ok(argv) => on_record(off as u64, argv),
            // A payload whose checksum matches was written whole: this is not a torn append.
            Err(reason) => return ScanEnd::Corrupt { offset: off as u64, reason },
        }
        off += end;
    }
    ScanEnd::Clean
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn argv(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
    }

    fn segment(cmds: &[Vec<Bytes>]) -> Vec<u8> {
        let mut out = segment_header(7).to_vec();
        for c in cmds {
            encode_record(c, &mut out);
        }
        out
    }

    fn collect(data: &[u8]) -> (Vec<Vec<Bytes>>, ScanEnd) {
        let mut got = Vec::new();
        let end = scan(&Bytes::copy_from_slice(data), |_, a| got.push(a));
        (got, end)
    }

    #[test]
    fn round_trip_and_header() {
        let cmds = vec![argv(&["SET", "k", "v"]), argv(&["DEL", "a", "b", ""]), argv(&["FLUSHALL"])];
        let data = segment(&cmds);
        assert_eq!(check_segment_header(&data), Ok(7));
        assert_eq!(collect(&data), (cmds, ScanEnd::Clean));
        let mut bad = data.clone();
        bad[13] ^= 1;
        assert!(check_segment_header(&bad).unwrap_err().contains("checksum"));
        let mut newer = segment_header(7);
        newer[8] = 2;
        let crc = crc32c::crc32c(&newer[..20]);
        newer[20..].copy_from_slice(&crc.to_le_bytes());
        assert!(check_segment_header(&newer).unwrap_err().contains("version 2"));
    }

    #[test]
    fn a_transaction_is_framed_by_multi_and_exec_records() {
        let cmds = vec![argv(&["SET", "a", "1"]), argv(&["SET", "b", "2"])];
        let mut data = segment_header(7).to_vec();
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
        let data = segment(&cmds);
        let rec = (data.len() - SEGMENT_HEADER_LEN) / 5;
        // Every byte of every record but the last.
        for at in SEGMENT_HEADER_LEN..SEGMENT_HEADER_LEN + 4 * rec {
            let mut bad = data.clone();
            bad[at] ^= 0x20;
            let (_, end) = collect(&bad);
            assert!(matches!(end, ScanEnd::Corrupt { .. }), "byte {at}: {end:?}");
        }
    }

    /// In preallocated space a crash can leave any mix of a last group's bytes and zeros (pages
    /// that reached the disk and pages that did not), with zeros after it: torn, at the end of
    /// the complete records, whatever the mix. A flipped byte before the last record stays
    /// corruption with the zero tail too.
    #[test]
    fn a_torn_group_in_preallocated_space_is_torn() {
        let cmds: Vec<_> = (0..4).map(|i| argv(&["SET", &format!("key{i}"), "some value"])).collect();
        let synced = segment(&cmds[..2]);
        let full = segment(&cmds);
        let (group_start, group_end) = (synced.len(), full.len());
        let zeros_after = 4096;
        let mut clean = full.clone();
        clean.resize(group_end + zeros_after, 0);
        assert_eq!(collect(&clean), (cmds.clone(), ScanEnd::ZeroTail { valid_end: group_end as u64 }));
        let record3_end = segment(&cmds[..3]).len();
        // Every way to lose one 8-byte-aligned "page" range of the last group (2 records),
        // and every suffix of it.
        for lost_from in (group_start..group_end).step_by(8) {
            for lost_to in [lost_from + 8, group_end] {
                let mut data = clean.clone();
                data[lost_from..lost_to.min(group_end)].fill(0);
                let (got, end) = collect(&data);
                let complete = got.len();
                assert!(complete >= 2, "{lost_from}..{lost_to}");
                assert_eq!(got[..], cmds[..complete]);
                if lost_from < record3_end && lost_to <= record3_end {
                    // The group's second record survived whole after the hole: it may as well
                    // be an acknowledged record after a damaged one, so the start is refused
                    // (a false alarm an operator resolves; never a silent loss).
                    assert!(
                        matches!(end, ScanEnd::Corrupt { offset: 114, .. }),
                        "{lost_from}..{lost_to}: {end:?}"
                    );
                    continue;
                }
                match end {
                    ScanEnd::Torn { valid_end, .. } => assert!(valid_end as usize <= lost_from),
                    ScanEnd::ZeroTail { valid_end } => assert!(valid_end as usize <= lost_from),
                    other => panic!("{lost_from}..{lost_to}: {other:?}"),
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
        assert!(matches!(collect(&past).1, ScanEnd::Torn { valid_end, .. } if valid_end == group_end as u64));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = check_segment_header(&body);
            let mut data = segment_header(1).to_vec();
            data.extend_from_slice(&body);
            let _ = collect(&data);
            let _ = collect(&body);
            let _ = decode_payload(&Bytes::from(body));
        }

        #[test]
        fn records_round_trip(cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..5), 0..10)) {
            let cmds: Vec<Vec<Bytes>> = cmds.into_iter().map(|c| c.into_iter().map(Bytes::from).collect()).collect();
            let data = segment(&cmds);
            prop_assert_eq!(collect(&data), (cmds, ScanEnd::Clean));
        }
    }
}
