#!/usr/bin/env bash
# Memory of a snapshot and of its recovery for one large Count-Min Sketch: a real sift-server
# (`--dir` on disk, `--appendonly no`), `CMS.INITBYDIM big WIDTH 2`, every counter written by
# `CMS.MERGE big 1 big` (so the whole sketch is resident), the peak reset (`echo 5 >
# /proc/PID/clear_refs`); then BGSAVE, whose peak is VmHWM once it ended; then kill -9 and a
# restart on the snapshot, whose VmHWM and VmRSS are read once it serves. Prints one line per run.
#
# Usage: scripts/bench_cms_snapshot_memory.sh BINARY [WIDTH]   (WIDTH=150000000: 1.2 GB)
# Knobs: PORT=7391; TYPE=topk measures a Top-K instead (`TOPK.RESERVE big 10 WIDTH 2 0.9`,
# 8 bytes a bucket, all written at creation); TYPE=tdigest a t-digest (`TDIGEST.CREATE big
# COMPRESSION WIDTH`, then VALUES=WIDTH/2 distinct values added in calls of 10 000, so that the
# compression a save makes leaves about WIDTH/4 centroids: 16 bytes each in memory, two RDB
# doubles each in the one-chunk dump). Needs redis-cli and bc.
set -euo pipefail
BIN=$1
WIDTH=${2:-150000000}
PORT=${PORT:-7391}
TYPE=${TYPE:-cms}
DIR=$(mktemp -d)
PID=
trap 'if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; fi; rm -rf "$DIR"' EXIT
kb() { awk -v f="$2:" '$1==f {print $2}' "/proc/$1/status"; }
start() {
  "$BIN" --port "$PORT" --dir "$DIR" --appendonly no >"$DIR/log.txt" 2>&1 &
  PID=$!
  until redis-cli -p "$PORT" PING >/dev/null 2>&1; do sleep 0.2; done
}
stop() { kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

start
if [ "$TYPE" = tdigest ]; then
  VALUES=${VALUES:-$((WIDTH / 2))}
  redis-cli -p "$PORT" TDIGEST.CREATE big COMPRESSION "$WIDTH" >/dev/null
  awk -v n="$VALUES" 'BEGIN {
    for (i = 0; i < n; i += 10000) {
      m = (n - i < 10000) ? n - i : 10000
      printf "*%d\r\n$11\r\nTDIGEST.ADD\r\n$3\r\nbig\r\n", m + 2
      for (j = 0; j < m; j++) { v = sprintf("%d", (i + j) * 7919 % n); printf "$%d\r\n%s\r\n", length(v), v }
    }
  }' | redis-cli -p "$PORT" --pipe >/dev/null
  READ=(TDIGEST.QUANTILE big 0.01 0.5 0.99)
elif [ "$TYPE" = topk ]; then
  redis-cli -p "$PORT" TOPK.RESERVE big 10 "$WIDTH" 2 0.9 >/dev/null
  redis-cli -p "$PORT" TOPK.ADD big a b a >/dev/null
  READ=(TOPK.LIST big)
else
  redis-cli -p "$PORT" CMS.INITBYDIM big "$WIDTH" 2 >/dev/null
  redis-cli -p "$PORT" CMS.INCRBY big a 5 b 7 >/dev/null
  redis-cli -p "$PORT" CMS.MERGE big 1 big >/dev/null
  READ=(CMS.QUERY big a b)
fi
sleep 1
echo 5 >"/proc/$PID/clear_refs"
steady=$(kb "$PID" VmRSS)
redis-cli -p "$PORT" BGSAVE >/dev/null
while redis-cli -p "$PORT" INFO persistence | grep -q 'rdb_bgsave_in_progress:1'; do sleep 0.1; done
sleep 0.5
bgsave_hwm=$(kb "$PID" VmHWM)
query=$(redis-cli -p "$PORT" "${READ[@]}")
stop
size=$(du -b "$DIR"/snapshot-*.sift | awk '{s += $1} END {print s}')
t0=$(date +%s.%N)
start
t1=$(date +%s.%N)
restart_hwm=$(kb "$PID" VmHWM)
restart_rss=$(kb "$PID" VmRSS)
query2=$(redis-cli -p "$PORT" "${READ[@]}")
stop
echo "bin=$BIN type=$TYPE width=$WIDTH snapshot_bytes=$size steady_rss_kB=$steady bgsave_hwm_kB=$bgsave_hwm" \
  "restart_hwm_kB=$restart_hwm restart_rss_kB=$restart_rss restart_s=$(echo "$t1 - $t0" | bc)" \
  "same_query=$([ "$query" = "$query2" ] && echo yes || echo no)"
