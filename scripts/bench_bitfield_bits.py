#!/usr/bin/env python3
"""What one bit costs a redis-server when a client sets bits without a module.

sift-client's plain-mode add is `BITFIELD key SET u1 <offset> 1 ...`, one `SET u1` per bit of
the item (its old value says whether the item was new). This measures the server CPU time of
that, per bit and per item, against seed 003's one `SETBIT` per bit, on one redis-server started
here (no persistence): the floor that per-bit work puts under any plain-command add.

Variants, each setting random bits of one 12 MB string (past the caches), pipelined in batches
of 1000 items, 16 items per BITFIELD command:
  bitfield-k  BITFIELD with k SET u1 per item (sift-client's add),
  bitfield-1  BITFIELD with 1 SET u1 per item (the same commands, 1/k of the bits),
  setbit-k    k SETBIT per item (seed 003's add).
The per-bit cost is (bitfield-k - bitfield-1) / (k - 1) per item: what a bit costs once the
command's own work is paid. Server CPU is user + system time from /proc/<pid>/stat.

Usage: scripts/bench_bitfield_bits.py [--items 200000] [--rounds 5] [--k 7]
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import redis

KEY_BITS = 12 * 1024 * 1024 * 8
PER_CMD = 16
BATCH = 1000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat; fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(r, pid, key, items, k, bits_per_item, setbit):
    rng = random.Random(items * 31 + bits_per_item + (1000 if setbit else 0))
    before = cpu_seconds(pid)
    done = 0
    while done < items:
        n = min(BATCH, items - done)
        p = r.pipeline(transaction=False)
        if setbit:
            for _ in range(n):
                for _ in range(k):
                    p.execute_command("SETBIT", key, rng.randrange(KEY_BITS), 1)
        else:
            for start in range(0, n, PER_CMD):
                args = []
                for _ in range(min(PER_CMD, n - start)):
                    # An item's bits share a 512-bit block, as in sift's layout.
                    block = rng.randrange(KEY_BITS // 512) * 512
                    for _ in range(bits_per_item):
                        args += ["SET", "u1", block + rng.randrange(512), 1]
                p.execute_command("BITFIELD", key, *args)
        p.execute()
        done += n
    return (cpu_seconds(pid) - before) / items * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--items", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=7)
    a = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        srv = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", d],
            stdout=subprocess.DEVNULL,
        )
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            variants = [
                (f"bitfield-{a.k}", "bf", a.k, a.k, False),
                ("bitfield-1", "b1", a.k, 1, False),
                (f"setbit-{a.k}", "sb", a.k, a.k, True),
            ]
            for _, key, *_ in variants:
                r.setbit(key, KEY_BITS - 1, 0)
            results = {v[0]: [] for v in variants}
            for _ in range(a.rounds):
                for name, key, k, bits, setbit in variants:
                    results[name].append(run(r, srv.pid, key, a.items, k, bits, setbit))
            print(f"server CPU us per item, {a.items} items x {a.rounds} rounds "
                  f"(load average {os.getloadavg()[0]:.1f}):")
            for name, vals in results.items():
                vals.sort()
                print(f"  {name:12} median {vals[len(vals) // 2]:.3f}  range {vals[0]:.3f}-{vals[-1]:.3f}")
            med = {n: sorted(v)[len(v) // 2] for n, v in results.items()}
            per_bit = (med[f"bitfield-{a.k}"] - med["bitfield-1"]) / (a.k - 1)
            floor = a.k * per_bit
            print(f"  per SET u1 bit: {per_bit:.3f} us; {a.k} bits alone: {floor:.3f} us; "
                  f"setbit-{a.k} / bitfield-{a.k}: {med[f'setbit-{a.k}'] / med[f'bitfield-{a.k}']:.2f}x; "
                  f"setbit-{a.k} / ({a.k} bits alone): {med[f'setbit-{a.k}'] / floor:.2f}x")
        finally:
            srv.terminate()
            srv.wait()


if __name__ == "__main__":
    sys.exit(main())
