//! RESP2 / RESP3 values: incremental parsing of client requests from a buffer, and encoding of
//! replies in either protocol.
//!
//! Requests are parsed in two steps, as in tokio's mini-redis: [`check_request`] walks the buffer
//! without allocating and says whether a whole request is there (and how long it is); only then
//! does [`parse_request`] build the argument list. Limits on bulk and multibulk lengths are
//! enforced in the first step, so a client announcing a 1 GB argument is refused before anything
//! is allocated for it.
//!
//! Replies are built as [`Frame`] values in their RESP3 shape and encoded for the connection's
//! protocol: in RESP2 a map becomes a flat array, a set an array, a boolean an integer, a double a
//! bulk string and a null a null bulk string — the downgrades Redis itself applies.

use bytes::Bytes;

/// Limits on what a client may send, as redis-server's `proto-max-bulk-len` and its fixed
/// multibulk and inline limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string argument, in bytes.
    pub max_bulk_len: usize,
    /// Largest number of arguments in one request.
    pub max_multibulk_len: usize,
    /// Largest inline request line, in bytes.
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, max_multibulk_len: 1024 * 1024, max_inline_len: 64 * 1024 }
    }
}

/// A protocol violation: the connection answers with this error and is closed, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// `*<n>` with a non-number or an out-of-range count.
    #[error("ERR Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` with a non-number or an out-of-range length.
    #[error("ERR Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An element of a request array that is not a bulk string.
    #[error("ERR Protocol error: expected '$', got '{0}'")]
    ExpectedBulk(char),
    /// An inline request longer than the limit.
    #[error("ERR Protocol error: too big inline request")]
    TooBigInline,
    /// A multibulk header line longer than the limit.
    #[error("ERR Protocol error: too big mbulk count string")]
    TooBigCount,
    /// An inline request with an unterminated quote.
    #[error("ERR Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// The outcome of [`check_request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// More bytes are needed.
    Incomplete,
    /// A whole request of this many bytes is buffered.
    Complete(usize),
}

