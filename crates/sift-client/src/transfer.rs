//! Moving a whole filter between a sift file and a server: [`push`] uploads a
//! [`sift::BlockedBloom`] built offline (`sift build`) into the Redis layout, [`pull`] downloads
//! one back. Seed 002's "archive and rebuild": a filter rebuilt from a database dump goes live in
//! one step, and clients see the old filter until the new one is complete.
//!
//! A push writes the bits under a generation no reader knows yet (`SETRANGE` in chunks, after
//! an `INCRBY u1 <last> 0` that allocates each key at its full length), then publishes it with
//! one `SET NX` of a metadata record (the pointer too, for a new name). A reader therefore sees
//! either the old filter or the whole new one, never a half-loaded one. The replaced
//! generations expire after a grace period (requests in flight finish on them). A push that
//! dies midway leaves keys `{name:<instance>:<generation>:*}` that nothing points to; the
//! report names them before the upload starts.

use std::time::Duration;

use redis::Value;
use sift::BlockedBloom;
use sift::Filter as _;

use crate::error::{Error, Result};
use crate::exec::{block_on_ready, Connection, Exec, Group, SyncExec};
use crate::filter::{generation_keys, Filter};
use crate::layout::{
    check_hasher, new_generation_id, new_instance_id, Generation, Names, Record, Split, BLOCK_BYTES,
    DEFAULT_KEY_BYTES, MAX_JSON_INT, MAX_KEY_BYTES, POINTER_PREFIX,
};
use crate::spec::Options;

#[cfg(feature = "tokio")]
use crate::exec::{AsyncConnection, AsyncExec};

/// Splits `redis://[user:password@]host:port[/db]/name` into the server's URL (what
/// [`redis::Client::open`] takes: `redis://[user:password@]host:port/db`) and the filter name
/// (percent-decoded, so a name holding `/` is written `%2F`). `rediss://` and `redis+unix://`
/// are split the same way (the path's last segment is the name).
pub fn split_url(url: &str) -> Result<(String, Vec<u8>)> {
    let bad = |why: &str| Error::Unsupported(format!("{url:?} is not redis://host:port[/db]/name: {why}"));
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    if !scheme.starts_with("redis") {
        return Err(bad("the scheme is not redis or rediss"));
    }
    let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no filter name after the host"))?;
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let (db, name) = match path.split_once('/') {
        Some((db, name)) if !db.is_empty() && db.bytes().all(|b| b.is_ascii_digit()) => (db, name),
        _ => ("0", path),
    };
    let mut decoded = Vec::with_capacity(name.len());
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| bad("a bad %-escape"))?;
            decoded.push(v);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    crate::layout::check_name(&decoded)?;
    let mut server = format!("{scheme}://{authority}/{db}");
    if let Some(q) = query {
        server.push('?');
        server.push_str(q);
    }
    Ok((server, decoded))
}

/// How to push.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Replace an existing filter of that name (else [`Error::Exists`]).
    pub replace: bool,
    /// Bytes per sub-bitmap for a new filter (an existing one keeps its own).
    pub key_bytes: u64,
    /// Bytes per `SETRANGE`.
    pub chunk_bytes: usize,
    /// How long the replaced generations stay after the switch.
    pub grace: Duration,
    /// The client options (clock).
    pub options: Options,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            replace: false,
            key_bytes: DEFAULT_KEY_BYTES,
            chunk_bytes: 1 << 20,
            grace: Duration::from_secs(60),
            options: Options::default(),
        }
    }
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReport {
    /// The instance id.
    pub instance: String,
    /// The generation written.
    pub generation: u64,
    /// The metadata revision that published it.
    pub rev: u64,
    /// Sub-bitmaps written.
    pub keys: u64,
    /// Payload bytes sent (all-zero chunks are skipped: the keys start zeroed).
    pub bytes_sent: u64,
    /// Whether an existing filter was replaced.
    pub replaced: bool,
}

/// Uploads `filter` as the filter `name`.
pub fn push<C: Connection + Send>(
    conn: &mut C,
    name: impl AsRef<[u8]>,
    filter: &BlockedBloom,
    opts: &PushOptions,
) -> Result<PushReport> {
    block_on_ready(push_in(&mut SyncExec(conn), name.as_ref(), filter, opts, &mut |_| {}))
}

