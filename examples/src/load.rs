//! The guard's load generator: a closed loop of `concurrency` workers over keep-alive HTTP/1.1
//! connections, each operation drawn at random from three classes:
//!
//! * `legit`: `GET /items/{id}` of an existing id (`1..=existing`), Zipf-distributed (rank 1 the
//!   most popular), as real traffic is; must answer `200`;
//! * `write`: `POST /items`, then `GET` of the new id, which must answer `200` at once (a new
//!   row is never rejected by the filter); both timed as one operation;
//! * `attack`: `GET` of a random id in `[2^40, 2^62)`, which no row has (ids come from a
//!   sequence starting at 1), never the same twice in practice, so the cache's null marker cannot
//!   absorb them; must answer `404`.
//!
//! Every request carries `x-load-class`, which the service uses to count its database lookups
//! by class (`GET /stats`); [`measure`] checks the total against PostgreSQL's own count of the
//! lookup statement in `pg_stat_statements`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::Serialize;

use crate::guard::{ClassStats, Stats, LOOKUP_SQL};

/// The first id of the attack's range (far beyond any id the sequence will give).
pub const ATTACK_MIN: i64 = 1 << 40;

/// What to send.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// `http://host:port`.
    pub url: String,
    /// Operations in all.
    pub operations: u64,
    /// Workers, each with one connection.
    pub concurrency: usize,
    /// Weight of `legit` reads.
    pub legit: f64,
    /// Weight of writes.
    pub write: f64,
    /// Weight of attack reads.
    pub attack: f64,
    /// Existing ids are `1..=existing`.
    pub existing: u64,
    /// The Zipf exponent of legitimate reads.
    pub zipf: f64,
    /// Seed of the random choices (each worker derives its own).
    pub seed: u64,
}

impl LoadConfig {
    /// 80% reads, 5% writes, 15% attack, Zipf 1.0.
    pub fn new(url: String, existing: u64, operations: u64) -> LoadConfig {
        LoadConfig {
            url,
            operations,
            concurrency: 8,
            legit: 0.80,
            write: 0.05,
            attack: 0.15,
            existing,
            zipf: 1.0,
            seed: 1,
        }
    }
}

/// The operation classes.
pub const CLASSES: [&str; 3] = ["legit", "write", "attack"];

/// Results of one class.
#[derive(Clone)]
pub struct ClassResult {
    /// Operations.
    pub count: u64,
    /// Operations whose status was not the expected one (a legit `404`, an attack `200`, a new
    /// row not found).
    pub wrong: u64,
    /// Transport errors and `5xx`.
    pub errors: u64,
    /// Latency, microseconds.
    pub latency: Histogram<u64>,
    /// Latency of the operations answered from the cache (legit hits), microseconds.
    pub cache_latency: Histogram<u64>,
    /// Answers by `x-source`.
    pub sources: BTreeMap<String, u64>,
}

impl ClassResult {
    fn new() -> ClassResult {
        ClassResult {
            count: 0,
            wrong: 0,
            errors: 0,
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
            cache_latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
            sources: BTreeMap::new(),
        }
    }

    fn merge(&mut self, o: &ClassResult) {
        self.count += o.count;
        self.wrong += o.wrong;
        self.errors += o.errors;
        self.latency.add(&o.latency).expect("same bounds");
        self.cache_latency.add(&o.cache_latency).expect("same bounds");
        for (k, v) in &o.sources {
            *self.sources.entry(k.clone()).or_default() += v;
        }
    }
}

/// The results of [`run`].
pub struct LoadResult {
    /// Wall time.
    pub elapsed: Duration,
    /// By class name.
    pub classes: BTreeMap<&'static str, ClassResult>,
    /// Ids the writes created.
    pub written: Vec<i64>,
}

type Http = Client<HttpConnector, Full<Bytes>>;

async fn send(
    http: &Http,
    method: Method,
    uri: &str,
    class: &str,
    body: Bytes,
) -> Result<(StatusCode, String, Bytes)> {
    let mut req = Request::builder().method(method).uri(uri).header("x-load-class", class);
    if !body.is_empty() {
        req = req.header("content-type", "application/json");
    }
    let resp = http.request(req.body(Full::new(body))?).await?;
    let status = resp.status();
    let source = resp.headers().get("x-source").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, source, body))
}

