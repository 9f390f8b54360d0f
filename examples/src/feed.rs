//! "Already shown" per user (seed 004): before a feed shows a page, it drops the candidates the
//! user has seen. The seed sketches two designs on Redis and this harness measures them side by
//! side on one workload:
//!
//! * [`Design::Set`] — the seed's first design: one Redis set per user (`SADD` what was shown,
//!   `SMISMEMBER` the candidates). Exact; the ids here are 64-bit integers, so a user's set is
//!   an `intset` (8 bytes an item) as long as it holds at most `set-max-intset-entries` (512).
//! * [`Design::Bf`] — the seed's second: one Bloom filter per user (`BF.RESERVE` sized for a
//!   week, `BF.MADD`, `BF.MEXISTS`), on sift-server or the sift module. It never forgets.
//! * [`Design::Window`] — the design the seed wants: one filter per user that forgets by
//!   itself, "seen in the last 7 days". Here it is `sift-client`'s time-windowed filter in plain
//!   Redis strings (no module): one generation a day, a query reads the last [`WINDOW_KEEP`]
//!   (8) of them, so an item is found for 7 to 8 days and then comes back; each generation's
//!   keys expire on their own. The harness drives its clock ([`sift_client::ManualClock`]) day
//!   by day, so a week passes in seconds; the expiry times the keys get are then up to a few
//!   weeks ahead of the server's clock, so nothing expires during a run.
//! * [`Design::Sf`] — the same design on the server's native aging filter: one key per user,
//!   `SF.RESERVE key p capacity KIND aging TTL 604800` (a time-limited Bloom filter: an item
//!   added at `t` is a member at every `now ≤ t + 7 days`, and gone once `now > t + 7 days +
//!   one slice`), on sift-server or the sift module, queried with one `SF.MEXISTS`. A TTL
//!   filter's clock is the time of its adds, and a read answers at the request's time or at the
//!   filter's clock if that is later (it never moves the clock). So the harness adds with
//!   `SF.MADDAT key ms item ...` (the command `SF.MADD` is replicated as, with the primary's
//!   time) at simulated times that start at the real time and run ahead of it, and moves a
//!   user's clock to the time a query is asked by one more `SF.MADDAT` of a sentinel item
//!   ([`SF_TICK`], not an id: never a candidate). Every read of the run then answers at a
//!   simulated time, as a server whose clock had run the 8 days would; the simulated times
//!   are ahead of the server's clock, so the real seconds of the run change nothing. Each day
//!   is shown in [`SF_SESSIONS`] sessions 6 hours apart (a user reads the feed several times a
//!   day), each one `SF.MADDAT` at its own time.
//!
//! The workload: `users` users, each shown `per_day` items a day for `days` days (the items of a
//! user and a day are derived from a seed, so nothing is kept in the harness); a query is one
//! command with `candidates` ids, a share of them drawn from what the user was shown in the
//! window (which must come back "seen": a miss is a false negative, counted) and the rest fresh
//! ids (a "seen" among them is a false positive, counted).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::{StreamExt, TryStreamExt};
use redis::aio::MultiplexedConnection;
use serde::Serialize;
use sift_client::{Clock, ManualClock};

/// A design (see the module docs).
#[derive(Clone, Debug)]
pub enum Design {
    /// One set per user.
    Set,
    /// One `BF` filter per user.
    Bf,
    /// One `sift-client` time-windowed filter per user (make it with [`Design::window`]).
    Window(Arc<Windows>),
    /// One native aging filter per user, `KIND aging TTL 604800` (make it with [`Design::sf`]).
    Sf(SfClock),
}

/// The aging filters' window: 7 days, in seconds (`SF.RESERVE ... TTL`).
pub const SF_TTL_S: u64 = 7 * 24 * 3600;

/// Sessions a day in which a user of the [`Design::Sf`] design is shown the day's items, at
/// hours 0, 6, 12 and 18 of the day.
pub const SF_SESSIONS: u32 = 4;

/// The item that moves an aging filter's clock to the time a query is asked (an `SF.MADDAT` needs
/// one): not a decimal id, so never a candidate.
pub const SF_TICK: &str = "clock-tick";

/// The simulated clock of the [`Design::Sf`] design.
#[derive(Clone, Copy, Debug)]
pub struct SfClock {
    /// Hour 0 of the run's first day, ms: the real time when the design was made, so every
    /// simulated time is at or after the server's clock at the first read.
    start_ms: u64,
}

impl SfClock {
    /// The time of `session` of `day` (day 0: the run's first).
    fn at(&self, day: u32, session: u32) -> u64 {
        self.start_ms + day as u64 * DAY_MS + session as u64 * (DAY_MS / SF_SESSIONS as u64)
    }
}

