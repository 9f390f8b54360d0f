#!/usr/bin/env bash
# SETBIT / GETBIT throughput of sift-server against redis-server: the seeds'
# bitmap Bloom filter workload, REQUESTS random offsets (fixed seed) in one key of KEYSPACE bits
# (10M by default, a 1.25 MB string), pipelined through one connection with redis-cli --pipe.
#
# redis-server runs without persistence (the ceiling reference); sift-server in its default
# `appendfsync always` and in `everysec`. Each round runs both commands on every server back
# to back (the key deleted first, so every round sets the same bits from scratch), so load
# changes on a shared machine hit all alike; the table shows the median of ROUNDS rounds and,
# for sift, its ratio to redis-server.
#
# Knobs (environment): ROUNDS=3  REQUESTS=2000000  KEYSPACE=10000000 (bits)
#   BIN=path/to/sift-server (default: build the release binary)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-2000000}
KEYSPACE=${KEYSPACE:-10000000}

. "$(dirname "$0")/bench_lib.sh"

require_tools redis-server redis-cli python3 bc

sift_server_bin

bench_workdir sift-bench-bitmap

declare -A port_of results
mkdir -p "$work/redis"
port_of[redis]=$(free_port)
redis-server --port "${port_of[redis]}" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$work/redis" --logfile "$work/redis/log" &
pids+=($!)
wait_ping "${port_of[redis]}"

for mode in always everysec; do
  dir="$work/sift-$mode"
  mkdir -p "$dir"
  RUST_LOG=warn "$BIN" --port 0 --dir "$dir/data" --appendfsync "$mode" >"$dir/out" 2>"$dir/err" &
  pids+=($!)
  for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
  addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
  [ -n "$addr" ] || { log "sift-server $mode did not start: $(cat "$dir/err")"; exit 1; }
  port_of[sift-$mode]=${addr##*:}
  wait_ping "${port_of[sift-$mode]}"
done

servers="redis sift-always sift-everysec"

# The request streams: random offsets, fixed seed. (redis-benchmark cannot drive this: its
# __rand_int__ is 12 zero-padded digits, and Redis, like sift-server, refuses an offset with a
# leading zero.) redis-cli --pipe writes one stream on one connection and reads the replies as
# they come: the deepest pipelining a client can do (Spring's executePipelined of a big list).
python3 - "$work" "$REQUESTS" "$KEYSPACE" <<'PY'
import random, sys
work, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(8)
offs = [str(rnd.randrange(m)) for _ in range(n)]
for name, fmt in (("setbit", "*4\r\n$6\r\nSETBIT\r\n$2\r\nbm\r\n${}\r\n{}\r\n$1\r\n1\r\n"),
                  ("getbit", "*3\r\n$6\r\nGETBIT\r\n$2\r\nbm\r\n${}\r\n{}\r\n")):
    with open(f"{work}/{name}.resp", "w", newline="") as f:
        f.write("".join(fmt.format(len(o), o) for o in offs))
PY

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $load_before ($(nproc) cores)"

for round in $(seq 1 "$ROUNDS"); do
  for s in $servers; do
    port=${port_of[$s]}
    redis-cli -p "$port" DEL bm >/dev/null
    for c in setbit getbit; do
      t0=$(date +%s.%N)
      out=$(redis-cli -p "$port" --pipe <"$work/$c.resp" 2>&1)
      t1=$(date +%s.%N)
      grep -q "errors: 0, replies: $REQUESTS" <<<"$out" || { log "$s $c: $out"; exit 1; }
      rps=$(echo "$REQUESTS / ($t1 - $t0)" | bc -l)
      log "round $round $c $s: $(printf '%.0f' "$rps") req/s"
      results["$c|$s"]+="$(printf '%.0f' "$rps") "
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "| command ($REQUESTS, random offsets < $KEYSPACE, redis-cli --pipe) | redis-server req/s | sift-server always req/s (ratio) | sift-server everysec req/s (ratio) |"
echo "|---|---:|---:|---:|"
for c in setbit getbit; do
  r=$(median <<<"${results[$c|redis]}")
  a=$(median <<<"${results[$c|sift-always]}")
  e=$(median <<<"${results[$c|sift-everysec]}")
  printf '| %s | %.0f | %.0f (%.2f) | %.0f (%.2f) |\n' "${c^^}" "$r" "$a" "$(echo "$a / $r" | bc -l)" \
    "$e" "$(echo "$e / $r" | bc -l)"
done
echo
echo "rounds: $ROUNDS; every run: $(for s in $servers; do for c in setbit getbit; do printf '%s/%s=[%s] ' "$c" "$s" "${results[$c|$s]% }"; done; done)"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
