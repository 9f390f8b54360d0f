#!/usr/bin/env bash
# Issue 6 benchmark: BF.ADD / BF.EXISTS on redis-server with libsift_redis.so, against plain
# SET / GET on the same redis-server, and on sift-server, all driven by redis-benchmark.
#
#   scripts/bench_module.sh            # 3 rounds, prints a markdown table
#   ROUNDS=5 THREADS=2 scripts/bench_module.sh
#
# Servers (all on 127.0.0.1, ephemeral ports, temp dirs, stopped on exit):
#   redis        redis-server --save '' --appendonly no                  (the SET/GET reference)
#   redis+sift   the same with --loadmodule libsift_redis.so
#   sift-server  --appendfsync everysec, and with its default (always)
# Each cell is the median of ROUNDS runs; rounds interleave the servers so load changes on the
# machine hit them alike. Besides requests/s, each cell gives the server process's CPU time
# (user + system, all its threads, from /proc/<pid>/stat) per request, which other jobs on a
# shared machine disturb much less than wall-clock throughput. Filters: BF.RESERVE bench:bf 0.01 10000000 first; items
# item:__rand_int__ with -r 10000000 (random over 10M values).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}              # redis-benchmark client threads
CLIENTS=${CLIENTS:-50}
N_PIPE=${N_PIPE:-2000000}          # requests per run with -P 64
N_PLAIN=${N_PLAIN:-200000}         # requests per run without pipelining
KEYSPACE=10000000

for t in redis-server redis-benchmark redis-cli; do
  command -v "$t" >/dev/null || { echo "$t not found (apt-get install -y redis-server)" >&2; exit 1; }
done

echo "building (release): sift-redis, sift-server" >&2
cargo build --release -q -p sift-redis -p sift-server
target=${CARGO_TARGET_DIR:-target}/release
so=$(cd "$target" && pwd)/libsift_redis.so
srv=$target/sift-server
[ -f "$so" ] && [ -x "$srv" ] || { echo "build products missing under $target" >&2; exit 1; }

