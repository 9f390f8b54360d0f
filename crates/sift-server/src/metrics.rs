//! Per-command counters and latency histograms, and the Prometheus endpoint (`--metrics-port`)
//! that exports them with the server's other state.
//!
//! # Counting on the hot path
//!
//! Every command that runs is counted by the dispatcher ([`crate::cmd`]): its calls, the calls
//! that answered an error, and its execution time (the handler alone, as Redis's
//! `commandstats` measure it: not the wait for shard locks, the fsync or the socket), read from
//! the CPU's time-stamp counter through `quanta` (std's `Instant` cost 45 ns a read on the
//! shared VM we benchmark on, 9 % of a pipelined BF.ADD's CPU for the two). The
//! counters live in per-thread blocks ([`CommandStats`]): a thread only ever writes its own
//! block, so an update is a plain load and store of a relaxed atomic (no locked instruction, no
//! cache line shared with another thread), indexed by the command's row in the table. A scrape
//! sums the blocks. A thread's block goes back to a free list when the thread ends and the next
//! new thread takes it over, so the blocks never outnumber the threads alive at once (tokio
//! replaces worker threads that a script moved off the runtime).
//!
//! Requests refused before they run (unknown command, wrong arity, `NOAUTH`, `OOM`,
//! `MISCONF`) are rare and counted with plain atomic increments ([`CommandStats::reject`]).
//!
//! # The endpoint
//!
//! `GET /metrics` on `bind:metrics-port` answers the OpenMetrics text format, written by the
//! `prometheus-client` crate from a [`Collector`] that reads the live state at each scrape (on
//! a blocking thread: counting the keys locks each shard in turn). The metric names are listed
//! in `docs/METRICS.md`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::cmd::table::{self, CommandSpec};
use crate::shared::Shared;

/// Finite bucket bounds of the latency histograms: 2^10 ns (~1 µs) to 2^30 ns (~1.07 s),
/// doubling. A power of two lets the bucket be found from the leading zeros of the duration,
/// without a search.
const FIRST_BOUND_LOG2: u32 = 10;
/// Number of finite buckets (bounds 2^10 ... 2^30 ns).
pub const FINITE_BUCKETS: usize = 21;
/// Slots of one command's row in a block: calls, failed calls, total nanoseconds, then the
/// (non-cumulative) bucket counts, the last one for durations past every finite bound.
const CALLS: usize = 0;
const FAILED: usize = 1;
const NANOS: usize = 2;
const BUCKET0: usize = 3;
const ROW: usize = BUCKET0 + FINITE_BUCKETS + 1;

/// The histogram bucket of a duration of `nanos`: the smallest `k` with
/// `nanos <= 2^(10 + k)`, or [`FINITE_BUCKETS`] past the last bound.
fn bucket(nanos: u64) -> usize {
    if nanos <= 1 << FIRST_BOUND_LOG2 {
        return 0;
    }
    // ceil(log2(nanos)) for nanos > 1.
    let log2 = 64 - (nanos - 1).leading_zeros();
    ((log2 - FIRST_BOUND_LOG2) as usize).min(FINITE_BUCKETS)
}

/// The upper bound of finite bucket `k`, in seconds.
fn bound_seconds(k: usize) -> f64 {
    (1u64 << (FIRST_BOUND_LOG2 as usize + k)) as f64 / 1e9
}

/// One thread's counters: [`ROW`] slots per command.
#[derive(Debug)]
struct Block(Box<[AtomicU64]>);

impl Block {
    fn new(rows: usize) -> Block {
        Block((0..rows * ROW).map(|_| AtomicU64::new(0)).collect())
    }

    /// Adds `v` to slot `i`. Only the thread holding the block writes it (see the module
    /// documentation), so a load and a store cannot lose another writer's update; readers on
    /// other threads see each slot whole (a 64-bit atomic), perhaps a moment late.
    #[inline]
    fn add(&self, i: usize, v: u64) {
        let slot = &self.0[i];
        slot.store(slot.load(Relaxed).wrapping_add(v), Relaxed);
    }
}

/// The block a thread writes, returned to its owner's free list when the thread ends.
struct Slot {
    owner: Weak<CommandStats>,
    block: Arc<Block>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.upgrade() {
            owner.free.lock().push(self.block.clone());
        }
    }
}

