//! "Already shown" per user (seed 004): before a feed shows a page, it drops the candidates the
//! user has seen. The seed sketches two designs on Redis and this harness measures them side by
//! side on one workload:
//!
//! * [`Design::Set`] — the seed's first design: one Redis set per user (`SADD` what was shown,
//!   `SMISMEMBER` the candidates). Exact; the ids here are 64-bit integers, so a user's set is
//!   an `intset` (8 bytes an item) as long as it holds at most `set-max-intset-entries` (512).
//! * [`Design::Bf`] — the seed's second: one Bloom filter per user (`BF.RESERVE` sized for a
//!   week, `BF.MADD`, `BF.MEXISTS`), on sift-server or the sift module. It never forgets.
//!
//! The design the seed wants, one aging filter per user ("seen in the last 7 days", whose old
//! items come back by themselves), needs the `SF.*` commands of issue 16; it joins this harness
//! once they are on main.
//!
//! The workload: `users` users, each shown `per_day` items a day for `days` days (the items of a
//! user and a day are derived from a seed, so nothing is kept in the harness); a query is one
//! command with `candidates` ids, a share of them drawn from what the user was shown in the
//! window (which must come back "seen": a miss is a false negative, counted) and the rest fresh
//! ids (a "seen" among them is a false positive, counted).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use redis::aio::MultiplexedConnection;
use serde::Serialize;

/// A design (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum Design {
    /// One set per user.
    Set,
    /// One `BF` filter per user.
    Bf,
}

impl Design {
    /// `set`, `bf`.
    pub fn name(&self) -> &'static str {
        match self {
            Design::Set => "set",
            Design::Bf => "bf",
        }
    }
}

