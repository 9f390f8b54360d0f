#!/usr/bin/env bash
# SF.ADD / SF.EXISTS on a KIND blocked key against BF.ADD / BF.EXISTS on a BF key, in the same
# server, the same run, alternating the order between rounds: pipelined requests/s and server CPU
# per request (redis-benchmark -c 50 --threads 2 -P 64 -r 10000000), on
#   BF.RESERVE bench:bf 0.01 10000000   and   SF.RESERVE bench:sf 0.01 10000000 (KIND blocked).
# Then bytes per item at the same error rate: each filter's bytes (BF.INFO Size, SF.INFO Bytes)
# over its capacity, for several capacities and rates.
#
#   scripts/bench_sf.sh server target/release/sift-server
#   scripts/bench_sf.sh module target/release/libsift_redis.so        # on redis-server
#
# Knobs: ROUNDS=4, REQUESTS=2000000 per run.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=$1
BUILD=$2
ROUNDS=${ROUNDS:-4}
REQUESTS=${REQUESTS:-2000000}
. scripts/bench_lib.sh
bench_workdir sift-sf-bench

start_bench_server "$MODE" "$BUILD" "$work/srv"
pid=$srv_pid
port=$srv_port
redis-cli -p "$port" BF.RESERVE bench:bf 0.01 10000000 >/dev/null
redis-cli -p "$port" SF.RESERVE bench:sf 0.01 10000000 KIND blocked >/dev/null

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run COMMAND KEY -> "requests/s µs-of-server-CPU-per-request"
run() {
  local before after out rps
  before=$(cpu_ticks "$pid")
  out=$(redis-benchmark -p "$port" -c 50 --threads 2 -P 64 -n "$REQUESTS" -r 10000000 -q "$1" "$2" \
    'item:__rand_int__' 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
  after=$(cpu_ticks "$pid")
  rps=$(echo "$out" | awk '{for (i = 1; i <= NF; i++) if ($i == "requests") print $(i - 1)}')
  echo "$rps $(python3 -c "print(round(($after - $before) * 1e6 / $(getconf CLK_TCK) / $REQUESTS, 3))")"
}

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| round | op | BF req/s | BF µs/req | SF req/s | SF µs/req | SF/BF req/s |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  for op in ADD EXISTS; do
    if [ $((r % 2)) -eq 1 ]; then
      b=$(run "BF.$op" bench:bf); s=$(run "SF.$op" bench:sf)
    else
      s=$(run "SF.$op" bench:sf); b=$(run "BF.$op" bench:bf)
    fi
    ratio=$(python3 -c "print(round(${s% *} / ${b% *}, 2))")
    echo "| $r | $op | ${b% *} | ${b#* } | ${s% *} | ${s#* } | $ratio |"
  done
done
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "| capacity | error rate | BF bytes/item | SF blocked bytes/item | SF/BF |"
echo "|---|---|---|---|---|"
for cap in 100000 1000000 10000000; do
  for rate in 0.01 0.001; do
    redis-cli -p "$port" DEL m:bf m:sf >/dev/null
    redis-cli -p "$port" BF.RESERVE m:bf "$rate" "$cap" >/dev/null
    redis-cli -p "$port" SF.RESERVE m:sf "$rate" "$cap" >/dev/null
    bf=$(redis-cli -p "$port" BF.INFO m:bf SIZE)
    sf=$(redis-cli -p "$port" SF.INFO m:sf BYTES)
    python3 -c "print(f'| $cap | $rate | {$bf / $cap:.3f} | {$sf / $cap:.3f} | {$sf / $bf:.3f} |')"
  done
done
