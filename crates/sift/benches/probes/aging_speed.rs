//! The sliding-window filters against sift's `BlockedBloom` at the same window size, FPR 1%:
//! nanoseconds per key and the ratios of issue 16 (insert ≤ 2×, query ≤ 2.5× BlockedBloom).
//!
//! ```text
//! cargo bench -p sift-filters --bench aging_speed -- --n 1M --rounds 5
//! ```
//!
//! Each round measures the filters one after the other, in an order that rotates from
//! round to round, so that a slow spell of the shared machine does not always hit the same
//! filter; the table gives every round's ratios and their range. Time is the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), as in the table program: time spent descheduled behind other
//! processes is not counted (cache and memory-bandwidth interference is).
//!
//! * `BlockedBloom::new(n, 0.01)`: *insert* is `n` keys into an empty filter (creation not
//!   timed); queries run on that filter.
//! * `AgingBloom::new(n, 0.01)`, filled with `2n` keys before the first round (the ring has
//!   turned: the steady state); *insert* is `n` more keys, shifts included.
//! * `TimeLimitedBloom::new(T, n, 0.01)`: the same at the planned rate, key `i` at time
//!   `i·T/n`; *insert* includes moving the clock.
//!
//! Each window filter is measured twice, on two filters that hold the same bits: once inserting
//! with `insert` (which answers whether the item was present: what `SF.ADD` replies) and once
//! with `push` (no answer, only the item's `k` youngest slices read and written).
//!
//! *member* queries the last `min(n, 1M)` keys inserted (all must be found), *absent* `1M` keys
//! never inserted.
//!
//! `--lines` instead times `AgingBloom::push` generation by generation and groups the
//! generations by the cache lines a push touches in them: the row's stamp (word 0, first line)
//! and the words of the `k` youngest slices, which move one word down at every generation, so
//! in some generations they share the stamp's line and in the others a push touches both lines
//! of the row. `BlockedBloom` inserts (one line) are timed between the generations, as many keys
//! each time:
//!
//! ```text
//! cargo bench -p sift-filters --bench aging_speed -- --n 30M --lines 62
//! ```
#[path = "../harness/mod.rs"]
mod harness;

use sift::prelude::*;
use sift::{AgingBloom, BlockedBloom, TimeLimitedBloom};

const FPR: f64 = 0.01;
const TTL: u64 = 60_000_000;

fn key(s: u64, i: u64) -> [u8; 8] {
    let mut z = (s << 40 | i).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

fn keys(s: u64, n: usize) -> Vec<[u8; 8]> {
    (0..n as u64).map(|i| key(s, i)).collect()
}

/// Thread CPU time in nanoseconds (the harness's clock).
fn cpu_ns() -> u64 {
    harness::measure::cpu_ns() as u64
}

fn per_key(n: usize, f: impl FnOnce() -> usize) -> f64 {
    let t = cpu_ns();
    std::hint::black_box(f());
    (cpu_ns() - t) as f64 / n as f64
}

fn parse_count(s: &str) -> usize {
    let s = s.replace('_', "");
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
        Some('M') => (&s[..s.len() - 1], 1_000_000),
        _ => (&s[..], 1),
    };
    num.parse::<usize>().expect("a count like 1M") * mul
}

/// One filter under test: its name, how to insert the round's keys, how to query.
trait Subject {
    fn name(&self) -> &'static str;
    /// Untimed set-up before a round's inserts.
    fn prepare(&mut self) {}
    fn insert_round(&mut self, keys: &[[u8; 8]]) -> usize;
    fn hits(&self, keys: &[[u8; 8]]) -> usize;
    fn bytes(&self) -> usize;
}

struct Blocked(BlockedBloom, usize);
impl Subject for Blocked {
    fn name(&self) -> &'static str {
        "BlockedBloom"
    }
    fn prepare(&mut self) {
        self.0 = BlockedBloom::new(self.1, FPR).unwrap();
    }
    fn insert_round(&mut self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.0.insert(std::hint::black_box(k))).count()
    }
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.0.contains(std::hint::black_box(k))).count()
    }
    fn bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
}

