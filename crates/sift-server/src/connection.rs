//! Buffered reading of requests and writing of replies on one socket.
//!
//! Reading: bytes accumulate in a `BytesMut`; [`Connection::next_request`] takes one complete
//! request out of it without touching the socket ([`frame::check_request`] first, so nothing is
//! allocated for a request that is not all there, then [`frame::parse_request`], zero-copy).
//! Writing: replies are encoded into an output buffer, and [`Connection::flush`] sends it.
//!
//! The server loop uses this to answer pipelined requests in batches: it handles every
//! complete request already buffered, then flushes once. One `write` per batch instead of one
//! per reply, and one point per batch where persistence can commit (group commit).

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::frame::{self, Check, Frame, Limits, ProtocolError};

/// Initial read buffer capacity, and the least free space kept before each read.
const READ_CHUNK: usize = 16 * 1024;

/// Output above this size is flushed before the batch ends, so a client pipelining many large
/// replies does not make the server buffer them all.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

/// A client connection.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Replies in `wbuf` (they all belong to requests not yet committed).
    replies: usize,
    limits: Limits,
}

impl Connection {
    /// Wraps an accepted socket.
    pub fn new(stream: TcpStream, limits: Limits) -> Connection {
        // Replies are small and written in batches: latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        Connection {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::with_capacity(READ_CHUNK),
            replies: 0,
            limits,
        }
    }

    /// The peer address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer_addr().ok()
    }

    /// The local address.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// Takes the next complete request from the buffer: `Ok(None)` when more bytes are needed.
    /// An empty request (`*0`, a blank line) comes back as an empty vector.
    pub fn next_request(&mut self) -> Result<Option<Vec<bytes::Bytes>>, ProtocolError> {
        match frame::check_request(&self.rbuf, &self.limits)? {
            Check::Incomplete => Ok(None),
            Check::Complete(len) => {
                let bytes = self.rbuf.split_to(len).freeze();
                frame::parse_request(bytes).map(Some)
            }
        }
    }

    /// Reads more bytes from the socket. Returns `false` at end of stream: a request left
    /// incomplete in the buffer is dropped unexecuted (a client gone mid-command loses only it).
    pub async fn fill(&mut self) -> std::io::Result<bool> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 2 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let n = self.stream.read_buf(&mut self.rbuf).await?;
        Ok(n > 0)
    }

    /// Encodes a reply into the output buffer.
    pub fn write_frame(&mut self, reply: &Frame, protocol: u8) {
        reply.encode(protocol, &mut self.wbuf);
        self.replies += 1;
    }

    /// Replaces every reply not yet sent by the error `message` (one per reply, so the client
    /// still gets one answer per request): used when persistence could not make the batch's
    /// writes durable, so none of its replies may claim success.
    pub fn replace_pending_replies(&mut self, message: &str) {
        let n = self.replies;
        self.wbuf.clear();
        self.replies = 0;
        for _ in 0..n {
            self.write_frame(&Frame::error(message.to_string()), 2);
        }
    }

    /// Bytes waiting to be sent.
    pub fn pending_output(&self) -> usize {
        self.wbuf.len()
    }

    /// Sends the output buffer.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        while self.wbuf.has_remaining() {
            let n = self.stream.write(&self.wbuf).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.wbuf.advance(n);
        }
        self.replies = 0;
        self.stream.flush().await
    }

    /// Sends the output buffer, then a protocol error reply, and shuts the write side down.
    pub async fn fail(&mut self, e: &ProtocolError) -> std::io::Result<()> {
        self.write_frame(&Frame::error(e.to_string()), 2);
        self.flush().await?;
        self.stream.shutdown().await
    }

    /// Reads and throws away input (after a protocol error); returns the bytes read.
    pub async fn discard_input(&mut self) -> std::io::Result<usize> {
        self.rbuf.clear();
        self.stream.read_buf(&mut self.rbuf).await
    }

    /// Shuts the write side down (after QUIT, on server shutdown).
    pub async fn close(&mut self) -> std::io::Result<()> {
        self.flush().await?;
        self.stream.shutdown().await
    }
}
