//! The shared suite's [`Server`] and [`Target`] (`suite/`) for the sift-server binary: for the
//! test binaries that include both `common` and `suite` (`bloom_commands.rs`,
//! `sketch_commands.rs`).

use crate::common::TestServer;
use crate::suite::{Server, Target};

impl Server for TestServer {
    fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The sift-server binary, with a private data directory (so DEBUG RELOAD saves and loads).
pub struct SiftServer;

impl Target for SiftServer {
    fn start(&self) -> Box<dyn Server> {
        Box::new(TestServer::start(&[]))
    }
    fn scripting(&self) -> bool {
        cfg!(feature = "lua")
    }
}
