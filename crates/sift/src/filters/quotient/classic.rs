//! The 3-metadata-bit layout of earlier versions (layout 0), read only: checked and turned into
//! the sorted list of stored fingerprints.

const OCCUPIED: u64 = 1;
const CONTINUATION: u64 = 2;
const SHIFTED: u64 = 4;
const META: u64 = 7;

/// Bytes of a layout-0 payload: three bitmaps and the packed remainders.
pub(super) fn payload_len(slots: u64, r: u32) -> u128 {
    3 * 8 * (slots as u128).div_ceil(64) + (slots as u128 * r as u128).div_ceil(8)
}

pub(super) struct Table {
    pub(super) bitmaps: [Vec<u64>; 3],
    pub(super) words: Vec<u64>,
    pub(super) r: u32,
    pub(super) slots: u64,
    pub(super) quotients: u64,
}

impl Table {
    /// Slot `i`: remainder `<< 3` | shifted (4) | continuation (2) | occupied (1).
    pub(super) fn get(&self, i: u64) -> u64 {
        let (k, b) = ((i >> 6) as usize, i & 63);
        let m = (0..3).fold(0, |m, j| m | (self.bitmaps[j][k] >> b & 1) << j);
        let bit = i * self.r as u64;
        let (w, off) = ((bit >> 6) as usize, (bit & 63) as u32);
        let two = self.words[w] as u128 | (self.words[w + 1] as u128) << 64;
        ((two >> off) as u64 & (u64::MAX >> (64 - self.r))) << 3 | m
    }

    #[cfg(test)]
    pub(super) fn set(&mut self, i: u64, v: u64) {
        let (k, b) = ((i >> 6) as usize, i & 63);
        for j in 0..3 {
            let w = &mut self.bitmaps[j][k];
            *w = (*w & !(1 << b)) | ((v >> j & 1) << b);
        }
        let mask = u64::MAX >> (64 - self.r);
        let bit = i * self.r as u64;
        let (w, off) = ((bit >> 6) as usize, (bit & 63) as u32);
        let two = (self.words[w] as u128 | (self.words[w + 1] as u128) << 64) & !((mask as u128) << off)
            | ((v >> 3 & mask) as u128) << off;
        self.words[w] = two as u64;
        self.words[w + 1] = (two >> 64) as u64;
    }

    fn occupied(&self, i: u64) -> bool {
        self.bitmaps[0][(i >> 6) as usize] >> (i & 63) & 1 != 0
    }

    /// Checks the layout invariants (as the earlier versions did) and returns the stored
    /// fingerprints in increasing order.
    pub(super) fn hashes(&self, items: u64) -> Result<Vec<u64>, &'static str> {
        let (mut pending, mut next_q, mut q) = (0u64, 0u64, 0u64);
        let mut prev_nonempty = false;
        let mut out = Vec::new();
        for s in 0..self.slots {
            let x = self.get(s);
            if x & OCCUPIED != 0 {
                if s >= self.quotients {
                    return Err("occupied bit on an overflow slot");
                }
                pending += 1;
            }
            if x & META == 0 {
                if x != 0 {
                    return Err("remainder in an empty slot");
                }
                if pending != 0 {
                    return Err("an occupied quotient has no run before an empty slot");
                }
                prev_nonempty = false;
                continue;
            }
            if x & CONTINUATION != 0 {
                if !prev_nonempty || x & SHIFTED == 0 {
                    return Err("continuation without a run before it");
                }
            } else {
                if pending == 0 {
                    return Err("a run without an occupied quotient");
                }
                while next_q < s && !self.occupied(next_q) {
                    next_q += 1;
                }
                q = next_q;
                next_q += 1;
                pending -= 1;
                if (x & SHIFTED != 0) != (q != s) {
                    return Err("shifted bit does not match the run's position");
                }
            }
            if x & SHIFTED != 0 && !prev_nonempty {
                return Err("shifted remainder after an empty slot");
            }
            if out.len() as u64 >= items {
                return Err("item count does not match the stored remainders");
            }
            out.push(q << self.r | x >> 3);
            prev_nonempty = true;
        }
        if pending != 0 {
            return Err("an occupied quotient has no run");
        }
        if out.len() as u64 != items {
            return Err("item count does not match the stored remainders");
        }
        // Runs were not sorted in this layout.
        out.sort_unstable();
        Ok(out)
    }
}

/// Loads little-endian bytes into words (the last word zero-padded).
fn fill_le(words: &mut [u64], bytes: &[u8]) {
    for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
}

/// Reads a layout-0 payload (its length already checked against `payload_len`).
pub(super) fn decode(
    quotients: u64,
    r: u32,
    slots: u64,
    items: u64,
    payload: &[u8],
) -> Result<Vec<u64>, &'static str> {
    let n = slots.div_ceil(64) as usize;
    let mut t = Table {
        bitmaps: [vec![0; n], vec![0; n], vec![0; n]],
        words: vec![0; (slots * r as u64).div_ceil(64) as usize + 1],
        r,
        slots,
        quotients,
    };
    let mut at = 0;
    for v in t.bitmaps.iter_mut() {
        fill_le(v, &payload[at..at + 8 * n]);
        at += 8 * n;
    }
    fill_le(&mut t.words, &payload[at..]);
    let tail = |v: &[u64], used: u64| {
        let (k, off) = ((used >> 6) as usize, used & 63);
        (off != 0 && v[k] >> off != 0) || v[k + (off != 0) as usize..].iter().any(|&x| x != 0)
    };
    if t.bitmaps.iter().any(|v| tail(v, slots)) || tail(&t.words, slots * r as u64) {
        return Err("quotient: bits set past the last slot");
    }
    t.hashes(items)
}
