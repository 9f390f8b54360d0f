#!/usr/bin/env bash
# Two sift-server builds against redis-server in the same minutes: each round runs redis SET,
# then BF.ADD and BF.EXISTS on both builds (the order of the two alternating between rounds),
# with -P 64, then redis SET and BF.ADD on both unpipelined. Both sift-servers run with their
# defaults (appendfsync always), each on one `BF.RESERVE bf 0.01 10000000`; redis-server without
# persistence. redis-benchmark -c 50 --threads 2 -r 10000000, as scripts/bench_server.sh.
#
#   scripts/bench_server_ab.sh OLD_BINARY NEW_BINARY
#
# Knobs: ROUNDS=4, REQUESTS_P=6000000 (-P 64), REQUESTS=200000 (unpipelined). redis-benchmark
# with --threads ends a test on a 250 ms tick, so 2M pipelined requests (~2.5 s) are measured in
# ~10% steps; 6M keep the step near 3%.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
ROUNDS=${ROUNDS:-4}
REQUESTS_P=${REQUESTS_P:-6000000}
REQUESTS=${REQUESTS:-200000}
. scripts/bench_lib.sh
bench_workdir sift-ab

mkdir -p "$work/redis"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis" \
  --logfile "$work/redis/log" &
pids+=($!)
wait_ping "$RP"

# start_sift NAME BINARY -> prints the port
start_sift() {
  local dir="$work/$1"
  mkdir -p "$dir"
  RUST_LOG=warn "$2" --port 0 --dir "$dir/data" >"$dir/out" 2>"$dir/err" &
  pids+=($!)
  for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
  local addr
  addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
  [ -n "$addr" ] || { log "sift-server $1 did not start: $(cat "$dir/err")"; exit 1; }
  echo "${addr##*:}"
}
start_sift old "$OLD" >"$work/old.port"
start_sift new "$NEW" >"$work/new.port"
OP=$(cat "$work/old.port")
NP=$(cat "$work/new.port")
for p in "$OP" "$NP"; do
  wait_ping "$p"
  redis-cli -p "$p" BF.RESERVE bf 0.01 10000000 >/dev/null
done

# bench PORT REQUESTS PIPELINE COMMAND... -> requests/s
bench() {
  local port=$1 n=$2 p=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$n" -P "$p" -r 10000000 --threads 2 --csv "$@" |
    tail -1 | cut -d, -f2 | tr -d '"'
}
# both PORT_FIRST REQUESTS PIPELINE COMMAND... -> "old new" requests/s
both() {
  local first=$1; shift
  local a b
  if [ "$first" = old ]; then
    a=$(bench "$OP" "$@"); b=$(bench "$NP" "$@"); echo "$a $b"
  else
    b=$(bench "$NP" "$@"); a=$(bench "$OP" "$@"); echo "$a $b"
  fi
}
r2() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "redis-benchmark -c 50 --threads 2 -r 10000000; -P 64: $REQUESTS_P requests, unpipelined:" \
  "$REQUESTS; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) before"
echo
echo "| round | redis SET -P 64 | BF.ADD -P 64 old | new | old ÷ SET | new ÷ SET |" \
  "BF.EXISTS -P 64 old | new | redis SET | BF.ADD old | new |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  first=$([ $((r % 2)) = 1 ] && echo old || echo new)
  s=$(bench "$RP" "$REQUESTS_P" 64 SET key:__rand_int__ xxx)
  read -r oa na <<<"$(both "$first" "$REQUESTS_P" 64 BF.ADD bf i:__rand_int__)"
  read -r oe ne <<<"$(both "$first" "$REQUESTS_P" 64 BF.EXISTS bf i:__rand_int__)"
  s1=$(bench "$RP" "$REQUESTS" 1 SET key:__rand_int__ xxx)
  read -r o1 n1 <<<"$(both "$first" "$REQUESTS" 1 BF.ADD bf i:__rand_int__)"
  printf '| %s | %.0f | %.0f | %.0f | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n' "$r" "$s" "$oa" "$na" \
    "$(r2 "$oa" "$s")" "$(r2 "$na" "$s")" "$oe" "$ne" "$s1" "$o1" "$n1"
done
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"
