//! The filter monitor: how many filters answer "maybe" more often than they were sized for, and
//! which is the worst (`INFO filters`, the `sift_filters_over_target` gauge).
//!
//! A filter's estimated error rate comes from its contents ([`sift_commands::Data::error_rate`]:
//! a popcount of a Bloom filter's bits), which costs a read of the whole value under its shard's
//! lock. Computing it when INFO or a scrape asks would make every poll read the whole keyspace
//! while writers wait; keeping it up to date on each write would put that read (or a change to
//! every filter type) on the write path. So a background task computes it, **incrementally and
//! paced**:
//!
//! * every [`ROUND_PERIOD`] a round visits the 64 shards; a shard whose change counter and key
//!   count are what they were when it was last walked is skipped (an idle server reads nothing);
//! * a changed shard is walked in key-hash order in steps: each step locks the shard, reads at
//!   most [`STEP_BYTES`] of filter values or [`STEP_KEYS`] keys, and unlocks, remembering where
//!   it stopped; the step runs on a blocking thread, never a runtime worker;
//! * after each step (the last of a walk included) the task pauses [`PAUSE_FACTOR`] times as
//!   long as the step took (at least [`PAUSE_MIN`]), so the monitor holds any shard's lock for
//!   at most about a tenth of the time, whatever the keyspace;
//! * a shard's figures are published when its walk completes, replacing the previous ones.
//!
//! Staleness: a shard's figures describe it as it was during its last completed walk. A change
//! shows up after at most the rest of the current round, the next [`ROUND_PERIOD`], and the walk
//! of its shard (its filter bytes at popcount speed, times 1 + [`PAUSE_FACTOR`] for the pauses).
//! `INFO filters` reports the age of the last completed round (`filter_monitor_round_age_ms`).
//!
//! One value is read whole in one step, but a value's estimate reads at most a few MiB of it:
//! the Bloom kinds larger than [`sift::bits::FILL_SAMPLE_BYTES`] count the bits of an evenly
//! spaced sample of that size. Before, a filter's whole popcount ran under its shard's lock:
//! 60–100 ms for a 1.2 GB filter on the benchmark machine, every few seconds, a stall every
//! writer of that filter saw with or without a snapshot (docs/BENCHMARKS.md, issue 15 item 7).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::db::{now_ms, Shard, Value, SHARDS};
use crate::shared::Shared;

/// How often a round over the shards starts.
pub const ROUND_PERIOD: Duration = Duration::from_secs(1);
/// Bytes of filter values one step reads at most (a value larger than this is read alone).
pub const STEP_BYTES: usize = 1 << 20;
/// Keys one step visits at most.
pub const STEP_KEYS: usize = 512;
/// After a step that took `t`, the monitor pauses `PAUSE_FACTOR * t`.
pub const PAUSE_FACTOR: u32 = 9;
/// The shortest pause between two steps.
pub const PAUSE_MIN: Duration = Duration::from_micros(200);

/// The filter furthest above (or closest to) its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    /// Its key.
    pub key: Bytes,
    /// The error rate it was created for.
    pub target: f64,
    /// The error rate its fill gives.
    pub estimate: f64,
}

impl Worst {
    fn ratio(&self) -> f64 {
        self.estimate / self.target
    }

    /// Keeps the higher ratio of `self` and `other` (ties: the smaller key, so the answer does
    /// not depend on the order of the walk).
    fn max(self, other: Worst) -> Worst {
        match other.ratio().total_cmp(&self.ratio()) {
            std::cmp::Ordering::Greater => other,
            std::cmp::Ordering::Equal if other.key < self.key => other,
            _ => self,
        }
    }
}

/// Figures of a set of filters.
#[derive(Debug, Clone, Default, PartialEq)]
struct Figures {
    filters: usize,
    over: usize,
    worst: Option<Worst>,
}

impl Figures {
    fn add(&mut self, w: Worst) {
        self.filters += 1;
        if w.estimate > w.target {
            self.over += 1;
        }
        self.worst = Some(match self.worst.take() {
            Some(cur) => cur.max(w),
            None => w,
        });
    }

    fn merge(&mut self, other: &Figures) {
        self.filters += other.filters;
        self.over += other.over;
        if let Some(w) = &other.worst {
            self.worst = Some(match self.worst.take() {
                Some(cur) => cur.max(w.clone()),
                None => w.clone(),
            });
        }
    }
}

