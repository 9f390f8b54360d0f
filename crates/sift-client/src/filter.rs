//! [`Filter`]: a handle on one filter kept in Redis, with sync and async methods.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;
use sift::Digest;

use crate::batch::{noscript_fallbacks, Batch, Builder, Freshness};
use crate::error::{Error, Result};
use crate::exec::{block_on_ready, Connection, Exec, Group, Replies, SyncExec};
use crate::layout::{new_generation_id, new_instance_id, Generation, Names, Record, Split, POINTER_PREFIX};
use crate::spec::{Mode, Options, Spec};

#[cfg(feature = "tokio")]
use crate::exec::{AsyncConnection, AsyncExec};

/// The metadata a handle works with: the pointer's value and the latest record.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub(crate) pointer: Vec<u8>,
    pub(crate) record: Record,
}

/// How full one generation is, from the `BITCOUNT` of its sub-bitmaps.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationFill {
    /// Its id (the period, in a windowed filter).
    pub id: u64,
    /// Bits of its bitmaps (512 per block).
    pub bits: u64,
    /// Bits set.
    pub bits_set: u64,
    /// Items it holds, estimated from the bits set (Swamidass & Baldi 2007).
    pub estimated_items: f64,
    /// The false-positive rate a query meets in it now: the layout's exact FPR at the estimated
    /// items ([`sift::math::blocked_words_fpr`]).
    pub expected_fpr: f64,
    /// The item count it was sized for.
    pub capacity: u64,
    /// The false-positive rate it was sized for.
    pub target_fpr: f64,
}

/// How full a filter is: seed 002's monitor, to decide when to rebuild or grow.
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    /// The generations queries read, newest first.
    pub generations: Vec<GenerationFill>,
    /// The false-positive rate of a query now: it reads every generation above, so
    /// `1 - Π (1 - p_g)`.
    pub expected_fpr: f64,
}

/// A Bloom filter kept in Redis strings by sift's blocked layout (see the crate documentation
/// and `docs/REDIS_LAYOUT.md`).
///
/// A handle holds the filter's metadata, not a connection: every call takes the connection to
/// use, so one handle serves many connections and threads (it is `Send + Sync`; share it in an
/// `Arc`). Each call also checks, in the same round trip, that the metadata it used is still
/// current: when another client has grown or replaced the filter, the call reloads it and runs
/// again, and when the filter was deleted it fails with [`Error::Deleted`].
#[derive(Debug)]
pub struct Filter {
    names: Names,
    opts: Options,
    state: Mutex<Arc<Loaded>>,
}

/// The pointer value of an instance.
fn pointer_value(instance: &str) -> Vec<u8> {
    format!("{POINTER_PREFIX}{instance}").into_bytes()
}

fn cmd1(name: &str, key: &[u8]) -> redis::Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

fn single_group(key: Vec<u8>, cmds: Vec<redis::Cmd>) -> Vec<Group> {
    vec![Group { key, cmds }]
}

/// The one reply of command `cmd` of group `g`, with a server error as an error.
fn one(replies: &[Replies], groups_keys: &[Vec<u8>], g: usize, cmd: usize) -> Result<Value> {
    match &replies[g] {
        Err(e) => Err(e.dup()),
        Ok(v) => match v.get(cmd) {
            Some(v) => match Error::from_reply(Some(&groups_keys[g]), v) {
                Some(e) => Err(e),
                None => Ok(v.clone()),
            },
            None => {
                Err(Error::Protocol { command: "pipeline".into(), reply: format!("{} replies", v.len()) })
            }
        },
    }
}

/// Runs `groups` on `exec` and returns their replies, every error reply kept in place.
async fn run<E: Exec>(exec: &mut E, groups: Vec<Group>) -> Vec<Replies> {
    exec.run(groups).await
}

/// Runs groups whose every command must succeed; returns the first error.
async fn run_all_ok<E: Exec>(exec: &mut E, groups: Vec<Group>) -> Result<Vec<Vec<Value>>> {
    let keys: Vec<Vec<u8>> = groups.iter().map(|g| g.key.clone()).collect();
    let counts: Vec<usize> = groups.iter().map(|g| g.cmds.len()).collect();
    let replies = run(exec, groups).await;
    let mut out = Vec::with_capacity(replies.len());
    for (g, n) in counts.iter().enumerate() {
        for c in 0..*n {
            one(&replies, &keys, g, c)?;
        }
    }
    for r in replies {
        out.push(r?);
    }
    Ok(out)
}