/// An `AgingBloom`, inserting with `insert` (`false`) or `push` (`true`).
struct Aging(AgingBloom, bool);
impl Subject for Aging {
    fn name(&self) -> &'static str {
        if self.1 {
            "AgingBloom push"
        } else {
            "AgingBloom insert"
        }
    }
    fn insert_round(&mut self, keys: &[[u8; 8]]) -> usize {
        if self.1 {
            keys.iter().for_each(|k| self.0.push(std::hint::black_box(k)));
            return self.0.len();
        }
        keys.iter().filter(|k| self.0.insert(std::hint::black_box(k))).count()
    }
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.0.contains(std::hint::black_box(k))).count()
    }
    fn bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
}

/// A `TimeLimitedBloom`, its insertion count, the clock step per insertion, and whether it
/// inserts with `push_at`.
struct TimedWindow(TimeLimitedBloom, u64, f64, bool);
impl Subject for TimedWindow {
    fn name(&self) -> &'static str {
        if self.3 {
            "TimeLimitedBloom push"
        } else {
            "TimeLimitedBloom insert"
        }
    }
    fn insert_round(&mut self, keys: &[[u8; 8]]) -> usize {
        let mut new = 0;
        for k in keys {
            let now = 1 + (self.1 as f64 * self.2) as u64;
            if self.3 {
                self.0.push_at(std::hint::black_box(k), now);
            } else {
                new += self.0.insert_at(std::hint::black_box(k), now) as usize;
            }
            self.1 += 1;
        }
        new
    }
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.0.contains(std::hint::black_box(k))).count()
    }
    fn bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
}

/// Median and range of `v`, formatted.
fn spread(v: &[f64]) -> String {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    format!("{:.2} ({:.2}–{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
}

/// The cache lines (16 words each) a push touches when the youngest slice is physical `head`:
/// the stamp's and those of the words `head + 1 ..` of the `k` youngest slices.
fn lines_touched(head: usize, k: usize, slices: usize) -> usize {
    let mut lines = 1u32; // the stamp, word 0
    for j in 0..k {
        lines |= 1 << (((head + j) % slices + 1) / 16);
    }
    lines.count_ones() as usize
}

/// `--lines GENS`: see the module documentation.
fn lines_probe(n: usize, generations: usize) {
    let mut f = AgingBloom::new(n, FPR).unwrap();
    let (g, k, slices) = (f.generation_size(), f.num_hashes() as usize, f.num_slices() as usize);
    // The youngest slice starts at physical 0 and moves one down (cyclically) at each shift.
    let mut head = 0usize;
    let push = |f: &mut AgingBloom, key: &[u8; 8], head: &mut usize| {
        let before = f.current_generation();
        f.push(std::hint::black_box(key));
        if f.current_generation() < before {
            *head = (*head + slices - 1) % slices;
        }
    };
    for key in keys(1, n).iter().chain(&keys(2, n)) {
        push(&mut f, key, &mut head);
    }
    // Line up with the start of a generation.
    let mut stream = keys(3, 2 * g as usize).into_iter();
    while f.current_generation() < g {
        push(&mut f, &stream.next().unwrap(), &mut head);
    }
    let mut blocked = BlockedBloom::new(n, FPR).unwrap();
    let mut blocked_held = 0;
    let mut by_lines: [Vec<f64>; 3] = Default::default();
    let mut blocked_ns = Vec::new();
    for r in 0..generations {
        let round = keys(100 + r as u64, 2 * g as usize);
        // One generation: the first push shifts, the ones after fill it up to `g`.
        let t = cpu_ns();
        let mut i = 0;
        f.push(std::hint::black_box(&round[0]));
        i += 1;
        while f.current_generation() < g {
            f.push(std::hint::black_box(&round[i]));
            i += 1;
        }
        let ns = (cpu_ns() - t) as f64 / i as f64;
        head = (head + slices - 1) % slices;
        by_lines[lines_touched(head, k, slices)].push(ns);
        if blocked_held + i > n {
            blocked = BlockedBloom::new(n, FPR).unwrap();
            blocked_held = 0;
        }
        let t = cpu_ns();
        let new = round[..i].iter().filter(|key| blocked.insert(std::hint::black_box(key))).count();
        blocked_ns.push((cpu_ns() - t) as f64 / i as f64);
        std::hint::black_box(new);
        blocked_held += i;
    }
    let b = {
        let mut v = blocked_ns.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "n = {n}, FPR 1%, kernel {}: AgingBloom k = {k}, {slices} slices, generation {g}; {} bytes (BlockedBloom {})",
        f.kernel_name(),
        f.size_in_bytes(),
        blocked.size_in_bytes()
    );
    println!("\n| insertion | cache lines per insertion | generations | ns per key, median (range) | ratio to BlockedBloom's median |");
    println!("|---|---:|---:|---:|---:|");
    println!("| BlockedBloom insert | 1 | {} | {} | 1.00× |", blocked_ns.len(), spread(&blocked_ns));
    for (lines, v) in by_lines.iter().enumerate().filter(|(_, v)| !v.is_empty()) {
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "| AgingBloom push | {lines} | {} | {} | {:.2}× |",
            v.len(),
            spread(v),
            sorted[sorted.len() / 2] / b
        );
    }
}

