//! The CMS.*, TOPK.* and TDIGEST.* commands in redis-server (Debian's 7.0.15 in CI) with
//! `libsift_redis.so`: the golden transcript of RedisBloom's sketches, byte for byte in RESP2 and
//! RESP3 (the shared `suite/sketches.rs`, which sift-server passes too). Redis 7.0 prints the
//! doubles (`%.17g`), so those are the recorded bytes; everything else is current RedisBloom's.

#[path = "../../sift-server/tests/suite/mod.rs"]
mod suite;
mod support;

use suite::sketches::{sketch_transcript_byte_exact, Doubles};
use suite::{Server, Target};
use support::RedisServer;

impl Server for RedisServer {
    fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    fn pid(&self) -> u32 {
        RedisServer::pid(self)
    }
}

/// redis-server + the module, fresh for each start.
struct RedisWithModule;

impl Target for RedisWithModule {
    fn start(&self) -> Box<dyn Server> {
        Box::new(RedisServer::start(&[], &[]))
    }
}

#[test]
fn sketch_transcript_resp2_byte_exact() {
    sketch_transcript_byte_exact(&RedisWithModule, 2, Doubles::Redis70);
}

#[test]
fn sketch_transcript_resp3_byte_exact() {
    sketch_transcript_byte_exact(&RedisWithModule, 3, Doubles::Redis70);
}