thread_local! {
    static SLOT: RefCell<Option<Slot>> = const { RefCell::new(None) };
}

/// Per-command call, error and latency counters (see the module documentation).
#[derive(Debug)]
pub struct CommandStats {
    /// Row names: every command of the table, then every subcommand (`config|get`).
    names: Vec<&'static str>,
    /// The table's subcommand slices: (address of the first, length, row of the first).
    subcommands: Vec<(usize, usize, usize)>,
    /// Every block ever handed to a thread (a scrape sums them).
    blocks: Mutex<Vec<Arc<Block>>>,
    /// Blocks whose thread ended, for the next thread.
    free: Mutex<Vec<Arc<Block>>>,
    /// Requests refused before running, per row; the last slot counts unknown commands.
    rejected: Box<[AtomicU64]>,
    /// The clock of the latencies: the CPU's time-stamp counter where it is invariant (a read
    /// is one instruction), else the OS's monotonic clock.
    clock: quanta::Clock,
}

/// What a scrape reads of one command.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandFigures {
    /// The command's name (`container|sub` for a subcommand).
    pub name: &'static str,
    /// Calls that ran.
    pub calls: u64,
    /// Calls that ran and answered an error.
    pub failed: u64,
    /// Requests refused before running (arity, `NOAUTH`, `OOM`, `MISCONF`).
    pub rejected: u64,
    /// Total execution time, nanoseconds.
    pub nanos: u64,
    /// Calls per bucket (non-cumulative): [`FINITE_BUCKETS`] finite ones, then the rest.
    pub buckets: [u64; FINITE_BUCKETS + 1],
}

/// The name [`CommandStats::figures`] gives the unknown commands' rejections.
pub const UNKNOWN: &str = "unknown";

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats::new()
    }
}

impl CommandStats {
    /// Counters for every row of [`table::commands`] and their subcommands, all 0.
    pub fn new() -> CommandStats {
        let all = table::commands();
        let mut names: Vec<&'static str> = all.iter().map(|c| c.name).collect();
        let mut subcommands = Vec::new();
        for c in all {
            let subs: &'static [CommandSpec] = c.subcommands;
            if !subs.is_empty() {
                subcommands.push((subs.as_ptr() as usize, subs.len(), names.len()));
                names.extend(subs.iter().map(|s| s.name));
            }
        }
        let rejected = (0..=names.len()).map(|_| AtomicU64::new(0)).collect();
        CommandStats {
            names,
            subcommands,
            blocks: Mutex::new(Vec::new()),
            free: Mutex::new(Vec::new()),
            rejected,
            clock: quanta::Clock::new(),
        }
    }

    /// A reading of the latency clock, for [`CommandStats::record`].
    #[inline]
    pub fn now(&self) -> u64 {
        self.clock.raw()
    }

    /// The row of `spec`, a row of [`table::commands`] or one of their subcommands (pointer
    /// arithmetic on the table: no hashing on the hot path).
    fn row(&self, spec: &'static CommandSpec) -> Option<usize> {
        let size = std::mem::size_of::<CommandSpec>();
        let addr = spec as *const CommandSpec as usize;
        let all = table::commands();
        let base = all.as_ptr() as usize;
        if addr >= base && addr < base + std::mem::size_of_val(all) {
            return Some((addr - base) / size);
        }
        self.subcommands
            .iter()
            .find(|(first, len, _)| addr >= *first && addr < first + len * size)
            .map(|(first, _, row)| row + (addr - first) / size)
    }

    /// Counts one run of `spec` that started at `started` (a reading of
    /// [`CommandStats::now`]), ends now, and answered an error if `failed`.
    #[inline]
    pub fn record(self: &Arc<Self>, spec: &'static CommandSpec, started: u64, failed: bool) {
        let nanos = self.clock.delta_as_nanos(started, self.clock.raw());
        self.record_nanos(spec, nanos, failed);
    }

