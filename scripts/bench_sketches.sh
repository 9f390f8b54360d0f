#!/usr/bin/env bash
# Throughput and memory of the sketch commands on sift-server (issue 19, "Speed and memory").
#
# Builds sift-server (release), starts Debian's redis-server (no persistence) and sift-server
# (its default appendfsync always, a temporary data directory) on 127.0.0.1, and runs
# redis-benchmark -c 50 -P 64 (and unpipelined) against them:
#
#   redis-server  SET key:__rand_int__ xxx                    (the ceiling reference)
#   sift-server   CMS.INCRBY cms i:__rand_int__ 1             (CMS.INITBYPROB 0.001 0.01: 2000 x 7)
#                 TOPK.ADD tk i:__rand_int__                  (TOPK.RESERVE 50 2000 7 0.9)
#                 TDIGEST.ADD td <100 random values>          (compression 100; values/s = requests/s x 100)
#
# Tests of the same pipelining run back to back, redis first, ROUNDS times; the table shows the
# median of the rounds and the range. Then memory per sketch: VmRSS of a fresh sift-server
# (appendfsync no) before and after creating COUNT sketches of each kind, per sketch, against
# the spec's memory callback (redisbloom-sketches.md §10.7) and MEMORY USAGE.
#
# Prints a markdown table on stdout (progress on stderr). Knobs (environment):
#   ROUNDS=3  REQUESTS=100000 (unpipelined)  REQUESTS_P=1000000 (-P 64)
#   TD_REQUESTS=20000  TD_REQUESTS_P=100000 (TDIGEST.ADD x100)  COUNT=2000 (memory)
#   CLIENTS=50  THREADS=2  BIN=path/to/sift-server (no build)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-100000}
REQUESTS_P=${REQUESTS_P:-1000000}
TD_REQUESTS=${TD_REQUESTS:-20000}
TD_REQUESTS_P=${TD_REQUESTS_P:-100000}
COUNT=${COUNT:-2000}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-2}
KEYSPACE=10000000
PIPELINE=64

. "$(dirname "$0")/bench_lib.sh"

require_tools redis-server redis-benchmark redis-cli python3

sift_server_bin

bench_workdir sift-bench-sketches

td_values=()
for _ in $(seq 1 100); do td_values+=("__rand_int__"); done

start_redis
start_sift bench
redis-cli -p "$SIFT_PORT" CMS.INITBYPROB cms 0.001 0.01 >/dev/null
redis-cli -p "$SIFT_PORT" TOPK.RESERVE tk 50 2000 7 0.9 >/dev/null
redis-cli -p "$SIFT_PORT" TDIGEST.CREATE td COMPRESSION 100 >/dev/null

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $load_before ($(nproc) cores)"

tests=(
  "SET|$REDIS_PORT|SET key:__rand_int__ xxx"
  "CMS.INCRBY|$SIFT_PORT|CMS.INCRBY cms i:__rand_int__ 1"
  "TOPK.ADD|$SIFT_PORT|TOPK.ADD tk i:__rand_int__"
  "TDIGEST.ADD x100|$SIFT_PORT|TDIGEST.ADD td ${td_values[*]}"
)
declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for p in 1 "$PIPELINE"; do
    for t in "${tests[@]}"; do
      IFS='|' read -r label port cmd <<<"$t"
      if [[ $label == TDIGEST* ]]; then
        n=$([ "$p" = 1 ] && echo "$TD_REQUESTS" || echo "$TD_REQUESTS_P")
      else
        n=$([ "$p" = 1 ] && echo "$REQUESTS" || echo "$REQUESTS_P")
      fi
      # shellcheck disable=SC2086 # the command is split into its arguments on purpose
      rps=$(bench "$port" "$n" "$p" $cmd)
      log "round $round P=$p $label: $rps requests/s"
      results["$label|$p"]+="$rps "
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

fmt() { awk -v v="$1" 'BEGIN {printf "%.0f", v}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "redis-benchmark -c $CLIENTS --threads $THREADS -r $KEYSPACE; median of $ROUNDS rounds (range);" \
  "$(nproc) cores; load average $load_before before, $load_after after;" \
  "sift-server appendfsync always, redis-server 7.0.15 without persistence"
echo
echo "| command | pipeline | requests/s | range | values/s | vs redis SET |"
echo "|---|---|---|---|---|---|"
for p in 1 "$PIPELINE"; do
  set_rps=$(median <<<"${results["SET|$p"]}")
  for t in "${tests[@]}"; do
    IFS='|' read -r label _ _ <<<"$t"
    m=$(median <<<"${results["$label|$p"]}")
    r=$(range <<<"${results["$label|$p"]}")
    values=$m
    [[ $label == TDIGEST* ]] && values=$(awk -v v="$m" 'BEGIN {print v * 100}')
    echo "| $label | $([ "$p" = 1 ] && echo none || echo "-P $p") | $(fmt "$m") | $r | $(fmt "$values") |" \
      "$(ratio "$m" "$set_rps")x |"
  done
done

log "memory: $COUNT sketches of each kind, each kind on a fresh server"
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
echo
echo "| sketch | spec callback (bytes) | MEMORY USAGE | RSS per sketch (bytes) | RSS / callback |"
echo "|---|---|---|---|---|"
for kind in "CMS 2000x7|CMS.INITBYDIM m%d 2000 7|$((32 + 4 * 2000 * 7))" \
            "TopK k=50 2000x7|TOPK.RESERVE m%d 50 2000 7 0.9|$((2088 + 8 * 2000 * 7 + 24 * 50))" \
            "t-digest compression 100|TDIGEST.CREATE m%d COMPRESSION 100|$((80 + 16 * 610))"; do
  IFS='|' read -r label fmtcmd callback <<<"$kind"
  start_sift "memory-${label%% *}" --appendfsync no
  before=$(rss_kb "$SIFT_PID")
  # shellcheck disable=SC2059 # the format is ours
  for i in $(seq 1 "$COUNT"); do printf "$fmtcmd\n" "$i"; done | redis-cli -p "$SIFT_PORT" >/dev/null
  after=$(rss_kb "$SIFT_PID")
  usage=$(redis-cli -p "$SIFT_PORT" MEMORY USAGE m1)
  per=$(awk -v a="$after" -v b="$before" -v n="$COUNT" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
  echo "| $label | $callback | $usage | $per | $(ratio "$per" "$callback") |"
  kill "$SIFT_PID"
done
