"""redis-py's Bloom and cuckoo helpers (r.bf(), r.cf()) against sift-server.

Run by `tests/bloom_commands.rs` as `python3 bloom_client.py <port> <protocol 2|3>`; prints
`redis-py OK` on success and exits non-zero (with a traceback) on the first failed check.
"""

import sys

import redis


def info_field(info, attr, name):
    """BF.INFO / CF.INFO: redis-py builds an object in RESP2 and may hand back a dict in RESP3."""
    if isinstance(info, dict):
        return info[name if name in info else name.encode()]
    return getattr(info, attr)


def dump(client_part, key):
    chunks = []
    it = 0
    while True:
        it, data = client_part.scandump(key, it)
        if it == 0:
            return chunks
        chunks.append((it, data))


def lua_scripts(r, cf):
    # Lua scripts, the seed-002 way: an element's k writes in one script (atomic), its k reads
    # in another; register_script runs EVALSHA and loads the script on NOSCRIPT.
    r.script_flush()
    add = r.register_script(
        "local n = 0\n"
        "for i = 1, #ARGV do n = n + redis.call('BF.ADD', KEYS[1], ARGV[i]) end\n"
        "return n"
    )
    check = r.register_script(
        "for i = 1, #ARGV do\n"
        "  if redis.call('BF.EXISTS', KEYS[1], ARGV[i]) == 0 then return 0 end\n"
        "end\n"
        "return 1"
    )
    assert add(keys=["lua-bf"], args=["x", "y", "z"]) == 3
    assert check(keys=["lua-bf"], args=["x", "y", "z"]) == 1
    assert check(keys=["lua-bf"], args=["x", "never"]) == 0
    assert r.script_exists(add.sha, check.sha, "0" * 40) == [True, True, False]
    assert r.eval("return {KEYS[1], ARGV[1], 3.7, {ok='S'}}", 1, "k", "a") in (
        [b"k", b"a", 3, b"S"],
        [b"k", b"a", 3, "S"],
    )
    sha = r.script_load("return redis.call('CF.ADD', KEYS[1], ARGV[1])")
    assert r.evalsha(sha, 1, "lua-cf", "item") == 1
    assert bool(cf.exists("lua-cf", "item"))
    try:
        r.evalsha("0" * 40, 0)
        raise AssertionError("EVALSHA of an unknown script ran")
    except redis.exceptions.NoScriptError:
        pass
    try:
        r.eval_ro("return redis.call('BF.ADD', KEYS[1], 'w')", 1, "lua-bf")
        raise AssertionError("EVAL_RO ran a write")
    except redis.ResponseError as e:
        assert "Write commands are not allowed from read-only scripts" in str(e), e
    assert r.eval_ro("return redis.call('BF.EXISTS', KEYS[1], 'x')", 1, "lua-bf") == 1
    r.script_flush()
    assert add(keys=["lua-bf"], args=["w"]) == 1
    # Seed 002 as written: the k SETBITs of an element in one script, the k GETBITs in another.
    setbits = r.register_script("for i = 1, #ARGV do redis.call('SETBIT', KEYS[1], ARGV[i], 1) end")
    getbits = r.register_script(
        "for i = 1, #ARGV do\n"
        "  if redis.call('GETBIT', KEYS[1], ARGV[i]) == 0 then return false end\n"
        "end\n"
        "return true"
    )
    positions = [17, 4711, 90210]
    assert getbits(keys=["lua-bm"], args=positions) is None
    setbits(keys=["lua-bm"], args=positions)
    assert getbits(keys=["lua-bm"], args=positions) == 1
    assert getbits(keys=["lua-bm"], args=[17, 18]) is None
    assert r.bitcount("lua-bm") == 3