    /// [`CommandStats::record`] of a run that took `nanos`.
    #[inline]
    pub fn record_nanos(self: &Arc<Self>, spec: &'static CommandSpec, nanos: u64, failed: bool) {
        let Some(row) = self.row(spec) else { return };
        // `try_with`: a thread being torn down no longer has its slot; its last commands are
        // not worth a panic.
        let _ = SLOT.try_with(|slot| {
            let Ok(mut slot) = slot.try_borrow_mut() else { return };
            let mine = slot.as_ref().is_some_and(|s| std::ptr::eq(s.owner.as_ptr(), Arc::as_ptr(self)));
            if !mine {
                // First command of this thread for this server (or of a thread that served
                // another server before, in tests): take a block.
                *slot = Some(Slot { owner: Arc::downgrade(self), block: self.take_block() });
            }
            let block = &slot.as_ref().expect("just set").block;
            let at = row * ROW;
            block.add(at + CALLS, 1);
            block.add(at + FAILED, failed as u64);
            block.add(at + NANOS, nanos);
            block.add(at + BUCKET0 + bucket(nanos), 1);
        });
    }

    fn take_block(&self) -> Arc<Block> {
        if let Some(b) = self.free.lock().pop() {
            return b;
        }
        let b = Arc::new(Block::new(self.names.len()));
        self.blocks.lock().push(b.clone());
        b
    }

    /// Counts a request refused before it ran: `spec` is the command named (`None` when the
    /// name is unknown).
    pub fn reject(&self, spec: Option<&'static CommandSpec>) {
        let row = spec.and_then(|s| self.row(s)).unwrap_or(self.names.len());
        self.rejected[row].fetch_add(1, Relaxed);
    }

    /// The counters of every command that ran or was refused at least once, in table order,
    /// then the unknown commands' rejections (if any, with `name` [`UNKNOWN`]).
    pub fn figures(&self) -> Vec<CommandFigures> {
        let mut sums = vec![0u64; self.names.len() * ROW];
        for block in self.blocks.lock().iter() {
            for (sum, slot) in sums.iter_mut().zip(block.0.iter()) {
                *sum = sum.wrapping_add(slot.load(Relaxed));
            }
        }
        let mut out = Vec::new();
        for (row, name) in self.names.iter().enumerate() {
            let r = &sums[row * ROW..(row + 1) * ROW];
            let rejected = self.rejected[row].load(Relaxed);
            if r[CALLS] == 0 && rejected == 0 {
                continue;
            }
            let mut buckets = [0; FINITE_BUCKETS + 1];
            buckets.copy_from_slice(&r[BUCKET0..]);
            out.push(CommandFigures {
                name,
                calls: r[CALLS],
                failed: r[FAILED],
                rejected,
                nanos: r[NANOS],
                buckets,
            });
        }
        let unknown = self.rejected[self.names.len()].load(Relaxed);
        if unknown > 0 {
            out.push(CommandFigures {
                name: UNKNOWN,
                calls: 0,
                failed: 0,
                rejected: unknown,
                nanos: 0,
                buckets: [0; FINITE_BUCKETS + 1],
            });
        }
        out
    }
}

/// The content type of the OpenMetrics text format `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Reads the server's state at each scrape.
#[derive(Debug)]
struct ServerCollector(Weak<Shared>);

