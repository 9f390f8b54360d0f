//! Reply values in their RESP3 shape, and their encoding for RESP2 or RESP3 clients.
//!
//! A command builds a [`Frame`]; the transport decides the bytes: sift-server encodes it with
//! [`Frame::encode`] for the connection's protocol (in RESP2 a map becomes a flat array, a set an
//! array, a boolean an integer, a double a bulk string and a null a null bulk string, the
//! downgrades Redis itself applies), the Redis module walks it with the server's reply API.

use bytes::{BufMut, Bytes, BytesMut};
use sift::compat::redisbloom::DoubleFormat;

/// A reply value, in its RESP3 shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...`: the text after the `-`.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$3\r\nfoo`.
    Bulk(Bytes),
    /// RESP3 `_`; RESP2 null bulk `$-1`.
    Null,
    /// RESP2 null array `*-1`; RESP3 `_`.
    NullArray,
    /// `*n`.
    Array(Vec<Frame>),
    /// RESP3 `%n`; RESP2 flat array of 2n elements.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n`; RESP2 array.
    Set(Vec<Frame>),
    /// RESP3 `,1.5`; RESP2 bulk string of the same text.
    Double(f64),
    /// RESP3 `#t`/`#f`; RESP2 integer 1/0.
    Boolean(bool),
    /// RESP3 verbatim string `=n\r\ntxt:...`; RESP2 bulk string of the text.
    Verbatim(Bytes),
}

impl Frame {
    /// `+OK`.
    pub fn ok() -> Frame {
        Frame::Simple("OK".into())
    }

    /// An error reply with exactly this text after the `-`.
    pub fn error(text: impl Into<String>) -> Frame {
        Frame::Error(text.into())
    }

    /// A bulk string.
    pub fn bulk(b: impl Into<Bytes>) -> Frame {
        Frame::Bulk(b.into())
    }

    /// Encodes the frame for a connection speaking RESP `protocol` (2 or 3).
    pub fn encode(&self, protocol: u8, out: &mut BytesMut) {
        let resp3 = protocol >= 3;
        match self {
            Frame::Simple(s) => line(out, b'+', one_line(s).as_bytes()),
            Frame::Error(s) => line(out, b'-', one_line(s).as_bytes()),
            Frame::Integer(i) => line(out, b':', itoa(*i).as_bytes()),
            Frame::Bulk(b) => bulk(out, b'$', b),
            Frame::Null | Frame::NullArray if resp3 => out.put_slice(b"_\r\n"),
            Frame::Null => out.put_slice(b"$-1\r\n"),
            Frame::NullArray => out.put_slice(b"*-1\r\n"),
            Frame::Array(items) => {
                // Most arrays are of small scalars (BF.MADD's 100 booleans): one reservation.
                out.reserve(16 + 4 * items.len());
                line(out, b'*', itoa(items.len() as i64).as_bytes());
                for f in items {
                    f.encode(protocol, out);
                }
            }
            Frame::Map(pairs) => {
                if resp3 {
                    line(out, b'%', itoa(pairs.len() as i64).as_bytes());
                } else {
                    line(out, b'*', itoa(2 * pairs.len() as i64).as_bytes());
                }
                for (k, v) in pairs {
                    k.encode(protocol, out);
                    v.encode(protocol, out);
                }
            }
            Frame::Set(items) => {
                line(out, if resp3 { b'~' } else { b'*' }, itoa(items.len() as i64).as_bytes());
                for f in items {
                    f.encode(protocol, out);
                }
            }
            Frame::Double(d) => {
                // Redis ≥ 7.2's reply text (`d2string`: integers plain, else Grisu2 with
                // exponents as `1e-10`), which RESP3 clients and RedisBloom's users see.
                let text = sift::compat::redisbloom::format_double(*d, DoubleFormat::D2String);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, b'$', text.as_bytes());
                }
            }
            Frame::Boolean(b) => {
                if resp3 {
                    out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Frame::Verbatim(text) => {
                if resp3 {
                    line(out, b'=', itoa(text.len() as i64 + 4).as_bytes());
                    out.put_slice(b"txt:");
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, b'$', text);
                }
            }
        }
    }
}

/// Simple strings and errors cannot hold CR or LF (an error echoing a client's argument could
/// otherwise inject a reply); Redis replaces them with spaces too.
fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\r', '\n']) {
        s.replace(['\r', '\n'], " ").into()
    } else {
        s.into()
    }
}

fn line(out: &mut BytesMut, prefix: u8, body: &[u8]) {
    out.reserve(body.len() + 3);
    out.put_u8(prefix);
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, prefix: u8, body: &[u8]) {
    line(out, prefix, itoa(body.len() as i64).as_bytes());
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

/// The decimal digits of `i`, without allocating (every header and integer reply needs them).
pub(crate) fn itoa(i: i64) -> Digits {
    let mut d = Digits { buf: [0; 20], start: 20 };
    let neg = i < 0;
    let mut v = i.unsigned_abs();
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        d.start -= 1;
        d.buf[d.start] = b'-';
    }
    d
}

/// Up to 20 ASCII bytes (`i64::MIN` is 20 characters), right-aligned in `buf`.
pub(crate) struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itoa_matches_to_string() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = vec![0, 1, -1, 9, 10, -10, i64::MIN, i64::MAX, i64::MIN + 1];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x as i64 >> (x % 64));
        }
        for v in values {
            assert_eq!(itoa(v).as_bytes(), v.to_string().as_bytes());
        }
    }

    #[test]
    fn booleans_and_arrays_in_both_protocols() {
        let f = Frame::Array(vec![Frame::Boolean(true), Frame::Boolean(false), Frame::Integer(-42)]);
        let enc = |p| {
            let mut out = BytesMut::new();
            f.encode(p, &mut out);
            out.to_vec()
        };
        assert_eq!(enc(2), b"*3\r\n:1\r\n:0\r\n:-42\r\n");
        assert_eq!(enc(3), b"*3\r\n#t\r\n#f\r\n:-42\r\n");
    }
}