def main():
    port, proto = int(sys.argv[1]), int(sys.argv[2])
    # "no-lua": the server has no scripting (sift-server without its `lua` feature).
    scripting = sys.argv[3:4] != ["no-lua"]
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    r.flushall()
    bf, cf = r.bf(), r.cf()

    # Bloom.
    assert bf.reserve("bf", 0.01, 1000)
    assert bf.add("bf", "a") in (1, True)
    assert bf.add("bf", "a") in (0, False)
    assert [bool(x) for x in bf.madd("bf", "a", "b", "c")] == [False, True, True]
    assert [bool(x) for x in bf.mexists("bf", "a", "b", "zz")] == [True, True, False]
    assert bool(bf.exists("bf", "c")) and not bool(bf.exists("missing", "c"))
    assert bf.card("bf") == 3
    info = bf.info("bf")
    assert info_field(info, "capacity", "Capacity") == 1000
    assert info_field(info, "insertedNum", "Number of items inserted") == 3
    assert info_field(info, "expansionRate", "Expansion rate") == 2
    res = bf.insert("ins", ["x", "y"], capacity=2, error=0.001, noScale=True)
    assert [bool(x) for x in res] == [True, True], res
    info = bf.info("ins")
    assert info_field(info, "expansionRate", "Expansion rate") is None
    try:
        bf.add("ins", "z")
        raise AssertionError("a full non-scaling filter accepted an item")
    except redis.ResponseError as e:
        assert "non scaling filter is full" in str(e), e
    try:
        bf.insert("nope", ["x"], noCreate=True)
        raise AssertionError("NOCREATE created a filter")
    except redis.ResponseError as e:
        assert "not found" in str(e), e
    chunks = dump(bf, "bf")
    assert len(chunks) == 2, chunks
    for it, data in chunks:
        assert bf.loadchunk("bf2", it, data) in (b"OK", "OK", True)
    assert [bool(x) for x in bf.mexists("bf2", "a", "b", "c")] == [True, True, True]
    assert dump(bf, "bf2") == chunks

    # Cuckoo.
    assert cf.reserve("cf", 1000)
    assert bool(cf.add("cf", "a"))
    assert not bool(cf.addnx("cf", "a"))
    assert [bool(x) for x in cf.insert("cf", ["b", "c"])] == [True, True]
    assert cf.insertnx("cf", ["b", "d"]) == [0, 1]
    assert cf.count("cf", "a") == 1
    assert [bool(x) for x in cf.mexists("cf", "a", "zz")] == [True, False]
    assert bool(cf.delete("cf", "a")) and not bool(cf.exists("cf", "a"))
    info = cf.info("cf")
    assert info_field(info, "insertedNum", "Number of items inserted") == 3
    assert info_field(info, "deletedNum", "Number of items deleted") == 1
    assert info_field(info, "bucketNum", "Number of buckets") == 512
    assert info_field(info, "size", "Size") == 1080
    chunks = dump(cf, "cf")
    assert len(chunks) == 2, chunks
    for it, data in chunks:
        assert cf.loadchunk("cf2", it, data) in (b"OK", "OK", True)
    assert [bool(x) for x in cf.mexists("cf2", "b", "c", "d")] == [True, True, True]
    assert cf.reserve("full", 4, expansion=0)
    res = cf.insert("full", ["1", "2", "3", "4", "5"])
    assert res[-1] in (-1, False), res
    try:
        cf.add("full", "6")
        raise AssertionError("a full filter accepted an item")
    except redis.ResponseError as e:
        assert "Filter is full" in str(e), e
    assert r.type("cf") in (b"MBbloomCF", "MBbloomCF")

    # A pipeline (MULTI/EXEC by default in redis-py).
    pipe = r.pipeline()
    pipe.bf().add("bf", "piped")
    pipe.cf().count("cf2", "b")
    out = pipe.execute()
    assert bool(out[0]) and out[1] == 1, out
    # The seeds' bitmap Bloom filter: SETBIT pipelined (not a transaction), GETBIT, BITCOUNT.
    pipe = r.pipeline(transaction=False)
    for pos in (3, 17, 17, 1000):
        pipe.setbit("bm", pos, 1)
    assert pipe.execute() == [0, 0, 1, 0]
    pipe = r.pipeline(transaction=False)
    for pos in (3, 4, 17, 1000, 5000):
        pipe.getbit("bm", pos)
    assert pipe.execute() == [1, 0, 1, 1, 0]
    assert r.bitcount("bm") == 3
    assert r.bitcount("bm", 0, 0) == 1
    assert r.bitcount("bm", 3, 17, "BIT") == 2
    assert r.bitpos("bm", 1) == 3
    assert r.bitpos("bm", 0) == 0
    assert r.bitpos("bm", 1, 1) == 17
    assert r.strlen("bm") == 126
    assert r.setbit("bm", 3, 0) == 1 and r.getbit("bm", 3) == 0
    assert r.type("bm") in (b"string", "string")
    try:
        r.setbit("bf", 0, 1)
        raise AssertionError("SETBIT on a Bloom filter")
    except redis.ResponseError as e:
        assert str(e).startswith("WRONGTYPE"), e
    try:
        r.setbit("bm", 4294967296, 1)
        raise AssertionError("an offset of 2^32")
    except redis.ResponseError as e:
        assert "bit offset is not an integer or out of range" in str(e), e
    assert r.delete("bm") == 1 and r.getbit("bm", 17) == 0
    if scripting:
        lua_scripts(r, cf)
    else:
        # sift-server built without its `lua` feature: a clear error, nothing run.
        try:
            r.eval("return redis.call('SET', KEYS[1], 'x')", 1, "lua-k")
            raise AssertionError("EVAL ran in a server without Lua")
        except redis.ResponseError as e:
            assert "scripting is not compiled in" in str(e), e
        assert r.exists("lua-k") == 0

    # WATCH: redis-py's optimistic transactions. r.transaction() retries `bump` until its EXEC
    # succeeds; a change by another client after the WATCH makes the first EXEC fail.
    other = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    r.delete("py-watch")
    seen = []

    def bump(pipe):
        n = pipe.bitcount("py-watch")
        if not seen:
            other.setbit("py-watch", 1000, 1)
        seen.append(n)
        pipe.multi()
        pipe.setbit("py-watch", n, 1)

    r.transaction(bump, "py-watch")
    assert seen == [0, 1], seen
    assert r.bitcount("py-watch") == 2 and r.getbit("py-watch", 1) == 1
    # pipeline.watch() by hand: a BF.ADD by another client fails the EXEC with WatchError, and
    # nothing queued ran; unwatched, the same transaction runs.
    with r.pipeline() as pipe:
        pipe.watch("py-watch-bf")
        other.bf().add("py-watch-bf", "x")
        pipe.multi()
        pipe.set("py-watch-flag", "1")
        try:
            pipe.execute()
            raise AssertionError("EXEC ran although a watched key changed")
        except redis.WatchError:
            pass
    assert r.exists("py-watch-flag") == 0
    with r.pipeline() as pipe:
        pipe.watch("py-watch-bf")
        pipe.multi()
        pipe.set("py-watch-flag", "1")
        assert pipe.execute() == [True]
    other.close()
    print("redis-py OK (RESP%d)" % proto)


if __name__ == "__main__":
    main()
