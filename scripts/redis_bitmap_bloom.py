#!/usr/bin/env python3
"""Read and write sift's Bloom filters kept in plain Redis strings (layout 1), from Python.

Written from docs/REDIS_LAYOUT.md alone, to show that another language can share a filter with
the Rust crate `sift-client` (crates/sift-client/tests/interop.rs runs it against live filters
and compares the answers). Needs redis-py and the `xxhash` package (pip install redis xxhash).

Library use:

    import redis, redis_bitmap_bloom as rbb
    f = rbb.BitmapBloom.open(redis.Redis(), "users")
    f.add_many([b"alice", b"bob"])          # -> [True, True]: new
    f.contains_many([b"alice", b"carol"])   # -> [True, False]

Command line (items as arguments, or one per line on stdin with -):

    redis_bitmap_bloom.py --url redis://127.0.0.1:6379/0 users add alice bob
    redis_bitmap_bloom.py users contains alice carol      # prints 1 or 0 per item
    redis_bitmap_bloom.py users create --blocks 1000 --k 7
    redis_bitmap_bloom.py users info
"""

import argparse
import json
import math
import secrets
import sys
import time

import redis
import xxhash

MASK64 = (1 << 64) - 1
POINTER_PREFIX = b"sift-bitmap-bloom:"
LAYOUT = 1


class LayoutError(Exception):
    """The keys do not hold a filter this script understands."""


# --- §3: hashing ---------------------------------------------------------------------------


def remix(h):
    x = (((h << 32) | (h >> 32)) & MASK64) * 0x9E3779B97F4A7C15 & MASK64
    return x ^ (x >> 29)


def fmix64(x):
    x ^= x >> 33
    x = x * 0xFF51AFD7ED558CCD & MASK64
    x ^= x >> 33
    x = x * 0xC4CEB9FE1A85EC53 & MASK64
    x ^= x >> 33
    return x


def digest(hash_name, seed, item):
    if hash_name == "xxh3-64":
        h1 = xxhash.xxh3_64_intdigest(item, seed=seed)
        return h1, remix(h1)
    if hash_name == "xxh64":
        h1 = xxhash.xxh64_intdigest(item, seed=seed)
        return h1, remix(h1)
    if hash_name == "xxh3-128":
        h = xxhash.xxh3_128_intdigest(item, seed=seed)
        return h & MASK64, h >> 64
    raise LayoutError(f"hash {hash_name} is not implemented in this script")


# --- §4: where the bits are ----------------------------------------------------------------


def item_bits(h2, k):
    """(word, bit) pairs of an item inside its block."""
    bits = set()
    s = h2 >> 61
    for j in range(min(k, 8)):
        w = (s + j) % 8
        bits.add((w, (h2 >> (6 * w)) & 63))
    if k > 8:
        h3 = fmix64(h2)
        s3 = h3 >> 61
        for j in range(k - 8):
            w = (s3 + j) % 8
            bits.add((w, (h3 >> (6 * w)) & 63))
    return sorted(bits)