/// Parses a pointer value: the instance id, or why it is not one of ours.
fn parse_pointer(names: &Names, v: &[u8]) -> Result<String> {
    let s = std::str::from_utf8(v).ok().and_then(|s| s.strip_prefix(POINTER_PREFIX));
    match s {
        Some(id)
            if id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(id.to_string())
        }
        _ => {
            // Another layout version of this crate writes "sift-bitmap-bloom:<v>:": say so.
            if let Some(rest) = std::str::from_utf8(v).ok().and_then(|s| s.strip_prefix("sift-bitmap-bloom:"))
            {
                if let Some(found) = rest.split(':').next().and_then(|n| n.parse::<u64>().ok()) {
                    return Err(Error::UnsupportedLayout { found, supported: crate::layout::LAYOUT_VERSION });
                }
            }
            Err(Error::Foreign {
                key: names.display(),
                reason: format!(
                    "it holds {:?}, not a sift filter pointer (\"{POINTER_PREFIX}<instance>\")",
                    String::from_utf8_lossy(&v[..v.len().min(64)])
                ),
            })
        }
    }
}

/// Reads the pointer: the instance id.
async fn read_pointer<E: Exec>(exec: &mut E, names: &Names) -> Result<String> {
    let key = names.pointer();
    let replies = run(exec, single_group(key.clone(), vec![cmd1("GET", &key)])).await;
    match one(&replies, &[key], 0, 0) {
        Ok(Value::Nil) => Err(Error::NotFound { name: names.display() }),
        Ok(Value::BulkString(v)) => parse_pointer(names, &v),
        Ok(other) => Err(Error::Protocol { command: "GET".into(), reply: format!("{other:?}") }),
        Err(Error::WrongType { .. }) => Err(Error::Foreign {
            key: names.display(),
            reason: "it holds a value that is not a string (WRONGTYPE)".into(),
        }),
        Err(e) => Err(e),
    }
}

/// Reads the records of `instance` from revision `from` on and returns the latest (`known`:
/// the one already held, returned when there is nothing newer).
async fn read_records<E: Exec>(
    exec: &mut E,
    names: &Names,
    instance: &str,
    mut from: u64,
    mut known: Option<Record>,
) -> Result<Record> {
    const PROBE: u64 = 8;
    loop {
        let ptr = names.pointer();
        let mut cmds = vec![cmd1("GET", &ptr)];
        for r in from..from + PROBE {
            cmds.push(cmd1("GET", &names.record(instance, r)));
        }
        let replies = run(exec, single_group(ptr.clone(), cmds)).await;
        let keys = [ptr];
        match one(&replies, &keys, 0, 0)? {
            Value::BulkString(v) if v == pointer_value(instance) => {}
            _ => return Err(Error::Deleted { name: names.display() }),
        }
        for i in 0..PROBE {
            let key = names.record(instance, from + i);
            match one(&replies, &keys, 0, 1 + i as usize)? {
                Value::Nil => {
                    return known.ok_or_else(|| Error::Foreign {
                        key: names.display(),
                        reason: format!("it points to instance {instance}, whose record 0 is missing"),
                    })
                }
                Value::BulkString(text) => {
                    let rec = Record::from_json(&key, &text)?;
                    if rec.instance != instance || rec.rev != from + i {
                        return Err(Error::Foreign {
                            key: String::from_utf8_lossy(&key).into_owned(),
                            reason: format!("it says instance {} revision {}", rec.instance, rec.rev),
                        });
                    }
                    known = Some(rec);
                }
                other => return Err(Error::Protocol { command: "GET".into(), reply: format!("{other:?}") }),
            }
        }
        from += PROBE;
    }
}

/// Loads a filter's metadata.
async fn load<E: Exec>(exec: &mut E, names: &Names) -> Result<Loaded> {
    let instance = read_pointer(exec, names).await?;
    let record = read_records(exec, names, &instance, 0, None).await?;
    Ok(Loaded { pointer: pointer_value(&instance), record })
}

/// The groups creating every sub-bitmap of generation `gen` (named `id`) at its full length:
/// `BITFIELD key INCRBY u1 <last bit> 0` changes no bit and allocates a missing key exactly.
fn create_keys(names: &Names, rec: &Record, id: u64, gen: &Generation) -> Vec<Group> {
    let split = Split::new(gen.blocks, rec.key_bytes);
    (0..split.keys())
        .map(|i| {
            let key = names.data(&rec.instance, id, i);
            let mut c = cmd1("BITFIELD", &key);
            c.arg("INCRBY").arg("u1").arg(split.key_len(i) * 8 - 1).arg(0);
            Group { key, cmds: vec![c] }
        })
        .collect()
}

