//! The CMS.*, TOPK.* and TDIGEST.* commands against the real sift-server binary: the golden
//! transcript of RedisBloom's sketches (`suite/sketches.rs`, which `crates/sift-redis` runs
//! against redis-server with the module too), byte for byte in RESP2 and RESP3, with current
//! RedisBloom's replies and Redis ≥ 7.2's double texts.

// `common` and `suite` both include `suite/client.rs`: two module paths for one file, on purpose.
#![allow(clippy::duplicate_mod)]

mod common;
mod suite;

use common::TestServer;
use suite::sketches::{sketch_transcript_byte_exact, Doubles};
use suite::{Server, Target};

impl Server for TestServer {
    fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The sift-server binary, with a private data directory (so DEBUG RELOAD saves and loads).
struct SiftServer;

impl Target for SiftServer {
    fn start(&self) -> Box<dyn Server> {
        Box::new(TestServer::start(&[]))
    }
}

#[test]
fn sketch_transcript_resp2_byte_exact() {
    sketch_transcript_byte_exact(&SiftServer, 2, Doubles::Current);
}

#[test]
fn sketch_transcript_resp3_byte_exact() {
    sketch_transcript_byte_exact(&SiftServer, 3, Doubles::Current);
}
