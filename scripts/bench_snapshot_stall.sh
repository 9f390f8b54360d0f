#!/usr/bin/env bash
# How long a writer of one big value waits while a snapshot or a log rewrite is taken (issue 15
# item 7): starts a real sift-server (appendfsync no, so that fsync latency does not hide the
# snapshot's own), creates one value of about GB bytes, then the Rust probe
# (scripts/stall_probe.rs) sends one write to it in a loop (unpipelined,
# each timed), and after WARMUP seconds another connection sends SNAPSHOT (BGSAVE or
# BGREWRITEAOF) and polls INFO persistence until it ends. SNAPSHOT=none sends nothing and
# measures a window of WINDOW seconds: the same writer's waits with no snapshot, the machine's.
# Prints per build and round: the value's size, the worst write before the window, the worst,
# p99 and p99.9 during it, the worst per GB; item 7's goal is a worst under 10 ms per GB.
#
# TYPE=bf: `BF.RESERVE big 0.0001 <capacity>` and BF.ADD. TYPE=cf: `CF.RESERVE big <capacity>`
# (bucket size 2, so about GB bytes of slots; capacity at most 2^30, so at most 1 GiB) and
# CF.ADD. TYPE=sf: sift's blocked Bloom filter, `SF.RESERVE big 0.0001 <capacity> KIND blocked`
# and SF.ADD. TYPE=qf: sift's quotient filter, `SF.RESERVE big 0.0001 <capacity> KIND quotient`
# (about GB bytes of table) and SF.ADD. TYPE=cms: a Count-Min Sketch, `CMS.INITBYDIM big <width> 4` (about GB bytes of
# counters) and `CMS.INCRBY big <item> 1`.
#
# On a shared machine the server and the probe run under real-time scheduling (RT=10: `chrt -f
# 10`, needs root; RT= to run them as ordinary processes), so that other users' processes do not
# preempt them between two timestamps. The kernel's real-time throttling could then stop them
# for 50 ms of every second in which they use 95% of a core: `sched_rt_runtime_us` (and the root
# cgroup's `cpu.rt_runtime_us`) is set to -1 for each run only, and put back after it and on
# exit (RT_UNTHROTTLE=0 leaves them alone). On the VM of docs/BENCHMARKS.md 50 ms waits for a
# CPU came once a second with the knobs lifted or not.
#
# Knobs (environment): TYPE=bf GB=1.2 ROUNDS=2 WARMUP=2 WINDOW=10 SNAPSHOT=bgsave RT=10
# SERVER_ARGS="--appendfsync no" BIN="old/sift-server new/sift-server" (default: the release
# build of this tree), run alternately.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=${TYPE:-bf}
GB=${GB:-1.2}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2}
WINDOW=${WINDOW:-10}
SNAPSHOT=${SNAPSHOT:-bgsave}
RT=${RT-10}
SERVER_ARGS=${SERVER_ARGS:---appendfsync no}
. scripts/bench_lib.sh
require_tools redis-cli python3

PROBE="${CARGO_TARGET_DIR:-target}/stall-probe/stall_probe"
mkdir -p "$(dirname "$PROBE")"
log "building the probe (rustc -O)"
rustc --edition 2021 -O -C debuginfo=1 scripts/stall_probe.rs -o "$PROBE" >&2
if [ -z "${BIN:-}" ]; then
  log "building sift-server (release)"
  cargo build --release -p sift-server >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/sift-server"