/// Generations (days) a windowed query reads: an item is found 7 to 8 days after it was shown.
pub const WINDOW_KEEP: u32 = 8;

const DAY_MS: u64 = 24 * 3600 * 1000;

/// The users' windowed filters and the clock they share.
pub struct Windows {
    clock: Arc<ManualClock>,
    /// Midnight (UTC) of the run's first day, ms: the server's clock is not before it, so the
    /// keys' expiry times are all in the server's future.
    start_ms: u64,
    filters: OnceLock<Vec<sift_client::Filter>>,
}

impl std::fmt::Debug for Windows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Windows").field("start_ms", &self.start_ms).finish_non_exhaustive()
    }
}

impl Windows {
    /// Moves the users' clock to noon of `day` (day 0: the run's first).
    fn set_day(&self, day: u32) {
        self.clock.set(self.start_ms + day as u64 * DAY_MS + DAY_MS / 2);
    }

    fn filters(&self) -> Result<&[sift_client::Filter]> {
        self.filters.get().map(Vec::as_slice).context("the users' filters are not created yet")
    }
}

impl Design {
    /// A windowed design with a fresh clock at today's midnight.
    pub fn window() -> Design {
        let now = sift_client::SystemClock.now_ms();
        Design::Window(Arc::new(Windows {
            clock: Arc::new(ManualClock::new(now)),
            start_ms: now - now % DAY_MS,
            filters: OnceLock::new(),
        }))
    }

    /// The native aging filter's design, its simulated days starting now.
    pub fn sf() -> Design {
        Design::Sf(SfClock { start_ms: sift_client::SystemClock.now_ms() })
    }

    /// `set`, `bf`, `window`, `sf`.
    pub fn name(&self) -> &'static str {
        match self {
            Design::Set => "set",
            Design::Bf => "bf",
            Design::Window(_) => "window",
            Design::Sf(_) => "sf",
        }
    }

    /// Whether the design forgets (an old item comes back after its window).
    pub fn forgets(&self) -> bool {
        matches!(self, Design::Window(_) | Design::Sf(_))
    }

    /// The day of the query for items from every day loaded, past the window: the windowed
    /// design reads the generations of 8 days (its newest day, `days - 1`, is no longer read on
    /// day `days - 1 + 8`); the aging filter's items of the last session of day `days - 1`
    /// (hour 18) are surely gone `7 days + one slice` (16 slices: 10.5 hours) later, so the
    /// query is asked at hour 0 of day `days + 8`: 8 days and 6 hours after them.
    pub fn after_window_day(&self, days: u32) -> u32 {
        match self {
            Design::Sf(_) => days + WINDOW_KEEP,
            _ => days.saturating_sub(1) + WINDOW_KEEP,
        }
    }
}

/// A user's windowed filter: `sift-client` names cannot hold `{` (its keys use hash tags).
fn window_name(user: u64) -> String {
    format!("seen:{user}")
}

/// Users handled at once by the windowed design (each a round trip of its own).
const WINDOW_CONCURRENCY: usize = 64;

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
        Design::Window(_) => "BITFIELD",
        Design::Sf(_) => "SF.MADDAT",
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

