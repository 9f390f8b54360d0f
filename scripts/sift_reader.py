#!/usr/bin/env python3
"""An independent reader of sift files that follows docs/FORMAT.md and shares no code with the crate.

Usage: python3 scripts/sift_reader.py [FILE.sift ... | FILE.sift --queries QUERIES]
       (needs the `xxhash` package: `python3 -m pip install xxhash`)

With no arguments it checks every golden file in crates/sift/tests/fixtures/ whose kind it reads:
the frame, the CRC32C, the kind's parameter checks, and that every query in the matching .txt
file gets the recorded answer. With files, it prints what it decodes and, where a .txt file sits
beside one (or with --queries: one `key answer` per line, answer 1/0 or true/false), checks those
queries too. Exit status 1 if anything disagrees.

Kinds read: 1 (bloom), 3 (split-block bloom), 4 (counting bloom), 5 (scalable bloom: the frame,
the layer schedule and the embedded files' frames; queries need kind 2, not read here), 18 (xor8),
19/20 (binary fuse), 21 (GCS), 32 (RedisBloom chain), 33 (RedisBloom cuckoo), 34 (Guava).
Hash ids: 1-6.
"""

import math
import os
import struct
import sys

import xxhash

M64 = (1 << 64) - 1


# --- CRC-32C (bitwise, reflected polynomial 0x82F63B78) -------------------------------------------

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# --- hash functions --------------------------------------------------------------------------------

def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def remix(h1):
    x = (rotl(h1, 32) * 0x9E3779B97F4A7C15) & M64
    return x ^ (x >> 29)


def murmur64a(key, seed):
    m, r = 0xC6A4A7935BD1E995, 47
    h = (seed ^ (len(key) * m)) & M64
    n8 = len(key) // 8 * 8
    for i in range(0, n8, 8):
        k = int.from_bytes(key[i:i + 8], "little")
        k = (k * m) & M64
        k ^= k >> r
        k = (k * m) & M64
        h ^= k
        h = (h * m) & M64
    tail = key[n8:]
    if tail:
        for j, b in enumerate(tail):
            h ^= b << (8 * j)
        h = (h * m) & M64
    h ^= h >> r
    h = (h * m) & M64
    h ^= h >> r
    return h