/// Every key of generation `gen` (named `id`).
pub(crate) fn generation_keys(names: &Names, rec: &Record, id: u64, gen: &Generation) -> Vec<Vec<u8>> {
    let split = Split::new(gen.blocks, rec.key_bytes);
    (0..split.keys()).map(|i| names.data(&rec.instance, id, i)).collect()
}

/// One command per key (`name key [args]`), each in its own group.
fn per_key(name: &str, keys: &[Vec<u8>], args: &[String]) -> Vec<Group> {
    keys.iter()
        .map(|k| {
            let mut c = cmd1(name, k);
            for a in args {
                c.arg(a.as_str());
            }
            Group { key: k.clone(), cmds: vec![c] }
        })
        .collect()
}

/// Deletes keys, best effort (cleaning up after a failed or lost creation).
async fn delete_keys<E: Exec>(exec: &mut E, keys: &[Vec<u8>]) {
    for chunk in keys.chunks(512) {
        let _ = run(exec, per_key("DEL", chunk, &[])).await;
    }
}

/// What `create` found.
enum Created {
    /// The filter was created.
    New(Loaded),
    /// A filter of that name exists (possibly created by another client meanwhile).
    Exists,
}

/// Creates a filter: its sub-bitmaps (static filters), record 0, and the pointer last, with
/// `SET NX`, so the filter appears whole or not at all and one creator wins a race.
async fn create<E: Exec>(exec: &mut E, names: &Names, spec: &Spec, now_ms: u64) -> Result<Created> {
    let window = spec.window_value();
    let id = window.map_or(0, |w| w.period(now_ms));
    let gen = spec.generation(id)?;
    let rec = Record {
        instance: new_instance_id(),
        rev: 0,
        hasher: spec.hasher_value(),
        key_bytes: spec.key_bytes_value(),
        window,
        gens: vec![gen.clone()],
    };
    // Do not allocate anything when the name is taken already.
    match read_pointer(exec, names).await {
        Err(Error::NotFound { .. }) => {}
        Ok(_) => return Ok(Created::Exists),
        Err(e) => return Err(e),
    }
    let mut ours: Vec<Vec<u8>> = Vec::new();
    if window.is_none() {
        ours = generation_keys(names, &rec, id, &gen);
        for chunk in create_keys(names, &rec, id, &gen).chunks(256) {
            if let Err(e) = run_all_ok(exec, chunk.to_vec()).await {
                delete_keys(exec, &ours).await;
                return Err(e);
            }
        }
    }
    let rkey = names.record(&rec.instance, 0);
    ours.push(rkey.clone());
    let mut set = cmd1("SET", &rkey);
    set.arg(rec.to_json()).arg("NX");
    if let Err(e) = run_all_ok(exec, single_group(rkey.clone(), vec![set])).await {
        delete_keys(exec, &ours).await;
        return Err(e);
    }
    let ptr = names.pointer();
    let value = pointer_value(&rec.instance);
    let mut set = cmd1("SET", &ptr);
    set.arg(value.as_slice()).arg("NX");
    let replies = run(exec, single_group(ptr.clone(), vec![set])).await;
    match one(&replies, &[ptr], 0, 0) {
        Ok(Value::Okay) | Ok(Value::SimpleString(_)) => {
            Ok(Created::New(Loaded { pointer: value, record: rec }))
        }
        Ok(Value::Nil) => {
            delete_keys(exec, &ours).await;
            Ok(Created::Exists)
        }
        Ok(other) => {
            delete_keys(exec, &ours).await;
            Err(Error::Protocol { command: "SET".into(), reply: format!("{other:?}") })
        }
        Err(e) => {
            delete_keys(exec, &ours).await;
            Err(e)
        }
    }
}