/// Runs the load and returns what it saw.
pub async fn run(cfg: &LoadConfig) -> Result<LoadResult> {
    let total = cfg.legit + cfg.write + cfg.attack;
    if total.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        || cfg.legit < 0.0
        || cfg.write < 0.0
        || cfg.attack < 0.0
    {
        bail!("the mix weights must be non-negative and not all zero");
    }
    if cfg.existing == 0 && cfg.legit > 0.0 {
        bail!("legitimate reads need existing ids (--existing)");
    }
    let zipf = Zipf::new(cfg.existing.max(1) as f64, cfg.zipf).context("the Zipf exponent must be ≥ 0")?;
    let mut http_conn = HttpConnector::new();
    http_conn.set_nodelay(true);
    let http: Http =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(cfg.concurrency).build(http_conn);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let workers = cfg.concurrency.max(1) as u64;
    for w in 0..workers {
        let n = cfg.operations / workers + u64::from(w < cfg.operations % workers);
        let http = http.clone();
        let cfg = cfg.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(w));
            let mut res: BTreeMap<&'static str, ClassResult> =
                CLASSES.iter().map(|&c| (c, ClassResult::new())).collect();
            let mut written = Vec::new();
            for _ in 0..n {
                let x = rng.random::<f64>() * total;
                let class = if x < cfg.legit {
                    "legit"
                } else if x < cfg.legit + cfg.write {
                    "write"
                } else {
                    "attack"
                };
                let t = Instant::now();
                let outcome: Result<(bool, String)> = async {
                    match class {
                        "legit" => {
                            let id = zipf.sample(&mut rng) as u64;
                            let (s, src, _) = send(
                                &http,
                                Method::GET,
                                &format!("{}/items/{id}", cfg.url),
                                class,
                                Bytes::new(),
                            )
                            .await?;
                            check_5xx(s)?;
                            Ok((s == StatusCode::OK, src))
                        }
                        "attack" => {
                            let id = rng.random_range(ATTACK_MIN..(1i64 << 62));
                            let (s, src, _) = send(
                                &http,
                                Method::GET,
                                &format!("{}/items/{id}", cfg.url),
                                class,
                                Bytes::new(),
                            )
                            .await?;
                            check_5xx(s)?;
                            Ok((s == StatusCode::NOT_FOUND, src))
                        }
                        _ => {
                            let body = Bytes::from(format!("{{\"name\":\"load {w}\"}}"));
                            let (s, _, b) =
                                send(&http, Method::POST, &format!("{}/items", cfg.url), class, body).await?;
                            check_5xx(s)?;
                            if s != StatusCode::CREATED {
                                return Ok((false, String::new()));
                            }
                            let item: crate::guard::Item = serde_json::from_slice(&b)?;
                            written.push(item.id);
                            let (s, src, _) = send(
                                &http,
                                Method::GET,
                                &format!("{}/items/{}", cfg.url, item.id),
                                class,
                                Bytes::new(),
                            )
                            .await?;
                            check_5xx(s)?;
                            Ok((s == StatusCode::OK, src))
                        }
                    }
                }
                .await;
                let us = t.elapsed().as_micros().max(1) as u64;
                let r = res.get_mut(class).expect("class");
                r.count += 1;
                match outcome {
                    Ok((ok, src)) => {
                        r.latency.saturating_record(us);
                        if src == "cache" {
                            r.cache_latency.saturating_record(us);
                        }
                        if !ok {
                            r.wrong += 1;
                        }
                        *r.sources.entry(src).or_default() += 1;
                    }
                    Err(e) => {
                        if r.errors == 0 {
                            tracing::warn!("{class} request failed: {e:#}");
                        }
                        r.errors += 1;
                    }
                }
            }
            (res, written)
        }));
    }
    let mut classes: BTreeMap<&'static str, ClassResult> =
        CLASSES.iter().map(|&c| (c, ClassResult::new())).collect();
    let mut written = Vec::new();
    for t in tasks {
        let (r, w) = t.await?;
        for (k, v) in r {
            classes.get_mut(k).expect("class").merge(&v);
        }
        written.extend(w);
    }
    Ok(LoadResult { elapsed: started.elapsed(), classes, written })
}

fn check_5xx(s: StatusCode) -> Result<()> {
    if s.is_server_error() {
        bail!("status {s}");
    }
    Ok(())
}

/// The service's counters (`GET /stats`).
pub async fn service_stats(url: &str) -> Result<Stats> {
    let http: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let resp = http.get(format!("{url}/stats").parse()?).await.with_context(|| format!("GET {url}/stats"))?;
    let body = resp.into_body().collect().await?.to_bytes();
    serde_json::from_slice(&body).context("parse /stats")
}

/// Calls of the lookup statement so far, from `pg_stat_statements` (`None` when the extension
/// is not installed in that database).
pub async fn pg_lookup_calls(db: &tokio_postgres::Client) -> Result<Option<u64>> {
    let has: bool = db
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')", &[])
        .await?
        .get(0);
    if !has {
        return Ok(None);
    }
    let marker = LOOKUP_SQL.split("/*").nth(1).unwrap_or("").trim_end_matches("*/").trim();
    let calls: i64 = db
        .query_one(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE '%' || $1 || '%'",
            &[&marker],
        )
        .await?
        .get(0);
    Ok(Some(calls as u64))
}

