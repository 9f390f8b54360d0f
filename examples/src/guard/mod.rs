//! The cache-penetration guard of seeds 000, 003 and 004: an HTTP service in front of a Redis
//! cache and PostgreSQL, with a membership filter of the table's ids in front of both.
//!
//! `GET /items/{id}`:
//! 1. the filter says "surely not" → `404` at once: no cache, no database (the attack of random
//!    ids the seeds describe stops here);
//! 2. the cache (`item:<id>`) holds the row → `200`; it holds the null marker (an empty string,
//!    cached for a short time after a database miss: the seeds' null caching, which absorbs the
//!    filter's false positives when they repeat) → `404`;
//! 3. the database: found → cache it, `200`; not found → cache the null marker, `404`.
//!
//! `POST /items` (`{"name": …}`) inserts the row, adds its id to the filter *before* the commit
//! makes it visible (see [`bootstrap`] for why no new row is ever rejected, also while a new
//! filter is swapped in), then writes the row through to the cache.
//!
//! Every response says where its answer came from in `x-source` (`filter`, `cache`,
//! `cache-null`, `db`), and the service counts its database lookups by the request's
//! `x-load-class` header (`legit`, `attack`, …: set by the load generator, used for accounting
//! only) at `GET /stats`, so a load test can check those counts against PostgreSQL's own
//! (`pg_stat_statements`). `POST /admin/rebuild` fills a new filter — from the table, or from a
//! `sift build` file and its key dump's snapshot — and swaps it in while the service runs.

pub mod bootstrap;
pub mod filter;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

pub use filter::{Guard, GuardKind};

/// The lookup every `GET` that passes the filter and misses the cache runs. The comment makes
/// it easy to find in `pg_stat_statements`, which keeps the first text it saw of a statement.
pub const LOOKUP_SQL: &str = "SELECT id, name FROM items WHERE id = $1 /* cache-guard lookup */";

/// How a service starts.
#[derive(Clone, Debug)]
pub struct Config {
    /// PostgreSQL connection string (`host=… port=… user=… dbname=…`).
    pub db_url: String,
    /// Database connections for requests.
    pub pool_size: usize,
    /// The cache, `redis://host:port/`.
    pub cache_url: String,
    /// The filter.
    pub guard: GuardKind,
    /// The filter's target false-positive rate.
    pub fpr: f64,
    /// Capacity = rows at bootstrap × this (room for the writes to come).
    pub headroom: f64,
    /// TTL of a cached row, seconds.
    pub hit_ttl_s: u64,
    /// TTL of the null marker, milliseconds.
    pub null_ttl_ms: u64,
    /// Where the first filter comes from.
    pub bootstrap: Bootstrap,
}

impl Config {
    /// Defaults for everything but the addresses and the guard.
    pub fn new(db_url: String, cache_url: String, guard: GuardKind) -> Config {
        Config {
            db_url,
            pool_size: 16,
            cache_url,
            guard,
            fpr: 0.01,
            headroom: 1.5,
            hit_ttl_s: 300,
            null_ttl_ms: 5_000,
            bootstrap: Bootstrap::Stream,
        }
    }
}

/// Where a filter's contents come from.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bootstrap {
    /// Stream the table's ids (`COPY`) in one snapshot.
    Stream,
    /// A file from `sift build` over a key dump, with the dump's snapshot
    /// (`cache-guard dump-keys` writes both).
    File {
        /// The filter file.
        path: PathBuf,
        /// `pg_current_snapshot()` of the dump.
        snapshot: String,
    },
}

/// Which requests a counter belongs to (the `x-load-class` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Reads of existing ids.
    Legit,
    /// Reads of ids that do not exist.
    Attack,
    /// `POST`s and the reads that check them.
    Write,
    /// No header, or another value.
    Other,
}

impl Class {
    const ALL: [Class; 4] = [Class::Legit, Class::Attack, Class::Write, Class::Other];

    fn of(headers: &HeaderMap) -> Class {
        match headers.get("x-load-class").map(HeaderValue::as_bytes) {
            Some(b"legit") => Class::Legit,
            Some(b"attack") => Class::Attack,
            Some(b"write") => Class::Write,
            _ => Class::Other,
        }
    }

    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            Class::Legit => "legit",
            Class::Attack => "attack",
            Class::Write => "write",
            Class::Other => "other",
        }
    }
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    filtered: AtomicU64,
    cache_hits: AtomicU64,
    cache_nulls: AtomicU64,
    db_lookups: AtomicU64,
    db_found: AtomicU64,
}

/// `GET /stats`: the counters of one request class.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassStats {
    /// Requests.
    pub requests: u64,
    /// Answered `404` by the filter.
    pub filtered: u64,
    /// Answered from a cached row.
    pub cache_hits: u64,
    /// Answered `404` from a cached null marker.
    pub cache_nulls: u64,
    /// Database lookups ([`LOOKUP_SQL`]).
    pub db_lookups: u64,
    /// Lookups that found the row.
    pub db_found: u64,
}