/// Refuses a filter whose parameters differ from `spec`'s.
fn check_matches(names: &Names, rec: &Record, spec: &Spec, now_ms: u64) -> Result<()> {
    let want = spec.generation(0)?;
    let (_, have) = rec.write_target(now_ms);
    let mismatch = |field: &'static str, expected: String, found: String| {
        Err(Error::Mismatch { name: names.display(), field, expected, found })
    };
    if rec.hasher != spec.hasher_value() {
        return mismatch(
            "hash",
            format!("{} seed {}", spec.hasher_value().kind().name(), spec.hasher_value().seed()),
            format!("{} seed {}", rec.hasher.kind().name(), rec.hasher.seed()),
        );
    }
    if rec.key_bytes != spec.key_bytes_value() {
        return mismatch("key_bytes", spec.key_bytes_value().to_string(), rec.key_bytes.to_string());
    }
    if rec.window != spec.window_value() {
        let show = |w: Option<crate::layout::Window>| {
            w.map_or("none (static)".to_string(), |w| format!("{} ms × {}", w.period_ms, w.keep))
        };
        return mismatch("window", show(spec.window_value()), show(rec.window));
    }
    if (have.blocks, have.k) != (want.blocks, want.k) {
        return mismatch(
            "size",
            format!("{} blocks, k = {} ({} items at {})", want.blocks, want.k, want.capacity, want.fpr),
            format!("{} blocks, k = {} ({} items at {})", have.blocks, have.k, have.capacity, have.fpr),
        );
    }
    Ok(())
}

/// Whether one item's answer is known, and how the call ends.
fn finish_answers(mut answers: Vec<Option<bool>>, cause: Option<Error>) -> Result<Vec<bool>> {
    match cause {
        None => Ok(answers.drain(..).map(|a| a.unwrap_or(false)).collect()),
        Some(cause) if answers.iter().all(Option::is_none) => Err(cause),
        Some(cause) => {
            Err(Error::Partial { answers: crate::error::Answers(answers), cause: Box::new(cause) })
        }
    }
}

impl Filter {
    fn with(names: Names, opts: Options, loaded: Loaded) -> Filter {
        Filter { names, opts, state: Mutex::new(Arc::new(loaded)) }
    }

    /// The metadata in use.
    fn snapshot(&self) -> Arc<Loaded> {
        Arc::clone(&self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn replace(&self, loaded: Loaded) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.pointer != s.pointer || loaded.record.rev >= s.record.rev {
            *s = Arc::new(loaded);
        }
    }

    /// The filter's name.
    pub fn name(&self) -> &[u8] {
        self.names.name()
    }

    /// The metadata record in use (the latest this handle has seen).
    pub fn record(&self) -> Record {
        self.snapshot().record.clone()
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    fn now(&self) -> u64 {
        self.opts.clock.now_ms()
    }

    // ----- the operations, once, over any Exec -----

    pub(crate) async fn open_in<E: Exec>(exec: &mut E, name: &[u8], opts: Options) -> Result<Filter> {
        let names = Names::new(name)?;
        let loaded = load(exec, &names).await?;
        Ok(Filter::with(names, opts, loaded))
    }

    async fn create_in<E: Exec>(exec: &mut E, name: &[u8], spec: &Spec, opts: Options) -> Result<Filter> {
        let names = Names::new(name)?;
        match create(exec, &names, spec, opts.clock.now_ms()).await? {
            Created::New(loaded) => Ok(Filter::with(names, opts, loaded)),
            Created::Exists => Err(Error::Exists { name: names.display() }),
        }
    }

    async fn open_or_create_in<E: Exec>(
        exec: &mut E,
        name: &[u8],
        spec: &Spec,
        opts: Options,
    ) -> Result<Filter> {
        let names = Names::new(name)?;
        spec.generation(0)?;
        for _ in 0..4 {
            match load(exec, &names).await {
                Ok(loaded) => {
                    check_matches(&names, &loaded.record, spec, opts.clock.now_ms())?;
                    return Ok(Filter::with(names, opts, loaded));
                }
                Err(Error::NotFound { .. }) | Err(Error::Deleted { .. }) => {}
                Err(e) => return Err(e),
            }
            if let Created::New(loaded) = create(exec, &names, spec, opts.clock.now_ms()).await? {
                return Ok(Filter::with(names, opts, loaded));
            }
        }
        Err(Error::Conflict { name: names.display(), rev: 0 })
    }

    pub(crate) async fn refresh_in<E: Exec>(&self, exec: &mut E) -> Result<()> {
        let snap = self.snapshot();
        let rec = read_records(
            exec,
            &self.names,
            &snap.record.instance,
            snap.record.rev + 1,
            Some(snap.record.clone()),
        )
        .await?;
        self.replace(Loaded { pointer: snap.pointer.clone(), record: rec });
        Ok(())
    }

    /// Runs one batch to its answers, redoing it after a metadata change.
    async fn batch_in<E: Exec>(&self, exec: &mut E, digests: &[Digest], add: bool) -> Vec<Result<bool>> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let snap = self.snapshot();
            let now = self.now();
            let grace = self.opts.expiry_grace.as_millis() as u64;
            let mut b = Builder::new(
                &self.names,
                &snap.record,
                self.opts.mode,
                self.opts.items_per_command,
                exec.eval_only(),
                now,
                grace,
            );
            for &d in digests {
                if add {
                    b.add(d);
                } else {
                    b.contains(d);
                }
            }
            let mut batch: Batch = b.finish(&snap.pointer);
            let mut replies = run(exec, std::mem::take(&mut batch.groups)).await;
            if self.opts.mode == Mode::Lua {
                let twins = noscript_fallbacks(&batch, &replies);
                if !twins.is_empty() {
                    let groups: Vec<Group> = twins.iter().map(|t| t.2.clone()).collect();
                    let again = run(exec, groups).await;
                    let mut failed = std::collections::HashSet::new();
                    for ((g, c, _), r) in twins.iter().zip(again) {
                        if failed.contains(g) {
                            continue;
                        }
                        if replies[*g].is_err() {
                            // The whole group failed with NOSCRIPT: its twins rebuild it.
                            replies[*g] = Ok(vec![Value::Nil; batch.counts[*g]]);
                        }
                        match r {
                            Ok(mut v) if !v.is_empty() => {
                                if let Ok(vals) = &mut replies[*g] {
                                    vals[*c] = v.swap_remove(0);
                                }
                            }
                            // The twin failed: the group's answers are lost with it.
                            other => {
                                failed.insert(*g);
                                replies[*g] = Err(other.err().unwrap_or(Error::Protocol {
                                    command: "EVAL".into(),
                                    reply: "no reply".into(),
                                }));
                            }
                        }
                    }
                }
            }
            match batch.freshness(&replies, &snap.pointer) {
                Freshness::Gone => {
                    return digests
                        .iter()
                        .map(|_| Err(Error::Deleted { name: self.names.display() }))
                        .collect()
                }
                Freshness::Stale if attempts < 8 => {
                    if let Err(e) = self.refresh_in(exec).await {
                        return digests.iter().map(|_| Err(e.dup())).collect();
                    }
                    continue;
                }
                _ => return batch.answers(&replies),
            }
        }
    }

