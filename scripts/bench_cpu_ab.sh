#!/usr/bin/env bash
# Server CPU time per request of two builds, side by side: pipelined BF.ADD and BF.EXISTS
# (redis-benchmark -c 50 --threads 2 -P 64 -r 10000000) on one `BF.RESERVE bench:bf 0.01 10000000`
# each, the order of the two builds alternating between rounds. CPU time (user + system of the
# server process, /proc/<pid>/stat) per request is what other jobs on a shared machine disturb
# least; requests/s is printed too.
#
#   scripts/bench_cpu_ab.sh server OLD_SIFT_SERVER NEW_SIFT_SERVER     # sift-server, --appendonly no
#   scripts/bench_cpu_ab.sh module OLD_LIBSIFT_REDIS.so NEW_LIBSIFT_REDIS.so   # on redis-server
#
# Build the old side into its own target directory, e.g.
#   git archive <commit> | tar -x -C /tmp/old && (cd /tmp/old && \
#     CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p sift-server -p sift-redis)
# Knobs: ROUNDS=4, REQUESTS=2000000 per run; TYPE=bf (default), sf (`SF.RESERVE bench:bf 0.01
# 10000000 KIND blocked`, 12 MB, SF.ADD and SF.EXISTS), qf (`SF.RESERVE bench:bf 0.01 10000000
# KIND quotient`, 12 MB, SF.ADD and SF.EXISTS) or cms (`CMS.INITBYDIM bench:bf 4194304 4`,
# 64 MiB, `CMS.INCRBY bench:bf <item> 1` and CMS.QUERY).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=$1
OLD=$2
NEW=$3
ROUNDS=${ROUNDS:-4}
TYPE=${TYPE:-bf}
case "$TYPE" in
  bf) CREATE=(BF.RESERVE bench:bf 0.01 10000000); COMMANDS="BF.ADD BF.EXISTS" ;;
  sf) CREATE=(SF.RESERVE bench:bf 0.01 10000000 KIND blocked); COMMANDS="SF.ADD SF.EXISTS" ;;
  qf) CREATE=(SF.RESERVE bench:bf 0.01 10000000 KIND quotient); COMMANDS="SF.ADD SF.EXISTS" ;;
  cms) CREATE=(CMS.INITBYDIM bench:bf 4194304 4); COMMANDS="CMS.INCRBY CMS.QUERY" ;;
  *) echo "TYPE must be bf, sf, qf or cms" >&2; exit 1 ;;
esac
REQUESTS=${REQUESTS:-2000000}
. scripts/bench_lib.sh
bench_workdir sift-cpu-ab

# start NAME BUILD -> "pid port" in $work/NAME.info
start() {
  start_bench_server "$MODE" "$2" "$work/$1"
  redis-cli -p "$srv_port" "${CREATE[@]}" >/dev/null
  echo "$srv_pid $srv_port" >"$work/$1.info"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run PID PORT COMMAND -> "requests/s µs-of-server-CPU-per-request"
run() {
  local before after out rps
  local extra=()
  [ "$3" = CMS.INCRBY ] && extra=(1)
  before=$(cpu_ticks "$1")
  out=$(redis-benchmark -p "$2" -c 50 --threads 2 -P 64 -n "$REQUESTS" -r 10000000 -q "$3" bench:bf \
    'item:__rand_int__' "${extra[@]}" 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
  after=$(cpu_ticks "$1")
  rps=$(echo "$out" | awk '{for (i = 1; i <= NF; i++) if ($i == "requests") print $(i - 1)}')
  echo "$rps $(python3 -c "print(round(($after - $before) * 1e6 / $(getconf CLK_TCK) / $REQUESTS, 3))")"
}

start old "$OLD"
start new "$NEW"
read -r OPID OPORT <"$work/old.info"
read -r NPID NPORT <"$work/new.info"
echo "| round | command | old req/s | old µs/req | new req/s | new µs/req |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  for c in $COMMANDS; do
    if [ $((r % 2)) -eq 1 ]; then
      o=$(run "$OPID" "$OPORT" "$c"); n=$(run "$NPID" "$NPORT" "$c")
    else
      n=$(run "$NPID" "$NPORT" "$c"); o=$(run "$OPID" "$OPORT" "$c")
    fi
    echo "| $r | $c | ${o% *} | ${o#* } | ${n% *} | ${n#* } |"
  done
done
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
