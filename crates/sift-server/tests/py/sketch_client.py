"""redis-py's Count-Min Sketch, Top-K and t-digest helpers (r.cms(), r.topk(), r.tdigest()).

Run by the sketch suite (`tests/suite/sketches.rs`) against sift-server and redis-server with the
module, as `python3 sketch_client.py <port> <protocol 2|3>`; prints `redis-py sketches OK` on
success and exits non-zero (with a traceback) on the first failed check. The expected numbers are
the spec's worked examples (redisbloom-sketches.md §7.7) and exact counts of tables wide enough
that no two items collide.
"""

import math
import sys

import redis


def field(info, attr, name):
    """INFO replies: redis-py builds an object in RESP2 and may hand back a dict in RESP3."""
    if isinstance(info, dict):
        for k in (name, name.encode(), attr, attr.encode()):
            if k in info:
                return info[k]
        raise KeyError(f"{name} not in {info}")
    return getattr(info, attr)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def main():
    port, proto = int(sys.argv[1]), int(sys.argv[2])
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    r.flushall()
    cms, topk, td = r.cms(), r.topk(), r.tdigest()

    # Count-Min Sketch.
    assert cms.initbydim("c", 2000, 5)
    assert cms.initbyprob("cp", 0.001, 0.01)
    assert cms.incrby("c", ["a", "b", "a"], [3, 4, 1]) == [3, 4, 4]
    assert cms.query("c", "a", "b", "never") == [4, 4, 0]
    info = cms.info("c")
    assert (field(info, "width", "width"), field(info, "depth", "depth"), field(info, "count", "count")) == (2000, 5, 8)
    info = cms.info("cp")
    assert (field(info, "width", "width"), field(info, "depth", "depth")) == (2000, 7), info
    assert cms.initbydim("c2", 2000, 5)
    assert cms.incrby("c2", ["a", "z"], [10, 1]) == [10, 1]
    assert cms.initbydim("dst", 2000, 5)
    assert cms.merge("dst", 2, ["c", "c2"], [1, 2])
    assert cms.query("dst", "a", "b", "z") == [24, 4, 2]
    try:
        cms.incrby("missing", ["a"], [1])
        raise AssertionError("CMS.INCRBY on a missing key")
    except redis.ResponseError as e:
        assert str(e) == "CMS: key does not exist", e

    # Top-K: a table wide enough that the three items never collide, decay 1.
    assert topk.reserve("t", 2, 1000, 4, 1)
    # k = 2: z finds the heap full and replaces its smallest, y.
    assert [text(v) for v in topk.add("t", "x", "y", "x", "z")] == [None, None, None, "y"]
    assert topk.incrby("t", ["x", "z"], [5, 2]) == [None, None]
    assert [bool(v) for v in topk.query("t", "x", "y", "z")] == [True, False, True]
    assert r.execute_command("TOPK.COUNT", "t", "x", "y", "z") == [7, 1, 3]
    assert [text(v) for v in topk.list("t")] == ["x", "z"]
    assert [text(v) for v in topk.list("t", withcount=True)] == ["x", 7, "z", 3]
    info = topk.info("t")
    assert (field(info, "k", "k"), field(info, "width", "width"), field(info, "depth", "depth")) == (2, 1000, 4)
    assert float(field(info, "decay", "decay")) == 1.0

    # t-digest: the worked example of spec §7.7 (compression 250, values 1..10).
    assert td.create("d", 250)
    assert td.add("d", list(range(1, 11)))
    assert td.min("d") == 1.0 and td.max("d") == 10.0
    assert [float(v) for v in td.quantile("d", 0, 0.5, 1)] == [1.0, 6.0, 10.0], td.quantile("d", 0, 0.5, 1)
    assert [float(v) for v in td.cdf("d", 1, 1.5, 5)] == [0.05, 0.1, 0.45]
    assert td.rank("d", 2.5) == [2] and td.revrank("d", 2.5) == [8]
    assert [float(v) for v in td.byrank("d", *range(10))] == [float(i) for i in range(1, 11)]
    assert [float(v) for v in td.byrevrank("d", 0)] == [10.0]
    assert float(td.trimmed_mean("d", 0.1, 0.9)) == 5.5
    info = td.info("d")
    assert field(info, "compression", "Compression") == 250
    assert field(info, "merged_weight", "Merged weight") + field(info, "unmerged_weight", "Unmerged weight") == 10
    assert field(info, "memory_usage", "Memory usage") == 80 + 16 * (6 * 250 + 10)
    assert td.create("e", 100)
    assert td.add("e", [1.5, 3.5])
    assert td.merge("m", 2, "d", "e", compression=100)
    assert td.max("m") == 10.0 and td.min("m") == 1.0
    assert td.merge("m", 1, "e", override=True)
    assert [float(v) for v in td.quantile("m", 0.49, 0.5)] == [1.5, 3.5]
    assert td.reset("d")
    assert math.isnan(float(td.min("d")))
    print("redis-py sketches OK")


if __name__ == "__main__":
    main()
