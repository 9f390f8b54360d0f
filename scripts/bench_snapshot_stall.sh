#!/usr/bin/env bash
# How long a writer of one big filter waits while a snapshot is taken (issue 15 item 7): starts
# a real sift-server (appendfsync no, so that fsync latency does not hide the snapshot's own),
# creates one filter of about GB bytes with `BF.RESERVE big 0.0001 <capacity>`, then one client
# sends BF.ADD big <random> in a loop (unpipelined, each timed), and after WARMUP seconds another
# client sends BGSAVE and waits for it to end (INFO persistence). Prints per build and round: the
# filter's size, the worst BF.ADD latency while the snapshot ran, its p99 and the worst before,
# the snapshot's duration; item 7's goal is a worst latency under 10 ms per GB of the filter.
# TYPE=cf does the same with a cuckoo filter: `CF.RESERVE big <capacity>` (bucket size 2, so
# about GB bytes of slots; capacity at most 2^30, so at most 1 GiB) and CF.ADD. TYPE=sf: sift's
# blocked Bloom filter, `SF.RESERVE big 0.0001 <capacity> KIND blocked` (about GB bytes) and
# SF.ADD. TYPE=qf: sift's quotient filter, `SF.RESERVE big 0.0001 <capacity> KIND quotient`
# (about GB bytes of table) and SF.ADD. TYPE=cms: a Count-Min Sketch, `CMS.INITBYDIM big
# <width> 4` (about GB bytes of counters) and `CMS.INCRBY big <item> 1`.
#
# Knobs (environment): TYPE=bf GB=1.2 ROUNDS=2 WARMUP=2  SERVER_ARGS="--appendfsync no"
# BIN="old/sift-server new/sift-server" (default: the release build of this tree), run alternately.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=${TYPE:-bf}
GB=${GB:-1.2}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2}
SERVER_ARGS=${SERVER_ARGS:---appendfsync no}
. scripts/bench_lib.sh
python3 -c 'import redis' 2>/dev/null || { log "needs redis-py (pip install redis)"; exit 1; }

if [ -z "${BIN:-}" ]; then
  log "building sift-server (release)"
  cargo build --release -p sift-server >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/sift-server"
fi
bench_workdir sift-stall
case "$TYPE" in
  # Bits per item at 0.0001 in the first link: RedisBloom tightens the first link to 0.00005.
  bf) capacity=$(python3 -c "import math; print(int($GB * 8e9 / (-math.log(0.00005) / math.log(2) ** 2)))") ;;
  # One byte per item: the slots are nextPow2(capacity / 2) buckets of 2.
  cf) capacity=$(python3 -c "print(min(int($GB * 1e9), 1 << 30))") ;;
  # About 21 bits per item at 0.0001 (sift's blocked filter: a Bloom filter's bits and 10%).
  sf) capacity=$(python3 -c "import math; print(int($GB * 8e9 / (-math.log(0.0001) / math.log(2) ** 2 * 1.1)))") ;;
  # 14-bit remainders at 0.0001 (r = ceil(log2(0.95 / 0.0001))): r + 2.125 bits per slot,
  # a slot per 0.95 items.
  qf) capacity=$(python3 -c "print(int($GB * 8e9 * 0.95 / (14 + 2.125)))") ;;
  # Four rows of 4-byte counters.
  cms) capacity=$(python3 -c "print(int($GB * 1e9 / 16))") ;;
  *) log "TYPE must be bf, cf, sf, qf or cms"; exit 1 ;;
esac
ADD=$(echo "$TYPE" | tr a-z A-Z).ADD
[ "$TYPE" = cms ] && ADD=CMS.INCRBY
[ "$TYPE" = qf ] && ADD=SF.ADD

printf '| build | filter bytes | worst %s during snapshot ms | p99 during ms | worst before ms | ms per GB | snapshot s |\n|---|---|---|---|---|---|---|\n' "$ADD"
run=0
for _ in $(seq 1 "$ROUNDS"); do
  for bin in $BIN; do
    run=$((run + 1))
    dir="$work/run-$run"
    mkdir -p "$dir"
    RUST_LOG=warn "$bin" --port 0 --dir "$dir/data" $SERVER_ARGS >"$dir/out" 2>"$dir/err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
    addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
    [ -n "$addr" ] || { log "sift-server did not start: $(cat "$dir/err")"; exit 1; }
    port=${addr##*:}
    wait_ping "$port"
    case "$TYPE" in
      bf)
        redis-cli -p "$port" BF.RESERVE big 0.0001 "$capacity" >/dev/null
        size=$(redis-cli -p "$port" BF.INFO big SIZE) ;;
      cf)
        redis-cli -p "$port" CF.RESERVE big "$capacity" >/dev/null
        size=$(redis-cli -p "$port" CF.INFO big | sed -n '/^Size$/{n;p}') ;;
      sf)
        redis-cli -p "$port" SF.RESERVE big 0.0001 "$capacity" KIND blocked >/dev/null
        size=$(redis-cli -p "$port" SF.INFO big BYTES) ;;
      qf)
        redis-cli -p "$port" SF.RESERVE big 0.0001 "$capacity" KIND quotient >/dev/null
        size=$(redis-cli -p "$port" SF.INFO big BYTES) ;;
      cms)
        redis-cli -p "$port" CMS.INITBYDIM big "$capacity" 4 >/dev/null
        size=$((capacity * 16)) ;;
    esac
    case "$size" in ''|*[!0-9]*) log "could not create the $TYPE value: $size"; exit 1 ;; esac
    python3 - "$port" "$size" "$WARMUP" "$bin" "$ADD" <<'PY'
import random, sys, threading, time
import redis

port, size, warmup, name, add = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
window = {}
lat = []  # (time sent, seconds)
stop = threading.Event()

def writer():
    w = redis.Redis(port=port)
    rnd = random.Random(7)
    while not stop.is_set():
        t = time.perf_counter()
        args = ("big", "k%d" % rnd.getrandbits(48)) + ((1,) if add == "CMS.INCRBY" else ())
        w.execute_command(add, *args)
        lat.append((t, time.perf_counter() - t))

th = threading.Thread(target=writer)
th.start()
time.sleep(warmup)
c = redis.Redis(port=port)
window["start"] = time.perf_counter()
c.execute_command("BGSAVE")
while c.info("persistence").get("rdb_bgsave_in_progress") != 0:
    time.sleep(0.01)
window["end"] = time.perf_counter()
time.sleep(0.5)
stop.set()
th.join()
during = sorted(l for t, l in lat if window["start"] <= t + l and t <= window["end"])
before = [l for t, l in lat if t + l < window["start"]]
worst = during[-1] * 1e3 if during else float("nan")
p99 = during[int(len(during) * 0.99)] * 1e3 if during else float("nan")
print("| %s | %d | %.1f | %.2f | %.1f | %.1f | %.2f |" % (
    name, size, worst, p99, max(before) * 1e3, worst / (size / 1e9), window["end"] - window["start"]))
PY
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