/// One row of the guard's table: a load run and the database work it caused.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The guard.
    pub guard: String,
    /// Operations per second.
    pub throughput: f64,
    /// Per class: operations, p50 and p99 in ms, wrong answers, errors.
    pub classes: BTreeMap<String, ClassSummary>,
    /// p50 of legitimate reads answered from the cache, ms.
    pub legit_hit_p50_ms: f64,
    /// p99 of the same, ms.
    pub legit_hit_p99_ms: f64,
    /// Attack requests.
    pub attack_requests: u64,
    /// Database lookups the attack caused (service counter).
    pub attack_db_lookups: u64,
    /// Their share of the attack requests.
    pub attack_db_share: f64,
    /// Database lookups in all (service counters).
    pub db_lookups: u64,
    /// Calls of the lookup statement in `pg_stat_statements` over the run (`None` without it).
    pub pg_lookup_calls: Option<u64>,
    /// Bytes of the filter at the end of the run.
    pub filter_bytes: u64,
}

/// [`Summary::classes`].
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    /// Operations.
    pub count: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Unexpected statuses.
    pub wrong: u64,
    /// Errors.
    pub errors: u64,
    /// Answers by source.
    pub sources: BTreeMap<String, u64>,
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        return f64::NAN;
    }
    h.value_at_quantile(q) as f64 / 1000.0
}

fn delta(a: &ClassStats, b: &ClassStats) -> ClassStats {
    ClassStats {
        requests: b.requests - a.requests,
        filtered: b.filtered - a.filtered,
        cache_hits: b.cache_hits - a.cache_hits,
        cache_nulls: b.cache_nulls - a.cache_nulls,
        db_lookups: b.db_lookups - a.db_lookups,
        db_found: b.db_found - a.db_found,
    }
}

/// Runs the load between two readings of the service's counters and of `pg_stat_statements`
/// (when `db` is given), and summarises.
pub async fn measure(cfg: &LoadConfig, db: Option<&tokio_postgres::Client>) -> Result<(Summary, LoadResult)> {
    let before = service_stats(&cfg.url).await?;
    let pg_before = match db {
        Some(db) => pg_lookup_calls(db).await?,
        None => None,
    };
    let result = run(cfg).await?;
    let after = service_stats(&cfg.url).await?;
    let pg_after = match db {
        Some(db) => pg_lookup_calls(db).await?,
        None => None,
    };
    let d = |c: &str| {
        delta(
            before.classes.get(c).unwrap_or(&ClassStats::default()),
            after.classes.get(c).unwrap_or(&ClassStats::default()),
        )
    };
    let attack = d("attack");
    let db_lookups: u64 = ["legit", "attack", "write", "other"].iter().map(|c| d(c).db_lookups).sum();
    let ops: u64 = result.classes.values().map(|c| c.count).sum();
    let legit = &result.classes["legit"];
    let summary = Summary {
        guard: after.guard.clone(),
        throughput: ops as f64 / result.elapsed.as_secs_f64(),
        classes: result
            .classes
            .iter()
            .map(|(k, c)| {
                (
                    k.to_string(),
                    ClassSummary {
                        count: c.count,
                        p50_ms: ms(&c.latency, 0.5),
                        p99_ms: ms(&c.latency, 0.99),
                        wrong: c.wrong,
                        errors: c.errors,
                        sources: c.sources.clone(),
                    },
                )
            })
            .collect(),
        legit_hit_p50_ms: ms(&legit.cache_latency, 0.5),
        legit_hit_p99_ms: ms(&legit.cache_latency, 0.99),
        attack_requests: attack.requests,
        attack_db_lookups: attack.db_lookups,
        attack_db_share: if attack.requests == 0 {
            0.0
        } else {
            attack.db_lookups as f64 / attack.requests as f64
        },
        db_lookups,
        pg_lookup_calls: pg_before.zip(pg_after).map(|(a, b)| b - a),
        filter_bytes: after.filter_bytes,
    };
    Ok((summary, result))
}

impl Summary {
    /// A human-readable report.
    pub fn render(&self) -> String {
        let mut s = format!(
            "guard: {}   throughput: {:.0} ops/s   filter: {} bytes\n",
            self.guard, self.throughput, self.filter_bytes
        );
        s += "class    ops      p50 ms   p99 ms   wrong  errors  answered by\n";
        for (k, c) in &self.classes {
            let src: Vec<String> = c.sources.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s += &format!(
                "{k:<8} {:<8} {:<8.3} {:<8.3} {:<6} {:<7} {}\n",
                c.count,
                c.p50_ms,
                c.p99_ms,
                c.wrong,
                c.errors,
                src.join(" ")
            );
        }
        s += &format!(
            "legit cache hits: p50 {:.3} ms, p99 {:.3} ms\n",
            self.legit_hit_p50_ms, self.legit_hit_p99_ms
        );
        s += &format!(
            "attack: {} requests, {} reached the database ({:.3}%)\n",
            self.attack_requests,
            self.attack_db_lookups,
            100.0 * self.attack_db_share
        );
        s += &match self.pg_lookup_calls {
            Some(pg) => format!(
                "database lookups: {} counted by the service, {} by pg_stat_statements{}\n",
                self.db_lookups,
                pg,
                if pg == self.db_lookups { " (equal)" } else { " (DIFFERENT)" }
            ),
            None => format!(
                "database lookups: {} counted by the service (no pg_stat_statements)\n",
                self.db_lookups
            ),
        };
        s
    }
}