/// Writes one metric without labels.
fn single(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric: &impl prometheus_client::encoding::EncodeMetric,
) -> std::fmt::Result {
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for ServerCollector {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(s) = self.0.upgrade() else { return Ok(()) };
        let figures = s.commands.figures();
        let label = |name: &'static str| [("command", name)];

        let mut m = e.encode_descriptor(
            "sift_commands",
            "Commands run, per command (those refused before running are not counted here).",
            None,
            MetricType::Counter,
        )?;
        for f in figures.iter().filter(|f| f.name != UNKNOWN) {
            ConstCounter::new(f.calls).encode(m.encode_family(&label(f.name))?)?;
        }
        let mut m = e.encode_descriptor(
            "sift_command_errors",
            "Error replies per command: kind=failed for a command that ran and answered an error, \
             kind=rejected for a request refused before running (unknown command, arity, NOAUTH, \
             OOM, MISCONF).",
            None,
            MetricType::Counter,
        )?;
        for f in &figures {
            for (kind, n) in [("failed", f.failed), ("rejected", f.rejected)] {
                if f.name == UNKNOWN && kind == "failed" {
                    continue;
                }
                ConstCounter::new(n).encode(m.encode_family(&[("command", f.name), ("kind", kind)])?)?;
            }
        }
        let mut m = e.encode_descriptor(
            "sift_command_duration_seconds",
            "Execution time of each command run (the handler alone: not the wait for locks, \
             fsync or the network).",
            None,
            MetricType::Histogram,
        )?;
        for f in figures.iter().filter(|f| f.name != UNKNOWN) {
            // Non-cumulative counts (the encoder sums them); the last bucket is +Inf, which
            // prometheus-client spells f64::MAX.
            let buckets: Vec<(f64, u64)> = (0..=FINITE_BUCKETS)
                .map(|k| (if k < FINITE_BUCKETS { bound_seconds(k) } else { f64::MAX }, f.buckets[k]))
                .collect();
            // The count from the buckets themselves, so that it equals the +Inf bucket even when
            // the scrape raced a command (the calls counter may be one ahead).
            let count = f.buckets.iter().sum();
            m.encode_family(&label(f.name))?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                f.nanos as f64 / 1e9,
                count,
                &buckets,
                None,
            )?;
        }

        single(
            &mut e,
            "sift_connected_clients",
            "Client connections open now.",
            &ConstGauge::new(s.clients.lock().len() as i64),
        )?;
        single(
            &mut e,
            "sift_connections_received",
            "Client connections accepted since start-up.",
            &ConstCounter::new(s.stats.connections_received.load(Relaxed)),
        )?;
        let (keys, expires) = s.db.counts();
        single(&mut e, "sift_keys", "Keys in the keyspace.", &ConstGauge::new(keys as i64))?;
        single(&mut e, "sift_keys_with_expiry", "Keys with a deadline.", &ConstGauge::new(expires as i64))?;
        single(
            &mut e,
            "sift_memory_used_bytes",
            "Bytes charged for the keyspace (the sum of MEMORY USAGE; what maxmemory is checked against).",
            &ConstGauge::new(s.db.used_memory() as i64),
        )?;
        single(
            &mut e,
            "sift_memory_resident_bytes",
            "Resident memory of the process.",
            &ConstGauge::new(crate::cmd::server::resident_bytes() as i64),
        )?;
        single(
            &mut e,
            "sift_memory_max_bytes",
            "The maxmemory limit (0: none).",
            &ConstGauge::new(s.config.read().maxmemory as i64),
        )?;

        let p = &s.persistence;
        let pm = p.metrics();
        let now_ms = crate::db::now_ms();
        single(
            &mut e,
            "sift_persistence_aof_enabled",
            "1 when the append-only log is on.",
            &ConstGauge::new(p.aof_enabled() as i64),
        )?;
        single(
            &mut e,
            "sift_persistence_log_bytes",
            "Bytes in the append-only log.",
            &ConstGauge::new(pm.log_bytes as i64),
        )?;
        single(
            &mut e,
            "sift_persistence_fsyncs",
            "fdatasyncs of the log since start-up.",
            &ConstCounter::new(pm.fsyncs),
        )?;
        if pm.last_fsync_unix_ms > 0 {
            single(
                &mut e,
                "sift_persistence_last_fsync_timestamp_seconds",
                "Unix time of the last successful fdatasync of the log (absent before the first).",
                &ConstGauge::new(pm.last_fsync_unix_ms as f64 / 1e3),
            )?;
        }
        single(
            &mut e,
            "sift_persistence_write_ok",
            "1 while the log accepts writes; 0 after a failed write or fsync (writes are refused).",
            &ConstGauge::new(p.write_error().is_none() as i64),
        )?;
        let last_save = p.last_save_unix();
        single(
            &mut e,
            "sift_persistence_last_save_timestamp_seconds",
            "Unix time of the last successful snapshot (start-up if none).",
            &ConstGauge::new(last_save as i64),
        )?;
        single(
            &mut e,
            "sift_persistence_snapshot_age_seconds",
            "Seconds since the last successful snapshot (since start-up if none).",
            &ConstGauge::new((now_ms / 1000).saturating_sub(last_save) as i64),
        )?;
        single(
            &mut e,
            "sift_persistence_last_save_ok",
            "1 when the last snapshot succeeded.",
            &ConstGauge::new(pm.last_save_ok as i64),
        )?;
        single(
            &mut e,
            "sift_persistence_bgsave_in_progress",
            "1 while a BGSAVE (or save rule) snapshot runs, as INFO rdb_bgsave_in_progress; not a log rewrite.",
            &ConstGauge::new(p.bgsave_in_progress() as i64),
        )?;

        let health = s.filters.health();
        single(
            &mut e,
            "sift_filters",
            "Filters with a target error rate, as of the monitor's last pass over each shard.",
            &ConstGauge::new(health.filters as i64),
        )?;
        single(
            &mut e,
            "sift_filters_over_target",
            "Filters whose error rate estimated from their fill exceeds their target.",
            &ConstGauge::new(health.over_target as i64),
        )?;
        if let Some(w) = &health.worst {
            single(
                &mut e,
                "sift_filter_worst_error_ratio",
                "The highest estimated error rate / target among the filters (INFO filters names the key).",
                &ConstGauge::new(w.estimate / w.target),
            )?;
        }
        single(
            &mut e,
            "sift_filter_monitor_age_seconds",
            "Seconds since the filter monitor last finished a round over every shard.",
            &ConstGauge::new(health.round_age.as_secs_f64()),
        )?;
        Ok(())
    }
}