/// Finds `\r\n` (or, for inline requests, `\n`) from `start`; returns the index of `\r`/`\n`.
fn find_crlf(buf: &[u8], start: usize) -> Option<usize> {
    let rel = memchr(b'\n', &buf[start..])?;
    let nl = start + rel;
    if nl > start && buf[nl - 1] == b'\r' {
        Some(nl - 1)
    } else {
        Some(nl)
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// Parses the decimal integer of a `*`/`$` header line, as Redis's `string2ll`: optional `-`,
/// digits only, no spaces, no `+`.
fn parse_len(digits: &[u8]) -> Option<i64> {
    let (neg, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// Walks one request at the start of `buf` without allocating: a RESP array of bulk strings
/// (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) or an inline command line.
pub fn check_request(buf: &[u8], limits: &Limits) -> Result<Check, ProtocolError> {
    if buf.is_empty() {
        return Ok(Check::Incomplete);
    }
    if buf[0] != b'*' {
        return match memchr(b'\n', buf) {
            Some(nl) => {
                if nl > limits.max_inline_len {
                    Err(ProtocolError::TooBigInline)
                } else {
                    Ok(Check::Complete(nl + 1))
                }
            }
            None if buf.len() > limits.max_inline_len => Err(ProtocolError::TooBigInline),
            None => Ok(Check::Incomplete),
        };
    }
    let Some(end) = find_crlf(buf, 1) else {
        return if buf.len() > limits.max_inline_len {
            Err(ProtocolError::TooBigCount)
        } else {
            Ok(Check::Incomplete)
        };
    };
    if buf[end] != b'\r' {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    let n = parse_len(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
    if n > limits.max_multibulk_len as i64 {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    let mut at = end + 2;
    // `*0` and negative counts are empty requests that Redis skips.
    for _ in 0..n.max(0) {
        if at >= buf.len() {
            return Ok(Check::Incomplete);
        }
        if buf[at] != b'$' {
            return Err(ProtocolError::ExpectedBulk(buf[at] as char));
        }
        let Some(end) = find_crlf(buf, at + 1) else {
            return if buf.len() - at > 32 {
                Err(ProtocolError::InvalidBulkLength)
            } else {
                Ok(Check::Incomplete)
            };
        };
        if buf[end] != b'\r' {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let len = parse_len(&buf[at + 1..end]).ok_or(ProtocolError::InvalidBulkLength)?;
        if len < 0 || len as u64 > limits.max_bulk_len as u64 {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let data_end = end + 2 + len as usize;
        if data_end + 2 > buf.len() {
            return Ok(Check::Incomplete);
        }
        if &buf[data_end..data_end + 2] != b"\r\n" {
            return Err(ProtocolError::InvalidBulkLength);
        }
        at = data_end + 2;
    }
    Ok(Check::Complete(at))
}

/// Parses a request that [`check_request`] reported complete, `frame` being exactly its bytes.
/// Arguments are zero-copy slices of `frame`. An empty list means an empty request (skip it).
pub fn parse_request(frame: Bytes) -> Result<Vec<Bytes>, ProtocolError> {
    if frame.first() != Some(&b'*') {
        return split_inline(&frame);
    }
    let end = find_crlf(&frame, 1).ok_or(ProtocolError::InvalidMultibulkLength)?;
    let n = parse_len(&frame[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?.max(0) as usize;
    let mut args = Vec::with_capacity(n);
    let mut at = end + 2;
    for _ in 0..n {
        let end = find_crlf(&frame, at + 1).ok_or(ProtocolError::InvalidBulkLength)?;
        let len = parse_len(&frame[at + 1..end]).ok_or(ProtocolError::InvalidBulkLength)? as usize;
        let start = end + 2;
        args.push(frame.slice(start..start + len));
        at = start + len + 2;
    }
    Ok(args)
}

/// Splits one line into arguments with the quoting rules of inline commands (also redis.conf's
/// syntax, used for the config file).
pub fn split_args(line: &[u8]) -> Result<Vec<Bytes>, ProtocolError> {
    split_inline(line)
}

/// Splits an inline command line into arguments, with the quoting rules of redis-server's
/// `sdssplitargs`: double quotes with `\n \r \t \b \a \\ \"` and `\xHH` escapes, single quotes
/// with `\'`; a closing quote must be followed by a space or the end.
fn split_inline(line: &[u8]) -> Result<Vec<Bytes>, ProtocolError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut args = Vec::new();
    let mut i = 0;
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= line.len() {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    let hex = |b: u8| (b as char).to_digit(16);
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        cur.push((h * 16 + l) as u8);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    cur.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else if in_sq {
                if i >= line.len() {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                let c = line[i];
                if c == b'\\' && i + 1 < line.len() && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                if i >= line.len() || is_space(line[i]) {
                    break;
                }
                match line[i] {
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        args.push(Bytes::from(cur));
    }
}

/// Reply values and their encoding live in `sift-commands`, shared with the Redis module.
pub use sift_commands::frame::Frame;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn req(s: &[u8]) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        match check_request(s, &Limits::default())? {
            Check::Incomplete => Ok(None),
            Check::Complete(n) => Ok(Some(
                parse_request(Bytes::copy_from_slice(&s[..n]))?.into_iter().map(|b| b.to_vec()).collect(),
            )),
        }
    }

    #[test]
    fn multibulk_request() {
        let r = req(b"*2\r\n$4\r\nPING\r\n$3\r\nabc\r\n").unwrap().unwrap();
        assert_eq!(r, vec![b"PING".to_vec(), b"abc".to_vec()]);
        // Two pipelined requests: check reports the first one's length only.
        let two = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(check_request(two, &Limits::default()), Ok(Check::Complete(14)));
        assert_eq!(req(b"*0\r\n").unwrap().unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn binary_safe_arguments() {
        let r = req(b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n").unwrap().unwrap();
        assert_eq!(r, vec![b"GET".to_vec(), b"a\r\nb".to_vec()]);
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let full = b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            assert_eq!(req(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert_eq!(req(full).unwrap().unwrap().len(), 3);
    }

    #[test]
    fn huge_bulk_is_refused_before_allocation() {
        let r = check_request(b"*2\r\n$3\r\nSET\r\n$1073741824\r\n", &Limits::default());
        assert_eq!(r, Err(ProtocolError::InvalidBulkLength));
        let r = check_request(b"*99999999\r\n", &Limits::default());
        assert_eq!(r, Err(ProtocolError::InvalidMultibulkLength));
    }

    #[test]
    fn malformed_requests() {
        assert_eq!(req(b"*x\r\n"), Err(ProtocolError::InvalidMultibulkLength));
        assert_eq!(req(b"*1\r\n:1\r\n"), Err(ProtocolError::ExpectedBulk(':')));
        assert_eq!(req(b"*1\r\n$-5\r\n"), Err(ProtocolError::InvalidBulkLength));
        assert_eq!(req(b"*1\r\n$2\r\nabcd\r\n"), Err(ProtocolError::InvalidBulkLength));
        assert_eq!(ProtocolError::ExpectedBulk(':').to_string(), "ERR Protocol error: expected '$', got ':'");
    }

    #[test]
    fn inline_requests() {
        assert_eq!(req(b"PING\r\n").unwrap().unwrap(), vec![b"PING".to_vec()]);
        assert_eq!(
            req(b"set \"a b\" 'c d' \"\\x41\\n\"\n").unwrap().unwrap(),
            vec![b"set".to_vec(), b"a b".to_vec(), b"c d".to_vec(), b"A\n".to_vec()]
        );
        assert_eq!(req(b"   \r\n").unwrap().unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(req(b"set \"abc\n"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(req(b"set \"a\"b\n"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(req(b"PING"), Ok(None));
        let long = vec![b'a'; 70 * 1024];
        assert_eq!(req(&long), Err(ProtocolError::TooBigInline));
    }

    fn enc(f: &Frame, proto: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        f.encode(proto, &mut out);
        out.to_vec()
    }

    #[test]
    fn encodes_both_protocols() {
        let m = Frame::Map(vec![(Frame::bulk("Capacity"), Frame::Integer(100))]);
        assert_eq!(enc(&m, 2), b"*2\r\n$8\r\nCapacity\r\n:100\r\n");
        assert_eq!(enc(&m, 3), b"%1\r\n$8\r\nCapacity\r\n:100\r\n");
        assert_eq!(enc(&Frame::Null, 2), b"$-1\r\n");
        assert_eq!(enc(&Frame::Null, 3), b"_\r\n");
        assert_eq!(enc(&Frame::Boolean(true), 2), b":1\r\n");
        assert_eq!(enc(&Frame::Boolean(false), 3), b"#f\r\n");
        assert_eq!(enc(&Frame::Double(1.5), 3), b",1.5\r\n");
        assert_eq!(enc(&Frame::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Frame::error("ERR x"), 2), b"-ERR x\r\n");
        assert_eq!(enc(&Frame::Set(vec![Frame::Integer(1)]), 3), b"~1\r\n:1\r\n");
        assert_eq!(enc(&Frame::error("ERR a\r\nb"), 2), b"-ERR a  b\r\n");
        assert_eq!(enc(&Frame::Verbatim("x".into()), 3), b"=5\r\ntxt:x\r\n");
    }
}