/// `GET /stats`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// The guard (`off`, `local`, `bf`).
    pub guard: String,
    /// By class: `legit`, `attack`, `write`, `other`.
    pub classes: std::collections::BTreeMap<String, ClassStats>,
    /// Rows inserted.
    pub inserts: u64,
    /// Bytes of the live filter.
    pub filter_bytes: u64,
}

/// The service's state.
pub struct App {
    db: Pool,
    cache: MultiplexedConnection,
    guard: Guard,
    cfg: Config,
    counters: [Counters; 4],
    inserts: AtomicU64,
    /// One rebuild at a time.
    rebuilding: Mutex<()>,
}

/// What a bootstrap or rebuild did, for logs and `POST /admin/rebuild`.
#[derive(Clone, Debug, Serialize)]
pub struct RebuildReport {
    /// Ids read from the view (stream) or rows in the dump (file: the filter's count).
    pub rows: u64,
    /// Rows added after the view, without blocking writers.
    pub caught_up: u64,
    /// Rows added while writers waited.
    pub caught_up_locked: u64,
    /// How long writers waited, microseconds.
    pub locked_us: u64,
    /// The whole operation, milliseconds.
    pub total_ms: u64,
}

impl App {
    /// Connects to the database, the cache and the filter, creates the table if needed, and
    /// fills the filter ([`Config::bootstrap`]) before returning.
    pub async fn start(cfg: Config) -> Result<Arc<App>> {
        let pg: tokio_postgres::Config = cfg.db_url.parse().context("database url")?;
        let mgr = Manager::from_config(
            pg,
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let db = Pool::builder(mgr).max_size(cfg.pool_size).build()?;
        {
            let c = db.get().await.context("connect to PostgreSQL")?;
            bootstrap::create_schema(&c).await?;
        }
        let cache = redis::Client::open(cfg.cache_url.as_str())?
            .get_multiplexed_async_connection()
            .await
            .with_context(|| format!("connect to the cache {}", cfg.cache_url))?;
        let guard = Guard::connect(&cfg.guard).await?;
        let app = Arc::new(App {
            db,
            cache,
            guard,
            cfg: cfg.clone(),
            counters: Default::default(),
            inserts: AtomicU64::new(0),
            rebuilding: Mutex::new(()),
        });
        let report = app.rebuild(&cfg.bootstrap).await?;
        tracing::info!(?report, guard = cfg.guard.name(), "filter installed");
        Ok(app)
    }

    /// Fills a new filter from `source` and swaps it in (see [`bootstrap`]).
    pub async fn rebuild(&self, source: &Bootstrap) -> Result<RebuildReport> {
        let _one = self.rebuilding.lock().await;
        let t = Instant::now();
        let mut conn = self.db.get().await?;
        let client: &mut tokio_postgres::Client = &mut conn;
        let (stage, fill) = match source {
            Bootstrap::Stream => {
                let (fpr, headroom) = (self.cfg.fpr, self.cfg.headroom);
                let guard = &self.guard;
                bootstrap::stream_fill(client, 10_000, |rows| async move {
                    let capacity = ((rows as f64 * headroom).ceil() as u64).max(1024);
                    guard.stage(capacity, fpr).await
                })
                .await?
            }
            Bootstrap::File { path, snapshot } => {
                let stage = self.guard.stage_file(path).await?;
                (stage, bootstrap::Fill { snapshot: snapshot.clone(), rows: 0 })
            }
        };
        let done = bootstrap::install(client, &self.guard, stage, &fill).await?;
        Ok(RebuildReport {
            rows: fill.rows,
            caught_up: done.caught_up,
            caught_up_locked: done.caught_up_locked,
            locked_us: done.locked_us,
            total_ms: t.elapsed().as_millis() as u64,
        })
    }

    /// The live filter.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The counters.
    pub async fn stats(&self) -> Stats {
        let classes = Class::ALL
            .iter()
            .map(|&c| {
                let k = &self.counters[c as usize];
                let s = ClassStats {
                    requests: k.requests.load(Relaxed),
                    filtered: k.filtered.load(Relaxed),
                    cache_hits: k.cache_hits.load(Relaxed),
                    cache_nulls: k.cache_nulls.load(Relaxed),
                    db_lookups: k.db_lookups.load(Relaxed),
                    db_found: k.db_found.load(Relaxed),
                };
                (c.name().to_owned(), s)
            })
            .collect();
        Stats {
            guard: self.cfg.guard.name().to_owned(),
            classes,
            inserts: self.inserts.load(Relaxed),
            filter_bytes: self.guard.bytes().await.unwrap_or(0),
        }
    }

    /// The routes.
    pub fn router(self: &Arc<App>) -> Router {
        Router::new()
            .route("/items/{id}", get(get_item))
            .route("/items", post(post_item))
            .route("/stats", get(get_stats))
            .route("/admin/rebuild", post(post_rebuild))
            .with_state(self.clone())
    }

    async fn lookup(&self, id: i64, class: Class) -> Result<(StatusCode, &'static str, String)> {
        let k = &self.counters[class as usize];
        k.requests.fetch_add(1, Relaxed);
        if !self.guard.may_contain(id).await? {
            k.filtered.fetch_add(1, Relaxed);
            return Ok((StatusCode::NOT_FOUND, "filter", String::new()));
        }
        let key = format!("item:{id}");
        let mut cache = self.cache.clone();
        let cached: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut cache).await?;
        match cached {
            Some(v) if v.is_empty() => {
                k.cache_nulls.fetch_add(1, Relaxed);
                return Ok((StatusCode::NOT_FOUND, "cache-null", String::new()));
            }
            Some(v) => {
                k.cache_hits.fetch_add(1, Relaxed);
                return Ok((StatusCode::OK, "cache", v));
            }
            None => {}
        }
        let db = self.db.get().await?;
        let stmt = db.prepare_cached(LOOKUP_SQL).await?;
        k.db_lookups.fetch_add(1, Relaxed);
        let row = db.query_opt(&stmt, &[&id]).await?;
        drop(db);
        match row {
            Some(row) => {
                k.db_found.fetch_add(1, Relaxed);
                let body = serde_json::to_string(&Item { id: row.get(0), name: row.get(1) })?;
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(&body)
                    .arg("EX")
                    .arg(self.cfg.hit_ttl_s)
                    .query_async(&mut cache)
                    .await?;
                Ok((StatusCode::OK, "db", body))
            }
            None => {
                // NX: a row written through by a POST that committed meanwhile wins over the
                // marker of this (older) miss.
                let _: Option<String> = redis::cmd("SET")
                    .arg(&key)
                    .arg("")
                    .arg("PX")
                    .arg(self.cfg.null_ttl_ms)
                    .arg("NX")
                    .query_async(&mut cache)
                    .await?;
                Ok((StatusCode::NOT_FOUND, "db", String::new()))
            }
        }
    }