fn main() {
    let mut n = 1_000_000;
    let mut rounds = 5;
    let mut lines = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => n = parse_count(&args.next().expect("--n COUNT")),
            "--rounds" => rounds = args.next().expect("--rounds R").parse().expect("a number"),
            "--lines" => lines = Some(args.next().expect("--lines GENERATIONS").parse().expect("a number")),
            // What `cargo bench` adds.
            "--bench" => {}
            other => {
                panic!("unknown argument {other}; use --n COUNT --rounds R, or --n COUNT --lines GENERATIONS")
            }
        }
    }
    if let Some(generations) = lines {
        lines_probe(n, generations);
        return;
    }
    let absent = keys(1 << 20, 1_000_000);
    let step = TTL as f64 / n as f64;
    let mut subjects: Vec<Box<dyn Subject>> = vec![
        Box::new(Blocked(BlockedBloom::new(n, FPR).unwrap(), n)),
        Box::new(Aging(AgingBloom::new(n, FPR).unwrap(), false)),
        Box::new(Aging(AgingBloom::new(n, FPR).unwrap(), true)),
        Box::new(TimedWindow(TimeLimitedBloom::new(TTL, n, FPR).unwrap(), 0, step, false)),
        Box::new(TimedWindow(TimeLimitedBloom::new(TTL, n, FPR).unwrap(), 0, step, true)),
    ];
    let count = subjects.len();
    // The steady state of the windows: 2n keys in (streams 1 and 2).
    for s in &mut subjects[1..] {
        s.insert_round(&keys(1, n));
        s.insert_round(&keys(2, n));
    }
    println!(
        "n = {n}, FPR 1%, kernel {}, bytes: BlockedBloom {}, AgingBloom {}, TimeLimitedBloom {}",
        AgingBloom::new(n, FPR).unwrap().kernel_name(),
        subjects[0].bytes(),
        subjects[1].bytes(),
        subjects[3].bytes()
    );
    println!("\n| round | filter | insert ns | member ns | absent ns | FP rate |");
    println!("|---:|---|---:|---:|---:|---:|");
    // ratios[filter][metric] over rounds
    let mut ratios = vec![vec![Vec::new(); 3]; count];
    for r in 0..rounds {
        let stream = 10 + r as u64;
        let round_keys = keys(stream, n);
        let recent = &round_keys[n - n.min(1_000_000)..];
        let mut ns = vec![[0.0f64; 3]; count];
        let mut fp = vec![0.0f64; count];
        for j in 0..count {
            let i = (j + r) % count;
            let s = &mut subjects[i];
            s.prepare();
            ns[i][0] = per_key(n, || s.insert_round(&round_keys));
            let found = s.hits(recent);
            assert_eq!(found, recent.len(), "{}: a member of the window is missing", s.name());
            ns[i][1] = per_key(recent.len(), || s.hits(recent));
            let mut hits = 0;
            ns[i][2] = per_key(absent.len(), || {
                hits = s.hits(&absent);
                hits
            });
            fp[i] = hits as f64 / absent.len() as f64;
        }
        for i in 0..count {
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.4} |",
                r + 1,
                subjects[i].name(),
                ns[i][0],
                ns[i][1],
                ns[i][2],
                fp[i]
            );
            for m in 0..3 {
                ratios[i][m].push(ns[i][m] / ns[0][m]);
            }
        }
    }
    println!("\nRatios to BlockedBloom (each round's own BlockedBloom time), range over {rounds} rounds:\n");
    println!("| filter | insert | member query | absent query |");
    println!("|---|---|---|---|");
    for i in 1..count {
        let cell = |v: &Vec<f64>| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            format!("{:.2}× ({:.2}–{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        println!(
            "| {} | {} | {} | {} |",
            subjects[i].name(),
            cell(&ratios[i][0]),
            cell(&ratios[i][1]),
            cell(&ratios[i][2])
        );
    }
}
