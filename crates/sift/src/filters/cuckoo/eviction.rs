//! What an insert does when both of its buckets are full: the first two levels of the
//! breadth-first search for a chain of kicks ending in a bucket with room (specialised), the
//! general search to `BFS_DEPTH` moves, the random walk of up to `MAX_KICKS` moves, the stash,
//! and moving stashed fingerprints back into the table.

use super::bucket::first_empty;
use super::*;

/// Buckets the breadth-first search may visit: the two roots and 8 + 32 + 128 below them.
pub(super) const BFS_NODES: usize = 2 + 8 + 32 + 128;

/// Buckets the search checks at a time (after generating and prefetching them).
const SEARCH_BATCH: usize = 8;

/// Buckets of a search level generated and prefetched ahead of the ones being checked (two
/// batches): their loads are under way while a batch is checked, and the rest of the level is
/// never computed once a bucket has room. (At n = 10M, generating the whole level first instead
/// made no measurable difference.)
const SEARCH_AHEAD: usize = 2 * SEARCH_BATCH;

impl Cuckoo {
    /// The rest of [`Cuckoo::insert_width`] when both buckets are full: out of line (and called
    /// last, so that the common path needs no registers saved across a call).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_full<const F: u32>(
        &mut self,
        i1: u64,
        i2: u64,
        b1: u64,
        b2: u64,
        fp: u16,
        d: Digest,
        was_present: bool,
    ) -> Result<bool> {
        if !(self.kick::<F>(i1, i2, b1, b2, fp) || self.place_bfs::<F>(i1, i2, b1, b2, fp)) {
            self.place(i1, fp, d.h1 ^ d.h2.rotate_left(17))?;
        }
        self.items += 1;
        Ok(!was_present)
    }

    /// The first two levels of [`Cuckoo::place_bfs`], which end all but about 3% of searches
    /// up to 95% load (n = 1M: 50.6k searches in the last tenth of the fill, 16.2k of them past
    /// the first level, 1.5k past the second). Level 1: the other buckets of the (up to) 8
    /// fingerprints in the full buckets `i1` and `i2` (contents `b1`, `b2`), all prefetched
    /// before any is read; level 2: the same from each of those, 32 buckets. Within a level
    /// the first bucket in the search's order with an empty slot ends it, and the chain is
    /// applied from its end, exactly as the general search does: same moves, same bytes
    /// (`insert_matches_the_reference_bit_for_bit`). Returns `false`, having changed nothing,
    /// when neither level has room.
    ///
    /// Faster than the general search for the same result: small fixed arrays (the general
    /// search's node arrays alone are ~3 KB to initialise), and the path test of a level-2 node
    /// is two compares.
    fn kick<const F: u32>(&mut self, i1: u64, i2: u64, b1: u64, b2: u64, fp: u16) -> bool {
        const S: usize = BUCKET_SLOTS;
        let bb = S as u64 * F as u64;
        let mask = (1u64 << F) - 1;
        let slot = |b: u64, j: usize| ((b >> (j as u32 * F)) & mask) as u16;
        let with = |b: u64, j: usize, v: u16| (b & !(mask << (j as u32 * F))) | (v as u64) << (j as u32 * F);
        let roots = [i1, i2];
        // Level 1: node `m` is the other bucket of slot `m % 4` of root `m / 4`; with one root
        // (i1 = i2) nodes 4-7 repeat nodes 0-3 and are not valid. A fixed count of 8 lets the
        // loops unroll.
        let n1 = if i1 == i2 { S } else { 2 * S };
        let mut c1 = [0u64; 2 * S];
        let mut valid = 0u32;
        for m in 0..2 * S {
            let r = roots[m / S];
            c1[m] = self.alt(r, slot(if m < S { b1 } else { b2 }, m % S));
            // (A hint: never faults, so the address needs no bounds check.)
            prefetch(self.table.as_ptr().wrapping_add((c1[m] * (bb / 8)) as usize));
            valid |= ((c1[m] != r) as u32) << m;
        }
        valid &= (1 << n1) - 1;
        // Checked in order, stopping at the first with room: a later bucket's load need not
        // have arrived (at n = 10M, where loads take 100 ns or more and vary, waiting for all
        // 8 made the last tenth of the fill slower).
        let mut w1 = [0u64; 2 * S];
        let mut hit = None;
        for m in (0..2 * S).filter(|&m| valid >> m & 1 != 0) {
            w1[m] = self.bucket_at(c1[m], bb);
            if empty_fields(w1[m], F) != 0 {
                hit = Some(m);
                break;
            }
        }
        if let Some(m) = hit {
            let (r, j1, c) = (roots[m / S], m % S, c1[m]);
            let e = first_empty(w1[m], F).expect("a bucket with room");
            let v = slot(self.bucket_at(r, bb), j1);
            let d = with(self.bucket_at(c, bb), e, v);
            self.put_at(c, bb, d);
            let d = with(self.bucket_at(r, bb), j1, fp);
            self.put_at(r, bb, d);
            return true;
        }
        // Level 2: node `t` is the other bucket of slot `t % 4` of level-1 node `parent[t]`
        // (valid ones only, in order); it must not be that node or its root. Generated (and
        // prefetched) up to [`SEARCH_AHEAD`] nodes ahead of the ones checked, checked in order
        // up to the first with room (most level-2 searches end early: the rest of the level is
        // then never computed).
        let mut parents = [0u8; 2 * S];
        let mut np = 0;
        for m in (0..n1).filter(|&m| valid >> m & 1 != 0) {
            parents[np] = m as u8;
            np += 1;
        }
        let mut c2 = [0u64; 4 * S * S];
        let mut parent = [0u8; 4 * S * S];
        let mut valid2 = 0u64;
        let (mut next, mut done, mut n2) = (0, 0, 0);
        let hit = loop {
            while next < np && n2 - done < SEARCH_AHEAD {
                let m = parents[next] as usize;
                for j in 0..S {
                    let g = self.alt(c1[m], slot(w1[m], j));
                    c2[n2] = g;
                    parent[n2] = m as u8;
                    prefetch(self.table.as_ptr().wrapping_add((g * (bb / 8)) as usize));
                    valid2 |= ((g != c1[m] && g != roots[m / S]) as u64) << n2;
                    n2 += 1;
                }
                next += 1;
            }
            let end = (done + SEARCH_BATCH).min(n2);
            let hit = (done..end)
                .find(|&t| valid2 >> t & 1 != 0 && empty_fields(self.bucket_at(c2[t], bb), F) != 0);
            done = end;
            if let Some(t) = hit {
                break t;
            }
            if next == np && done == n2 {
                return false;
            }
        };
        let t = hit;
        let m = parent[t] as usize;
        let (r, j1, c, j2, g) = (roots[m / S], m % S, c1[m], t % S, c2[t]);
        let e = first_empty(self.bucket_at(g, bb), F).expect("a bucket with room");
        let v = slot(self.bucket_at(c, bb), j2);
        let d = with(self.bucket_at(g, bb), e, v);
        self.put_at(g, bb, d);
        let v = slot(self.bucket_at(r, bb), j1);
        let d = with(self.bucket_at(c, bb), j2, v);
        self.put_at(c, bb, d);
        let d = with(self.bucket_at(r, bb), j1, fp);
        self.put_at(r, bb, d);
        true
    }

    /// Places `fp`, whose buckets `i1` and `i2` (contents `b1`, `b2`) are both full, by the
    /// shortest chain of at most [`BFS_DEPTH`] moves that ends in a bucket with an empty slot:
    /// a breadth-first search over the table, level by level. The buckets of a level are all
    /// computed and prefetched before any is read, so their cache misses overlap (one miss
    /// latency per level instead of one per move of a random walk). Returns `false`, having
    /// changed nothing, when no such chain exists; the caller then falls back to the random walk.
    ///
    /// Near 95% load a random walk averaged 7.4 serial moves per full pair of buckets (n = 1M,
    /// `benches/probes/cuckoo.rs`); most searches end at the first level (8 buckets read at once).
    #[inline(never)]
    fn place_bfs<const F: u32>(&mut self, i1: u64, i2: u64, b1: u64, b2: u64, fp: u16) -> bool {
        // Node `k`: bucket `at[k]` (full), contents `word[k]`, reached from node `from[k]` by
        // moving the fingerprint in slot `via[k]` of that node (roots: `from = NONE`).
        const NONE: u8 = u8::MAX;
        let mut at = [0u64; BFS_NODES];
        let mut word = [0u64; BFS_NODES];
        let mut from = [NONE; BFS_NODES];
        let mut via = [0u8; BFS_NODES];
        at[0] = i1;
        word[0] = b1;
        let mut len = 1;
        if i2 != i1 {
            at[1] = i2;
            word[1] = b2;
            len = 2;
        }
        // Widths are constants here (`F`), so slot extraction and the slot index of an empty
        // field need no run-time shift amounts or division.
        let bb = BUCKET_SLOTS as u64 * F as u64;
        let mask = (1u64 << F) - 1;
        let slot = |b: u64, j: usize| ((b >> (j as u32 * F)) & mask) as u16;
        let with = |b: u64, j: usize, v: u16| (b & !(mask << (j as u32 * F))) | (v as u64) << (j as u32 * F);
        let mut level = 0..len;
        for _ in 0..BFS_DEPTH {
            // Children of this level: every fingerprint's other bucket, skipping buckets already
            // on the node's own path (a chain must not move a fingerprint twice). Generated (and
            // prefetched) up to [`SEARCH_AHEAD`] nodes ahead of the ones checked, a batch at a
            // time: a hit ends the search without generating the rest of the level (at the third
            // level, up to 128 buckets). The same nodes in the same order as generating the whole
            // level first.
            let first_child = len;
            let (mut k, mut done) = (level.start, first_child);
            loop {
                'nodes: while k < level.end && len - done < SEARCH_AHEAD {
                    for j in 0..BUCKET_SLOTS {
                        if len == BFS_NODES {
                            break 'nodes;
                        }
                        let c = self.alt(at[k], slot(word[k], j));
                        let mut a = k;
                        let on_path = loop {
                            if at[a] == c {
                                break true;
                            }
                            if from[a] == NONE {
                                break false;
                            }
                            a = from[a] as usize;
                        };
                        if on_path {
                            continue;
                        }
                        prefetch(self.table.as_ptr().wrapping_add((c * (bb / 8)) as usize));
                        at[len] = c;
                        from[len] = k as u8;
                        via[len] = j as u8;
                        len += 1;
                    }
                    k += 1;
                }
                let before = (done + SEARCH_BATCH).min(len);
                for c in done..before {
                    let b = self.bucket_at(at[c], bb);
                    if let Some(e) = first_empty(b, F) {
                        // Apply the chain from its end: each fingerprint moves one step down it,
                        // and `fp` takes the slot freed in a root.
                        let (mut node, mut js, mut dst, mut dst_slot) =
                            (from[c] as usize, via[c] as usize, c, e);
                        loop {
                            let v = slot(self.bucket_at(at[node], bb), js);
                            let d = with(self.bucket_at(at[dst], bb), dst_slot, v);
                            self.put_at(at[dst], bb, d);
                            if from[node] == NONE {
                                let r = with(self.bucket_at(at[node], bb), js, fp);
                                self.put_at(at[node], bb, r);
                                return true;
                            }
                            (dst, dst_slot) = (node, js);
                            (node, js) = (from[node] as usize, via[node] as usize);
                        }
                    }
                    word[c] = b;
                }
                done = before;
                if (k == level.end || len == BFS_NODES) && done == len {
                    break;
                }
            }
            level = first_child..len;
            if level.is_empty() {
                break;
            }
        }
        false
    }

    /// Places `fp` (primary bucket `i1`) by cuckoo moves, then the stash; on failure undoes every
    /// move so that the table is exactly as before.
    #[inline(never)]
    pub(super) fn place(&mut self, i1: u64, fp: u16, seed: u64) -> Result<()> {
        let i2 = self.alt(i1, fp);
        if self.try_put(i1, fp) || self.try_put(i2, fp) {
            return Ok(());
        }
        // Deterministic walk: the same filter and item always take the same path.
        let mut rng = seed | 1;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cur = fp;
        let mut at = if next() & 1 == 0 { i1 } else { i2 };
        // (bucket, slot, fingerprint that was there): replayed backwards to undo.
        let mut path: Vec<(u64, usize, u16)> = Vec::with_capacity(64);
        for _ in 0..MAX_KICKS {
            let j = (next() >> 62) as usize;
            let b = self.bucket(at);
            let victim = self.slot_of(b, j);
            let nb = self.with_slot(b, j, cur);
            self.set_bucket(at, nb);
            path.push((at, j, victim));
            cur = victim;
            at = self.alt(at, cur);
            if self.try_put(at, cur) {
                return Ok(());
            }
        }
        if self.stash.len() < STASH_SLOTS {
            self.stash.push((at, cur));
            return Ok(());
        }
        for &(b, j, old) in path.iter().rev() {
            let v = self.bucket(b);
            let v = self.with_slot(v, j, old);
            self.set_bucket(b, v);
        }
        Err(Error::Full { len: self.items as usize })
    }

    /// Moves stashed fingerprints back into the table where a slot has come free.
    pub(super) fn drain_stash(&mut self) {
        let mut k = 0;
        while k < self.stash.len() {
            let (b, fp) = self.stash[k];
            let other = self.alt(b, fp);
            if self.try_put(b, fp) || self.try_put(other, fp) {
                self.stash.swap_remove(k);
            } else {
                k += 1;
            }
        }
    }
}