/// The workload.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    /// Users.
    pub users: u64,
    /// Items shown to each user a day.
    pub per_day: u32,
    /// Days of history loaded.
    pub days: u32,
    /// Candidates per query.
    pub candidates: usize,
    /// How many of them the user has seen.
    pub seen_candidates: usize,
    /// The filters' false-positive rate.
    pub fpr: f64,
    /// Users per pipeline while loading.
    pub batch: usize,
    /// Seed of the items.
    pub seed: u64,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finaliser: a fixed, portable bijection (the items must be the same on every
    // run and machine).
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A 64-bit id in `[2^40, 2^62)`, like a snowflake id, from its coordinates.
fn shown(seed: u64, user: u64, day: u32, j: u32) -> i64 {
    let h = mix(seed ^ mix(user ^ mix(((day as u64) << 32) | j as u64)));
    ((1u64 << 40) + h % ((1u64 << 62) - (1u64 << 40))) as i64
}

/// Fresh candidate `j` of query `q` for `user`: never shown (odd, while shown ids are even).
fn fresh(seed: u64, user: u64, q: u64, j: u32) -> i64 {
    shown(seed ^ 0x5eed_f4e5, user, (q % u32::MAX as u64) as u32, j) | 1
}

fn key(user: u64) -> String {
    format!("seen:{{{user}}}")
}

/// Item `j` shown to `user` on `day`. Shown ids are even, fresh candidates odd: the two never
/// meet.
pub fn shown_even(seed: u64, user: u64, day: u32, j: u32) -> i64 {
    shown(seed, user, day, j) & !1
}

/// Checks that the server has what the design needs.
pub async fn check_server(design: &Design, conn: &mut MultiplexedConnection) -> Result<()> {
    let command = match design {
        Design::Set => return Ok(()),
        Design::Bf => "BF.MEXISTS",
    };
    let info: redis::Value = redis::cmd("COMMAND").arg("INFO").arg(command).query_async(conn).await?;
    let known =
        matches!(&info, redis::Value::Array(v) if v.first().is_some_and(|x| !matches!(x, redis::Value::Nil)));
    if !known {
        bail!(
            "this server has no {command}: the {} design needs it (sift-server or redis-server with libsift_redis.so)",
            design.name()
        );
    }
    Ok(())
}

/// Creates the users' filters (nothing for sets): capacity one window of items.
pub async fn reserve(design: &Design, cfg: &FeedConfig, conn: &mut MultiplexedConnection) -> Result<()> {
    let capacity = (cfg.per_day as u64 * cfg.days.max(7) as u64).max(1);
    let mut users = 0..cfg.users;
    loop {
        let mut p = redis::pipe();
        for u in users.by_ref().take(cfg.batch) {
            match design {
                Design::Set => return Ok(()),
                Design::Bf => {
                    p.cmd("BF.RESERVE").arg(key(u)).arg(cfg.fpr).arg(capacity).ignore();
                }
            }
        }
        if p.cmd_iter().next().is_none() {
            return Ok(());
        }
        let _: () = p.query_async(conn).await.context("reserve the users' filters")?;
    }
}

/// Records what every user was shown on `day` (one command per user, pipelined).
pub async fn add_day(
    design: &Design,
    cfg: &FeedConfig,
    day: u32,
    conn: &mut MultiplexedConnection,
) -> Result<()> {
    let verb = match design {
        Design::Set => "SADD",
        Design::Bf => "BF.MADD",
    };
    let mut users = 0..cfg.users;
    loop {
        let mut p = redis::pipe();
        for u in users.by_ref().take(cfg.batch) {
            let c = p.cmd(verb).arg(key(u));
            for j in 0..cfg.per_day {
                c.arg(shown_even(cfg.seed, u, day, j));
            }
            c.ignore();
        }
        if p.cmd_iter().next().is_none() {
            return Ok(());
        }
        let _: () = p.query_async(conn).await.with_context(|| format!("{verb} day {day}"))?;
    }
}

/// One query: which of `ids` the user has seen.
pub async fn seen(
    design: &Design,
    conn: &mut MultiplexedConnection,
    user: u64,
    ids: &[i64],
) -> Result<Vec<bool>> {
    let verb = match design {
        Design::Set => "SMISMEMBER",
        Design::Bf => "BF.MEXISTS",
    };
    let v: Vec<i64> = redis::cmd(verb).arg(key(user)).arg(ids).query_async(conn).await?;
    Ok(v.into_iter().map(|x| x == 1).collect())
}

/// The candidates of query `q` for `user`: `seen_candidates` from the last `days_back` days
/// before `today` (exclusive), then fresh ids.
pub fn candidates(cfg: &FeedConfig, user: u64, q: u64, today: u32, days_back: u32) -> (Vec<i64>, usize) {
    let mut ids = Vec::with_capacity(cfg.candidates);
    let first = today.saturating_sub(days_back);
    let span = today - first;
    for j in 0..cfg.seen_candidates.min(cfg.candidates) as u32 {
        let h = mix(q ^ mix(user ^ j as u64));
        let day = first + (h % span.max(1) as u64) as u32;
        let item = ((h >> 32) % cfg.per_day as u64) as u32;
        ids.push(shown_even(cfg.seed, user, day, item));
    }
    let n_seen = ids.len();
    for j in 0..(cfg.candidates - n_seen) as u32 {
        ids.push(fresh(cfg.seed, user, q, j));
    }
    (ids, n_seen)
}

/// Results of a query run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueryReport {
    /// Queries.
    pub queries: u64,
    /// Queries per second.
    pub per_second: f64,
    /// Seen candidates reported unseen (must be 0 for items in the window).
    pub false_negatives: u64,
    /// Seen candidates asked.
    pub seen_asked: u64,
    /// Fresh candidates reported seen.
    pub false_positives: u64,
    /// Fresh candidates asked.
    pub fresh_asked: u64,
}

