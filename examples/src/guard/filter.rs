//! The guard's filter, wherever it lives: a `BF.*` key on sift-server or on Redis with the sift
//! module, a `sift-client` filter in plain Redis strings (any Redis-protocol server, no module),
//! or an in-process [`AtomicBloom`]. Items are ids written in decimal, the same bytes a key dump
//! has one per line, so `sift build` over a dump makes the same filter.
//!
//! Replacing a filter (bootstrap, rebuild) goes through a [`Stage`]: a new filter filled aside
//! — a temporary key, or a new in-process filter — then swapped in at once ([`Guard::install`]):
//! `RENAME` of the temporary key over the live one (atomic in Redis and sift-server: a reader
//! sees the old filter or the new one), a pointer swap in process, or, for `sift-client`, an
//! upload of the new bits under a generation no reader knows yet, published by one metadata
//! record ([`sift_client::transfer::push_async`] with `replace`): every client, in this process
//! or another, reads the old generation or the whole new one.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use arc_swap::{ArcSwap, ArcSwapOption};
use redis::aio::MultiplexedConnection;
use sift::compat::redisbloom::BloomChain;
use sift::format::FilterKind;
use sift::prelude::*;
use sift::{AtomicBloom, BlockedBloom};

/// Which filter guards the service, chosen at start.
#[derive(Clone, Debug, PartialEq)]
pub enum GuardKind {
    /// No guard: every request goes to the cache, then the database (the control).
    Off,
    /// A filter in this process ([`AtomicBloom`]: lock-free adds from every request thread).
    Local,
    /// A RedisBloom-compatible `BF.*` key on a Redis-protocol server (sift-server, or
    /// redis-server with `libsift_redis.so`).
    Bf {
        /// `redis://host:port/`.
        url: String,
        /// The live key.
        key: String,
    },
    /// sift's blocked Bloom filter in plain Redis strings (`sift-client`): `BITFIELD` adds and
    /// `GETRANGE` queries, on any Redis-protocol server, with no module loaded.
    Client {
        /// `redis://host:port/`.
        url: String,
        /// The filter's name (its pointer key; the bits are in `{name:…}` keys).
        name: String,
    },
}

impl GuardKind {
    /// A short name for tables: `off`, `local`, `bf`, `client`.
    pub fn name(&self) -> &'static str {
        match self {
            GuardKind::Off => "off",
            GuardKind::Local => "local",
            GuardKind::Bf { .. } => "bf",
            GuardKind::Client { .. } => "client",
        }
    }
}

/// The live filter.
pub enum Guard {
    /// No filter: everything may exist.
    Off,
    /// In process, swapped whole by [`Guard::install`].
    Local(ArcSwap<AtomicBloom>),
    /// A `BF` key.
    Bf {
        /// A pipelined connection shared by all requests.
        conn: MultiplexedConnection,
        /// The live key.
        key: String,
    },
    /// A `sift-client` filter.
    Client {
        /// A pipelined connection shared by all requests.
        conn: MultiplexedConnection,
        /// The filter's name.
        name: String,
        /// The handle, `None` until the first [`Guard::install`] (or when the name held no
        /// filter at connect). A handle follows the filter's metadata by itself: after a
        /// replacement published by anyone, its next round trip reads the new record.
        live: ArcSwapOption<sift_client::Filter>,
    },
}

/// How long a replaced `sift-client` generation stays after the switch, for requests already
/// on their way to it (their answers stay right: its bits hold every id it ever held).
const CLIENT_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// The decimal text of an id: what is added and looked up.
pub fn item(id: i64) -> String {
    id.to_string()
}

impl Guard {
    /// Connects (for `Bf`) and makes a guard with an empty filter (`Local`) or whatever the key
    /// holds (`Bf`); fill it with [`Guard::install`] before serving.
    pub async fn connect(kind: &GuardKind) -> Result<Guard> {
        Ok(match kind {
            GuardKind::Off => Guard::Off,
            GuardKind::Local => Guard::Local(ArcSwap::from_pointee(AtomicBloom::new(1, 0.5)?)),
            GuardKind::Bf { url, key } => {
                let client =
                    redis::Client::open(url.as_str()).with_context(|| format!("filter url {url}"))?;
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .with_context(|| format!("connect to {url}"))?;
                // Fail now, with a clear message, on a server without BF.* rather than on the
                // first request.
                let probe: redis::RedisResult<i64> =
                    redis::cmd("BF.EXISTS").arg(format!("{key}:probe")).arg("x").query_async(&mut conn).await;
                if let Err(e) = probe {
                    bail!("{url} does not answer BF.EXISTS ({e}): use sift-server or redis-server with libsift_redis.so");
                }
                Guard::Bf { conn, key: key.clone() }
            }
            GuardKind::Client { url, name } => {
                let client =
                    redis::Client::open(url.as_str()).with_context(|| format!("filter url {url}"))?;
                let conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .with_context(|| format!("connect to {url}"))?;
                // An existing filter under the name is used until the bootstrap replaces it;
                // anything else under it (another layout, not a filter) is refused now.
                let live = match sift_client::Filter::open_async(&conn, name, sift_client::Options::new())
                    .await
                {
                    Ok(f) => Some(Arc::new(f)),
                    Err(sift_client::Error::NotFound { .. }) => None,
                    Err(e) => return Err(e).with_context(|| format!("open the filter {name:?} on {url}")),
                };
                Guard::Client { conn, name: name.clone(), live: ArcSwapOption::new(live) }
            }
        })
    }

