#!/usr/bin/env bash
# The price of "a reply waits for the writes it reveals" (issue 15, item 4): BF.EXISTS on a key
# that another client keeps writing (BF.ADD, unpipelined: one fdatasync per request or group),
# on two sift-server builds in the same rounds, both with their defaults (appendfsync always).
# A build without the rule answers the reads at once; with it, a read batch that saw a write not
# yet synced waits for that fdatasync.
#
#   scripts/bench_read_wait.sh OLD_BINARY NEW_BINARY
#
# Each round, for each build (the order alternating): a fresh server, BF.RESERVE bf 0.01 10000000,
# a writer `redis-benchmark -c 10 -P 1 BF.ADD bf` running the whole time, and, while it runs,
# `redis-benchmark -c 50 -P 64 BF.EXISTS bf` (READS requests) and `-c 50 -P 1` (READS_1).
# Knobs: ROUNDS=3, READS=2000000, READS_1=100000.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
ROUNDS=${ROUNDS:-3}
READS=${READS:-2000000}
READS_1=${READS_1:-100000}
. scripts/bench_lib.sh
bench_workdir sift-readwait

# run NAME BINARY -> "reads/s -P 64, reads/s -P 1, writes/s during them"
run() {
  local dir="$work/$1.$RANDOM"
  mkdir -p "$dir"
  RUST_LOG=warn "$2" --port 0 --dir "$dir/data" >"$dir/out" 2>"$dir/err" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 200); do grep -qs "listening on" "$dir/out" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
  port=${port##*:}
  wait_ping "$port"
  redis-cli -p "$port" BF.RESERVE bf 0.01 10000000 >/dev/null
  redis-benchmark -h 127.0.0.1 -p "$port" -c 10 -n 100000000 -P 1 -r 10000000 --csv \
    BF.ADD bf w:__rand_int__ >"$dir/writer" 2>&1 &
  local writer=$!
  sleep 1
  local before after p64 p1
  before=$(redis-cli -p "$port" INFO persistence | sed -n 's/^aof_fsynced_records:\([0-9]*\).*/\1/p')
  local t0=$SECONDS
  p64=$(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$READS" -P 64 -r 10000000 --threads 2 --csv \
    BF.EXISTS bf i:__rand_int__ | tail -1 | cut -d, -f2 | tr -d '"')
  p1=$(redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$READS_1" -P 1 -r 10000000 --threads 2 --csv \
    BF.EXISTS bf i:__rand_int__ | tail -1 | cut -d, -f2 | tr -d '"')
  after=$(redis-cli -p "$port" INFO persistence | sed -n 's/^aof_fsynced_records:\([0-9]*\).*/\1/p')
  local secs=$((SECONDS - t0))
  kill "$writer" 2>/dev/null || true
  wait "$writer" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$p64 $p1 $(( (after - before) / (secs > 0 ? secs : 1) ))"
}

echo "writer: redis-benchmark -c 10 -P 1 BF.ADD; readers: -c 50 --threads 2, -P 64: $READS requests," \
  "-P 1: $READS_1; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) before"
echo
echo "| round | BF.EXISTS -P 64 old | new | new ÷ old | BF.EXISTS -P 1 old | new | new ÷ old | writes/s old | new |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    read -r o64 o1 ow <<<"$(run old "$OLD")"
    read -r n64 n1 nw <<<"$(run new "$NEW")"
  else
    read -r n64 n1 nw <<<"$(run new "$NEW")"
    read -r o64 o1 ow <<<"$(run old "$OLD")"
  fi
  printf '| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %s | %s |\n' "$r" "$o64" "$n64" \
    "$(awk -v a="$n64" -v b="$o64" 'BEGIN {print a / b}')" "$o1" "$n1" \
    "$(awk -v a="$n1" -v b="$o1" 'BEGIN {print a / b}')" "$ow" "$nw"
done
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"
