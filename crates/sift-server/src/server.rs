//! The network side: the accept loop, `maxclients`, one task per connection, the periodic
//! expiry sweep, and graceful shutdown (SHUTDOWN, SIGTERM, ctrl-c).
//!
//! Shutdown is one behaviour for `SHUTDOWN` and a stop signal: the final snapshot is taken
//! while the server still serves; if it fails (a full disk), the cause is logged once and the
//! server keeps running — `SHUTDOWN` answers an error, as Redis does — and a second signal
//! exits without the snapshot (status 1), the log still flushed and synced. `SHUTDOWN NOSAVE`
//! (or `FORCE`) exits without it on purpose (status 0).
//!
//! A connection task reads what the socket has, runs every complete request already buffered,
//! commits persistence once if any of them wrote, then flushes all their replies in one write.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;

use crate::cmd::{self, After, Session};
use crate::config::Params;
use crate::connection::{Connection, FLUSH_THRESHOLD};
use crate::frame::{Frame, Limits};
use crate::persist::Persistence;
use crate::shared::{ClientInfo, Shared};

/// How often the expiry sweep runs, and how many expired keys it may remove per shard per run.
const EXPIRE_PERIOD: Duration = Duration::from_millis(100);
const EXPIRE_BUDGET: usize = 200;
/// Most requests taken from the read buffer before they run: bounds the parsed requests held
/// at once when a client pipelines thousands.
const BATCH_MAX: usize = 256;
/// How long shutdown waits for connections to finish their current batch.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A bound, loaded server, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    /// The metrics endpoint's listener (`metrics-port`), if it is on.
    metrics: Option<TcpListener>,
    shared: Arc<Shared>,
    limits: Limits,
}

impl Server {
    /// Binds `bind:port` (port 0 picks a free one; see [`Server::local_addr`]) and loads the
    /// keyspace from `persistence`.
    pub async fn bind(params: Params, persistence: Box<dyn Persistence>) -> std::io::Result<Server> {
        let host = params.get("bind").unwrap_or("127.0.0.1").to_string();
        let port: u16 =
            params.get("port").unwrap_or("6379").parse().map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "port must be 0..=65535")
            })?;
        let listener = TcpListener::bind((host.as_str(), port)).await?;
        // Bound before the keyspace loads, like the main port: a port in use fails the start
        // at once, naming the flag.
        let metrics = match params.get("metrics-port").filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => {
                let port: u16 = p.parse().map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "metrics-port must be 0..=65535")
                })?;
                let bound = TcpListener::bind((host.as_str(), port)).await.map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot listen on {host}:{port} (metrics-port): {e}"),
                    )
                })?;
                Some(bound)
            }
        };
        let shared = Arc::new(Shared::new(params, persistence));
        shared.port.store(listener.local_addr()?.port(), Ordering::Relaxed);
        let started = Instant::now();
        shared.persistence.attach(Arc::downgrade(&shared));
        let loaded = shared.persistence.load(&mut shared.db.lock_all()).map_err(std::io::Error::other)?;
        tracing::info!(
            keys = loaded,
            engine = shared.persistence.name(),
            "keyspace loaded in {:?}",
            started.elapsed()
        );
        shared.dirty_at_save.store(shared.db.dirty(), Ordering::Relaxed);
        Ok(Server { listener, metrics, shared, limits: Limits::default() })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The metrics endpoint's address, when `metrics-port` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The shared state (for embedding and tests).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serves until SHUTDOWN or a stop signal (each item of `signals` is one, named: SIGTERM,
    /// SIGINT; a closed channel sends none), then closes every connection after its current
    /// batch. A signal takes the final snapshot first, while the server still serves: when it
    /// fails the server keeps running (the cause logged once) until the next signal, which
    /// exits without it and returns an error (see the module documentation).
    pub async fn run(self, mut signals: UnboundedReceiver<&'static str>) -> std::io::Result<()> {
        let Server { listener, metrics, shared, limits } = self;
        let sweeper = tokio::spawn(expiry_sweeper(shared.clone()));
        let monitor = tokio::spawn(crate::monitor::run(shared.clone()));
        let exporter = metrics.map(|l| {
            let shared = shared.clone();
            tokio::spawn(async move {
                if let Err(e) = crate::metrics::serve(l, shared).await {
                    tracing::error!("the metrics endpoint stopped: {e}");
                }
            })
        });
        let mut shutdown = shared.shutdown_signal();
        let mut tasks = JoinSet::new();
        let mut signals_open = true;
        let mut save_failed = false;
        let forced = loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, addr)) => accept(&shared, &mut tasks, stream, addr, limits).await,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                _ = shutdown.changed() => break false,
                signal = signals.recv(), if signals_open => match signal {
                    None => signals_open = false,
                    Some(name) if save_failed => {
                        tracing::warn!("{name} received again: exiting without the final snapshot");
                        break true;
                    }
                    Some(name) => {
                        tracing::info!("{name} received: taking the final snapshot");
                        let s = shared.clone();
                        let saved = match tokio::task::spawn_blocking(move || s.save_and_stop()).await {
                            Ok(result) => result.map_err(|e| e.to_string()),
                            Err(panicked) => Err(panicked.to_string()),
                        };
                        if let Err(e) = saved {
                            tracing::error!(
                                "the final snapshot failed, so the server keeps running (send {name} again to exit without it): {e}"
                            );
                            save_failed = true;
                        } else {
                            break false;
                        }
                    }
                },
            }
        };
        drop(listener);
        shared.request_shutdown();
        tracing::info!("shutting down: closing {} connection(s)", tasks.len());
        let drained =
            tokio::time::timeout(DRAIN_TIMEOUT, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tasks.abort_all();
        }
        sweeper.abort();
        monitor.abort();
        if let Some(e) = exporter {
            e.abort();
        }
        // Whatever happened above: every recorded write reaches the disk before the exit.
        shared.persistence.shutdown().map_err(std::io::Error::other)?;
        if forced {
            return Err(std::io::Error::other(
                "stopped without the final snapshot, which had failed (the log was flushed and synced)",
            ));
        }
        tracing::info!("server stopped");
        Ok(())
    }
}