    fn client_filter(live: &ArcSwapOption<sift_client::Filter>) -> Result<Arc<sift_client::Filter>> {
        live.load_full().context("no filter installed yet")
    }

    /// A guard with an empty filter for `capacity` ids at `fpr` (for `Bf`, the key is replaced).
    pub async fn fresh(kind: &GuardKind, capacity: u64, fpr: f64) -> Result<Guard> {
        let g = Guard::connect(kind).await?;
        let stage = g.stage(capacity, fpr).await?;
        g.install(stage).await?;
        Ok(g)
    }

    /// `false` only when `id` was surely never added.
    pub async fn may_contain(&self, id: i64) -> Result<bool> {
        match self {
            Guard::Off => Ok(true),
            Guard::Local(f) => Ok(f.load().contains(item(id))),
            Guard::Bf { conn, key } => {
                let mut c = conn.clone();
                let v: i64 = redis::cmd("BF.EXISTS").arg(key).arg(item(id)).query_async(&mut c).await?;
                Ok(v == 1)
            }
            Guard::Client { conn, live, .. } => {
                Ok(Self::client_filter(live)?.contains_async(conn, item(id)).await?)
            }
        }
    }

    /// Adds `id`; returns once every later [`Guard::may_contain`] sees it. The answer is
    /// whether the filter changed: `true` means `id` was surely new, `false` "maybe seen".
    /// `BF.ADD` and `sift-client`'s `BITFIELD` answer atomically (of all the clients adding one
    /// id, at most one hears `true`); the in-process filter may tell two threads adding the same new id at the same
    /// instant both `true`.
    pub async fn add(&self, id: i64) -> Result<bool> {
        match self {
            Guard::Off => Ok(true),
            Guard::Local(f) => Ok(f.load().insert(item(id))),
            Guard::Bf { conn, key } => {
                let mut c = conn.clone();
                let v: i64 = redis::cmd("BF.ADD").arg(key).arg(item(id)).query_async(&mut c).await?;
                Ok(v == 1)
            }
            Guard::Client { conn, live, .. } => {
                Ok(Self::client_filter(live)?.add_async(conn, item(id)).await?)
            }
        }
    }

    /// An empty filter sized for `capacity` items at `fpr`, to fill aside. For `Bf`, the
    /// temporary key `<key>:staging` is deleted first (a previous attempt may have left it).
    pub async fn stage(&self, capacity: u64, fpr: f64) -> Result<Stage> {
        match self {
            Guard::Off => Ok(Stage::Off),
            Guard::Local(_) => {
                let n = usize::try_from(capacity.max(1)).context("capacity")?;
                Ok(Stage::Local(AtomicBloom::new(n, fpr)?))
            }
            Guard::Bf { conn, key } => {
                let mut c = conn.clone();
                let staging = format!("{key}:staging");
                let _: i64 = redis::cmd("DEL").arg(&staging).query_async(&mut c).await?;
                let _: () = redis::cmd("BF.RESERVE")
                    .arg(&staging)
                    .arg(fpr)
                    .arg(capacity.max(1))
                    .query_async(&mut c)
                    .await
                    .context("BF.RESERVE of the staging key")?;
                Ok(Stage::Bf { conn: conn.clone(), key: staging })
            }
            // Filled in process, uploaded at install: `sift-client` publishes a filter whole,
            // so the new bits cannot be written in place while the old ones serve.
            Guard::Client { .. } => {
                let n = usize::try_from(capacity.max(1)).context("capacity")?;
                Ok(Stage::Client(BlockedBloom::new(n, fpr)?))
            }
        }
    }