    async fn items_in<E: Exec, I: AsRef<[u8]>>(
        &self,
        exec: &mut E,
        items: &[I],
        add: bool,
    ) -> Result<Vec<bool>> {
        let hasher = self.snapshot().record.hasher;
        let mut answers: Vec<Option<bool>> = Vec::with_capacity(items.len());
        let mut cause = None;
        for chunk in items.chunks(self.opts.batch_items) {
            if cause.is_some() {
                answers.extend(chunk.iter().map(|_| None));
                continue;
            }
            let digests: Vec<Digest> = chunk.iter().map(|i| hasher.digest(i.as_ref())).collect();
            for a in self.batch_in(exec, &digests, add).await {
                match a {
                    Ok(v) => answers.push(Some(v)),
                    Err(e) => {
                        answers.push(None);
                        cause.get_or_insert(e);
                    }
                }
            }
        }
        finish_answers(answers, cause)
    }

    async fn fill_in<E: Exec>(&self, exec: &mut E) -> Result<Fill> {
        let snap = self.snapshot();
        let rec = &snap.record;
        let targets = rec.read_targets(self.now());
        let mut groups = Vec::new();
        let mut spans = Vec::new();
        for (id, gen) in &targets {
            let keys = generation_keys(&self.names, rec, *id, gen);
            spans.push(groups.len()..groups.len() + keys.len());
            groups.extend(per_key("BITCOUNT", &keys, &[]));
        }
        let replies = run_all_ok(exec, groups).await?;
        let mut gens = Vec::new();
        let mut pass = 1.0;
        for ((id, gen), span) in targets.iter().zip(spans) {
            let mut set = 0u64;
            for r in &replies[span] {
                match r.first() {
                    Some(Value::Int(n)) if *n >= 0 => set += *n as u64,
                    other => {
                        return Err(Error::Protocol {
                            command: "BITCOUNT".into(),
                            reply: format!("{other:?}"),
                        })
                    }
                }
            }
            let bits = gen.blocks * 512;
            // Bits an item sets: k, less the expected collisions of its second round (k > 8)
            // with the first (1/64 each), as sift's BlockedBloom counts them.
            let k_eff = if gen.k <= 8 { gen.k as f64 } else { 8.0 + (gen.k - 8) as f64 * 63.0 / 64.0 };
            let est = sift::math::bloom_estimate_items(bits as f64, k_eff, set as f64);
            let est = if est.is_finite() { est } else { f64::MAX };
            let fpr = sift::math::blocked_words_fpr(bits as f64, est, gen.k);
            pass *= 1.0 - fpr;
            gens.push(GenerationFill {
                id: *id,
                bits,
                bits_set: set,
                estimated_items: est,
                expected_fpr: fpr,
                capacity: gen.capacity,
                target_fpr: gen.fpr,
            });
        }
        Ok(Fill { generations: gens, expected_fpr: 1.0 - pass })
    }