/// [`push`], reporting progress: `progress(bytes of payload done)`.
pub fn push_with_progress<C: Connection + Send>(
    conn: &mut C,
    name: impl AsRef<[u8]>,
    filter: &BlockedBloom,
    opts: &PushOptions,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<PushReport> {
    block_on_ready(push_in(&mut SyncExec(conn), name.as_ref(), filter, opts, progress))
}

/// [`push`], async.
#[cfg(feature = "tokio")]
pub async fn push_async<C: AsyncConnection>(
    conn: &C,
    name: impl AsRef<[u8]>,
    filter: &BlockedBloom,
    opts: &PushOptions,
) -> Result<PushReport> {
    push_in(&mut AsyncExec(conn), name.as_ref(), filter, opts, &mut |_| {}).await
}

/// A downloaded filter.
#[derive(Debug)]
pub struct Pulled {
    /// The filter (its item count estimated from the bits set).
    pub filter: BlockedBloom,
    /// The generation downloaded.
    pub generation: u64,
    /// Other generations queries still read (a migration in progress), not downloaded.
    pub other_generations: usize,
}

/// Downloads the generation of `name` that takes the writes (a static filter). Bits are only
/// ever set, so the result holds every item added before the pull began, even with writers
/// active (it may hold some added during it).
pub fn pull<C: Connection + Send>(conn: &mut C, name: impl AsRef<[u8]>, opts: &Options) -> Result<Pulled> {
    block_on_ready(pull_in(&mut SyncExec(conn), name.as_ref(), opts, &mut |_, _| {}))
}

/// [`pull`], reporting progress: `progress(bytes done, bytes total)`.
pub fn pull_with_progress<C: Connection + Send>(
    conn: &mut C,
    name: impl AsRef<[u8]>,
    opts: &Options,
    progress: &mut (dyn FnMut(u64, u64) + Send),
) -> Result<Pulled> {
    block_on_ready(pull_in(&mut SyncExec(conn), name.as_ref(), opts, progress))
}

/// [`pull`], async.
#[cfg(feature = "tokio")]
pub async fn pull_async<C: AsyncConnection>(
    conn: &C,
    name: impl AsRef<[u8]>,
    opts: &Options,
) -> Result<Pulled> {
    pull_in(&mut AsyncExec(conn), name.as_ref(), opts, &mut |_, _| {}).await
}

fn expect_ok(replies: Vec<crate::exec::Replies>, groups_keys: &[Vec<u8>]) -> Result<Vec<Vec<Value>>> {
    let mut out = Vec::with_capacity(replies.len());
    for (r, key) in replies.into_iter().zip(groups_keys) {
        let vals = r?;
        for v in &vals {
            if let Some(e) = Error::from_reply(Some(key), v) {
                return Err(e);
            }
        }
        out.push(vals);
    }
    Ok(out)
}

async fn run_ok<E: Exec>(exec: &mut E, groups: Vec<Group>) -> Result<Vec<Vec<Value>>> {
    let keys: Vec<Vec<u8>> = groups.iter().map(|g| g.key.clone()).collect();
    let replies = exec.run(groups).await;
    expect_ok(replies, &keys)
}

async fn del_all<E: Exec>(exec: &mut E, keys: &[Vec<u8>]) {
    let groups: Vec<Group> = keys
        .iter()
        .map(|k| {
            let mut c = redis::cmd("DEL");
            c.arg(k);
            Group { key: k.clone(), cmds: vec![c] }
        })
        .collect();
    for chunk in groups.chunks(512) {
        let _ = exec.run(chunk.to_vec()).await;
    }
}

/// `SET key value NX`: whether it was set.
async fn set_nx<E: Exec>(exec: &mut E, key: &[u8], value: &[u8]) -> Result<bool> {
    let mut c = redis::cmd("SET");
    c.arg(key).arg(value).arg("NX");
    let r = run_ok(exec, vec![Group { key: key.to_vec(), cmds: vec![c] }]).await?;
    match r[0].first() {
        Some(Value::Nil) => Ok(false),
        Some(Value::Okay) | Some(Value::SimpleString(_)) => Ok(true),
        other => Err(Error::Protocol { command: "SET".into(), reply: format!("{other:?}") }),
    }
}

async fn push_in<E: Exec>(
    exec: &mut E,
    name: &[u8],
    filter: &BlockedBloom,
    opts: &PushOptions,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<PushReport> {
    let names = Names::new(name)?;
    let hasher = filter.hasher();
    check_hasher(hasher)?;
    let existing = match Filter::open_in(exec, name, opts.options.clone()).await {
        Ok(f) => Some(f),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    if existing.is_some() && !opts.replace {
        return Err(Error::Exists { name: names.display() });
    }
    let key_bytes = match &existing {
        Some(f) => f.loaded().record.key_bytes,
        None => opts.key_bytes,
    };
    if key_bytes == 0 || key_bytes % BLOCK_BYTES != 0 || key_bytes > MAX_KEY_BYTES {
        return Err(crate::error::param("key_bytes", key_bytes, "a multiple of 64 between 64 and 536870848"));
    }
    if let Some(f) = &existing {
        let rec = &f.loaded().record;
        if rec.window.is_some() {
            return Err(Error::Unsupported(format!(
                "{} is a windowed filter: its generations follow the clock, a file cannot replace them",
                names.display()
            )));
        }
        if rec.hasher != hasher {
            return Err(Error::Mismatch {
                name: names.display(),
                field: "hash",
                expected: format!("{} seed {} (the file's)", hasher.kind().name(), hasher.seed()),
                found: format!("{} seed {}", rec.hasher.kind().name(), rec.hasher.seed()),
            });
        }
    }
    let instance = existing.as_ref().map_or_else(new_instance_id, |f| f.loaded().record.instance.clone());
    let gen = Generation {
        id: if existing.is_some() { new_generation_id() } else { 0 },
        blocks: filter.num_blocks(),
        k: filter.num_hashes(),
        capacity: filter.capacity().clamp(1, MAX_JSON_INT - 1),
        fpr: filter.target_fpr(),
        retire_ms: 0,
    };
    let mut rec = Record {
        instance: instance.clone(),
        rev: 0,
        hasher,
        key_bytes,
        window: None,
        gens: vec![gen.clone()],
    };
    let keys = generation_keys(&names, &rec, gen.id, &gen);
    let split = Split::new(gen.blocks, key_bytes);

    // Upload, key by key: allocate at full length, then the non-zero chunks.
    let chunk = opts.chunk_bytes.clamp(64, 64 << 20);
    let mut words = filter.words();
    let mut sent = 0u64;
    let mut done = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(chunk);
    let mut pending: Vec<Group> = Vec::new();
    let mut pending_bytes = 0usize;
    for (i, key) in keys.iter().enumerate() {
        let len = split.key_len(i as u64);
        let mut g = Group::new(key.clone());
        let mut c = redis::cmd("BITFIELD");
        c.arg(key).arg("INCRBY").arg("u1").arg(len * 8 - 1).arg(0);
        g.cmds.push(c);
        let mut at = 0u64;
        while at < len {
            let n = (chunk as u64).min(len - at) as usize;
            buf.clear();
            for w in words.by_ref().take(n / 8) {
                buf.extend_from_slice(&w.to_le_bytes());
            }
            if buf.iter().any(|&b| b != 0) {
                let mut c = redis::cmd("SETRANGE");
                c.arg(key).arg(at).arg(buf.as_slice());
                g.cmds.push(c);
                sent += n as u64;
                pending_bytes += n;
            }
            at += n as u64;
        }
        pending.push(g);
        done += len;
        if pending_bytes >= 8 * chunk || pending.len() >= 256 {
            if let Err(e) = run_ok(exec, std::mem::take(&mut pending)).await {
                del_all(exec, &keys).await;
                return Err(e);
            }
            pending_bytes = 0;
            progress(done);
        }
    }
    if !pending.is_empty() {
        if let Err(e) = run_ok(exec, pending).await {
            del_all(exec, &keys).await;
            return Err(e);
        }
    }
    progress(done);

    // Publish.
    let pointer = format!("{POINTER_PREFIX}{instance}").into_bytes();
    match existing {
        None => {
            let rkey = names.record(&instance, 0);
            if !set_nx(exec, &rkey, rec.to_json().as_bytes()).await? {
                del_all(exec, &keys).await;
                return Err(Error::Conflict { name: names.display(), rev: 0 });
            }
            if !set_nx(exec, &names.pointer(), &pointer).await? {
                del_all(exec, &keys).await;
                del_all(exec, &[rkey]).await;
                return Err(Error::Exists { name: names.display() });
            }
            Ok(PushReport {
                instance,
                generation: gen.id,
                rev: 0,
                keys: keys.len() as u64,
                bytes_sent: sent,
                replaced: false,
            })
        }
        Some(f) => {
            for _ in 0..8 {
                f.refresh_in(exec).await?;
                let cur = f.loaded().record.clone();
                rec.rev = cur.rev + 1;
                if !set_nx(exec, &names.record(&instance, rec.rev), rec.to_json().as_bytes()).await? {
                    continue;
                }
                // The replaced generations: expire after the grace (requests in flight).
                let at =
                    opts.options.clock.now_ms().saturating_add(opts.grace.as_millis() as u64).to_string();
                let mut old = Vec::new();
                for g in &cur.gens {
                    old.extend(generation_keys(&names, &cur, g.id, g));
                }
                let groups: Vec<Group> = old
                    .iter()
                    .map(|k| {
                        let mut c = redis::cmd("PEXPIREAT");
                        c.arg(k).arg(at.as_str());
                        Group { key: k.clone(), cmds: vec![c] }
                    })
                    .collect();
                for chunk in groups.chunks(512) {
                    run_ok(exec, chunk.to_vec()).await?;
                }
                return Ok(PushReport {
                    instance,
                    generation: gen.id,
                    rev: rec.rev,
                    keys: keys.len() as u64,
                    bytes_sent: sent,
                    replaced: true,
                });
            }
            del_all(exec, &keys).await;
            Err(Error::Conflict { name: names.display(), rev: rec.rev })
        }
    }
}

async fn pull_in<E: Exec>(
    exec: &mut E,
    name: &[u8],
    opts: &Options,
    progress: &mut (dyn FnMut(u64, u64) + Send),
) -> Result<Pulled> {
    let f = Filter::open_in(exec, name, opts.clone()).await?;
    let loaded = f.loaded();
    let rec = &loaded.record;
    if rec.window.is_some() {
        return Err(Error::Unsupported(format!(
            "{} is a windowed filter: pull downloads a static filter's generation",
            f.names().display()
        )));
    }
    let now = opts.clock.now_ms();
    let (id, gen) = rec.write_target(now);
    let others = rec.read_targets(now).len() - 1;
    let total = gen.blocks * BLOCK_BYTES;
    let payload_len = usize::try_from(total)
        .map_err(|_| Error::Unsupported(format!("a filter of {total} bytes does not fit in memory here")))?;
    let mut payload: Vec<u8> = Vec::new();
    payload.try_reserve_exact(payload_len).map_err(|_| Error::Io {
        context: format!("allocating {total} bytes for the filter"),
        source: std::io::Error::from(std::io::ErrorKind::OutOfMemory),
    })?;
    let split = Split::new(gen.blocks, rec.key_bytes);
    let keys = generation_keys(f.names(), rec, id, gen);
    const CHUNK: u64 = 1 << 20;
    let mut groups = Vec::new();
    let mut spans = Vec::new();
    let mut in_flight = 0u64;
    for (i, key) in keys.iter().enumerate() {
        let len = split.key_len(i as u64);
        let mut g = Group::new(key.clone());
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at);
            let mut c = redis::cmd("GETRANGE");
            c.arg(key).arg(at).arg(at + n - 1);
            g.cmds.push(c);
            spans.push(n);
            at += n;
        }
        in_flight += len;
        groups.push(g);
        if in_flight >= 16 * CHUNK || i + 1 == keys.len() {
            let replies = run_ok(exec, std::mem::take(&mut groups)).await?;
            let mut span = spans.drain(..);
            for vals in replies {
                for v in vals {
                    let want = span.next().unwrap_or(0) as usize;
                    match v {
                        // A missing or short key reads as zeros (Redis returns what exists).
                        Value::BulkString(b) if b.len() <= want => {
                            payload.extend_from_slice(&b);
                            payload.resize(payload.len() + want - b.len(), 0);
                        }
                        other => {
                            return Err(Error::Protocol {
                                command: "GETRANGE".into(),
                                reply: format!("{other:?}"),
                            })
                        }
                    }
                }
            }
            in_flight = 0;
            progress(payload.len() as u64, total);
        }
    }
    let filter = BlockedBloom::from_payload(&payload, gen.k, rec.hasher, gen.capacity, gen.fpr)?;
    Ok(Pulled { filter, generation: id, other_generations: others })
}

#[cfg(test)]
mod tests {
    use super::split_url;

    #[test]
    fn urls_split_into_server_and_name() {
        let ok = |u: &str| split_url(u).unwrap();
        assert_eq!(
            ok("redis://127.0.0.1:6379/users"),
            ("redis://127.0.0.1:6379/0".into(), b"users".to_vec())
        );
        assert_eq!(ok("redis://h:1/3/bf:users"), ("redis://h:1/3".into(), b"bf:users".to_vec()));
        assert_eq!(ok("redis://u:p@h/a%2Fb"), ("redis://u:p@h/0".into(), b"a/b".to_vec()));
        assert_eq!(ok("rediss://h/x?protocol=resp3"), ("rediss://h/0?protocol=resp3".into(), b"x".to_vec()));
        assert_eq!(ok("redis://h/12"), ("redis://h/0".into(), b"12".to_vec()), "a lone number is a name");
        for bad in [
            "users",
            "http://h/x",
            "redis://h",
            "redis://h/",
            "redis://h/a%2",
            "redis://h/a{b",
            "redis://h/3/",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }
}
