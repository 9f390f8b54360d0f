//! State shared by every connection: the keyspace, the configuration, the persistence engine,
//! the client registry and the shutdown signal. Commands reach it through
//! [`crate::cmd::Ctx::server`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::config::Params;
use crate::db::Db;
use crate::persist::Persistence;

/// What `CLIENT LIST` shows about a connection. Updated only by rare commands (SETNAME,
/// SETINFO, HELLO, SELECT), never per command.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Peer address.
    pub addr: Option<SocketAddr>,
    /// Local address.
    pub laddr: Option<SocketAddr>,
    /// `CLIENT SETNAME`.
    pub name: String,
    /// `CLIENT SETINFO LIB-NAME`.
    pub lib_name: String,
    /// `CLIENT SETINFO LIB-VER`.
    pub lib_ver: String,
    /// RESP version.
    pub resp: u8,
    /// Connected since.
    pub since: Instant,
}

/// Counters for `INFO stats`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted since start-up.
    pub connections_received: AtomicU64,
    /// Connections refused by `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Commands run (`total_commands_processed`): each command a client, a transaction or a
    /// script ran, as Redis counts them; not those refused before running, nor the log
    /// replayed at start-up.
    pub commands_processed: StripedCounter,
}

/// A counter that every connection increments: striped by client id over separate cache lines,
/// so that connections served by different threads do not contend for one line on each
/// command; a reader sums the stripes.
#[derive(Debug, Default)]
pub struct StripedCounter([PaddedCounter; 16]);

/// One stripe, alone on its cache line (128 bytes: adjacent-line prefetchers pair lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct PaddedCounter(AtomicU64);

impl StripedCounter {
    /// Adds one on the stripe of `client`.
    pub fn incr(&self, client: u64) {
        self.0[(client % 16) as usize].0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The total.
    pub fn sum(&self) -> u64 {
        self.0.iter().map(|c| c.0.load(std::sync::atomic::Ordering::Relaxed)).sum()
    }

    /// Back to 0 (`CONFIG RESETSTAT`).
    pub fn reset(&self) {
        for c in &self.0 {
            c.0.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The server-wide state.
pub struct Shared {
    /// The keyspace.
    pub db: Db,
    /// The configuration (`CONFIG GET/SET`); replaced as a whole on a successful CONFIG SET.
    pub config: RwLock<Params>,
    /// The durable store.
    pub persistence: Box<dyn Persistence>,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, ClientInfo>>,
    next_client_id: AtomicU64,
    /// When the server started.
    pub started: Instant,
    /// The TCP port actually bound (`INFO server` `tcp_port`).
    pub port: AtomicU16,
    /// Value of [`Db::dirty`] at the last successful save.
    pub dirty_at_save: AtomicU64,
    /// Counters.
    pub stats: Stats,
    /// Per-command calls, errors and latencies (the metrics endpoint).
    pub commands: std::sync::Arc<crate::metrics::CommandStats>,
    /// The filters' error rates against their targets (`INFO filters`, the metrics).
    pub filters: crate::monitor::FilterMonitor,
    /// The Lua VM and script cache (EVAL, SCRIPT).
    pub scripting: crate::script::Engine,
    shutdown: tokio::sync::watch::Sender<bool>,
    /// Set with `shutdown`: read by every write command (no lock to take).
    stopping: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("persistence", &self.persistence.name()).finish_non_exhaustive()
    }
}

impl Shared {
    /// The `maxmemory` check Redis runs before a command flagged `denyoom` (SET, COPY, every
    /// BF/CF command that may add; [`crate::cmd::execute`] applies it after the unknown-command,
    /// arity and NOAUTH errors, which Redis gives first): true while a limit is set and the
    /// charged memory of the keyspace ([`crate::db::Db::used_memory`], the sum of `MEMORY USAGE`
    /// over all keys) exceeds it. Reads, deletions and `FLUSHALL` still run, so a full server can
    /// be emptied.
    pub fn over_maxmemory(&self) -> bool {
        let max = self.config.read().maxmemory;
        max > 0 && self.db.used_memory() > max
    }

    /// New state around a configuration and a persistence engine.
    pub fn new(config: Params, persistence: Box<dyn Persistence>) -> Shared {
        Shared {
            db: Db::new(),
            config: RwLock::new(config),
            persistence,
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            started: Instant::now(),
            port: AtomicU16::new(0),
            dirty_at_save: AtomicU64::new(0),
            stats: Stats::default(),
            commands: std::sync::Arc::new(crate::metrics::CommandStats::new()),
            filters: crate::monitor::FilterMonitor::default(),
            scripting: crate::script::Engine::new(),
            shutdown: tokio::sync::watch::channel(false).0,
            stopping: AtomicBool::new(false),
        }
    }

    /// A fresh client id (ids are never reused, as Redis's).
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks the server to shut down (SHUTDOWN, signals). From then on write commands are not
    /// run: the final snapshot is taken under every shard lock just before this is called
    /// (still holding them), and a write after it would be acknowledged but missing from it.
    pub fn request_shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        self.shutdown.send_replace(true);
    }

    /// The final snapshot of a stop signal (SIGTERM, SIGINT), under every shard lock, then
    /// [`Shared::request_shutdown`] before the locks are released. On failure the server keeps
    /// running, as after a failed `SHUTDOWN`.
    pub fn save_and_stop(&self) -> Result<(), crate::persist::PersistError> {
        let mut keys = self.db.lock_all();
        self.persistence.save(&mut keys)?;
        let mut dirty = 0;
        keys.for_each_shard(|_, s| dirty += s.dirty());
        self.dirty_at_save.store(dirty, Ordering::Relaxed);
        self.request_shutdown();
        Ok(())
    }

    /// A receiver that changes to `true` when shutdown is requested.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Has shutdown been requested?
    pub fn is_shutting_down(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Updates the registry entry of client `id`.
    pub fn update_client(&self, id: u64, f: impl FnOnce(&mut ClientInfo)) {
        if let Some(c) = self.clients.lock().get_mut(&id) {
            f(c);
        }
    }
}