    async fn grow_in<E: Exec>(
        &self,
        exec: &mut E,
        spec: &Spec,
        retire_after: Option<Duration>,
    ) -> Result<()> {
        self.refresh_in(exec).await?;
        let snap = self.snapshot();
        let rec = &snap.record;
        let now = self.now();
        if spec.hasher_value() != rec.hasher
            || spec.key_bytes_value() != rec.key_bytes
            || spec.window_value() != rec.window
        {
            return Err(Error::Mismatch {
                name: self.names.display(),
                field: "hash, key_bytes or window",
                expected: "those of the filter (a new generation only changes the size)".into(),
                found: "others in the spec".into(),
            });
        }
        let mut next = rec.clone();
        next.rev += 1;
        let mut created = Vec::new();
        let mut retired = Vec::new();
        match rec.window {
            Some(w) => {
                let from = w.period(now) + 1;
                if rec.gens.last().is_some_and(|g| g.id >= from) {
                    return Err(Error::Conflict { name: self.names.display(), rev: rec.rev });
                }
                next.gens.push(spec.generation(from)?);
            }
            None => {
                let gen = spec.generation(new_generation_id())?;
                for g in next.gens.iter_mut() {
                    if g.retire_ms == 0 {
                        if let Some(after) = retire_after {
                            g.retire_ms = now.saturating_add(after.as_millis() as u64).max(1);
                            retired.push(g.clone());
                        }
                    }
                }
                created = generation_keys(&self.names, rec, gen.id, &gen);
                for chunk in create_keys(&self.names, rec, gen.id, &gen).chunks(256) {
                    if let Err(e) = run_all_ok(exec, chunk.to_vec()).await {
                        delete_keys(exec, &created).await;
                        return Err(e);
                    }
                }
                next.gens.push(gen);
            }
        }
        let rkey = self.names.record(&rec.instance, next.rev);
        let mut set = cmd1("SET", &rkey);
        set.arg(next.to_json()).arg("NX");
        let replies = run(exec, single_group(rkey.clone(), vec![set])).await;
        match one(&replies, &[rkey], 0, 0) {
            Ok(Value::Nil) => {
                delete_keys(exec, &created).await;
                return Err(Error::Conflict { name: self.names.display(), rev: next.rev });
            }
            Ok(_) => {}
            Err(e) => {
                delete_keys(exec, &created).await;
                return Err(e);
            }
        }
        let grace = self.opts.expiry_grace.as_millis() as u64;
        for g in &retired {
            let keys = generation_keys(&self.names, rec, g.id, g);
            let at = g.retire_ms.saturating_add(grace).to_string();
            for chunk in keys.chunks(512) {
                run_all_ok(exec, per_key("PEXPIREAT", chunk, std::slice::from_ref(&at))).await?;
            }
        }
        self.replace(Loaded { pointer: snap.pointer.clone(), record: next });
        Ok(())
    }

