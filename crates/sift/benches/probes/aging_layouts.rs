//! Blocked against unblocked: `AgingBloom`'s rows against the age-partitioned filter as the APBF
//! paper first describes it (Shtul, Baquero & Almeida 2020): `k + l` separate bit arrays (slices)
//! of `m = k·g / ln 2` bits, an item setting one bit at an independent position in each of the `k`
//! youngest, a query scanning the slices from the youngest for `k` consecutive hits (skipping
//! ahead as soon as a run can no longer fit). Same window, same `k` and `l`, FPR about 1%; thread
//! CPU time per key, rounds alternating the two.
//!
//! ```text
//! cargo bench -p sift-filters --bench aging_layouts -- --n 10M --rounds 3
//! ```
#[path = "../harness/mod.rs"]
mod harness;

use sift::prelude::*;
use sift::AgingBloom;

/// Thread CPU time in nanoseconds (the harness's clock).
fn cpu_ns() -> u64 {
    harness::measure::cpu_ns() as u64
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The unblocked layout: slice `s` (physical) is `words[s·w .. (s+1)·w]`.
struct Unblocked {
    words: Vec<u64>,
    slice_words: usize,
    bits: u64,
    k: usize,
    slices: usize,
    head: usize,
    count: u64,
    g: u64,
}

impl Unblocked {
    fn new(k: usize, l: usize, g: u64) -> Self {
        let bits = ((k as f64 * g as f64 / std::f64::consts::LN_2).ceil() as u64).max(64);
        let slice_words = bits.div_ceil(64) as usize;
        Unblocked {
            words: vec![0; slice_words * (k + l)],
            slice_words,
            bits,
            k,
            slices: k + l,
            head: 0,
            count: 0,
            g,
        }
    }

    /// The item's bit in physical slice `s` (independent per slice: double hashing).
    #[inline(always)]
    fn pos(&self, h: u64, s: usize) -> usize {
        let x = h.wrapping_add((s as u64).wrapping_mul(mix(h) | 1));
        s * self.slice_words * 64 + sift::hash::fastrange(x, self.bits) as usize
    }

    fn insert(&mut self, h: u64) {
        if self.count == self.g {
            self.head = (self.head + self.slices - 1) % self.slices;
            let at = self.head * self.slice_words;
            self.words[at..at + self.slice_words].fill(0);
            self.count = 0;
        }
        for j in 0..self.k {
            let b = self.pos(h, (self.head + j) % self.slices);
            self.words[b / 64] |= 1 << (b % 64);
        }
        self.count += 1;
    }

    fn contains(&self, h: u64) -> bool {
        let mut run = 0;
        let mut age = 0;
        while age < self.slices {
            if self.slices - age < self.k - run {
                return false;
            }
            let b = self.pos(h, (self.head + age) % self.slices);
            if self.words[b / 64] >> (b % 64) & 1 == 1 {
                run += 1;
                if run == self.k {
                    return true;
                }
            } else {
                run = 0;
            }
            age += 1;
        }
        false
    }
}

fn parse_count(s: &str) -> usize {
    let (num, mul) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1_000),
        Some('M') => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    num.parse::<usize>().expect("a count like 10M") * mul
}

fn main() {
    let mut n = 10_000_000;
    let mut rounds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => n = parse_count(&args.next().expect("--n COUNT")),
            "--rounds" => rounds = args.next().expect("--rounds R").parse().expect("a number"),
            other => panic!("unknown argument {other}"),
        }
    }
    let mut blocked = AgingBloom::new(n, 0.01).unwrap();
    let (k, l) = (blocked.num_hashes() as usize, (blocked.num_slices() - blocked.num_hashes()) as usize);
    let mut plain = Unblocked::new(k, l, (n as u64).div_ceil(l as u64));
    let hasher = blocked.hasher();
    // Steady state: two windows in.
    for i in 0..2 * n as u64 {
        let h = hasher.hash64(&i.to_le_bytes());
        blocked.insert_hash(h);
        plain.insert(h);
    }
    println!(
        "window {n}, k {k}, l {l}: AgingBloom {} bytes, unblocked {} bytes",
        blocked.size_in_bytes(),
        plain.words.len() * 8
    );
    println!(
        "\n| round | layout | insert ns | member ns | absent ns | FP rate |\n|---:|---|---:|---:|---:|---:|"
    );
    let probes = 1_000_000u64;
    for r in 0..rounds {
        let base = (2 + r as u64) * n as u64;
        let fresh: Vec<u64> = (base..base + n as u64).map(|i| hasher.hash64(&i.to_le_bytes())).collect();
        let absent: Vec<u64> = (0..probes).map(|i| hasher.hash64(&(u64::MAX - i).to_le_bytes())).collect();
        let recent = &fresh[n - (probes as usize).min(n)..];
        for j in 0..2 {
            let which = (j + r) % 2;
            let t = cpu_ns();
            if which == 0 {
                for &h in &fresh {
                    blocked.insert_hash(h);
                }
            } else {
                for &h in &fresh {
                    plain.insert(h);
                }
            }
            let ins = (cpu_ns() - t) as f64 / n as f64;
            let has = |h: u64| if which == 0 { blocked.contains_hash(h) } else { plain.contains(h) };
            let t = cpu_ns();
            let found = recent.iter().filter(|&&h| has(h)).count();
            let mem = (cpu_ns() - t) as f64 / recent.len() as f64;
            assert_eq!(found, recent.len(), "a member of the window is missing");
            let t = cpu_ns();
            let fp = absent.iter().filter(|&&h| has(h)).count();
            let abs = (cpu_ns() - t) as f64 / probes as f64;
            let name = if which == 0 { "AgingBloom (rows)" } else { "unblocked slices" };
            println!(
                "| {} | {name} | {ins:.1} | {mem:.1} | {abs:.1} | {:.4} |",
                r + 1,
                fp as f64 / probes as f64
            );
        }
    }
}
