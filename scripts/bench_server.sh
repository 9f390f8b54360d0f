#!/usr/bin/env bash
# Throughput and memory of sift-server against redis-server (issue 4, "Concurrency and speed").
#
# Builds sift-server (release), starts Debian's redis-server (no persistence) and sift-server
# in three fsync modes (the default `always`, `everysec`, `no`), all on 127.0.0.1 with free
# ports and temporary data directories, and runs redis-benchmark against them:
#
#   redis-server  SET key:__rand_int__ xxx, GET key:__rand_int__     (the ceiling reference)
#   sift-server   BF.ADD, BF.EXISTS, CF.ADD, CF.EXISTS on one 10M filter each, random items,
#                 BF.MADD with 100 random items per request (items/s = requests/s x 100)
#
# each with -c 50, unpipelined and -P 64, -r 10000000. Tests of the same pipelining run back to
# back, redis first, ROUNDS times; the table shows the median of the rounds, so a load change
# on a shared machine hits both servers alike. Then the resident memory of one 10M-item Bloom
# filter: VmRSS of a fresh sift-server after BF.RESERVE 0.01 10000000 and 10M distinct adds,
# minus VmRSS before, against BF.INFO Size.
#
# Prints a markdown table on stdout (progress on stderr). Knobs (environment):
#   ROUNDS=3  REQUESTS=200000 (unpipelined)  REQUESTS_P=2000000 (-P 64)
#   MADD_REQUESTS=20000 (unpipelined BF.MADD)  MADD_REQUESTS_P=100000 (-P 64 BF.MADD)
#   CLIENTS=50  THREADS=2 (redis-benchmark --threads)  FSYNC_MODES="always everysec no"
#   SKIP_MEMORY=1 to skip the memory measurement.
#   BIN=path/to/sift-server to benchmark a prebuilt binary (no build), e.g. an older commit's
#   built into its own target directory, run alternately with the current one.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
REQUESTS_P=${REQUESTS_P:-2000000}
MADD_REQUESTS=${MADD_REQUESTS:-20000}
MADD_REQUESTS_P=${MADD_REQUESTS_P:-100000}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-2}
FSYNC_MODES=${FSYNC_MODES:-"always everysec no"}
KEYSPACE=10000000
PIPELINE=64

. "$(dirname "$0")/bench_lib.sh"

require_tools redis-server redis-benchmark redis-cli python3

sift_server_bin

bench_workdir sift-bench

madd_items=()
for _ in $(seq 1 100); do madd_items+=("i:__rand_int__"); done

declare -A port_of results
start_redis
port_of[redis]=$REDIS_PORT
for mode in $FSYNC_MODES; do
  start_sift "$mode" --appendfsync "$mode"
  port_of[$mode]=$SIFT_PORT
  redis-cli -p "$SIFT_PORT" BF.RESERVE bf 0.01 "$KEYSPACE" >/dev/null
  redis-cli -p "$SIFT_PORT" BF.RESERVE bfm 0.01 "$KEYSPACE" >/dev/null
  redis-cli -p "$SIFT_PORT" CF.RESERVE cf "$KEYSPACE" >/dev/null
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $load_before ($(nproc) cores)"

# Test rows: "label|server|command". Servers are redis or sift (every fsync mode).
tests=(
  "SET|redis|SET key:__rand_int__ xxx"
  "GET|redis|GET key:__rand_int__"
  "BF.ADD|sift|BF.ADD bf i:__rand_int__"
  "BF.EXISTS|sift|BF.EXISTS bf i:__rand_int__"
  "CF.ADD|sift|CF.ADD cf i:__rand_int__"
  "CF.EXISTS|sift|CF.EXISTS cf i:__rand_int__"
  "BF.MADD x100|sift|BF.MADD bfm ${madd_items[*]}"
)

for round in $(seq 1 "$ROUNDS"); do
  for p in 1 "$PIPELINE"; do
    for t in "${tests[@]}"; do
      IFS='|' read -r label server cmd <<<"$t"
      if [ "$server" = redis ]; then servers=redis; else servers=$FSYNC_MODES; fi
      for s in $servers; do
        if [[ $label == BF.MADD* ]]; then
          n=$([ "$p" = 1 ] && echo "$MADD_REQUESTS" || echo "$MADD_REQUESTS_P")
        else
          n=$([ "$p" = 1 ] && echo "$REQUESTS" || echo "$REQUESTS_P")
        fi
        # shellcheck disable=SC2086 # the command is split into its arguments on purpose
        rps=$(bench "${port_of[$s]}" "$n" "$p" $cmd)
        log "round $round P=$p $label ($s): $rps requests/s"
        results["$label|$s|$p"]+="$rps "
      done
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average after: $load_after"