/// Makes glibc's malloc give large freed blocks back to the system (call once, at start-up,
/// in a binary). glibc raises its mmap threshold to the size of any mmapped block freed, up to
/// 32 MiB; after the first log rewrite freed a filter-sized snapshot buffer, the next one came
/// from the heap and stayed resident after being freed: +13.4 MB of RSS for a server holding one
/// 13.8 MB filter (`scripts/bench_server.sh`, memory section). A fixed threshold of 1 MiB keeps
/// every block from 1 MiB up (filters, snapshot buffers, large requests) in its own mapping,
/// unmapped on free. No effect on other platforms or allocators.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is thread-safe and takes no
        // pointers. A refusal (0) leaves the default behaviour, which is still correct.
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
        if ok == 0 {
            tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused");
        }
    }
}

async fn expiry_sweeper(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(EXPIRE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let removed = shared.db.active_expire(EXPIRE_BUDGET);
        if removed > 0 {
            tracing::trace!(removed, "expired keys swept");
        }
    }
}

async fn accept(
    shared: &Arc<Shared>,
    tasks: &mut JoinSet<()>,
    stream: TcpStream,
    addr: SocketAddr,
    limits: Limits,
) {
    shared.stats.connections_received.fetch_add(1, Ordering::Relaxed);
    let mut conn = Connection::new(stream, limits);
    let maxclients = shared.config.read().maxclients;
    if shared.clients.lock().len() >= maxclients {
        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        // Answer from a task: a slow client must not stall the accept loop.
        tasks.spawn(async move {
            conn.write_frame(&Frame::error(cmd::err::MAX_CLIENTS), 2);
            let _ = conn.close().await;
        });
        return;
    }
    let id = shared.next_client_id();
    let info = ClientInfo {
        addr: Some(addr),
        laddr: conn.local_addr(),
        name: String::new(),
        lib_name: String::new(),
        lib_ver: String::new(),
        resp: 2,
        since: Instant::now(),
    };
    shared.clients.lock().insert(id, info);
    let shared = shared.clone();
    tasks.spawn(async move {
        let _registered = Registered { shared: &shared, id };
        serve(&shared, conn, id).await;
    });
}

/// Removes a client from the registry however its task ends.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.clients.lock().remove(&self.id);
    }
}

/// Commits the batch's writes before its replies go out; if that fails, the replies are
/// replaced by errors, so no write is acknowledged that may not be durable. A commit that waits
/// for an fsync only suspends this task (see [`Persistence::commit_async`]): the runtime thread
/// serves other connections meanwhile, and their writes join the next fsync.
///
/// A batch that only read waits too when it read a shard whose last write is not durable yet
/// ([`Session::wait_lsn`]): its replies may reveal that write.
async fn commit(shared: &Shared, session: &mut Session, conn: &mut Connection) {
    let wait = std::mem::take(&mut session.wait_lsn);
    let result = if session.needs_commit {
        session.needs_commit = false;
        shared.persistence.commit_async().await
    } else if wait > 0 {
        shared.persistence.wait_durable(wait).await
    } else {
        return;
    };
    if let Err(e) = result {
        tracing::error!("persistence commit failed, the batch's replies become errors: {e}");
        conn.replace_pending_replies(cmd::err::COMMIT_FAILED);
    }
}

/// A connection's session, whose WATCHes end with it however its task ends.
struct Unwatching<'a>(&'a Shared, Session);

impl std::ops::Deref for Unwatching<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.1
    }
}

impl std::ops::DerefMut for Unwatching<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.1
    }
}

impl Drop for Unwatching<'_> {
    fn drop(&mut self) {
        cmd::unwatch_all(self.0, &mut self.1);
    }
}