/// What `INFO filters` and the metrics report.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterHealth {
    /// Filters with a target error rate (a cuckoo filter has none: it is not counted).
    pub filters: usize,
    /// Those whose estimated error rate exceeds their target.
    pub over_target: usize,
    /// The one with the highest estimate / target.
    pub worst: Option<Worst>,
    /// Since the last completed round (since start-up before the first).
    pub round_age: Duration,
    /// Rounds completed since start-up.
    pub rounds: u64,
}

/// A shard's published figures, and the state they describe.
#[derive(Debug, Default)]
struct Published {
    figures: Figures,
    /// (change counter, key count) when the walk that produced `figures` started.
    seen: Option<(u64, usize)>,
}

/// The monitor's published state (in [`Shared::filters`]).
#[derive(Debug)]
pub struct FilterMonitor {
    shards: Mutex<Vec<Published>>,
    /// (when the last round completed, rounds completed).
    rounds: Mutex<(Instant, u64)>,
}

impl Default for FilterMonitor {
    fn default() -> Self {
        FilterMonitor {
            shards: Mutex::new((0..SHARDS).map(|_| Published::default()).collect()),
            rounds: Mutex::new((Instant::now(), 0)),
        }
    }
}

impl FilterMonitor {
    /// The figures of every shard's last completed walk.
    pub fn health(&self) -> FilterHealth {
        let mut all = Figures::default();
        for p in self.shards.lock().iter() {
            all.merge(&p.figures);
        }
        let (at, rounds) = *self.rounds.lock();
        FilterHealth {
            filters: all.filters,
            over_target: all.over,
            worst: all.worst,
            round_age: at.elapsed(),
            rounds,
        }
    }
}

/// A walk of one shard in progress.
#[derive(Debug, Default)]
struct Walk {
    /// The last key read (hash order), `None` before the first step.
    after: Option<(u64, Bytes)>,
    seen: (u64, usize),
    figures: Figures,
}

/// What one step may read: keys visited, bytes of filter values (the first filter of a step
/// is read whatever its size).
#[derive(Debug, Clone, Copy)]
struct Budget {
    keys: usize,
    bytes: usize,
}

const BUDGET: Budget = Budget { keys: STEP_KEYS, bytes: STEP_BYTES };

/// One step of the walk of a shard: true once the walk is complete (or unnecessary: the shard
/// did not change since the published walk, `published`).
fn step(s: &mut Shard, published: Option<(u64, usize)>, walk: &mut Walk, budget: Budget) -> bool {
    if walk.after.is_none() {
        walk.seen = (s.dirty(), s.len());
        if published == Some(walk.seen) {
            return true;
        }
    }
    let now = now_ms();
    let (mut bytes, mut keys) = (0usize, 0usize);
    let from = walk.after.as_ref().map_or(0, |(h, _)| *h);
    let mut last: Option<(u64, &[u8])> = None;
    let mut done = true;
    for (h, key) in s.keys_from(from) {
        // Keys of the same hash as the last one read were read with it only if they sort
        // before it.
        if walk.after.as_ref().is_some_and(|(ah, ak)| (h, key) <= (*ah, &ak[..])) {
            continue;
        }
        if keys >= budget.keys || bytes >= budget.bytes {
            done = false;
            break;
        }
        keys += 1;
        last = Some((h, key));
        let Some(entry) = s.get_live(key, now) else { continue };
        let Value::Data(d) = &entry.value else { continue };
        let Some(rate) = d.error_rate() else { continue };
        bytes += d.mem_usage();
        if let Some(target) = rate.target {
            walk.figures.add(Worst { key: Bytes::copy_from_slice(key), target, estimate: rate.estimate });
        }
    }
    if let Some((h, k)) = last {
        walk.after = Some((h, Bytes::copy_from_slice(k)));
    }
    done
}