def sip24(k0, k1, data):
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd():
        v[0] = (v[0] + v[1]) & M64; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64; v[3] = rotl(v[3], 16); v[3] ^= v[2]
        v[0] = (v[0] + v[3]) & M64; v[3] = rotl(v[3], 21); v[3] ^= v[0]
        v[2] = (v[2] + v[1]) & M64; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32)

    n8 = len(data) // 8 * 8
    for i in range(0, n8, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m
        rnd(); rnd()
        v[0] ^= m
    last = (len(data) & 0xFF) << 56
    for j, b in enumerate(data[n8:]):
        last |= b << (8 * j)
    v[3] ^= last
    rnd(); rnd()
    v[0] ^= last
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def murmur3_x64_128(data, seed):
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F

    def fmix(k):
        k ^= k >> 33; k = (k * 0xFF51AFD7ED558CCD) & M64
        k ^= k >> 33; k = (k * 0xC4CEB9FE1A85EC53) & M64
        return k ^ (k >> 33)

    def mk1(k):
        return (rotl((k * c1) & M64, 31) * c2) & M64

    def mk2(k):
        return (rotl((k * c2) & M64, 33) * c1) & M64

    h1 = h2 = seed
    n16 = len(data) // 16 * 16
    for i in range(0, n16, 16):
        k1 = int.from_bytes(data[i:i + 8], "little")
        k2 = int.from_bytes(data[i + 8:i + 16], "little")
        h1 ^= mk1(k1)
        h1 = ((rotl(h1, 27) + h2) * 5 + 0x52DCE729) & M64
        h2 ^= mk2(k2)
        h2 = ((rotl(h2, 31) + h1) * 5 + 0x38495AB5) & M64
    tail = data[n16:]
    if tail:
        buf = tail + bytes(16 - len(tail))
        if len(tail) > 8:
            h2 ^= mk2(int.from_bytes(buf[8:], "little"))
        h1 ^= mk1(int.from_bytes(buf[:8], "little"))
    h1 ^= len(data); h2 ^= len(data)
    h1 = (h1 + h2) & M64; h2 = (h2 + h1) & M64
    h1 = fmix(h1); h2 = fmix(h2)
    h1 = (h1 + h2) & M64; h2 = (h2 + h1) & M64
    return h1, h2


def digest(hash_id, seed, key_hi, item):
    """(h1, h2) of an item under the header's hash id and seed (FORMAT.md, Hash functions)."""
    if hash_id == 1:
        h = xxhash.xxh3_64_intdigest(item, seed=seed)
        return h, remix(h)
    if hash_id == 2:
        h = xxhash.xxh3_128_intdigest(item, seed=seed)
        return h & M64, h >> 64
    if hash_id == 3:
        h = xxhash.xxh64_intdigest(item, seed=seed)
        return h, remix(h)
    if hash_id == 4:
        a = murmur64a(item, 0xC6A4A7935BD1E995)
        return a, murmur64a(item, a)
    if hash_id == 5:
        h = sip24(seed, key_hi, item)
        return h, remix(h)
    if hash_id == 6:
        return murmur3_x64_128(item, seed & 0xFFFFFFFF)
    raise ValueError(f"unknown hash id {hash_id}")


def fastrange(x, n):
    return (x * n) >> 64


# --- frame -----------------------------------------------------------------------------------------

class Bad(Exception):
    pass


def need(cond, why):
    if not cond:
        raise Bad(why)


class Frame:
    def __init__(self, b):
        need(len(b) >= 4 and b[:4] == b"SIFT", "bad magic")
        need(len(b) >= 32, "truncated header")
        self.version, self.kind, self.hash_id, flags, reserved, plen, self.seed, self.plen_payload = \
            struct.unpack_from("<HHBBHIQQ", b, 4)
        need(self.version == 1, f"unsupported version {self.version}")
        need(1 <= self.hash_id <= 6, f"unknown hash id {self.hash_id}")
        need(flags == 0 and reserved == 0, "reserved header bytes")
        start = 32 + (plen + 7) // 8 * 8
        need(start + self.plen_payload + 4 == len(b), "length mismatch")
        need(not any(b[32 + plen:start]), "padding not zero")
        stored = struct.unpack_from("<I", b, len(b) - 4)[0]
        need(crc32c(b[:-4]) == stored, "CRC32C mismatch")
        self.params = b[32:32 + plen]
        self.payload = b[start:start + self.plen_payload]
        self.crc = stored

    def reader(self, fmt):
        need(struct.calcsize("<" + fmt) == len(self.params), "parameter block length")
        return struct.unpack("<" + fmt, self.params)


def check_fpr(p):
    need(0 < p < 1, "fpr outside (0, 1)")


# --- kinds -----------------------------------------------------------------------------------------

def read_bloom(f):
    m, k, _res, items, cap, fpr = f.reader("QIIQQd")
    need(m >= 1 and 1 <= k <= 64, "bloom m/k")
    check_fpr(fpr)
    words = (m + 63) // 64
    need(len(f.payload) == 8 * words, "bloom payload length")
    bits = int.from_bytes(f.payload, "little")
    need(bits >> m == 0, "bits past the end")

    def contains(h1, h2):
        a, b = h1, h2
        for i in range(k):
            x = fastrange(a, m)
            if not (bits >> x) & 1:
                return False
            a = (a + b) & M64
            b = (b + i) & M64
        return True
    return contains, f"bloom m={m} k={k} items={items} capacity={cap} fpr={fpr}"


SALT = [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31]


def read_split_block(f):
    nbytes, items, cap, fpr = f.reader("QQQd")
    check_fpr(fpr)
    need(nbytes > 0 and nbytes % 32 == 0 and nbytes // 32 <= 1 << 32, "split-block size")
    need(len(f.payload) == nbytes, "split-block payload length")
    blocks = nbytes // 32

    def contains(h1, _h2):
        blk = ((h1 >> 32) * blocks) >> 32
        key = h1 & 0xFFFFFFFF
        for i in range(8):
            word = struct.unpack_from("<I", f.payload, blk * 32 + 4 * i)[0]
            bit = ((key * SALT[i]) & 0xFFFFFFFF) >> 27
            if not (word >> bit) & 1:
                return False
        return True
    return contains, f"split-block blocks={blocks} items={items} capacity={cap} fpr={fpr}"


def read_counting(f):
    m, k, res, items, cap, fpr = f.reader("QIIQQd")
    need(m >= 1 and 1 <= k <= 64 and res == 0, "counting m/k/reserved")
    check_fpr(fpr)
    need(len(f.payload) == 8 * ((m + 15) // 16), "counting payload length")
    counters = int.from_bytes(f.payload, "little")
    need(counters >> (4 * m) == 0, "counters past the end")

    def counter(i):
        return (f.payload[i // 2] >> (4 * (i % 2))) & 0xF

    def contains(h1, h2):
        a, b = h1, h2
        for i in range(k):
            if counter(fastrange(a, m)) == 0:
                return False
            a = (a + b) & M64
            b = (b + i) & M64
        return True
    return contains, f"counting m={m} k={k} items={items} capacity={cap} fpr={fpr}"


def read_scalable(f):
    growth, tightening, fpr, n0, items, count, res = f.reader("dddQQII")
    check_fpr(fpr)
    need(1 <= growth <= 1024 and 0 < tightening < 1, "growth/tightening")
    need(n0 >= 1 and 1 <= count <= 64 and res == 0, "n0/count/reserved")
    rest = f.payload
    for i in range(count):
        need(len(rest) >= 8, "layer length")
        ln = struct.unpack_from("<Q", rest)[0]
        rest = rest[8:]
        need(ln <= len(rest), "layer")
        layer = Frame(rest[:ln])
        rest = rest[ln:]
        need(layer.kind == 2, "a layer is not a blocked bloom file")
        need((layer.hash_id, layer.seed) == (f.hash_id, f.seed), "layer hasher")
        # Kind 2's parameter block is not parsed here (FORMAT.md does not fix its layout yet): the
        # schedule check only looks for the layer's capacity (u64) and FPR (f64) bytes in it.
        cap, p = float(n0), fpr * (1 - tightening)
        for _ in range(i):
            cap *= growth
            p *= tightening
        cap = math.ceil(cap)
        need(struct.pack("<Q", cap) in layer.params and struct.pack("<d", p) in layer.params,
             f"layer {i} does not match the schedule (capacity {cap}, fpr {p!r})")
    need(not rest, "bytes after the last layer")
    return None, f"scalable n0={n0} fpr={fpr} growth={growth} tightening={tightening} layers={count} items={items}"


def mix(h, seed):
    x = (h + seed) & M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def read_xor8(f):
    block, seed, items = f.reader("QQQ")
    need(block <= 0xFFFFFFFF // 3, "xor8 slots")
    need(items <= 3 * block and (block == 0) == (items == 0), "xor8 items")
    need(len(f.payload) == 3 * block, "xor8 payload length")
    fp = f.payload

    def contains(h1, _h2):
        if block == 0:
            return False
        x = mix(h1, seed)
        a = fastrange(x, block)
        b = fastrange(rotl(x, 21), block) + block
        c = fastrange(rotl(x, 42), block) + 2 * block
        return (x ^ (x >> 32)) & 0xFF == fp[a] ^ fp[b] ^ fp[c]
    return contains, f"xor8 block={block} seed={seed:#x} items={items}"


def read_fuse(f, width):
    arity, bits, r1, seglen, segcount, r2, seed, items = f.reader("BBHIIIQQ")
    need(arity in (3, 4) and bits == 8 * width and r1 == 0 and r2 == 0, "fuse arity/bits/reserved")
    if segcount == 0:
        need(seglen == 0 and items == 0, "empty fuse")
        slots = 0
    else:
        need(seglen & (seglen - 1) == 0 and 4 <= seglen <= 1 << 18, "segment length")
        slots = (segcount + arity - 1) * seglen
        need(slots <= 0xFFFFFFFF and items <= slots, "fuse slots/items")
    need(len(f.payload) == slots * width, "fuse payload length")
    fps = [int.from_bytes(f.payload[i * width:(i + 1) * width], "little") for i in range(slots)]
    mask = seglen - 1

    def contains(h1, _h2):
        if slots == 0:
            return False
        x = mix(h1, seed)
        h0 = fastrange(x, segcount * seglen)
        pos = [h0, (h0 + seglen) ^ ((x >> 18) & mask), (h0 + 2 * seglen) ^ (x & mask)]
        if arity == 4:
            y = (x * 0x9E3779B97F4A7C15) & M64
            pos.append((h0 + 3 * seglen) ^ ((y >> 46) & mask))
        v = 0
        for p in pos:
            v ^= fps[p]
        return (x ^ (x >> 32)) & ((1 << (8 * width)) - 1) == v
    return contains, f"binary fuse{8 * width} arity={arity} segment length={seglen} count={segcount} seed={seed:#x} items={items}"


def read_gcs(f):
    p, r1, r2, s, modulus, n, k1, nbits = f.reader("BBHIQQQQ")
    need(r1 == 0 and r2 == 0, "gcs reserved")
    need(p <= 56 and modulus >= 2 and (p + 8 >= 64 or modulus < 1 << (p + 8)), "gcs P/M")
    need(1 <= s <= 65536, "gcs S")
    need(f.hash_id == 5 or k1 == 0, "gcs k1 without siphash")
    need((nbits + 7) // 8 == len(f.payload), "gcs stream length")
    need(n * modulus <= M64, "gcs N*M")
    need(n * (p + 1) <= nbits, "gcs stream too short")
    bits = "".join(f"{b:08b}" for b in f.payload)
    pos, last, values = 0, 0, set()
    for i in range(n):
        q = 0
        while pos < nbits and bits[pos] == "1":
            q += 1
            pos += 1
        pos += 1  # the 0 that ends the unary part
        rem = int(bits[pos:pos + p], 2) if p else 0
        pos += p
        need(pos <= nbits, "gcs stream ends inside an element")
        last += (q << p) | rem
        need(last < n * modulus, "gcs value out of range")
        values.add(last)
    need(nbits - pos < 8 and "1" not in bits[pos:], "gcs padding")
    self_key = k1

    def contains(h1, _h2):
        return n != 0 and fastrange(h1, n * modulus) in values
    contains.key_hi = self_key
    return contains, f"gcs P={p} M={modulus} N={n} S={s} k1={k1:#x} bits={nbits}"


def murmur2_32(key, seed):
    m, M32 = 0x5BD1E995, 0xFFFFFFFF
    h = (seed ^ len(key)) & M32
    n4 = len(key) // 4 * 4
    for i in range(0, n4, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * m) & M32
        k ^= k >> 24
        k = (k * m) & M32
        h = (h * m) & M32
        h ^= k
    tail = key[n4:]
    if tail:
        if len(tail) >= 3:
            h ^= tail[2] << 16
        if len(tail) >= 2:
            h ^= tail[1] << 8
        h ^= tail[0]
        h = (h * m) & M32
    h ^= h >> 13
    h = (h * m) & M32
    return h ^ (h >> 15)


def read_chunks(f):
    """Kinds 32 and 33: the SCANDUMP chunks, checked as FORMAT.md says."""
    (count,) = f.reader("Q")
    pl = f.payload
    need(1 <= count <= len(pl) // 16, "chunk count")
    chunks, at, nxt, data_len = [], 0, 1, 0
    for i in range(count):
        need(len(pl) - at >= 16, "chunk header past the end")
        it, ln = struct.unpack_from("<qQ", pl, at)
        at += 16
        need(ln <= len(pl) - at and ln <= 16 << 20, "chunk length")
        data = pl[at:at + ln]
        at += ln
        if i == 0:
            need(it == 1, "header chunk iterator")
        else:
            need(ln > 0 and it == nxt + ln, "data chunks not contiguous")
            nxt = it
            data_len += ln
        chunks.append((it, data))
    need(at == len(pl), "bytes after the last chunk")
    return chunks, data_len


def read_redisbloom_bf(f):
    chunks, data_len = read_chunks(f)
    h = chunks[0][1]
    need(len(h) >= 20, "bf header")
    size, nfilters, options, growth = struct.unpack_from("<QIII", h)
    need(nfilters >= 1 and len(h) == 20 + 53 * nfilters and options & ~15 == 0, "bf header shape")
    links, total = [], 0
    for i in range(nfilters):
        nbytes, bits, lsize, error, bpe, hashes, entries, n2 = struct.unpack_from("<QQQddIQB", h, 20 + 53 * i)
        hk = 0.693147180559945 * bpe
        need(0 < error < 1 and n2 <= 63 and (n2 == 0 or bits >= 1 << n2) and bits != 0
             and bits == nbytes * 8 and math.isfinite(hk) and math.ceil(hk) == hashes, f"bf link {i}")
        links.append([hashes, (1 << n2) if n2 else bits, nbytes])
        total += lsize
    need(total == size and sum(l[2] for l in links) == data_len, "bf sizes")
    stream = b"".join(d for _, d in chunks[1:])
    off = 0
    for l in links:
        l.append(stream[off:off + l[2]])
        off += l[2]

    def contains(item):
        if options & 4:
            a = murmur64a(item, 0xC6A4A7935BD1E995)
            b = murmur64a(item, a)
        else:
            a = murmur2_32(item, 0x9747B28C)
            b = murmur2_32(item, a)
        for hashes, modulus, _, bitmap in links:
            x, ok = a, True
            for _ in range(hashes):
                bit = x % modulus
                if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                    ok = False
                    break
                x = (x + b) & M64
            if ok:
                return True
        return False
    contains.raw = True
    return contains, f"redisbloom-bf size={size} links={nfilters} options={options} growth={growth}"


def read_redisbloom_cf(f):
    chunks, data_len = read_chunks(f)
    h = chunks[0][1]
    need(len(h) == 38, "cf header length")
    items, nb0, deletes, nfilters, bs, maxit, exp = struct.unpack("<QQQQHHH", h)
    nfilters &= 0xFFFF
    need(1 <= bs <= 255 and nfilters >= 1 and maxit >= 1 and exp <= 32768
         and not (exp == 0 and nfilters > 1), "cf header")
    need(nb0 != 0 and nb0 <= (1 << 56) - 1 and nb0 & (nb0 - 1) == 0, "cf numBuckets")
    nbs = [int(nb0 * float(exp) ** i) for i in range(nfilters)]
    need(all(nb >= 1 for nb in nbs) and sum(nb * bs for nb in nbs) == data_len, "cf sizes")
    stream = b"".join(d for _, d in chunks[1:])
    subs, off = [], 0
    for nb in nbs:
        subs.append((nb, stream[off:off + nb * bs]))
        off += nb * bs

    def contains(item):
        h1 = murmur64a(item, 0)
        fp = h1 % 255 + 1
        h2 = h1 ^ (fp * 0x5BD1E995)
        for nb, slots in subs:
            for hh in (h1, h2):
                o = ((hh % nb) * bs) & 0xFFFFFFFF
                if fp in slots[o:o + bs]:
                    return True
        return False
    contains.raw = True
    return contains, f"redisbloom-cf items={items} buckets={nb0} filters={nfilters} bucket size={bs} expansion={exp}"


def read_guava(f):
    words, k, strategy = f.reader("QII")
    need((f.hash_id, f.seed) == (6, 0), "guava hash")
    pl = f.payload
    need(len(pl) >= 6 and pl[0] in (0, 1) and pl[1] != 0, "guava stream header")
    n = struct.unpack_from(">i", pl, 2)[0]
    need(n > 0 and len(pl) == 6 + 8 * n, "guava stream length")
    need((words, k, strategy) == (n, pl[1], pl[0]), "guava parameters disagree with the stream")
    ws = struct.unpack_from(f">{n}Q", pl, 6)
    m = 64 * n

    def contains(item):
        h1, h2 = murmur3_x64_128(item, 0)
        if strategy == 1:
            c = h1
            for _ in range(k):
                j = (c & 0x7FFFFFFFFFFFFFFF) % m
                if not (ws[j >> 6] >> (j & 63)) & 1:
                    return False
                c = (c + h2) & M64
            return True
        a = h1 & 0xFFFFFFFF
        b = (h1 >> 32) & 0xFFFFFFFF
        for i in range(1, k + 1):
            c = (a + i * b) & 0xFFFFFFFF
            if c >= 1 << 31:
                c = ~c & 0xFFFFFFFF
            j = c % m
            if not (ws[j >> 6] >> (j & 63)) & 1:
                return False
        return True
    contains.raw = True
    return contains, f"guava words={n} k={k} strategy={strategy}"


READERS = {1: read_bloom, 3: read_split_block, 4: read_counting, 5: read_scalable, 18: read_xor8,
           19: lambda f: read_fuse(f, 1), 20: lambda f: read_fuse(f, 2), 21: read_gcs,
           32: read_redisbloom_bf, 33: read_redisbloom_cf, 34: read_guava}


def check_file(path, verbose, queries=None):
    data = open(path, "rb").read()
    f = Frame(data)
    if f.kind not in READERS:
        print(f"{path}: kind {f.kind} not read by this script (skipped)")
        return True
    contains, what = READERS[f.kind](f)
    if verbose:
        print(f"{path}: kind {f.kind}, hash id {f.hash_id}, seed {f.seed:#x}, CRC {f.crc:#010x} ok; {what}")
    txt = queries or os.path.splitext(path)[0] + ".txt"
    if contains is None or not os.path.exists(txt):
        return True
    key_hi = getattr(contains, "key_hi", 0)
    ok, n = True, 0
    for line in open(txt):
        if line.startswith("#") or not line.strip():
            continue
        key, want = line.split()
        want = want in ("1", "true")
        if getattr(contains, "raw", False):
            got = contains(key.encode())
        else:
            got = contains(*digest(f.hash_id, f.seed, key_hi, key.encode()))
        n += 1
        if got != want:
            print(f"{path}: {key}: got {int(got)}, {txt} says {int(want)}")
            ok = False
    if verbose:
        print(f"  {n} queries {'agree' if ok else 'DISAGREE'} with {os.path.basename(txt)}")
    return ok


def self_test():
    assert crc32c(b"123456789") == 0xE3069283
    assert murmur64a(b"", 0) == 0
    k0, k1 = 0x0706050403020100, 0x0F0E0D0C0B0A0908
    assert sip24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5
    h1, h2 = murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0)
    assert (h1.to_bytes(8, "little") + h2.to_bytes(8, "little")).hex() == "6c1b07bc7bbc4be347939ac4a93c437a"
    assert xxhash.xxh3_64_intdigest(b"", seed=0) == 0x2D06800538D394C2


def main(argv):
    self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    queries = None
    if len(argv) == 3 and argv[1] == "--queries":
        argv, queries = argv[:1], argv[2]
    if argv:
        paths = argv
    else:
        d = os.path.join(here, "..", "crates", "sift", "tests", "fixtures")
        paths = sorted(os.path.normpath(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".sift"))
    ok = True
    for p in paths:
        try:
            ok &= check_file(p, True, queries)
        except (Bad, struct.error, IndexError, ValueError) as e:
            print(f"{p}: refused: {e}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