fi
rt=()
[ -n "$RT" ] && rt=(chrt -f "$RT")
RT_UNTHROTTLE=${RT_UNTHROTTLE:-1}
# With RT group scheduling the root cgroup has its own budget (cpu.rt_runtime_us, cgroup v1),
# which the global knob does not change: both are lifted, the cgroup's after the global one.
rt_knobs=(/proc/sys/kernel/sched_rt_runtime_us)
[ -w /sys/fs/cgroup/cpu/cpu.rt_runtime_us ] && rt_knobs+=(/sys/fs/cgroup/cpu/cpu.rt_runtime_us)
rt_saved=()
for k in "${rt_knobs[@]}"; do rt_saved+=("$(cat "$k")"); done
rt_restore() {
  [ -z "$RT" ] || [ "$RT_UNTHROTTLE" = 0 ] && return 0
  local i
  for ((i = ${#rt_knobs[@]} - 1; i >= 0; i--)); do echo "${rt_saved[$i]}" >"${rt_knobs[$i]}"; done
}
rt_unthrottle() {
  [ -z "$RT" ] || [ "$RT_UNTHROTTLE" = 0 ] && return 0
  local k
  for k in "${rt_knobs[@]}"; do echo -1 >"$k"; done
}
bench_workdir sift-stall
trap 'rt_restore; bench_cleanup' EXIT
case "$TYPE" in
  # Bits per item at 0.0001 in the first link: RedisBloom tightens the first link to 0.00005.
  bf) capacity=$(python3 -c "import math; print(int($GB * 8e9 / (-math.log(0.00005) / math.log(2) ** 2)))") ;;
  # One byte per item: the slots are nextPow2(capacity / 2) buckets of 2.
  cf) capacity=$(python3 -c "print(min(int($GB * 1e9), 1 << 30))") ;;
  # About 21 bits per item at 0.0001 (sift's blocked filter: a Bloom filter's bits and 10%).
  sf) capacity=$(python3 -c "import math; print(int($GB * 8e9 / (-math.log(0.0001) / math.log(2) ** 2 * 1.1)))") ;;
  # 14-bit remainders at 0.0001 (r = ceil(log2(0.95 / 0.0001))): r + 2.125 bits per slot,
  # a slot per 0.95 items.
  qf) capacity=$(python3 -c "print(int($GB * 8e9 * 0.95 / (14 + 2.125)))") ;;
  # Four rows of 4-byte counters.
  cms) capacity=$(python3 -c "print(int($GB * 1e9 / 16))") ;;
  *) log "TYPE must be bf, cf, sf, qf or cms"; exit 1 ;;
esac
case "$TYPE" in
  bf) write="BF.ADD big {}" ;;
  cf) write="CF.ADD big {}" ;;
  sf | qf) write="SF.ADD big {}" ;;
  cms) write="CMS.INCRBY big {} 1" ;;
esac
log "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"

printf '| build | window | value bytes | worst before ms | worst during ms | p99 during ms | p99.9 during ms | worst ms per GB | window s | writes during |\n|---|---|---|---|---|---|---|---|---|---|\n'
run=0
for _ in $(seq 1 "$ROUNDS"); do
  for bin in $BIN; do
    run=$((run + 1))
    dir="$work/run-$run"
    mkdir -p "$dir"
    RUST_LOG=warn "${rt[@]}" "$bin" --port 0 --dir "$dir/data" $SERVER_ARGS >"$dir/out" 2>"$dir/err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 200); do grep -qs "listening on" "$dir/out" && break; sleep 0.05; done
    addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
    [ -n "$addr" ] || { log "sift-server did not start: $(cat "$dir/err")"; exit 1; }
    port=${addr##*:}
    wait_ping "$port"
    case "$TYPE" in
      bf)
        redis-cli -p "$port" BF.RESERVE big 0.0001 "$capacity" >/dev/null
        size=$(redis-cli -p "$port" BF.INFO big SIZE) ;;
      cf)
        redis-cli -p "$port" CF.RESERVE big "$capacity" >/dev/null
        size=$(redis-cli -p "$port" CF.INFO big | sed -n '/^Size$/{n;p}') ;;
      sf)
        redis-cli -p "$port" SF.RESERVE big 0.0001 "$capacity" KIND blocked >/dev/null
        size=$(redis-cli -p "$port" SF.INFO big BYTES) ;;
      qf)
        redis-cli -p "$port" SF.RESERVE big 0.0001 "$capacity" KIND quotient >/dev/null
        size=$(redis-cli -p "$port" SF.INFO big BYTES) ;;
      cms)
        redis-cli -p "$port" CMS.INITBYDIM big "$capacity" 4 >/dev/null
        size=$((capacity * 16)) ;;
    esac
    case "$size" in ''|*[!0-9]*) log "could not create the $TYPE value: $size"; exit 1 ;; esac
    rt_unthrottle
    "${rt[@]}" "$PROBE" --port "$port" --write "$write" --snapshot "$SNAPSHOT" --warmup "$WARMUP" \
      --window "$WINDOW" --bytes "$size" --label "$bin" || { log "the probe failed"; exit 1; }
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    rt_restore
    log "load average after run $run: $(cut -d' ' -f1-3 /proc/loadavg)"
    rm -rf "$dir"
  done
done