tmp=$(mktemp -d)
# Servers are started inside $(...) subshells, so their pids go to files, not a variable.
cleanup() {
  for f in "$tmp"/*/pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$tmp"
}
trap cleanup EXIT

. "$(dirname "$0")/bench_lib.sh"  # free_port, wait_ping

start_redis() { # name, extra args...
  local name=$1; shift
  local port; port=$(free_port)
  mkdir -p "$tmp/$name"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp/$name" --save '' --appendonly no \
    --logfile "$tmp/$name/log" "$@" > /dev/null 2>&1 &
  echo $! > "$tmp/$name/pid"
  wait_ping "$port"
  echo "$port"
}
start_sift() { # name, extra args...
  local name=$1; shift
  mkdir -p "$tmp/$name"
  "$srv" --port 0 --dir "$tmp/$name/data" "$@" > "$tmp/$name/out" 2> "$tmp/$name/err" &
  echo $! > "$tmp/$name/pid"
  for _ in $(seq 1 200); do grep -q "listening on" "$tmp/$name/out" && break; sleep 0.05; done
  local addr; addr=$(sed -n 's/.*listening on //p' "$tmp/$name/out" | head -1)
  [ -n "$addr" ] || { echo "sift-server $name did not start" >&2; cat "$tmp/$name/err" >&2; exit 1; }
  wait_ping "${addr##*:}"
  echo "${addr##*:}"
}

p_redis=$(start_redis redis)
p_module=$(start_redis module --loadmodule "$so")
p_sift_es=$(start_sift sift-everysec --appendfsync everysec)
p_sift_def=$(start_sift sift-default)
for p in "$p_module" "$p_sift_es" "$p_sift_def"; do
  redis-cli -p "$p" BF.RESERVE bench:bf 0.01 "$KEYSPACE" | grep -qx OK
done

# One redis-benchmark run; prints requests per second. Args: port, pipeline, command...
run() {
  local port=$1 pipe=$2; shift 2
  local n=$N_PLAIN; [ "$pipe" -gt 1 ] && n=$N_PIPE
  redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -P "$pipe" -n "$n" -r "$KEYSPACE" \
    --threads "$THREADS" --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}

# Cells: "label|server dir|port|command"; SET/GET use redis-benchmark's own tests
# (key:__rand_int__, 3-byte values).
cells=(
  "redis SET|redis|$p_redis|-t set"
  "redis GET|redis|$p_redis|-t get"
  "redis+sift BF.ADD|module|$p_module|BF.ADD bench:bf item:__rand_int__"
  "redis+sift BF.EXISTS|module|$p_module|BF.EXISTS bench:bf item:__rand_int__"
  "sift-server everysec BF.ADD|sift-everysec|$p_sift_es|BF.ADD bench:bf item:__rand_int__"
  "sift-server everysec BF.EXISTS|sift-everysec|$p_sift_es|BF.EXISTS bench:bf item:__rand_int__"
  "sift-server always BF.ADD|sift-default|$p_sift_def|BF.ADD bench:bf item:__rand_int__"
  "sift-server always BF.EXISTS|sift-default|$p_sift_def|BF.EXISTS bench:bf item:__rand_int__"
)

# CPU time (user + system, clock ticks) the server process has used so far: per request it is a
# steadier measure than requests/s when other jobs share the cores.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$tmp/$1/pid")/stat"; }
tick_hz=$(getconf CLK_TCK)

declare -A results cpu
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$ROUNDS"); do
  for pipe in 64 1; do
    for cell in "${cells[@]}"; do
      IFS='|' read -r label name port cmd <<< "$cell"
      t0=$(cpu_ticks "$name")
      # shellcheck disable=SC2086 # the command is split into words on purpose
      rps=$(run "$port" "$pipe" $cmd)
      t1=$(cpu_ticks "$name")
      n=$N_PLAIN; [ "$pipe" -gt 1 ] && n=$N_PIPE
      us=$(awk -v t="$((t1 - t0))" -v hz="$tick_hz" -v n="$n" 'BEGIN {printf "%.3f", t / hz * 1e6 / n}')
      results["$label|$pipe"]+="$rps "
      cpu["$label|$pipe"]+="$us "
      echo "round $round  -P $pipe  $label: $rps req/s, server CPU $us µs/req" >&2
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), redis-benchmark -c $CLIENTS -r $KEYSPACE --threads $THREADS," \
  "-n $N_PIPE (-P 64) / $N_PLAIN (-P 1), median of $ROUNDS rounds, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| server | command | -P 64 req/s | vs SET | server CPU µs/req | SET CPU ÷ this | -P 1 req/s | vs SET | server CPU µs/req | SET CPU ÷ this |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
set64=$(echo "${results["redis SET|64"]}" | median)
set1=$(echo "${results["redis SET|1"]}" | median)
setc64=$(echo "${cpu["redis SET|64"]}" | median)
setc1=$(echo "${cpu["redis SET|1"]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", (b > 0) ? a / b : 0}'; }
for cell in "${cells[@]}"; do
  IFS='|' read -r label _ _ _ <<< "$cell"
  server=${label% *}; cmd=${label##* }
  m64=$(echo "${results["$label|64"]}" | median)
  m1=$(echo "${results["$label|1"]}" | median)
  c64=$(echo "${cpu["$label|64"]}" | median)
  c1=$(echo "${cpu["$label|1"]}" | median)
  printf '| %s | %s | %.0f | %s | %.2f | %s | %.0f | %s | %.2f | %s |\n' "$server" "$cmd" \
    "$m64" "$(ratio "$m64" "$set64")" "$c64" "$(ratio "$setc64" "$c64")" \
    "$m1" "$(ratio "$m1" "$set1")" "$c1" "$(ratio "$setc1" "$c1")"
done