/// Serves one client until it leaves, QUITs, breaks the protocol, or the server shuts down.
async fn serve(shared: &Shared, mut conn: Connection, id: u64) {
    let mut session = Unwatching(shared, Session::new(id, shared.config.read().requirepass.is_none()));
    let mut shutdown = shared.shutdown_signal();
    let mut queue = VecDeque::new();
    loop {
        // Run every complete request already buffered (a batch, see `cmd::batch`), then
        // flush once.
        loop {
            let mut broken = None;
            while queue.len() < BATCH_MAX {
                match conn.next_request() {
                    Ok(Some(argv)) => queue.push_back(argv),
                    Ok(None) => break,
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                }
            }
            if queue.is_empty() && broken.is_none() {
                break;
            }
            while !queue.is_empty() {
                cmd::batch::execute_batch(shared, &mut session, &mut queue, |session, reply| {
                    if session.after != After::CloseSilently {
                        conn.write_frame(&reply, session.protocol);
                    }
                    conn.pending_output() <= FLUSH_THRESHOLD
                });
                if session.after != After::Continue {
                    commit(shared, &mut session, &mut conn).await;
                    let _ = conn.close().await;
                    return;
                }
                if conn.pending_output() > FLUSH_THRESHOLD {
                    commit(shared, &mut session, &mut conn).await;
                    if conn.flush().await.is_err() {
                        return;
                    }
                }
            }
            if let Some(e) = broken {
                // The requests before the broken one ran and are answered first.
                commit(shared, &mut session, &mut conn).await;
                tracing::debug!(client = id, "protocol error: {e}");
                let _ = conn.fail(&e).await;
                linger(&mut conn).await;
                return;
            }
        }
        commit(shared, &mut session, &mut conn).await;
        if conn.flush().await.is_err() {
            return;
        }
        if *shutdown.borrow_and_update() {
            let _ = conn.close().await;
            return;
        }
        tokio::select! {
            more = conn.fill() => match more {
                Ok(true) => {}
                // EOF or reset: an incomplete request in the buffer is dropped unexecuted.
                _ => return,
            },
            _ = shutdown.changed() => {
                let _ = conn.close().await;
                return;
            }
        }
    }
}

/// After a protocol error: read and discard what the client is still sending, briefly, so the
/// kernel does not answer unread data with a reset that could destroy the error reply.
async fn linger(conn: &mut Connection) {
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        let mut total = 0usize;
        while total < 1 << 20 {
            match conn.discard_input().await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::db::Locked;
    use crate::persist::PersistError;

    /// A store whose disk breaks at the first commit.
    #[derive(Debug, Default)]
    struct Broken {
        failed: AtomicBool,
    }

    impl Persistence for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn aof_enabled(&self) -> bool {
            true
        }
        fn write_error(&self) -> Option<String> {
            self.failed.load(Ordering::Relaxed).then(|| "disk on fire".to_string())
        }
        fn load(&self, _keys: &mut Locked<'_>) -> Result<usize, PersistError> {
            Ok(0)
        }
        fn record(&self, _argv: &[bytes::Bytes]) {}
        fn commit(&self) -> Result<(), PersistError> {
            self.failed.store(true, Ordering::Relaxed);
            Err(PersistError::Io(std::io::Error::other("disk on fire")))
        }
        fn save(&self, _keys: &mut Locked<'_>) -> Result<(), PersistError> {
            Ok(())
        }
        fn bgsave(
            &self,
            _keys: &mut Locked<'_>,
            _when: crate::persist::BgsaveWhen,
        ) -> Result<crate::persist::BgsaveStart, PersistError> {
            Ok(crate::persist::BgsaveStart::Started)
        }
        fn bgsave_in_progress(&self) -> bool {
            false
        }
        fn last_save_unix(&self) -> u64 {
            0
        }
    }

    async fn read_lines(s: &mut TcpStream, n: usize) -> String {
        let mut buf = Vec::new();
        while buf.windows(2).filter(|w| w == b"\r\n").count() < n {
            let mut chunk = [0u8; 1024];
            let k = s.read(&mut chunk).await.unwrap();
            assert!(k > 0, "closed after {:?}", String::from_utf8_lossy(&buf));
            buf.extend_from_slice(&chunk[..k]);
        }
        String::from_utf8(buf).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_turns_every_reply_of_the_batch_into_an_error() {
        let mut params = Params::default();
        params.set("port", b"0", true).unwrap();
        let server = Server::bind(params, Box::new(Broken::default())).await.unwrap();
        let (addr, shared) = (server.local_addr().unwrap(), server.shared());
        let (_signal, signals) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(server.run(signals));
        let mut s = TcpStream::connect(addr).await.unwrap();
        // A pipelined batch: a write and a read. Neither reply may claim success.
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n")
            .await
            .unwrap();
        let err = format!("-{}\r\n", cmd::err::COMMIT_FAILED);
        assert_eq!(read_lines(&mut s, 2).await, format!("{err}{err}"));
        // Later writes are refused before they run; reads still work.
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$6\r\nEXISTS\r\n$1\r\nb\r\n")
            .await
            .unwrap();
        assert_eq!(
            read_lines(&mut s, 2).await,
            "-MISCONF Errors writing to the AOF file: disk on fire\r\n:0\r\n"
        );
        shared.request_shutdown();
        task.await.unwrap().unwrap();
    }
}
