#!/usr/bin/env bash
# Peak memory while sift-server recovers a snapshot (issue 15 item 8): builds a dataset of about
# 290 MB in a real sift-server (one large Bloom filter, BIG_CAPACITY items at 1%, plus SMALL
# filters of capacity 1000 and as many short strings), SAVEs it, kills the server, then starts
# each binary of BIN on that directory in turn, ROUNDS times, and reads from /proc/PID/status
# the peak resident size during start-up (VmHWM) and the resident size once it serves (VmRSS):
# the ratio peak / steady is what item 8 bounds (<= 1.2).
#
# Knobs (environment): BIG_CAPACITY=200000000 SMALL=20000 ROUNDS=3
#   BIN="path/a path/b" (default: the release build of this tree), run alternately.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG_CAPACITY=${BIG_CAPACITY:-200000000}
SMALL=${SMALL:-20000}
ROUNDS=${ROUNDS:-3}
. scripts/bench_lib.sh

if [ -z "${BIN:-}" ]; then
  log "building sift-server (release)"
  cargo build --release -p sift-server >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/sift-server"
fi
first=${BIN%% *}

bench_workdir sift-recovery
data="$work/data"

# start BIN -> PID, PORT
start() {
  : >"$work/out"
  RUST_LOG=warn "$1" --port 0 --dir "$data" >"$work/out" 2>"$work/err" &
  PID=$!
  pids+=("$PID")
  for _ in $(seq 1 2400); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  local addr
  addr=$(sed -n 's/.*listening on //p' "$work/out" | head -1)
  [ -n "$addr" ] || { log "sift-server did not start: $(cat "$work/err")"; exit 1; }
  PORT=${addr##*:}
  wait_ping "$PORT"
}

log "building the dataset with $first"
start "$first"
redis-cli -p "$PORT" BF.RESERVE big 0.01 "$BIG_CAPACITY" >/dev/null
python3 - "$SMALL" >"$work/load.resp" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
for i in range(n):
    cmd(b"BF.RESERVE", b"u:%d" % i, b"0.01", b"1000")
    cmd(b"BF.ADD", b"u:%d" % i, b"item")
    cmd(b"SET", b"s:%d" % i, b"v" * 100)
for i in range(200000):
    cmd(b"BF.ADD", b"big", b"x%d" % i)
PY
redis-cli -p "$PORT" --pipe <"$work/load.resp" >"$work/pipe" 2>&1
grep -q "errors: 0" "$work/pipe" || { log "load failed: $(cat "$work/pipe")"; exit 1; }
redis-cli -p "$PORT" SAVE >/dev/null
kill -9 "$PID"; wait "$PID" 2>/dev/null || true
snap=$(du -cb "$data"/snapshot-*.sift | tail -1 | cut -f1)
log "snapshot: $snap bytes"

printf '| build | snapshot bytes | steady VmRSS kB | peak VmHWM kB | peak / steady |\n|---|---|---|---|---|\n'
for _ in $(seq 1 "$ROUNDS"); do
  for bin in $BIN; do
    start "$bin"
    sleep 1
    steady=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status")
    peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$PID/status")
    keys=$(redis-cli -p "$PORT" DBSIZE)
    [ "$keys" = "$((2 * SMALL + 1))" ] || { log "DBSIZE $keys after recovery"; exit 1; }
    kill -9 "$PID"; wait "$PID" 2>/dev/null || true
    python3 -c "print(f'| $bin | $snap | $steady | $peak | {$peak / $steady:.3f} |')"
  done
done