    /// A stage holding the filter in `path`, a file written by `sift build`: the default
    /// `blocked-bloom` family for `Local` and `Client`, `--family redisbloom-bf` for `Bf` (its `SCANDUMP`
    /// chunks go to the temporary key with `BF.LOADCHUNK`, as `BF.SCANDUMP` gave them).
    pub async fn stage_file(&self, path: &Path) -> Result<Stage> {
        let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        let kind = sift::format::decode(&bytes)
            .with_context(|| format!("{} is not a sift file", path.display()))?
            .kind();
        match self {
            Guard::Off => Ok(Stage::Off),
            Guard::Local(_) => {
                if kind != Some(FilterKind::BlockedBloom) {
                    bail!("{}: the in-process guard loads blocked Bloom files (sift build's default family), not {}", path.display(), kind_name(kind));
                }
                let f =
                    BlockedBloom::from_bytes(&bytes).with_context(|| format!("load {}", path.display()))?;
                Ok(Stage::Local(AtomicBloom::from(f)))
            }
            Guard::Client { .. } => {
                if kind != Some(FilterKind::BlockedBloom) {
                    bail!("{}: a sift-client guard loads blocked Bloom files (sift build's default family), not {}", path.display(), kind_name(kind));
                }
                let f =
                    BlockedBloom::from_bytes(&bytes).with_context(|| format!("load {}", path.display()))?;
                Ok(Stage::Client(f))
            }
            Guard::Bf { conn, key } => {
                if kind != Some(FilterKind::RedisBloomChain) {
                    bail!(
                        "{}: a BF guard loads RedisBloom filters (`sift build --family redisbloom-bf`), not {}",
                        path.display(),
                        kind_name(kind)
                    );
                }
                let chain =
                    BloomChain::from_bytes(&bytes).with_context(|| format!("load {}", path.display()))?;
                let mut c = conn.clone();
                let staging = format!("{key}:staging");
                let _: i64 = redis::cmd("DEL").arg(&staging).query_async(&mut c).await?;
                for (it, data) in chain.scandump_all() {
                    let _: () = redis::cmd("BF.LOADCHUNK")
                        .arg(&staging)
                        .arg(it)
                        .arg(data)
                        .query_async(&mut c)
                        .await
                        .context("BF.LOADCHUNK into the staging key")?;
                }
                Ok(Stage::Bf { conn: conn.clone(), key: staging })
            }
        }
    }

    /// Puts `stage` live: readers see the old filter or the new one, never a mix.
    pub async fn install(&self, stage: Stage) -> Result<()> {
        match (self, stage) {
            (Guard::Off, Stage::Off) => Ok(()),
            (Guard::Local(live), Stage::Local(f)) => {
                live.store(Arc::new(f));
                Ok(())
            }
            (Guard::Bf { conn, key }, Stage::Bf { key: staging, .. }) => {
                let mut c = conn.clone();
                let _: () = redis::cmd("RENAME").arg(&staging).arg(key).query_async(&mut c).await?;
                Ok(())
            }
            (Guard::Client { conn, name, live }, Stage::Client(f)) => {
                let opts = sift_client::transfer::PushOptions {
                    replace: true,
                    grace: CLIENT_GRACE,
                    ..Default::default()
                };
                sift_client::transfer::push_async(conn, name, &f, &opts)
                    .await
                    .with_context(|| format!("upload the new filter to {name:?}"))?;
                // A fresh handle: also right if the name had no filter, or someone deleted and
                // recreated it (a new instance the old handle would refuse).
                let opened = sift_client::Filter::open_async(conn, name, sift_client::Options::new())
                    .await
                    .with_context(|| format!("open the filter {name:?} after the upload"))?;
                live.store(Some(Arc::new(opened)));
                Ok(())
            }
            _ => bail!("a stage of another kind of guard"),
        }
    }

    /// Bytes of the live filter (the in-process size, or `MEMORY USAGE` of the key).
    pub async fn bytes(&self) -> Result<u64> {
        match self {
            Guard::Off => Ok(0),
            Guard::Local(f) => Ok(f.load().size_in_bytes() as u64),
            Guard::Bf { conn, key } => {
                let mut c = conn.clone();
                let v: Option<u64> = redis::cmd("MEMORY").arg("USAGE").arg(key).query_async(&mut c).await?;
                Ok(v.unwrap_or(0))
            }
            // The bits of the generations queries read (64 bytes a block); the few hundred
            // bytes of metadata records are left out.
            Guard::Client { live, .. } => {
                Ok(live.load().as_ref().map_or(0, |f| f.record().gens.iter().map(|g| g.blocks * 64).sum()))
            }
        }
    }
}

fn kind_name(kind: Option<FilterKind>) -> &'static str {
    kind.map_or("an unknown kind", FilterKind::name)
}

/// A filter being filled aside (see [`Guard::stage`]).
pub enum Stage {
    /// Nothing to fill.
    Off,
    /// A new in-process filter.
    Local(AtomicBloom),
    /// The temporary key.
    Bf {
        /// A connection to the filter's server.
        conn: MultiplexedConnection,
        /// `<live key>:staging`.
        key: String,
    },
    /// The bits of a `sift-client` filter, uploaded by [`Guard::install`].
    Client(BlockedBloom),
}

impl Stage {
    /// Adds ids (one `BF.MADD` for a `Bf` stage).
    pub async fn add_many(&mut self, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        match self {
            Stage::Off => Ok(()),
            Stage::Local(f) => {
                for &id in ids {
                    f.insert(item(id));
                }
                Ok(())
            }
            Stage::Client(f) => {
                for &id in ids {
                    f.insert(item(id));
                }
                Ok(())
            }
            Stage::Bf { conn, key } => {
                let mut cmd = redis::cmd("BF.MADD");
                cmd.arg(&*key);
                for &id in ids {
                    cmd.arg(item(id));
                }
                let _: Vec<i64> = cmd.query_async(conn).await?;
                Ok(())
            }
        }
    }
}
