//! Diagnostic micro-benchmarks of the blocked and classic Bloom filters (not part of the published
//! tables): constructor cost, then, interleaved over 7 rounds (median and minimum), queries and
//! inserts of `BlockedBloom`, `Bloom`, sbbf-rs and fastbloom, the scalar kernel, and experimental
//! AVX2 kernel variants (module `exp`: other remix, salts, counters) against the library's.
//! x86-64 with AVX2 only.
//!
//! `cargo bench -p sift-filters --bench blocked_bloom_probe -- [--n 1M]`
#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use harness::contender::Subject;
use harness::keys::{members, non_members, Key};
use harness::measure::cpu_ns;
use sift::prelude::*;
use std::hint::black_box;

fn time(f: &mut dyn FnMut() -> usize, n: usize) -> f64 {
    let t = cpu_ns();
    black_box(f());
    (cpu_ns() - t) / n as f64
}

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a =
            Args::from_env("usage: cargo bench -p sift-filters --bench blocked_bloom_probe -- [--n 1M]")?;
        let n = a.count("--n", 1_000_000)?.max(1);
        a.finish()?;
        probe(n);
        Ok(())
    })
}

fn probe(n: usize) {
    for _ in 0..3 {
        let t = cpu_ns();
        let f = black_box(sift::BlockedBloom::new(black_box(n), 0.01).unwrap());
        let t1 = cpu_ns();
        let g = black_box(sift::Bloom::new(black_box(n), 0.01).unwrap());
        let t2 = cpu_ns();
        println!("BlockedBloom::new {:.2} ms, Bloom::new {:.2} ms", (t1 - t) / 1e6, (t2 - t1) / 1e6);
        drop((f, g));
    }
    let keys: Vec<u64> = members::<u64>(n);
    let others: Vec<u64> = non_members::<u64>(n);
    let mut bb = sift::BlockedBloom::new(n, 0.01).unwrap();
    let mut bl = sift::Bloom::new(n, 0.01).unwrap();
    let mut sb = harness::bloom::Sbbf::new(n, 0.01);
    let mut fb = fastbloom::BloomFilter::with_false_pos(0.01)
        .hasher(foldhash::fast::FixedState::with_seed(1))
        .expected_items(n);
    for k in &keys {
        bb.insert(k.bytes());
        bl.insert(k.bytes());
        Subject::<u64>::add(&mut sb, k);
        fb.insert(k);
    }
    let nb = bb.num_blocks() as usize;
    let kk = bb.num_hashes();
    println!("blocks {nb} k {kk}");
    let mut ex: Vec<exp::F> = (0..3).map(|_| exp::F::new(nb, kk)).collect();
    for (v, f) in ex.iter_mut().enumerate() {
        for k in &keys {
            // SAFETY: AVX2 is present on the benchmark machine (checked below).
            unsafe { f.ins(k, v as u32) };
        }
    }
    assert!(std::arch::is_x86_feature_detected!("avx2"));
    // SAFETY: AVX2 checked above.
    unsafe {
        for (v, f) in ex.iter().enumerate() {
            let q = |k: &u64| match v {
                0 => f.q0(k),
                1 => f.q1(k),
                _ => f.q2(k),
            };
            assert!(keys.iter().all(q));
            let fp = others.iter().filter(|k| q(k)).count();
            println!("variant {v}: fpr {:.4}%", fp as f64 * 100.0 / others.len() as f64);
        }
    }
    let mut bs = bb.clone();
    bs.force_scalar();
    let khashes: Vec<u64> = keys.iter().map(|k| xxhash_rust::xxh3::xxh3_64(&k.bytes())).collect();
    let hashes: Vec<u64> = others.iter().map(|k| xxhash_rust::xxh3::xxh3_64(&k.bytes())).collect();
    let names = [
        "bb.contains",
        "bb.contains_hash",
        "sbbf",
        "bloom.contains",
        "fastbloom",
        "xxh3 only",
        "bb.insert",
        "bloom.insert",
        "sbbf.insert",
        "bb.insert scalar",
        "bb.insert_hash",
        "bb.contains scalar",
        "exp q0 fused remix",
        "exp q1 fused mulC",
        "exp q2 fused salts",
        "exp ins set-only",
        "exp ins test+set",
        "exp ins t+s memcount",
        "exp ins t+s via fnptr",
        "exp ins hash outside",
        "exp ins seeded in fn",
        "G1 lib-like",
        "G2 no counter",
        "G3 unseeded",
        "G4 no kind check",
        "G5 counter only",
        "G6 runtime-k kernel",
        "G7 ins_h via G",
        "exp ins_s count in F",
        "exp ins_s count far",
    ];
    let mut gs: Vec<exp::G> = (0..7).map(|v| exp::G::new(nb, v)).collect();
    let mut res = vec![vec![]; names.len()];
    for round in 0..7 {
        for j in 0..names.len() {
            let i = (j + round) % names.len();
            let v = match i {
                0 => time(&mut || others.iter().filter(|k| bb.contains(black_box(*k).bytes())).count(), n),
                1 => time(&mut || hashes.iter().filter(|h| bb.contains_hash(black_box(**h))).count(), n),
                2 => {
                    time(&mut || others.iter().filter(|k| Subject::<u64>::has(&sb, black_box(k))).count(), n)
                }
                3 => time(&mut || others.iter().filter(|k| bl.contains(black_box(*k).bytes())).count(), n),
                4 => time(&mut || others.iter().filter(|k| fb.contains(black_box(*k))).count(), n),
                5 => time(
                    &mut || {
                        others
                            .iter()
                            .map(|k| xxhash_rust::xxh3::xxh3_64(&black_box(k.bytes())) as usize & 1)
                            .sum()
                    },
                    n,
                ),
                6 => time(
                    &mut || {
                        for k in &keys {
                            bb.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                7 => time(
                    &mut || {
                        for k in &keys {
                            bl.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                8 => time(
                    &mut || {
                        for k in &keys {
                            Subject::<u64>::add(&mut sb, black_box(k));
                        }
                        0
                    },
                    n,
                ),
                9 => time(
                    &mut || {
                        for k in &keys {
                            bs.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                10 => time(
                    &mut || {
                        for h in &khashes {
                            bb.insert_hash(black_box(*h));
                        }
                        0
                    },
                    n,
                ),
                11 => time(&mut || others.iter().filter(|k| bs.contains(black_box(*k).bytes())).count(), n),
                // SAFETY: AVX2 checked above.
                12 => time(&mut || others.iter().filter(|k| unsafe { ex[0].q0(black_box(k)) }).count(), n),
                // SAFETY: AVX2 checked above.
                13 => time(&mut || others.iter().filter(|k| unsafe { ex[1].q1(black_box(k)) }).count(), n),
                // SAFETY: AVX2 checked above.
                14 => time(&mut || others.iter().filter(|k| unsafe { ex[2].q2(black_box(k)) }).count(), n),
                15 => time(
                    &mut || {
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            unsafe { ex[0].ins(black_box(k), 0) };
                        }
                        0
                    },
                    n,
                ),
                16 => time(
                    &mut || {
                        let mut new = 0;
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            new += unsafe { ex[0].ins_t(black_box(k)) } as usize;
                        }
                        new
                    },
                    n,
                ),
                28 => time(
                    &mut || {
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            unsafe { ex[0].ins_c(black_box(k)) };
                        }
                        ex[0].items as usize
                    },
                    n,
                ),
                29 => time(
                    &mut || {
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            unsafe { ex[0].ins_far(black_box(k)) };
                        }
                        ex[0].far.0 as usize
                    },
                    n,
                ),
                21..=27 => {
                    let v = i - 21;
                    time(
                        &mut || {
                            let g = &mut gs[v];
                            for k in &keys {
                                // SAFETY: AVX2 checked above.
                                unsafe { g.ins(black_box(k), v) };
                            }
                            g.items as usize
                        },
                        n,
                    )
                }
                20 => time(
                    &mut || {
                        let mut new = 0;
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            new += unsafe { ex[0].ins_s(black_box(k)) } as usize;
                        }
                        new
                    },
                    n,
                ),
                19 => time(
                    &mut || {
                        let mut new = 0;
                        for k in &keys {
                            let h = xxhash_rust::xxh3::xxh3_64(&black_box(k).to_le_bytes());
                            // SAFETY: AVX2 checked above.
                            new += unsafe { ex[0].ins_h(h) } as usize;
                        }
                        new
                    },
                    n,
                ),
                18 => time(
                    &mut || {
                        let mut new = 0;
                        let f: unsafe fn(&mut exp::F, &u64) -> bool = black_box(exp::F::ins_t);
                        for k in &keys {
                            // SAFETY: AVX2 checked above.
                            new += unsafe { f(&mut ex[0], black_box(k)) } as usize;
                        }
                        new
                    },
                    n,
                ),
                _ => time(
                    &mut || {
                        let mut cnt = 0usize;
                        let c: *mut usize = &mut cnt;
                        for k in &keys {
                            // SAFETY: AVX2 checked above; `c` points to the live local `cnt`.
                            unsafe {
                                let new = ex[0].ins_t(black_box(k)) as usize;
                                c.write_volatile(c.read_volatile() + new);
                            }
                        }
                        cnt
                    },
                    n,
                ),
            };
            res[i].push(v);
        }
    }
    for (name, mut v) in names.iter().zip(res) {
        v.sort_by(f64::total_cmp);
        println!("{name:20} {:6.1} ns (min {:.1})", v[v.len() / 2], v[0]);
    }
}

// ---- layout experiments (standalone re-implementations, u64 keys) ----
mod exp {
    use core::arch::x86_64::*;
    use std::hint::black_box;
    #[repr(C, align(64))]
    #[derive(Clone, Copy, Default)]
    pub struct Blk(pub [u64; 8]);
    pub struct F {
        pub blocks: Vec<Blk>,
        pub k: u32,
        pub seedkey: u64,
        pub items: u64,
        pub far: Far,
    }
    /// A counter on its own cache line.
    #[repr(align(128))]
    #[derive(Default)]
    pub struct Far(pub u64);
    static DISABLE: [[Blk; 8]; 9] = {
        let mut t = [[Blk([0; 8]); 8]; 9];
        let mut len = 0;
        while len <= 8 {
            let mut start = 0;
            while start < 8 {
                let run = ((1u16 << len) - 1) as u8;
                let win = run.rotate_left(start as u32);
                let mut w = 0;
                while w < 8 {
                    if (win >> w) & 1 == 0 {
                        t[len][start].0[w] = 64;
                    }
                    w += 1;
                }
                start += 1;
            }
            len += 1;
        }
        t
    };
    #[inline(always)]
    fn fr(x: u64, n: u64) -> u64 {
        ((x as u128 * n as u128) >> 64) as u64
    }
    #[inline(always)]
    pub fn remix(h: u64) -> u64 {
        let mut x = h.rotate_left(32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 29;
        x
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn masks(h: u64, len: u32) -> (__m256i, __m256i) {
        let hv = _mm256_set1_epi64x(h as i64);
        let c63 = _mm256_set1_epi64x(63);
        let one = _mm256_set1_epi64x(1);
        let d = &DISABLE[len.min(8) as usize][(h >> 61) as usize];
        let p = d.0.as_ptr() as *const __m256i;
        let (dlo, dhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
        let slo = _mm256_setr_epi64x(0, 6, 12, 18);
        let shi = _mm256_setr_epi64x(24, 30, 36, 42);
        let clo = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(hv, slo), c63), dlo);
        let chi = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(hv, shi), c63), dhi);
        (_mm256_sllv_epi64(one, clo), _mm256_sllv_epi64(one, chi))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn test(b: &Blk, lo: __m256i, hi: __m256i) -> bool {
        let p = b.0.as_ptr() as *const __m256i;
        let (blo, bhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
        (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn set(b: &mut Blk, lo: __m256i, hi: __m256i) {
        let p = b.0.as_mut_ptr() as *mut __m256i;
        _mm256_store_si256(p, _mm256_or_si256(_mm256_load_si256(p), lo));
        _mm256_store_si256(p.add(1), _mm256_or_si256(_mm256_load_si256(p.add(1)), hi));
    }
    /// Salted positions from the low 32 bits (Parquet style), all 8 words, window by top 3 bits of another product.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn masks_salt(h: u64, len: u32) -> (__m256i, __m256i) {
        const S: [i32; 8] = [
            0x47b6137bu32 as i32,
            0x44974d91,
            0x8824ad5bu32 as i32,
            0xa2b7289du32 as i32,
            0x705495c7,
            0x2df1424b,
            0x9efc4947u32 as i32,
            0x5c6bfb31,
        ];
        let x = _mm256_set1_epi32(h as u32 as i32);
        let salt = _mm256_setr_epi32(S[0], S[1], S[2], S[3], S[4], S[5], S[6], S[7]);
        let pos = _mm256_srli_epi32(_mm256_mullo_epi32(x, salt), 26);
        let s = ((h as u32).wrapping_mul(0x9e37_79b9) >> 29) as usize;
        let d = &DISABLE[len.min(8) as usize][s];
        let p = d.0.as_ptr() as *const __m256i;
        let (dlo, dhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
        let one = _mm256_set1_epi64x(1);
        let clo = _mm256_or_si256(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(pos)), dlo);
        let chi = _mm256_or_si256(_mm256_cvtepu32_epi64(_mm256_extracti128_si256(pos, 1)), dhi);
        (_mm256_sllv_epi64(one, clo), _mm256_sllv_epi64(one, chi))
    }
    /// The library's single insert, re-created: fields read by the caller, a per-k kernel
    /// through a function pointer, the item counter in the struct.
    pub struct G {
        pub blocks: Vec<Blk>,
        pub kind: u8,
        pub key: u64,
        pub items: u64,
        pub fp: unsafe fn(&mut Blk, u64) -> bool,
    }
    #[target_feature(enable = "avx2")]
    unsafe fn kern6(b: &mut Blk, h2: u64) -> bool {
        let (lo, hi) = masks(h2, 6);
        let p = b.0.as_mut_ptr() as *mut __m256i;
        let (blo, bhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
        let present = (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0;
        _mm256_store_si256(p, _mm256_or_si256(blo, lo));
        _mm256_store_si256(p.add(1), _mm256_or_si256(bhi, hi));
        !present
    }
    static KRT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(6);
    #[target_feature(enable = "avx2")]
    unsafe fn kern_rt(b: &mut Blk, h2: u64) -> bool {
        let (lo, hi) = masks(h2, KRT.load(std::sync::atomic::Ordering::Relaxed));
        let p = b.0.as_mut_ptr() as *mut __m256i;
        let (blo, bhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
        let present = (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0;
        _mm256_store_si256(p, _mm256_or_si256(blo, lo));
        _mm256_store_si256(p.add(1), _mm256_or_si256(bhi, hi));
        !present
    }
    #[target_feature(enable = "avx2")]
    unsafe fn ins_h_g(blocks: &mut [Blk], h: u64) -> bool {
        let n = blocks.len() as u64;
        // SAFETY: fastrange maps into 0..n and the vector is not empty.
        let b = unsafe { blocks.get_unchecked_mut(fr(h, n) as usize) };
        kern6(b, remix(h))
    }
    impl G {
        pub fn new(blocks: usize, v: usize) -> G {
            G {
                blocks: vec![Blk::default(); blocks],
                kind: black_box(1),
                key: black_box(0xc73a_b174_c5ec_d5a2),
                items: 0,
                fp: black_box(if v == 5 { kern_rt } else { kern6 } as unsafe fn(&mut Blk, u64) -> bool),
            }
        }
        /// Variant `v` of the library-like insert.
        ///
        /// # Safety
        /// The CPU must support AVX2 (`fp` is an AVX2 function).
        #[inline(always)]
        pub unsafe fn ins(&mut self, key: &u64, v: usize) {
            let kind_ok = v == 3 || self.kind == 1;
            if !kind_ok {
                return;
            }
            let seed = if v == 2 { 0xc73a_b174_c5ec_d5a2 } else { self.key };
            let mut x = key.rotate_left(32) ^ seed;
            x ^= x.rotate_left(49) ^ x.rotate_left(24);
            x = x.wrapping_mul(0x9fb2_1c65_1e98_df25);
            x ^= (x >> 35).wrapping_add(8);
            x = x.wrapping_mul(0x9fb2_1c65_1e98_df25);
            let h = x ^ (x >> 28);
            if v == 6 {
                // SAFETY: AVX2 (this function's contract).
                let new = unsafe { ins_h_g(&mut self.blocks, h) };
                self.items += new as u64;
                return;
            }
            let n = self.blocks.len() as u64;
            // SAFETY: fastrange maps into 0..n and the vector is not empty.
            let b = unsafe { self.blocks.get_unchecked_mut(fr(h, n) as usize) };
            if v == 4 {
                self.items += 1;
                // SAFETY: AVX2 (this function's contract).
                unsafe { (self.fp)(b, remix(h)) };
                return;
            }
            // SAFETY: AVX2 (this function's contract).
            let new = unsafe { (self.fp)(b, remix(h)) };
            if v != 1 {
                self.items += new as u64;
            }
        }
    }
    #[inline(always)]
    fn xx(key: &u64) -> u64 {
        xxhash_rust::xxh3::xxh3_64(&key.to_le_bytes())
    }
    impl F {
        pub fn new(blocks: usize, k: u32) -> F {
            F {
                blocks: vec![Blk::default(); blocks],
                k,
                seedkey: black_box(0xc73a_b174_c5ec_d5a2),
                items: 0,
                far: Far::default(),
            }
        }
        #[inline(always)]
        fn blk(&self, h: u64) -> &Blk {
            unsafe { self.blocks.get_unchecked(fr(h, self.blocks.len() as u64) as usize) }
        }
        #[inline(always)]
        fn blk_mut(&mut self, h: u64) -> &mut Blk {
            let n = self.blocks.len() as u64;
            unsafe { self.blocks.get_unchecked_mut(fr(h, n) as usize) }
        }
        #[target_feature(enable = "avx2")]
        pub unsafe fn ins(&mut self, key: &u64, v: u32) {
            let h = xx(key);
            let (lo, hi) = match v {
                0 => masks(remix(h), self.k),
                1 => masks(h.wrapping_mul(0x9e37_79b9_7f4a_7c15), self.k),
                _ => masks_salt(h, self.k),
            };
            let k = self.k;
            let _ = k;
            set(self.blk_mut(h), lo, hi);
        }
        #[target_feature(enable = "avx2")]
        pub unsafe fn ins_c(&mut self, key: &u64) {
            let new = self.ins_s(key);
            self.items += new as u64;
        }
        #[target_feature(enable = "avx2")]
        pub unsafe fn ins_far(&mut self, key: &u64) {
            let new = self.ins_s(key);
            self.far.0 += new as u64;
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        pub unsafe fn ins_s(&mut self, key: &u64) -> bool {
            let mut v = key.rotate_left(32) ^ self.seedkey;
            v ^= v.rotate_left(49) ^ v.rotate_left(24);
            v = v.wrapping_mul(0x9fb2_1c65_1e98_df25);
            v ^= (v >> 35).wrapping_add(8);
            v = v.wrapping_mul(0x9fb2_1c65_1e98_df25);
            let h = v ^ (v >> 28);
            debug_assert_eq!(h, xx(key));
            self.ins_h(h)
        }
        #[target_feature(enable = "avx2")]
        pub unsafe fn ins_t(&mut self, key: &u64) -> bool {
            self.ins_h(xx(key))
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        pub unsafe fn ins_h(&mut self, h: u64) -> bool {
            let (lo, hi) = masks(remix(h), self.k);
            let b = self.blk_mut(h);
            let p = b.0.as_mut_ptr() as *mut __m256i;
            let (blo, bhi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
            let present = (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0;
            _mm256_store_si256(p, _mm256_or_si256(blo, lo));
            _mm256_store_si256(p.add(1), _mm256_or_si256(bhi, hi));
            !present
        }
        /// current layout, fused
        #[target_feature(enable = "avx2")]
        pub unsafe fn q0(&self, key: &u64) -> bool {
            let h = xx(key);
            let (lo, hi) = masks(remix(h), self.k);
            test(self.blk(h), lo, hi)
        }
        /// h2 = h1*C, fused
        #[target_feature(enable = "avx2")]
        pub unsafe fn q1(&self, key: &u64) -> bool {
            let h = xx(key);
            let (lo, hi) = masks(h.wrapping_mul(0x9e37_79b9_7f4a_7c15), self.k);
            test(self.blk(h), lo, hi)
        }
        /// salts, fused
        #[target_feature(enable = "avx2")]
        pub unsafe fn q2(&self, key: &u64) -> bool {
            let h = xx(key);
            let (lo, hi) = masks_salt(h, self.k);
            test(self.blk(h), lo, hi)
        }
    }
}