    async fn destroy_in<E: Exec>(exec: &mut E, name: &[u8], opts: &Options) -> Result<bool> {
        let names = Names::new(name)?;
        let loaded = match load(exec, &names).await {
            Ok(l) => l,
            Err(Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let rec = &loaded.record;
        // The pointer first: from then on no client uses the filter (their next call fails).
        run_all_ok(exec, per_key("DEL", &[names.pointer()], &[])).await?;
        let mut keys: Vec<Vec<u8>> = (0..=rec.rev).map(|r| names.record(&rec.instance, r)).collect();
        match rec.window {
            None => {
                for g in &rec.gens {
                    keys.extend(generation_keys(&names, rec, g.id, g));
                }
            }
            Some(w) => {
                // Periods whose keys may still exist: those read now, the next one (a client
                // whose clock runs ahead), and those kept for the grace.
                let now = opts.clock.now_ms();
                let p = w.period(now);
                let grace = (opts.expiry_grace.as_millis() as u64).div_ceil(w.period_ms);
                let first = p.saturating_sub(w.keep as u64 + grace + 1);
                for q in first..=p + 1 {
                    let gen = rec.gens.iter().rev().find(|g| g.id <= q).unwrap_or(&rec.gens[0]);
                    keys.extend(generation_keys(&names, rec, q, gen));
                }
            }
        }
        for chunk in keys.chunks(512) {
            run_all_ok(exec, per_key("DEL", chunk, &[])).await?;
        }
        Ok(true)
    }
}

/// The sync API: every method takes the connection to use ([`redis::Connection`] or
/// [`redis::cluster::ClusterConnection`]).
impl Filter {
    /// Opens an existing filter: reads its metadata (and refuses what it does not understand).
    pub fn open<C: Connection + Send>(conn: &mut C, name: impl AsRef<[u8]>, opts: Options) -> Result<Filter> {
        block_on_ready(Filter::open_in(&mut SyncExec(conn), name.as_ref(), opts))
    }

    /// Creates a new filter; [`Error::Exists`] if the name is taken. Static filters get all
    /// their sub-bitmaps allocated (zeroed) first; the filter appears to other clients at once,
    /// whole, when its pointer is written last.
    pub fn create<C: Connection + Send>(
        conn: &mut C,
        name: impl AsRef<[u8]>,
        spec: &Spec,
        opts: Options,
    ) -> Result<Filter> {
        block_on_ready(Filter::create_in(&mut SyncExec(conn), name.as_ref(), spec, opts))
    }

    /// Opens the filter, creating it if it does not exist; an existing filter whose parameters
    /// differ from `spec` (hash, seed, key size, window, or the size of the generation taking
    /// writes) is refused with [`Error::Mismatch`]. Safe when many clients start at once: one
    /// creates, the others open what it created.
    pub fn open_or_create<C: Connection + Send>(
        conn: &mut C,
        name: impl AsRef<[u8]>,
        spec: &Spec,
        opts: Options,
    ) -> Result<Filter> {
        block_on_ready(Filter::open_or_create_in(&mut SyncExec(conn), name.as_ref(), spec, opts))
    }

    /// Deletes a filter and all its keys; `false` if there was none. Clients still using it get
    /// [`Error::Deleted`] at their next call.
    pub fn destroy<C: Connection + Send>(
        conn: &mut C,
        name: impl AsRef<[u8]>,
        opts: &Options,
    ) -> Result<bool> {
        block_on_ready(Filter::destroy_in(&mut SyncExec(conn), name.as_ref(), opts))
    }

    /// Adds an item; `true` if it was new: one of its bits was clear, atomically (one command
    /// sets the bits and returns their old values), so among all clients adding the same item
    /// at once exactly one is told "new" (and, at the false-positive rate, none).
    pub fn add<C: Connection + Send>(&self, conn: &mut C, item: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.add_many(conn, &[item])?[0])
    }

    /// Adds items; per item, whether it was new (as [`Filter::add`]; a repeated item is new at
    /// most once). One round trip per [`Options::batch_items`] items.
    pub fn add_many<C: Connection + Send, I: AsRef<[u8]>>(
        &self,
        conn: &mut C,
        items: &[I],
    ) -> Result<Vec<bool>> {
        block_on_ready(self.items_in(&mut SyncExec(conn), items, true))
    }

    /// Whether an item may have been added (false: surely not).
    pub fn contains<C: Connection + Send>(&self, conn: &mut C, item: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.contains_many(conn, &[item])?[0])
    }

    /// [`Filter::contains`] for many items, one round trip per [`Options::batch_items`].
    pub fn contains_many<C: Connection + Send, I: AsRef<[u8]>>(
        &self,
        conn: &mut C,
        items: &[I],
    ) -> Result<Vec<bool>> {
        block_on_ready(self.items_in(&mut SyncExec(conn), items, false))
    }

    /// How full the filter is and its false-positive rate now, from `BITCOUNT` of every
    /// sub-bitmap read (one round trip; Redis counts about 1 GB/s, so a 1 GB filter holds the
    /// server for about a second, in one-key steps).
    pub fn fill<C: Connection + Send>(&self, conn: &mut C) -> Result<Fill> {
        block_on_ready(self.fill_in(&mut SyncExec(conn)))
    }