def redis_bit(w, j):
    """Offset inside the block, in Redis's bit order."""
    return 8 * (8 * w + j // 8) + (7 - j % 8)


class Generation:
    def __init__(self, obj, key_bytes):
        self.id = obj["id"]
        self.blocks = obj["blocks"]
        self.k = obj["k"]
        self.capacity = obj["capacity"]
        self.fpr = obj["fpr"]
        self.retire_ms = obj["retire_ms"]
        self.per_key = key_bytes // 64

    def key_len(self, i):
        return 64 * min(self.per_key, self.blocks - i * self.per_key)

    def keys(self):
        return (self.blocks + self.per_key - 1) // self.per_key

    def spot(self, h1, h2):
        b = (h1 * self.blocks) >> 64
        i, c = divmod(b, self.per_key)
        return i, c, item_bits(h2, self.k)


# --- §1, §2: keys and records --------------------------------------------------------------


def record_key(name, instance, rev):
    return b"{" + name + b"}:" + instance + b":" + str(rev).encode()


def data_key(name, instance, gen, i):
    return b"{" + name + b":" + instance + b":" + str(gen).encode() + b":" + str(i).encode() + b"}"


def parse_record(raw, instance, rev):
    try:
        rec = json.loads(raw)
    except ValueError as e:
        raise LayoutError(f"record {rev} is not JSON: {e}")
    if rec.get("format") != "sift-bitmap-bloom":
        raise LayoutError("not a sift-bitmap-bloom record")
    if rec.get("layout") != LAYOUT:
        raise LayoutError(f"layout {rec.get('layout')}: this script reads layout {LAYOUT}")
    if rec.get("instance", "").encode() != instance or rec.get("rev") != rev:
        raise LayoutError("the record names another instance or revision")
    return rec


class BitmapBloom:
    def __init__(self, r, name, pointer, record, clock=None):
        self.r = r
        self.name = name
        self.pointer = pointer
        self.rec = record
        self.instance = record["instance"].encode()
        self.clock = clock or (lambda: int(time.time() * 1000))

    # Opening and creating.

    @staticmethod
    def read_pointer(r, name):
        v = r.get(name)
        if v is None:
            raise LayoutError(f"no filter named {name!r}")
        if not v.startswith(POINTER_PREFIX):
            raise LayoutError(f"{name!r} is not a filter pointer")
        version, _, instance = v[len(POINTER_PREFIX):].partition(b":")
        if version != str(LAYOUT).encode():
            raise LayoutError(f"layout version {version!r}: upgrade")
        return v, instance

    @classmethod
    def open(cls, r, name, clock=None):
        name = name.encode() if isinstance(name, str) else name
        pointer, instance = cls.read_pointer(r, name)
        rec, rev = None, 0
        while True:
            raw = r.get(record_key(name, instance, rev))
            if raw is None:
                break
            rec = parse_record(raw, instance, rev)
            rev += 1
        if rec is None:
            raise LayoutError("the pointer names an instance without record 0")
        return cls(r, name, pointer, rec, clock)

    @classmethod
    def create(cls, r, name, blocks, k, capacity, fpr, key_bytes=4194240, seed=0, clock=None):
        """A static filter with one generation (xxh3-64)."""
        name = name.encode() if isinstance(name, str) else name
        instance = secrets.token_hex(8).encode()
        rec = {
            "format": "sift-bitmap-bloom", "layout": LAYOUT, "instance": instance.decode(), "rev": 0,
            "hash": "xxh3-64", "seed": str(seed), "key_bytes": key_bytes, "window_ms": 0, "keep": 1,
            "gens": [{"id": 0, "blocks": blocks, "k": k, "capacity": capacity, "fpr": fpr, "retire_ms": 0}],
        }
        gen = Generation(rec["gens"][0], key_bytes)
        keys = [data_key(name, instance, 0, i) for i in range(gen.keys())]
        p = r.pipeline(transaction=False)
        for i, key in enumerate(keys):
            p.execute_command("BITFIELD", key, "INCRBY", "u1", 8 * gen.key_len(i) - 1, 0)
        p.execute()
        rkey = record_key(name, instance, 0)
        if not r.set(rkey, json.dumps(rec, separators=(",", ":")), nx=True):
            raise LayoutError("record 0 exists")
        pointer = POINTER_PREFIX + str(LAYOUT).encode() + b":" + instance
        if not r.set(name, pointer, nx=True):
            r.delete(rkey, *keys)
            raise LayoutError(f"a filter named {name!r} exists")
        return cls(r, name, pointer, rec, clock)

    # §5: which generations.

    def generations(self):
        return [Generation(g, self.rec["key_bytes"]) for g in self.rec["gens"]]

    def shape_of_period(self, p):
        gens = self.generations()
        best = gens[0]
        for g in gens:
            if g.id <= p:
                best = g
        return best

    def write_target(self, now):
        w = self.rec["window_ms"]
        if w == 0:
            g = self.generations()[-1]
            return g.id, g
        p = now // w
        return p, self.shape_of_period(p)

    def read_targets(self, now):
        w = self.rec["window_ms"]
        if w == 0:
            gens = self.generations()[::-1]
            return [(g.id, g) for n, g in enumerate(gens) if n == 0 or g.retire_ms == 0 or g.retire_ms > now]
        p = now // w
        return [(q, self.shape_of_period(q)) for q in range(p, max(p - self.rec["keep"], -1), -1)]

    # §6: operations. Each round trip also checks that the metadata is current (§2).

    def _check(self, pipe):
        pipe.get(self.name)
        pipe.exists(record_key(self.name, self.instance, self.rec["rev"] + 1))

    def _current(self, replies):
        pointer, newer = replies
        if pointer != self.pointer:
            raise LayoutError("the filter was deleted or replaced")
        if newer:
            fresh = BitmapBloom.open(self.r, self.name, self.clock)
            self.rec = fresh.rec
            return False
        return True

    def _digests(self, items):
        h, seed = self.rec["hash"], int(self.rec["seed"])
        return [digest(h, seed, x.encode() if isinstance(x, str) else x) for x in items]

    def add_many(self, items):
        digests = self._digests(items)
        while True:
            now = self.clock()
            gid, gen = self.write_target(now)
            reads = [t for t in self.read_targets(now) if t[0] != gid]
            pipe = self.r.pipeline(transaction=False)
            expire = None
            if self.rec["window_ms"]:
                expire = (gid + self.rec["keep"]) * self.rec["window_ms"] + 60_000
            for h1, h2 in digests:
                i, c, bits = gen.spot(h1, h2)
                key = data_key(self.name, self.instance, gid, i)
                args = ["BITFIELD", key, "INCRBY", "u1", 8 * gen.key_len(i) - 1, 0]
                for w, j in bits:
                    args += ["SET", "u1", 512 * c + redis_bit(w, j), 1]
                pipe.execute_command(*args)
                if expire is not None:
                    pipe.execute_command("PEXPIREAT", key, expire)
                for rid, rgen in reads:
                    ri, rc, _ = rgen.spot(h1, h2)
                    pipe.getrange(data_key(self.name, self.instance, rid, ri), 64 * rc, 64 * rc + 63)
            self._check(pipe)
            out = pipe.execute()
            if not self._current(out[-2:]):
                continue
            answers, at = [], 0
            for h1, h2 in digests:
                olds = out[at][1:]
                at += 2 if expire is not None else 1
                new = any(v == 0 for v in olds)
                for rid, rgen in reads:
                    if self._all_set(out[at], rgen.spot(h1, h2)[2]):
                        new = False
                    at += 1
                answers.append(new)
            return answers

    @staticmethod
    def _all_set(block, bits):
        for w, j in bits:
            byte = 8 * w + j // 8
            if byte >= len(block) or not (block[byte] >> (j % 8)) & 1:
                return False
        return True

    def contains_many(self, items):
        digests = self._digests(items)
        while True:
            targets = self.read_targets(self.clock())
            pipe = self.r.pipeline(transaction=False)
            for h1, h2 in digests:
                for gid, gen in targets:
                    i, c, _ = gen.spot(h1, h2)
                    pipe.getrange(data_key(self.name, self.instance, gid, i), 64 * c, 64 * c + 63)
            self._check(pipe)
            out = pipe.execute()
            if not self._current(out[-2:]):
                continue
            answers, at = [], 0
            for h1, h2 in digests:
                found = False
                for gid, gen in targets:
                    found = found or self._all_set(out[at], gen.spot(h1, h2)[2])
                    at += 1
                answers.append(found)
            return answers

    def fill(self):
        """(bits set, bits, estimated items) per generation read."""
        out = []
        for gid, gen in self.read_targets(self.clock()):
            set_bits = sum(self.r.bitcount(data_key(self.name, self.instance, gid, i)) for i in range(gen.keys()))
            m = 512 * gen.blocks
            k = gen.k if gen.k <= 8 else 8 + (gen.k - 8) * 63 / 64
            n = -(m / k) * math.log(1 - set_bits / m) if set_bits < m else float("inf")
            out.append((set_bits, m, n))
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("name")
    ap.add_argument("op", choices=["add", "contains", "create", "info"])
    ap.add_argument("items", nargs="*")
    ap.add_argument("--blocks", type=int)
    ap.add_argument("--k", type=int, default=7)
    ap.add_argument("--capacity", type=int, default=1)
    ap.add_argument("--fpr", type=float, default=0.01)
    ap.add_argument("--key-bytes", type=int, default=4194240)
    args = ap.parse_args()
    r = redis.Redis.from_url(args.url)
    items = args.items
    if items == ["-"]:
        items = [line.rstrip(b"\n") for line in sys.stdin.buffer]
    else:
        items = [x.encode() for x in items]
    try:
        if args.op == "create":
            BitmapBloom.create(r, args.name, args.blocks, args.k, args.capacity, args.fpr, args.key_bytes)
            return 0
        f = BitmapBloom.open(r, args.name)
        if args.op == "info":
            print(json.dumps(f.rec))
            for set_bits, m, n in f.fill():
                print(f"bits set {set_bits} of {m}, about {n:.0f} items")
        else:
            answers = f.add_many(items) if args.op == "add" else f.contains_many(items)
            sys.stdout.write("".join("1\n" if a else "0\n" for a in answers))
    except LayoutError as e:
        print(f"redis_bitmap_bloom: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
