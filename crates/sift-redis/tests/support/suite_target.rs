//! The shared suite's [`Server`] and [`Target`] (`sift-server/tests/suite`) for redis-server or
//! Valkey with the module: for the test binaries that include the suite (`module.rs`,
//! `sketches.rs`), beside `#[macro_use] mod support;`.

use std::time::{Duration, Instant};

use crate::suite::{Raw, Server, Target};
use crate::support::{Program, RedisServer};

/// The server configuration of the AOF tests: a plain AOF (no RDB preamble, so the rewrite's
/// commands can be read), every write synced.
pub const AOF: &[&str] = &["--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always"];

/// Waits (up to 30 s) until no AOF rewrite is in progress or scheduled on the server of `c`.
pub fn wait_aof_rewrite(c: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let field = |c: &mut Raw, name: &str| {
        let text = c.cmd_text(&["INFO", "persistence"]);
        let value = text.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::trim));
        value.unwrap_or_else(|| panic!("no {name} in INFO persistence")).to_string()
    };
    while field(c, "aof_rewrite_in_progress") != "0" || field(c, "aof_rewrite_scheduled") != "0" {
        assert!(Instant::now() < deadline, "AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Server for RedisServer {
    fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    fn pid(&self) -> u32 {
        RedisServer::pid(self)
    }
}

/// A server program + the module, fresh for each start.
pub struct WithModule(pub Program);

/// redis-server + the module.
pub const REDIS: WithModule = WithModule(Program::Redis);

impl Target for WithModule {
    fn start(&self) -> Box<dyn Server> {
        Box::new(self.0.start(&[], &[]))
    }
    fn config_name(&self, name: &str) -> String {
        format!("bf.{name}")
    }
    fn module_configs_prefixed(&self) -> bool {
        true
    }
    fn memory_scale(&self) -> u64 {
        12
    }
}