/// Creates the users' filters (nothing for sets): capacity one window of items (`BF`), or one
/// day of items in each of the windowed filter's generations, at `fpr / 8` each, so the 8 a
/// query reads together stay within `fpr`.
pub async fn reserve(design: &Design, cfg: &FeedConfig, conn: &mut MultiplexedConnection) -> Result<()> {
    if let Design::Window(w) = design {
        let spec = sift_client::Spec::new(cfg.per_day.max(1) as u64, cfg.fpr / WINDOW_KEEP as f64)
            .window(Duration::from_millis(DAY_MS), WINDOW_KEEP);
        let opts = sift_client::Options::new().clock(w.clock.clone());
        let conn = conn.clone();
        let filters: Vec<sift_client::Filter> = futures_util::stream::iter(0..cfg.users)
            .map(|u| {
                let (conn, spec, opts) = (conn.clone(), spec.clone(), opts.clone());
                async move {
                    sift_client::Filter::create_async(&conn, window_name(u), &spec, opts)
                        .await
                        .with_context(|| format!("create the filter of user {u}"))
                }
            })
            .buffered(WINDOW_CONCURRENCY)
            .try_collect()
            .await?;
        if w.filters.set(filters).is_err() {
            bail!("the users' filters were created twice");
        }
        return Ok(());
    }
    let capacity = (cfg.per_day as u64 * cfg.days.max(7) as u64).max(1);
    // The aging filter's capacity is its adds per TTL: a week of items and the clock ticks.
    let per_ttl = cfg.per_day as u64 * 7 + 2;
    let mut users = 0..cfg.users;
    loop {
        let mut p = redis::pipe();
        for u in users.by_ref().take(cfg.batch) {
            match design {
                Design::Set | Design::Window(_) => return Ok(()),
                Design::Bf => {
                    p.cmd("BF.RESERVE").arg(key(u)).arg(cfg.fpr).arg(capacity).ignore();
                }
                Design::Sf(_) => {
                    p.cmd("SF.RESERVE")
                        .arg(key(u))
                        .arg(cfg.fpr)
                        .arg(per_ttl)
                        .arg("KIND")
                        .arg("aging")
                        .arg("TTL")
                        .arg(SF_TTL_S)
                        .ignore();
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
        Design::Sf(clock) => return add_day_sf(*clock, cfg, day, conn).await,
        Design::Window(w) => {
            w.set_day(day);
            let filters = w.filters()?;
            let conn = conn.clone();
            return futures_util::stream::iter(0..cfg.users)
                .map(|u| {
                    let conn = conn.clone();
                    async move {
                        let ids: Vec<String> =
                            (0..cfg.per_day).map(|j| shown_even(cfg.seed, u, day, j).to_string()).collect();
                        filters[u as usize]
                            .add_many_async(&conn, &ids)
                            .await
                            .with_context(|| format!("day {day}, user {u}"))?;
                        anyhow::Ok(())
                    }
                })
                .buffer_unordered(WINDOW_CONCURRENCY)
                .try_collect::<()>()
                .await;
        }
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

/// [`add_day`] for the aging filters: the day's items in [`SF_SESSIONS`] sessions, each one
/// `SF.MADDAT` at its time.
async fn add_day_sf(
    clock: SfClock,
    cfg: &FeedConfig,
    day: u32,
    conn: &mut MultiplexedConnection,
) -> Result<()> {
    let mut users = 0..cfg.users;
    loop {
        let mut p = redis::pipe();
        for u in users.by_ref().take(cfg.batch) {
            for s in 0..SF_SESSIONS {
                let items = (s * cfg.per_day / SF_SESSIONS)..((s + 1) * cfg.per_day / SF_SESSIONS);
                if items.is_empty() {
                    continue;
                }
                let c = p.cmd("SF.MADDAT").arg(key(u)).arg(clock.at(day, s));
                for j in items {
                    c.arg(shown_even(cfg.seed, u, day, j));
                }
                c.ignore();
            }
        }
        if p.cmd_iter().next().is_none() {
            return Ok(());
        }
        let _: () = p.query_async(conn).await.with_context(|| format!("SF.MADDAT day {day}"))?;
    }
}

/// Moves every user's aging filter to hour 0 of `day` (the time the next queries are asked):
/// an `SF.MADDAT` of [`SF_TICK`] at that time.
async fn tick_sf(clock: SfClock, cfg: &FeedConfig, day: u32, conn: &MultiplexedConnection) -> Result<()> {
    let mut conn = conn.clone();
    let mut users = 0..cfg.users;
    loop {
        let mut p = redis::pipe();
        for u in users.by_ref().take(cfg.batch) {
            p.cmd("SF.MADDAT").arg(key(u)).arg(clock.at(day, 0)).arg(SF_TICK).ignore();
        }
        if p.cmd_iter().next().is_none() {
            return Ok(());
        }
        let _: () =
            p.query_async(&mut conn).await.with_context(|| format!("move the clocks to day {day}"))?;
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
        Design::Sf(_) => "SF.MEXISTS",
        Design::Window(w) => {
            let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
            let f = w.filters()?.get(user as usize).context("no such user")?;
            return Ok(f.contains_many_async(&*conn, &ids).await?);
        }
    };
    let v: Vec<i64> = redis::cmd(verb).arg(key(user)).arg(ids).query_async(conn).await?;
    Ok(v.into_iter().map(|x| x == 1).collect())
}

/// When a query is asked and which of the user's days its seen candidates come from.
#[derive(Clone, Copy, Debug)]
pub struct Ask {
    /// The day the query is asked (the windowed design's clock is set to its noon, the aging
    /// filters' to its hour 0).
    pub day: u32,
    /// The first day the seen candidates were shown.
    pub from: u32,
    /// The day after the last.
    pub to: u32,
}

/// The candidates of query `q` for `user`: `seen_candidates` shown on the days `ask.from` to
/// `ask.to` (exclusive), then fresh ids.
pub fn candidates(cfg: &FeedConfig, user: u64, q: u64, ask: Ask) -> (Vec<i64>, usize) {
    let mut ids = Vec::with_capacity(cfg.candidates);
    let first = ask.from.min(ask.to);
    let span = ask.to - first;
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
    /// Seen candidates reported unseen (must be 0 for items in the window; after it, the share
    /// of old items that came back).
    pub false_negatives: u64,
    /// Seen candidates asked.
    pub seen_asked: u64,
    /// Fresh candidates reported seen.
    pub false_positives: u64,
    /// Fresh candidates asked.
    pub fresh_asked: u64,
}

/// `queries` queries of random users from `concurrency` tasks, each waiting for its answer
/// (no pipelining: a feed service asks once per page), candidates as `ask` says.
pub async fn query(
    design: &Design,
    cfg: &FeedConfig,
    conn: &MultiplexedConnection,
    queries: u64,
    concurrency: usize,
    ask: Ask,
) -> Result<QueryReport> {
    match design {
        Design::Window(w) => w.set_day(ask.day),
        Design::Sf(clock) => tick_sf(*clock, cfg, ask.day, conn).await?,
        Design::Set | Design::Bf => {}
    }
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
                let (ids, n_seen) = candidates(&cfg, user, q, ask);
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

/// Mean `MEMORY USAGE` (with all samples) of `sample` users' keys: the set, `BF` or `SF` key, or
/// every key of a windowed filter (its pointer, its metadata record, and the bitmap of each day
/// loaded: `docs/REDIS_LAYOUT.md` §1 names them; these filters fit one bitmap key a day).
pub async fn memory_per_key(
    design: &Design,
    cfg: &FeedConfig,
    conn: &mut MultiplexedConnection,
    sample: u64,
) -> Result<f64> {
    let step = (cfg.users / sample.max(1)).max(1);
    let mut p = redis::pipe();
    let mut n = 0u64;
    for u in (0..cfg.users).step_by(step as usize).take(sample as usize) {
        n += 1;
        let Design::Window(w) = design else {
            p.cmd("MEMORY").arg("USAGE").arg(key(u)).arg("SAMPLES").arg(0);
            continue;
        };
        let name = window_name(u);
        let record = w.filters()?[u as usize].record();
        if record.gens.iter().any(|g| g.blocks * 64 > record.key_bytes) {
            bail!("user {u}'s filter spans several bitmap keys a day: the sizes here assume one");
        }
        let i = &record.instance;
        let mut keys = vec![name.clone(), format!("{{{name}}}:{i}:{}", record.rev)];
        for day in 0..cfg.days {
            let period = (w.start_ms + day as u64 * DAY_MS + DAY_MS / 2) / DAY_MS;
            keys.push(format!("{{{name}:{i}:{period}:0}}"));
        }
        for k in keys {
            p.cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0);
        }
    }
    let v: Vec<Option<u64>> = p.query_async(conn).await?;
    Ok(v.iter().map(|x| x.unwrap_or(0)).sum::<u64>() as f64 / n.max(1) as f64)
}

/// One design's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct FeedReport {
    /// `set`, `bf`, `window`.
    pub design: String,
    /// Users.
    pub users: u64,
    /// Items per user loaded.
    pub items_per_user: u64,
    /// Seconds to load everything.
    pub load_s: f64,
    /// `used_memory` growth over the load, per user.
    pub bytes_per_user: f64,
    /// Mean `MEMORY USAGE` of a user's keys (one, but for the windowed design).
    pub memory_usage_per_key: f64,
    /// Queries of items in the window, asked the day after the last day loaded.
    pub query: QueryReport,
    /// Queries of items from every day loaded, asked when the newest of them are past the
    /// design's window ([`Design::after_window_day`]: 8 days old, or 8 days and 6 hours for the
    /// aging filter): `false_negatives` counts the old items that came back (a set or a `BF`
    /// never lets one come back).
    pub after_window: QueryReport,
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
    let memory_usage_per_key = memory_per_key(design, cfg, conn, 1000).await?;
    // "Seen in the last 7 days", asked the next day.
    let in_window = Ask { day: cfg.days, from: cfg.days.saturating_sub(7), to: cfg.days };
    let q = query(design, cfg, conn, queries, concurrency, in_window).await?;
    let old = Ask { day: design.after_window_day(cfg.days), from: 0, to: cfg.days };
    let after_window = query(design, cfg, conn, queries, concurrency, old).await?;
    Ok(FeedReport {
        design: design.name().to_owned(),
        users: cfg.users,
        items_per_user: cfg.per_day as u64 * cfg.days as u64,
        load_s,
        bytes_per_user: after.saturating_sub(before) as f64 / cfg.users as f64,
        memory_usage_per_key,
        query: q,
        after_window,
    })
}
