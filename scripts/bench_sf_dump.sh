#!/usr/bin/env bash
# The full SF.DUMP of a large blocked filter, in its 16 MiB pieces (`SF.DUMP key <iterator>`
# until the iterator is 0), on two sift-server builds, alternating which goes first between
# rounds: seconds for the whole dump (wall, at the client, which includes moving 1 GB through
# redis-py), the server's CPU seconds for it (utime + stime from /proc), and the wall time of
# its first and last piece. Each server holds one
#   SF.RESERVE big 0.01 CAPACITY KIND blocked      (CAPACITY=760000000: about 1 GB)
# with 1000 items added, and runs with --appendonly no. The dumps of both builds are checked to
# be the same bytes (sha256), so the measure is of the same file.
#
#   scripts/bench_sf_dump.sh OLD_BINARY NEW_BINARY
#
# Knobs: ROUNDS=3, CAPACITY=760000000. Needs python3 with redis (scripts/test.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
ROUNDS=${ROUNDS:-3}
CAPACITY=${CAPACITY:-760000000}
. scripts/bench_lib.sh
bench_workdir sift-sf-dump

declare -A PORT PID
for name in old new; do
  bin=$OLD; [ "$name" = new ] && bin=$NEW
  start_bench_server server "$bin" "$work/$name"
  PORT[$name]=$srv_port
  PID[$name]=$srv_pid
  redis-cli -p "$srv_port" SF.RESERVE big 0.01 "$CAPACITY" KIND blocked >/dev/null
  redis-cli -p "$srv_port" SF.MADD big $(seq -f 'item%g' 1 1000) >/dev/null
  log "$name: $(redis-cli -p "$srv_port" SF.INFO big bytes | tail -1) bytes"
done

# dump PORT -> "total_s first_piece_s last_piece_s pieces bytes sha256"
dump() {
  python3 - "$1" <<'PY'
import hashlib, sys, time
import redis
r = redis.Redis(port=int(sys.argv[1]))
h, it, times, size = hashlib.sha256(), 0, [], 0
start = time.perf_counter()
while True:
    t = time.perf_counter()
    nxt, data = r.execute_command("SF.DUMP", "big", it)
    if nxt == 0:
        break
    times.append(time.perf_counter() - t)
    h.update(data)
    size += len(data)
    it = nxt
total = time.perf_counter() - start
print(f"{total:.2f} {times[0]:.3f} {times[-1]:.3f} {len(times)} {size} {h.hexdigest()}")
PY
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for round in $(seq 1 "$ROUNDS"); do
  order="old new"; [ $((round % 2)) -eq 0 ] && order="new old"
  declare -A sum=()
  for name in $order; do
    before=$(cpu_ticks "${PID[$name]}")
    out=$(dump "${PORT[$name]}")
    after=$(cpu_ticks "${PID[$name]}")
    cpu=$(python3 -c "print(round(($after - $before) / $(getconf CLK_TCK), 2))")
    sum[$name]=${out##* }
    read -r total first last pieces bytes _ <<<"$out"
    echo "round $round $name: full dump ${total} s, server CPU ${cpu} s ($pieces pieces, $bytes bytes; first piece ${first} s, last ${last} s)"
  done
  [ "${sum[old]}" = "${sum[new]}" ] || { log "the two builds dumped different bytes"; exit 1; }
done
