#!/usr/bin/env python3
"""Time of Redis's Lua libraries in sift-server against redis-server, in the same run.

Builds a 13 MB JSON document (200k objects: an id, a name, a two-string array, a float) on the
redis-server, then times on both servers, alternating, ROUNDS times: one `cjson.decode`, five
`cjson.encode` of the decoded table, five `cmsgpack.pack` of it and five `cmsgpack.unpack`.
Prints the medians (seconds, the decode subtracted from the loops) and sift / redis.

    redis-server --port 7391 --save '' --appendonly no --daemonize yes
    sift-server --port 7392 --dir /tmp/x --busy-reply-threshold 120000 &
    python3 scripts/bench_lua_libs.py 7391 7392 [ROUNDS]
"""
import statistics, sys, time
import redis

ref, sift = int(sys.argv[1]), int(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
make = ("local t = {} for i = 1, 200000 do t[i] = {id = i, name = 'user' .. i, tags = {'a', 'b'}, "
        "score = i * 0.5} end return cjson.encode(t)")
doc = redis.Redis(port=ref).eval(make, 0)
tests = {
    "cjson.decode": "return #cjson.decode(ARGV[1])",
    "cjson.encode x5": "local u = cjson.decode(ARGV[1]) local n = 0 for i = 1, 5 do n = n + #cjson.encode(u) end return n",
    "cmsgpack.pack x5": "local u = cjson.decode(ARGV[1]) local n = 0 for i = 1, 5 do n = n + #cmsgpack.pack(u) end return n",
    "cmsgpack.unpack x5": "local p = cmsgpack.pack(cjson.decode(ARGV[1])) local n = 0 "
                          "for i = 1, 5 do n = n + #cmsgpack.unpack(p) end return n",
}
times = {(name, port): [] for name in tests for port in (ref, sift)}
for _ in range(rounds):
    for name, body in tests.items():
        for port in (ref, sift):
            r = redis.Redis(port=port, socket_timeout=600)
            t = time.perf_counter()
            r.eval(body, 0, doc)
            times[(name, port)].append(time.perf_counter() - t)
med = {k: statistics.median(v) for k, v in times.items()}
print(f"JSON document {len(doc) / 1e6:.1f} MB; medians of {rounds} rounds, seconds")
print("| test | redis-server | sift-server | sift / redis |")
print("|---|---:|---:|---:|")
for name in tests:
    a, b = med[(name, ref)], med[(name, sift)]
    if name != "cjson.decode":
        a -= med[("cjson.decode", ref)]
        b -= med[("cjson.decode", sift)]
    print(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
