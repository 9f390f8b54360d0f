#!/usr/bin/env bash
# Resident memory per key of many small filters (issue 15 item 9; seed 004 keeps one filter per
# user): starts a real sift-server (no log, no snapshots), reads VmRSS from /proc, loads KEYS
# keys `u:<n>` with `BF.RESERVE u:<n> 0.01 1000` pipelined through `redis-cli --pipe`, reads
# VmRSS again and prints (RSS after - RSS before) / KEYS against the filter's payload (BF.INFO
# Size of one key: 1,480 bytes at 0.01 / 1000).
#
# Knobs (environment): KEYS=1000000  ROUNDS=1  BIN=path/to/sift-server (default: build release).
# Several BIN values separated by spaces are run alternately, ROUNDS times each, so an older
# build and the current one see the same machine load.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-1}
. scripts/bench_lib.sh

if [ -z "${BIN:-}" ]; then
  log "building sift-server (release)"
  cargo build --release -p sift-server >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/sift-server"
fi

bench_workdir sift-small
python3 - "$KEYS" >"$work/load.resp" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for i in range(n):
    k = b"u:%d" % i
    out.write(b"*4\r\n$10\r\nBF.RESERVE\r\n$%d\r\n%s\r\n$4\r\n0.01\r\n$4\r\n1000\r\n" % (len(k), k))
PY

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

printf '| build | keys | payload B/key | RSS B/key | ratio |\n|---|---|---|---|---|\n'
run=0
for _ in $(seq 1 "$ROUNDS"); do
  for bin in $BIN; do
    run=$((run + 1))
    dir="$work/run-$run"
    mkdir -p "$dir"
    printf 'save ""\n' >"$dir/conf"
    RUST_LOG=warn "$bin" --port 0 --dir "$dir/data" --appendonly no "$dir/conf" >"$dir/out" 2>"$dir/err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
    addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
    [ -n "$addr" ] || { log "sift-server did not start: $(cat "$dir/err")"; exit 1; }
    port=${addr##*:}
    wait_ping "$port"
    before=$(rss_kb "$pid")
    redis-cli -p "$port" --pipe <"$work/load.resp" >"$dir/pipe" 2>&1
    grep -q "errors: 0" "$dir/pipe" || { log "load failed: $(cat "$dir/pipe")"; exit 1; }
    got=$(redis-cli -p "$port" DBSIZE)
    [ "$got" = "$KEYS" ] || { log "DBSIZE $got, expected $KEYS"; exit 1; }
    size=$(redis-cli -p "$port" BF.INFO u:0 Size)
    after=$(rss_kb "$pid")
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    python3 -c "
b, a, n, s = $before, $after, $KEYS, $size
per = (a - b) * 1024 / n
print(f'| $bin | {n} | {s} | {per:.0f} | {per / s:.3f} |')"
  done
done