    async fn insert(&self, name: &str) -> Result<Item> {
        let mut db = self.db.get().await?;
        let tx = db.transaction().await?;
        // Shared: writers do not wait for each other, only for a filter swap (bootstrap.rs).
        tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&bootstrap::WRITE_LOCK]).await?;
        let row = tx.query_one("INSERT INTO items (name) VALUES ($1) RETURNING id, name", &[&name]).await?;
        let item = Item { id: row.get(0), name: row.get(1) };
        // Before the commit: once the row is visible, the filter already has it. If the add
        // fails, dropping `tx` rolls the insert back.
        self.guard.add(item.id).await.context("add to the filter")?;
        tx.commit().await?;
        self.inserts.fetch_add(1, Relaxed);
        // Write-through replaces a null marker a false positive may have cached for this id.
        let mut cache = self.cache.clone();
        let body = serde_json::to_string(&item)?;
        let written: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("item:{}", item.id))
            .arg(body)
            .arg("EX")
            .arg(self.cfg.hit_ttl_s)
            .query_async(&mut cache)
            .await;
        if let Err(e) = written {
            tracing::warn!(
                id = item.id,
                "cache write-through failed ({e}); a null marker may hide the row until it expires"
            );
        }
        Ok(item)
    }
}

/// A row, as the API returns it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Item {
    /// The key.
    pub id: i64,
    /// The payload.
    pub name: String,
}

/// `POST /items` body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewItem {
    /// The payload.
    pub name: String,
}

fn error(e: anyhow::Error) -> Response {
    tracing::warn!("request failed: {e:#}");
    (StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}\n")).into_response()
}

async fn get_item(State(app): State<Arc<App>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return (StatusCode::BAD_REQUEST, "the id must be a 64-bit integer\n").into_response();
    };
    match app.lookup(id, Class::of(&headers)).await {
        Ok((status, source, body)) => {
            let mut r = (status, body).into_response();
            r.headers_mut().insert("x-source", HeaderValue::from_static(source));
            if status == StatusCode::OK {
                r.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            }
            r
        }
        Err(e) => error(e),
    }
}

async fn post_item(State(app): State<Arc<App>>, Json(new): Json<NewItem>) -> Response {
    match app.insert(&new.name).await {
        Ok(item) => (StatusCode::CREATED, Json(item)).into_response(),
        Err(e) => error(e),
    }
}

async fn get_stats(State(app): State<Arc<App>>) -> Json<Stats> {
    Json(app.stats().await)
}

async fn post_rebuild(State(app): State<Arc<App>>, Json(source): Json<Bootstrap>) -> Response {
    match app.rebuild(&source).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => error(e),
    }
}

/// Serves `app` on `listener` until `shutdown` completes.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    axum::serve(listener, app.router()).with_graceful_shutdown(shutdown).await?;
    Ok(())
}
