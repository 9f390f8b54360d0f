//! The checks of the filters that forget ([`sift::AgingBloom`], [`sift::TimeLimitedBloom`]),
//! over streams several windows long, with fixed seeds:
//!
//! * **no false negative inside the window, ever**: after every insertion the oldest item still
//!   inside the window is present (an item's presence only ends by age, so this covers every
//!   item at every age inside the window), and at checkpoints every item of the window is;
//! * **never-seen items**: over [`PROBES`] non-members the false-positive count is at most
//!   `upper(PROBES, p)` (exact binomial, one-sided 99.9 %), in the worst phase (the current
//!   generation full, right before a new one starts) and right after a new one started;
//! * **expired items**: items older than the window plus one generation are reported present
//!   at most `upper(count, p)` times: they answer like never-seen items.
//!
//! [`TimedAtStep`] also puts the time-limited filter through the generic suite (`suite.rs`),
//! inserting at a clock that moves one step per insertion.

use std::fmt::Debug;

use sift::prelude::*;
use sift::{AgingBloom, Digest, TimeLimitedBloom};

use super::keys::{self, Key};
use super::stats::{upper, ALPHA};

/// Non-member probes per phase.
pub const PROBES: u64 = 200_000;

fn count_present(f: impl Fn(&Key) -> bool, keys: &[Key]) -> u64 {
    keys.iter().filter(|k| f(k)).count() as u64
}

fn assert_rate(what: &str, hits: u64, trials: u64, p: f64) {
    let bound = upper(trials, p, ALPHA);
    eprintln!("{what}: {hits} of {trials} ({:.5}), bound {bound} at p = {p}", hits as f64 / trials as f64);
    assert!(hits <= bound, "{what}: {hits} of {trials} present, above the 99.9% bound {bound} of p = {p}");
}

/// How the window filters take their items: [`Insert::insert`] (which answers whether the item
/// was present) or `push` (which does not, and must leave the same filter, bit for bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adding {
    /// `insert` / `insert_at`.
    Insert,
    /// `push` / `push_at`, checked against a twin filter fed with `insert` / `insert_at`.
    Push,
}

/// A window by count of `n` items at rate `p`, over a stream of `6n` distinct keys and more.
pub fn count_window(n: usize, p: f64, stream: u32) {
    count_window_adding(n, p, stream, Adding::Insert)
}

/// [`count_window`], adding the items the way `adding` says.
pub fn count_window_adding(n: usize, p: f64, stream: u32, adding: Adding) {
    let mut f = AgingBloom::new(n, p).expect("valid parameters");
    let mut twin = (adding == Adding::Push).then(|| f.clone());
    let g = f.generation_size() as usize;
    let mut keys: Vec<Key> = Vec::new();
    let checkpoint = (n / 3).max(1);
    let mut push = |f: &mut AgingBloom, keys: &mut Vec<Key>| {
        let key = keys::member(stream, keys.len() as u64);
        match &mut twin {
            None => {
                f.insert(key);
            }
            Some(t) => {
                f.push(key);
                t.insert(key);
            }
        }
        keys.push(key);
    };
    for i in 0..6 * n {
        push(&mut f, &mut keys);
        let oldest = (i + 1).saturating_sub(n);
        assert!(f.contains(keys[oldest]), "n = {n}, p = {p}: item {oldest} missing after insert {i}");
        if (i + 1) % checkpoint == 0 {
            for (j, k) in keys[oldest..=i].iter().enumerate() {
                assert!(
                    f.contains(k),
                    "n = {n}, p = {p}: item {} of the window missing after insert {i}",
                    oldest + j
                );
            }
        }
    }
    // Worst phase: fill the current generation.
    while f.current_generation() < g as u64 {
        push(&mut f, &mut keys);
    }
    let tag = format!("aging n = {n} ({adding:?})");
    check_phase(&tag, "full generation", &f, &keys, n + g, p, stream);
    // Right after a new generation started.
    push(&mut f, &mut keys);
    assert_eq!(f.current_generation(), 1);
    check_phase(&tag, "new generation", &f, &keys, n + g, p, stream);
    if let Some(t) = twin {
        assert!(f.to_bytes() == t.to_bytes(), "n = {n}: push and insert built different files");
    }
}

/// Never-seen and expired items at the current state: `keys` in insertion order, those before
/// the last `keep` expired.
fn check_phase<F: Filter>(tag: &str, phase: &str, f: &F, keys: &[Key], keep: usize, p: f64, stream: u32) {
    let fp = (0..PROBES).filter(|&i| f.contains(keys::non_member(stream, i))).count() as u64;
    assert_rate(&format!("{tag} p = {p}, {phase}: never-seen"), fp, PROBES, p);
    let expired = &keys[..keys.len().saturating_sub(keep)];
    let old = count_present(|k| f.contains(k), expired);
    assert_rate(&format!("{tag} p = {p}, {phase}: expired"), old, expired.len() as u64, p);
}

