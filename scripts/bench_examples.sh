#!/usr/bin/env bash
# The examples' benchmarks (docs/EXAMPLES.md): the cache-penetration guard, idempotent jobs and
# per-user "already shown" filters, each on its own PostgreSQL / redis-server / sift-server
# processes started by the demo binaries, release builds. Raw output (tables on stdout, each
# run's details on stderr) goes to $OUT (default target/bench-examples/).
#
#   scripts/bench_examples.sh                 # all three at the documented scale
#   scripts/bench_examples.sh guard           # one of guard | guard-file | jobs | feed | feed-window
#   SCALE=moderate scripts/bench_examples.sh  # a tenth of the size (1M rows, 100k users)
#   SCALE=small scripts/bench_examples.sh     # a quick pass at a hundredth of the size
#
# The machine is shared: every demo alternates its configurations round by round; compare the
# ranges over rounds, not single numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/bench-examples}
mkdir -p "$out"
what=${1:-all}

rows=10000000 ops=50000 warm=20000 jobs=100000 users=1000000 queries=100000
case "${SCALE:-full}" in
  full) ;;
  moderate) rows=1000000 ops=20000 warm=10000 jobs=20000 users=100000 queries=20000 ;;
  small) rows=100000 ops=5000 warm=2000 jobs=5000 users=10000 queries=5000 ;;
  *) echo "SCALE must be full, moderate or small" >&2; exit 2 ;;
esac

# One build per package kind: `--bins` would apply to every -p and skip the module (a library).
cargo build --release -q -p sift-examples --bins -p sift-server -p sift-filters-cli
cargo build --release -q -p sift-redis --lib
bin=target/release
uptime

run() {  # name, command...
  local name=$1; shift
  echo "== $name: $*" | tee "$out/$name.cmd"
  "$@" > "$out/$name.md" 2> "$out/$name.log"
  cat "$out/$name.md"
}

if [ "$what" = all ] || [ "$what" = guard ]; then
  run guard "$bin/guard-demo" --rows "$rows" --operations "$ops" --warmup "$warm" --rounds 3 \
    --json "$out/guard.jsonl"
fi
if [ "$what" = all ] || [ "$what" = guard-file ]; then
  # The offline path: dump-keys, sift build (both families), services started from the files.
  run guard-file "$bin/guard-demo" --rows "$rows" --operations "$ops" --warmup "$warm" --rounds 1 \
    --from-file --guards local,bf-module,bf-sift,client-redis --json "$out/guard-file.jsonl"
fi
if [ "$what" = all ] || [ "$what" = jobs ]; then
  run jobs "$bin/jobs-demo" --jobs "$jobs" --rounds 2
fi
if [ "$what" = all ] || [ "$what" = feed ]; then
  run feed "$bin/feed-demo" --users "$users" --per-day 40 --days 7 --queries "$queries" \
    --designs set,bf-module,bf-sift,sf-module,sf-sift --rounds 1
fi
if [ "$what" = all ] || [ "$what" = feed-window ]; then
  # sift-client's windowed filter loads a user a round trip per day (about 2,600-3,200 users a
  # second here at 10k users, docs/EXAMPLES.md), so it runs at a tenth of the users, next to the
  # set and the module's aging filter at the same size.
  run feed-window "$bin/feed-demo" --users "$((users / 10))" --per-day 40 --days 7 \
    --queries "$((queries / 4))" --designs set,window-redis,sf-module --rounds 1
fi
uptime