/// The registry a scrape encodes: one collector over `shared`.
pub fn registry(shared: &Arc<Shared>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(ServerCollector(Arc::downgrade(shared))));
    r
}

/// The OpenMetrics text of `registry`.
pub fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// Serves `GET /metrics` on `listener` until the server shuts down.
pub async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;

    let registry = Arc::new(registry(&shared));
    let scrape = move || {
        let registry = registry.clone();
        async move {
            // Counting keys locks each shard in turn: off the runtime's worker threads.
            match tokio::task::spawn_blocking(move || render(&registry)).await {
                Ok(Ok(body)) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
                Ok(Err(_)) | Err(_) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, "encoding the metrics failed\n").into_response()
                }
            }
        }
    };
    let app = axum::Router::new().route("/metrics", axum::routing::get(scrape));
    let mut stop = shared.shutdown_signal();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_the_smallest_power_of_two_bound_at_or_above() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1024), 0);
        assert_eq!(bucket(1025), 1);
        assert_eq!(bucket(2048), 1);
        assert_eq!(bucket(2049), 2);
        assert_eq!(bucket(1 << 30), FINITE_BUCKETS - 1);
        assert_eq!(bucket((1 << 30) + 1), FINITE_BUCKETS);
        assert_eq!(bucket(u64::MAX), FINITE_BUCKETS);
        for k in 0..FINITE_BUCKETS {
            let bound = (bound_seconds(k) * 1e9).round() as u64;
            assert_eq!(bucket(bound), k);
            assert_eq!(bucket(bound + 1), k + 1);
        }
    }

    /// Rows are found for top-level commands and subcommands; a thread that ends gives its
    /// block back, and the next thread's counts add to it (nothing is lost, no block is added).
    #[test]
    fn counts_survive_threads_and_find_subcommands() {
        let stats = Arc::new(CommandStats::new());
        let get = table::lookup(b"get").unwrap();
        let config_get = table::lookup(b"config").unwrap().subcommand(b"get").unwrap();
        for _ in 0..3 {
            let s = stats.clone();
            std::thread::spawn(move || {
                s.record_nanos(get, 500, false);
                s.record_nanos(config_get, 3000, true);
            })
            .join()
            .unwrap();
        }
        stats.reject(None);
        stats.reject(Some(get));
        assert_eq!(stats.blocks.lock().len(), 1, "each thread reused the block of the last");
        let f = stats.figures();
        let by = |n: &str| f.iter().find(|x| x.name == n).unwrap().clone();
        let g = by("get");
        assert_eq!((g.calls, g.failed, g.rejected, g.nanos, g.buckets[0]), (3, 0, 1, 1500, 3));
        let c = by("config|get");
        assert_eq!((c.calls, c.failed, c.rejected, c.buckets[2]), (3, 3, 0, 3));
        assert_eq!(by(UNKNOWN).rejected, 1);
        assert_eq!(f.len(), 3);
    }
}