/// A window by time: `n` insertions planned per TTL, inserted at jittered times around the
/// planned rate (intervals uniform in [step/2, 3·step/2)), over six TTLs.
pub fn time_window(n: usize, p: f64, stream: u32) {
    time_window_adding(n, p, stream, Adding::Insert)
}

/// [`time_window`], adding the items the way `adding` says.
pub fn time_window_adding(n: usize, p: f64, stream: u32, adding: Adding) {
    let step = 1_000u64;
    let ttl = n as u64 * step;
    let mut f = TimeLimitedBloom::new(ttl, n, p).expect("valid parameters");
    let mut twin = (adding == Adding::Push).then(|| f.clone());
    let keys = keys::members(stream, 6 * n);
    let mut rng = keys::splitmix64(stream as u64);
    let mut now = 1_700_000_000_000u64;
    let mut times = Vec::with_capacity(keys.len());
    let checkpoint = (n / 3).max(1);
    for (i, k) in keys.iter().enumerate() {
        rng = keys::splitmix64(rng);
        now += step / 2 + rng % step;
        match &mut twin {
            None => {
                f.insert_at(k, now);
            }
            Some(t) => {
                f.push_at(k, now);
                t.insert_at(k, now);
            }
        }
        times.push(now);
        let oldest = times.partition_point(|&t| now - t > ttl);
        assert!(f.contains_at(keys[oldest], now), "n = {n}, p = {p}: item {oldest} missing at insert {i}");
        if (i + 1) % checkpoint == 0 {
            for (j, k) in keys[oldest..=i].iter().enumerate() {
                assert!(
                    f.contains(k),
                    "n = {n}, p = {p}: item {} of the window missing at insert {i}",
                    oldest + j
                );
            }
        }
    }
    let gone = times.partition_point(|&t| now - t > ttl + f.generation_span());
    let tag = format!("time-limited n = {n} ({adding:?})");
    check_phase(&tag, "end of stream", &f, &keys, keys.len() - gone, p, stream);
    if let Some(t) = &twin {
        assert!(f.to_bytes() == t.to_bytes(), "n = {n}: push_at and insert_at built different files");
    }
    // Half a generation later, without insertions: still nothing inside the window lost.
    let later = now + f.generation_span() / 2;
    f.advance(later);
    let oldest = times.partition_point(|&t| later - t > ttl);
    assert!(keys[oldest..].iter().all(|k| f.contains(k)), "n = {n}, p = {p}: window lost while idle");
    let gone = times.partition_point(|&t| later - t > ttl + f.generation_span());
    check_phase(&tag, "idle half a generation", &f, &keys, keys.len() - gone, p, stream);
}

/// [`TimeLimitedBloom`] seen through [`Insert`], for the generic suite: `new(n, p)` plans `n`
/// insertions per TTL of `n` steps, and each insertion happens one step after the filter's
/// clock, so `n` consecutive insertions always lie inside the window. The clock is the
/// filter's own (persisted), so a decoded filter goes on exactly as the original.
#[derive(Clone, PartialEq)]
pub struct TimedAtStep(pub TimeLimitedBloom);

/// Clock units per insertion.
pub const STEP: u64 = 1_000;

impl TimedAtStep {
    /// `TimeLimitedBloom::new(n·STEP, n, p)`.
    pub fn new(n: usize, p: f64) -> sift::Result<Self> {
        TimeLimitedBloom::new((n as u64).saturating_mul(STEP), n, p).map(TimedAtStep)
    }
}

impl Debug for TimedAtStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Filter for TimedAtStep {
    fn hasher(&self) -> sift::Hasher {
        self.0.hasher()
    }
    fn contains_digest(&self, d: Digest) -> bool {
        self.0.contains_digest(d)
    }
    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        self.0.contains_digests(digests, out)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn size_in_bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
    fn expected_fpr(&self) -> f64 {
        self.0.expected_fpr()
    }
}

impl Insert for TimedAtStep {
    fn insert_digest(&mut self, d: Digest) -> bool {
        let now = self.0.clock().saturating_add(STEP);
        self.0.insert_digest_at(d, now)
    }
}

impl Persist for TimedAtStep {
    const KIND: sift::format::FilterKind = TimeLimitedBloom::KIND;
    fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes()
    }
    fn from_bytes(bytes: &[u8]) -> sift::Result<Self> {
        TimeLimitedBloom::from_bytes(bytes).map(TimedAtStep)
    }
}
