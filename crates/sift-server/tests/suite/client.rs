//! A raw RESP client that reads whole replies as bytes, for byte-exact checks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A raw TCP client that reads whole RESP replies as bytes, for byte-exact checks.
pub struct Raw {
    pub reader: BufReader<TcpStream>,
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { reader: BufReader::new(stream.try_clone().unwrap()), stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends a command as a RESP array of bulk strings.
    pub fn send_cmd(&mut self, args: &[&str]) {
        self.send(&encode(args));
    }

    /// Sends a command and returns its reply's bytes.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        self.send_cmd(args);
        self.reply()
    }

    /// Sends a command with binary-safe arguments and returns its reply's bytes.
    pub fn cmd_bytes<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(&encode_bytes(args));
        self.reply()
    }

    /// Sends a command and returns its reply as (lossy) text, for readable asserts.
    pub fn cmd_text(&mut self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cmd(args)).into_owned()
    }

    fn line(&mut self, out: &mut Vec<u8>) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("read line");
        assert!(line.ends_with(b"\r\n"), "unterminated line {:?}", String::from_utf8_lossy(&line));
        out.extend_from_slice(&line);
        line[..line.len() - 2].to_vec()
    }

    /// Reads exactly one reply, returning its raw bytes.
    pub fn reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.reply_into(&mut out);
        out
    }

    fn reply_into(&mut self, out: &mut Vec<u8>) {
        let mut first = [0u8; 1];
        self.reader.read_exact(&mut first).expect("reply expected, got EOF or timeout");
        out.push(first[0]);
        let body = self.line(out);
        let n = || String::from_utf8_lossy(&body).parse::<i64>().expect("length");
        match first[0] {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {}
            b'$' | b'=' | b'!' => {
                let len = n();
                if len >= 0 {
                    let mut data = vec![0u8; len as usize + 2];
                    self.reader.read_exact(&mut data).unwrap();
                    out.extend_from_slice(&data);
                }
            }
            b'*' | b'~' | b'>' => {
                for _ in 0..n().max(0) {
                    self.reply_into(out);
                }
            }
            b'%' | b'|' => {
                for _ in 0..2 * n() {
                    self.reply_into(out);
                }
            }
            other => panic!("unexpected reply type {:?}", other as char),
        }
    }

    /// True when the server has closed the connection (reads EOF).
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0) | Err(_))
    }
}

pub fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// [`encode`] for binary arguments.
pub fn encode_bytes<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