fmt() { awk -v v="$1" 'BEGIN {printf "%.0f", v}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "redis-benchmark -c $CLIENTS --threads $THREADS -r $KEYSPACE; median of $ROUNDS rounds;" \
  "$(nproc) cores; load average $load_before before, $load_after after"
echo
echo "| command | server | pipeline | requests/s | items/s | vs redis SET |"
echo "|---|---|---|---|---|---|"
declare -A med
for p in 1 "$PIPELINE"; do
  set_rps=$(median <<<"${results["SET|redis|$p"]}")
  for t in "${tests[@]}"; do
    IFS='|' read -r label server _ <<<"$t"
    if [ "$server" = redis ]; then servers=redis; else servers=$FSYNC_MODES; fi
    for s in $servers; do
      m=$(median <<<"${results["$label|$s|$p"]}")
      med["$label|$s|$p"]=$m
      items=$m
      [[ $label == BF.MADD* ]] && items=$(awk -v v="$m" 'BEGIN {print v * 100}')
      name=$([ "$s" = redis ] && echo "redis-server 7.0.15" || echo "sift-server appendfsync $s")
      echo "| $label | $name | $([ "$p" = 1 ] && echo none || echo "-P $p") | $(fmt "$m") |" \
        "$(fmt "$items") | $(ratio "$items" "$set_rps")x |"
    done
  done
done

echo
echo "Targets (sift-server with its default appendfsync always):"
verdict() { awk -v v="$1" -v t="$2" 'BEGIN {print (v >= t) ? "met" : "NOT met"}'; }
first=${FSYNC_MODES%% *}
for p in "$PIPELINE" 1; do
  set_rps=${med["SET|redis|$p"]}
  want=$([ "$p" = 1 ] && echo 1.0 || echo 1.3)
  for label in BF.ADD BF.EXISTS; do
    r=$(ratio "${med["$label|$first|$p"]}" "$set_rps")
    echo "- $label $([ "$p" = 1 ] && echo unpipelined || echo "-P $p") >= ${want}x redis SET: ${r}x," \
      "$(verdict "$r" "$want")"
  done
done
best_madd=0
for p in 1 "$PIPELINE"; do
  v=$(awk -v v="${med["BF.MADD x100|$first|$p"]}" 'BEGIN {print v * 100}')
  best_madd=$(awk -v a="$v" -v b="$best_madd" 'BEGIN {print (a > b) ? a : b}')
done
echo "- BF.MADD x100 >= 6 M items/s: $(awk -v v="$best_madd" 'BEGIN {printf "%.2f", v / 1e6}') M items/s," \
  "$(verdict "$best_madd" 6000000)"

if [ -z "${SKIP_MEMORY:-}" ]; then
  log "memory: one 10M-item Bloom filter"
  start_sift memory
  rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
  before=$(rss_kb "$SIFT_PID")
  redis-cli -p "$SIFT_PORT" BF.RESERVE mem 0.01 10000000 >/dev/null
  # 10M distinct items, 1000 per BF.MADD, through redis-cli --pipe.
  awk 'BEGIN {
    for (i = 0; i < 10000; i++) {
      printf "*1002\r\n$7\r\nBF.MADD\r\n$3\r\nmem\r\n"
      for (j = 0; j < 1000; j++) { s = "item:" (i * 1000 + j); printf "$%d\r\n%s\r\n", length(s), s }
    }
  }' | redis-cli -p "$SIFT_PORT" --pipe >&2
  # Let a log rewrite the adds triggered finish, so its buffers are gone.
  for _ in $(seq 1 600); do
    redis-cli -p "$SIFT_PORT" INFO persistence | grep -q 'aof_rewrite_in_progress:0' && break
    sleep 0.1
  done
  sleep 1
  after=$(rss_kb "$SIFT_PID")
  size=$(redis-cli -p "$SIFT_PORT" BF.INFO mem SIZE)
  items=$(redis-cli -p "$SIFT_PORT" BF.CARD mem)
  growth=$(((after - before) * 1024))
  echo
  echo "Memory: BF.RESERVE mem 0.01 10000000, then 10M distinct items ($items counted as new)."
  echo
  echo "| VmRSS before | VmRSS after | growth | BF.INFO Size | growth - Size |"
  echo "|---|---|---|---|---|"
  echo "| $before kB | $after kB | $growth B | $size B | $((growth - size)) B |"
  echo
  echo "- RSS growth <= bitmap + 1 MB: $((growth - size)) B over," \
    "$([ $((growth - size)) -le 1048576 ] && echo met || echo "NOT met")"
fi