/// Runs rounds until the server shuts down (its task is aborted).
pub async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(ROUND_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for index in 0..SHARDS {
            let mut walk = Walk::default();
            loop {
                let published = shared.filters.shards.lock()[index].seen;
                let s = shared.clone();
                let stepped = tokio::task::spawn_blocking(move || {
                    let t0 = Instant::now();
                    let done =
                        s.db.unlocked().with_shard(index, |shard| step(shard, published, &mut walk, BUDGET));
                    (done, walk, t0.elapsed())
                })
                .await;
                let Ok((done, w, took)) = stepped else { return };
                walk = w;
                let skipped = done && published == Some(walk.seen);
                if done && !skipped {
                    let mut shards = shared.filters.shards.lock();
                    shards[index] =
                        Published { figures: std::mem::take(&mut walk.figures), seen: Some(walk.seen) };
                }
                if skipped {
                    break;
                }
                // After the last step too: a shard holding one huge filter is then re-read less
                // often, rather than held longer.
                tokio::time::sleep((took * PAUSE_FACTOR).max(PAUSE_MIN)).await;
                if done {
                    break;
                }
            }
        }
        let mut rounds = shared.filters.rounds.lock();
        *rounds = (Instant::now(), rounds.1 + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{execute, Session};
    use crate::config::Params;
    use crate::persist::MemoryOnly;

    /// Walks shard `index` to the end with `budget`: (steps taken, figures).
    fn walk(shared: &Shared, index: usize, published: Option<(u64, usize)>, budget: Budget) -> (usize, Walk) {
        let mut w = Walk::default();
        let mut steps = 0;
        loop {
            steps += 1;
            let done = shared.db.unlocked().with_shard(index, |s| step(s, published, &mut w, budget));
            if done {
                return (steps, w);
            }
            assert!(steps < 10_000, "the walk does not end");
        }
    }

    /// Steps read at most their budget and, between them, resume after the last key read:
    /// every filter of the shard is counted once, whatever the budget; an unchanged shard is
    /// not walked again, a changed one is.
    #[test]
    fn a_walk_in_small_steps_counts_every_filter_once() {
        let shared = Shared::new(Params::default(), Box::new(MemoryOnly::default()));
        let mut session = Session::new(1, true);
        let mut run = |args: &[&str]| {
            let argv = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            execute(&shared, &mut session, argv).unwrap()
        };
        for i in 0..3000 {
            let key = format!("bf{i}");
            run(&["BF.RESERVE", &key, "0.01", "100"]);
            if i % 7 == 0 {
                run(&["SET", &format!("s{i}"), "x"]);
            }
        }
        let index = crate::db::shard_of(b"bf0");
        let (keys, filters) = shared
            .db
            .unlocked()
            .with_shard(index, |s| (s.len(), s.keys_from(0).filter(|(_, k)| k.starts_with(b"bf")).count()));
        assert!(filters > 20 && keys > filters, "{keys} {filters}");
        let (steps, all) = walk(&shared, index, None, BUDGET);
        assert_eq!((steps, all.figures.filters), (1, filters));
        // Three keys per step.
        let (steps, w) = walk(&shared, index, None, Budget { keys: 3, bytes: usize::MAX });
        assert_eq!(w.figures, all.figures);
        assert!((keys.div_ceil(3)..=keys.div_ceil(3) + 1).contains(&steps), "{keys} keys, {steps} steps");
        // One filter per step when every filter exceeds the byte budget (the strings after the
        // last filter, if any, take one more).
        let (steps, w) = walk(&shared, index, None, Budget { keys: usize::MAX, bytes: 1 });
        assert_eq!(w.figures, all.figures);
        assert!((filters..=filters + 1).contains(&steps), "{filters} filters, {steps} steps");
        // Unchanged: nothing read; changed: walked again.
        let (steps, again) = walk(&shared, index, Some(all.seen), Budget { keys: 1, bytes: usize::MAX });
        assert_eq!((steps, again.figures.filters), (1, 0));
        let key = shared
            .db
            .unlocked()
            .with_shard(index, |s| Bytes::copy_from_slice(s.keys_from(0).next().unwrap().1));
        run(&["DEL", std::str::from_utf8(&key).unwrap()]);
        let (_, after) = walk(&shared, index, Some(all.seen), BUDGET);
        assert_eq!(after.figures.filters, filters - key.starts_with(b"bf") as usize);
    }

    fn w(key: &str, target: f64, estimate: f64) -> Worst {
        Worst { key: Bytes::copy_from_slice(key.as_bytes()), target, estimate }
    }

    #[test]
    fn the_worst_is_the_highest_ratio_whatever_the_order() {
        let items = [w("a", 0.01, 0.005), w("b", 0.001, 0.002), w("c", 0.1, 0.15), w("d", 0.001, 0.002)];
        let mut fwd = Figures::default();
        items.iter().cloned().for_each(|x| fwd.add(x));
        let mut rev = Figures::default();
        items.iter().rev().cloned().for_each(|x| rev.add(x));
        assert_eq!(fwd, rev);
        assert_eq!((fwd.filters, fwd.over), (4, 3));
        assert_eq!(fwd.worst.unwrap().key, Bytes::from_static(b"b"));
    }
}
