//! How fast this machine serves random cache lines from a buffer far larger than its caches,
//! with and without software prefetching: the ceiling of every batch query of a large filter.
//!
//! ```text
//! cargo bench -p sift-filters --bench line_rate -- [--bytes 2^30]
//! ```
//!
//! Reads 20M random 8-byte words of a huge-page-advised buffer in a dependent-free loop, once
//! with no prefetch (the out-of-order core overlaps what its window holds) and then prefetching
//! `ahead` reads in advance, and prints nanoseconds per line. A classic Bloom member query needs
//! `k` lines (7 at 1%), so its batch can only beat its single query by as much as the prefetched
//! line rate beats the unprefetched one (`docs/BENCHMARKS.md`, "Bloom batch: a staged query").

#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use std::time::Instant;

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env("usage: cargo bench -p sift-filters --bench line_rate -- [--bytes 2^30]")?;
        let bytes = a.count("--bytes", 1 << 30)?.max(8);
        a.finish()?;
        probe(bytes);
        Ok(())
    })
}

fn probe(bytes: usize) {
    let words = (bytes / 8).max(1);
    let layout = std::alloc::Layout::from_size_align(words * 8, 2 << 20).expect("valid layout");
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { std::alloc::alloc(layout) } as *mut u64;
    assert!(!base.is_null(), "allocation of {bytes} bytes failed");
    #[cfg(target_os = "linux")]
    // SAFETY: `base` is 2 MiB-aligned and the `words * 8` bytes after it are this allocation;
    // the advice only changes the page size used to back it (as sift's own large arrays do).
    unsafe {
        sift_madvise(base, words * 8);
    }
    // SAFETY: `base` is valid for `words` u64 writes; they are all initialised here, before any
    // read through the slice.
    let buf = unsafe {
        for i in 0..words {
            base.add(i).write(i as u64);
        }
        std::slice::from_raw_parts(base, words)
    };
    let n = 20_000_000usize;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let idx: Vec<usize> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x as u128 * words as u128) >> 64) as usize
        })
        .collect();
    for ahead in [0usize, 8, 16, 32, 64, 128, 256] {
        let t = Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            if ahead > 0 {
                if let Some(&j) = idx.get(i + ahead) {
                    prefetch(&buf[j]);
                }
            }
            sum = sum.wrapping_add(buf[idx[i]]);
        }
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        println!("prefetch ahead {ahead:3}: {ns:6.1} ns per random line (checksum {sum})");
    }
    // SAFETY: allocated above with this layout, freed once; `buf` is not used after this.
    unsafe { std::alloc::dealloc(base as *mut u8, layout) };
}

#[cfg(target_os = "linux")]
unsafe fn sift_madvise(p: *mut u64, len: usize) {
    // SAFETY: forwarded from the caller: `p..p+len` is one allocation, page-aligned.
    unsafe { libc::madvise(p as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

fn prefetch(r: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint that never faults; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch(r as *const u64 as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