/// `queries` queries of random users from `concurrency` tasks, each waiting for its answer
/// (no pipelining: a feed service asks once per page), candidates from the `days_back` days
/// before `today`.
pub async fn query(
    design: &Design,
    cfg: &FeedConfig,
    conn: &MultiplexedConnection,
    queries: u64,
    concurrency: usize,
    today: u32,
    days_back: u32,
) -> Result<QueryReport> {
    let t = Instant::now();
    let mut tasks = Vec::new();
    let workers = concurrency.max(1) as u64;
    for w in 0..workers {
        let n = queries / workers + u64::from(w < queries % workers);
        let (design, cfg, mut conn) = (design.clone(), cfg.clone(), conn.clone());
        tasks.push(tokio::spawn(async move {
            let mut r = QueryReport::default();
            for i in 0..n {
                let q = mix(cfg.seed ^ (w << 48) ^ i);
                let user = q % cfg.users;
                let (ids, n_seen) = candidates(&cfg, user, q, today, days_back);
                let answer = seen(&design, &mut conn, user, &ids).await?;
                r.queries += 1;
                r.seen_asked += n_seen as u64;
                r.fresh_asked += (ids.len() - n_seen) as u64;
                r.false_negatives += answer[..n_seen].iter().filter(|&&s| !s).count() as u64;
                r.false_positives += answer[n_seen..].iter().filter(|&&s| s).count() as u64;
            }
            anyhow::Ok(r)
        }));
    }
    let mut total = QueryReport::default();
    for t in tasks {
        let r = t.await??;
        total.queries += r.queries;
        total.seen_asked += r.seen_asked;
        total.fresh_asked += r.fresh_asked;
        total.false_negatives += r.false_negatives;
        total.false_positives += r.false_positives;
    }
    total.per_second = total.queries as f64 / t.elapsed().as_secs_f64();
    Ok(total)
}

/// The server's `used_memory`.
pub async fn used_memory(conn: &mut MultiplexedConnection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

/// Mean `MEMORY USAGE` (with all samples) of `sample` users' keys.
pub async fn memory_per_key(cfg: &FeedConfig, conn: &mut MultiplexedConnection, sample: u64) -> Result<f64> {
    let step = (cfg.users / sample.max(1)).max(1);
    let mut p = redis::pipe();
    let mut n = 0u64;
    for u in (0..cfg.users).step_by(step as usize).take(sample as usize) {
        p.cmd("MEMORY").arg("USAGE").arg(key(u)).arg("SAMPLES").arg(0);
        n += 1;
    }
    let v: Vec<Option<u64>> = p.query_async(conn).await?;
    Ok(v.iter().map(|x| x.unwrap_or(0)).sum::<u64>() as f64 / n.max(1) as f64)
}

/// One design's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct FeedReport {
    /// `set`, `bf`.
    pub design: String,
    /// Users.
    pub users: u64,
    /// Items per user loaded.
    pub items_per_user: u64,
    /// Seconds to load everything.
    pub load_s: f64,
    /// `used_memory` growth over the load, per user.
    pub bytes_per_user: f64,
    /// Mean `MEMORY USAGE` of a user's key.
    pub memory_usage_per_key: f64,
    /// Queries of items in the window.
    pub query: QueryReport,
}

/// Loads `days` days for every user, measures memory and the query rate. The server should be
/// empty (its memory growth is charged to the users).
pub async fn measure(
    design: &Design,
    cfg: &FeedConfig,
    conn: &mut MultiplexedConnection,
    queries: u64,
    concurrency: usize,
) -> Result<FeedReport> {
    check_server(design, conn).await?;
    let before = used_memory(conn).await?;
    let t = Instant::now();
    reserve(design, cfg, conn).await?;
    for day in 0..cfg.days {
        add_day(design, cfg, day, conn).await?;
    }
    let load_s = t.elapsed().as_secs_f64();
    let after = used_memory(conn).await?;
    let memory_usage_per_key = memory_per_key(cfg, conn, 1000).await?;
    let q = query(design, cfg, conn, queries, concurrency, cfg.days, cfg.days).await?;
    Ok(FeedReport {
        design: design.name().to_owned(),
        users: cfg.users,
        items_per_user: cfg.per_day as u64 * cfg.days as u64,
        load_s,
        bytes_per_user: after.saturating_sub(before) as f64 / cfg.users as f64,
        memory_usage_per_key,
        query: q,
    })
}