    /// Progressive migration (seed 002): a new generation sized by `spec` takes the writes from
    /// now on. In a static filter the generations written so far stay readable (a query checks
    /// all) until `retire_after` has passed (`None`: for ever), then their keys expire; an add
    /// answers "new" only if the item was in none of them. In a windowed filter the new size
    /// applies from the next period on, and older periods expire as always. `spec` must keep
    /// the filter's hash, key size and window. [`Error::Conflict`] if another client changed
    /// the filter meanwhile.
    pub fn grow<C: Connection + Send>(
        &self,
        conn: &mut C,
        spec: &Spec,
        retire_after: Option<Duration>,
    ) -> Result<()> {
        block_on_ready(self.grow_in(&mut SyncExec(conn), spec, retire_after))
    }

    /// Reads metadata changes made by other clients now (every call does it anyway when it
    /// finds the metadata changed).
    pub fn refresh<C: Connection + Send>(&self, conn: &mut C) -> Result<()> {
        block_on_ready(self.refresh_in(&mut SyncExec(conn)))
    }
}

/// The async API (tokio): the same operations, on [`AsyncConnection`]s. The commands of one
/// request go out concurrently on clones of the connection.
#[cfg(feature = "tokio")]
impl Filter {
    /// [`Filter::open`], async.
    pub async fn open_async<C: AsyncConnection>(
        conn: &C,
        name: impl AsRef<[u8]>,
        opts: Options,
    ) -> Result<Filter> {
        Filter::open_in(&mut AsyncExec(conn), name.as_ref(), opts).await
    }

    /// [`Filter::create`], async.
    pub async fn create_async<C: AsyncConnection>(
        conn: &C,
        name: impl AsRef<[u8]>,
        spec: &Spec,
        opts: Options,
    ) -> Result<Filter> {
        Filter::create_in(&mut AsyncExec(conn), name.as_ref(), spec, opts).await
    }

    /// [`Filter::open_or_create`], async.
    pub async fn open_or_create_async<C: AsyncConnection>(
        conn: &C,
        name: impl AsRef<[u8]>,
        spec: &Spec,
        opts: Options,
    ) -> Result<Filter> {
        Filter::open_or_create_in(&mut AsyncExec(conn), name.as_ref(), spec, opts).await
    }

    /// [`Filter::destroy`], async.
    pub async fn destroy_async<C: AsyncConnection>(
        conn: &C,
        name: impl AsRef<[u8]>,
        opts: &Options,
    ) -> Result<bool> {
        Filter::destroy_in(&mut AsyncExec(conn), name.as_ref(), opts).await
    }

    /// [`Filter::add`], async.
    pub async fn add_async<C: AsyncConnection>(
        &self,
        conn: &C,
        item: impl AsRef<[u8]> + Sync,
    ) -> Result<bool> {
        Ok(self.add_many_async(conn, &[item]).await?[0])
    }

    /// [`Filter::add_many`], async.
    pub async fn add_many_async<C: AsyncConnection, I: AsRef<[u8]> + Sync>(
        &self,
        conn: &C,
        items: &[I],
    ) -> Result<Vec<bool>> {
        self.items_in(&mut AsyncExec(conn), items, true).await
    }

    /// [`Filter::contains`], async.
    pub async fn contains_async<C: AsyncConnection>(
        &self,
        conn: &C,
        item: impl AsRef<[u8]> + Sync,
    ) -> Result<bool> {
        Ok(self.contains_many_async(conn, &[item]).await?[0])
    }

    /// [`Filter::contains_many`], async.
    pub async fn contains_many_async<C: AsyncConnection, I: AsRef<[u8]> + Sync>(
        &self,
        conn: &C,
        items: &[I],
    ) -> Result<Vec<bool>> {
        self.items_in(&mut AsyncExec(conn), items, false).await
    }

    /// [`Filter::fill`], async.
    pub async fn fill_async<C: AsyncConnection>(&self, conn: &C) -> Result<Fill> {
        self.fill_in(&mut AsyncExec(conn)).await
    }

    /// [`Filter::grow`], async.
    pub async fn grow_async<C: AsyncConnection>(
        &self,
        conn: &C,
        spec: &Spec,
        retire_after: Option<Duration>,
    ) -> Result<()> {
        self.grow_in(&mut AsyncExec(conn), spec, retire_after).await
    }

    /// [`Filter::refresh`], async.
    pub async fn refresh_async<C: AsyncConnection>(&self, conn: &C) -> Result<()> {
        self.refresh_in(&mut AsyncExec(conn)).await
    }
}

/// The metadata-level operations push and pull use.
impl Filter {
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn loaded(&self) -> Arc<Loaded> {
        self.snapshot()
    }
}
