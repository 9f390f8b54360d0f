#!/usr/bin/env bash
# Issue 5, "Speed": reproduces the tables of docs/BENCHMARKS.md, section "Issue 5: the sift
# command line".
#
#   scripts/bench_cli.sh            # 3 rounds of each measurement
#   ROUNDS=1 scripts/bench_cli.sh   # quicker
#   SIFT_OLD=/path/to/old/sift scripts/bench_cli.sh   # also time another sift binary
#
# 1. dedup: 10M URL lines (30% repeats, seed 42, ~812 MB) through `awk '!seen[$0]++'` and
#    `sift dedup -n 10M -p 0.001` (and `sift dedup` with no -n, a scalable filter), alternating,
#    each under /usr/bin/time (wall, user, sys, max RSS); output line counts compared with awk's.
# 2. build: 100M database-style keys (seed 7, ~2.36 GB), read once to warm the page cache, then
#    `sift build -n 100M -p 0.01` (blocked Bloom, the default family) timed the same way.
#
# Generated data goes to $DATA (default /tmp/sift-bench-cli), never into the repository. Needs
# ~3.3 GB of disk there and ~3.5 GB of free memory for the page cache.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DATA=${DATA:-/tmp/sift-bench-cli}
mkdir -p "$DATA"
RES="$DATA/results.tsv"

cargo build --release -q -p sift-filters-cli --bin sift --example gen_keys
TARGET=${CARGO_TARGET_DIR:-target}
SIFT="$TARGET/release/sift"
GEN="$TARGET/release/examples/gen_keys"

URLS="$DATA/urls-10m.txt"
KEYS="$DATA/keys-100m.txt"
[ -s "$URLS" ] || "$GEN" urls 10000000 0.3 42 > "$URLS"
[ -s "$KEYS" ] || "$GEN" keys 100000000 0 7 > "$KEYS"

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/{print $2}') GB RAM"
echo "# awk: $(readlink -f "$(command -v awk)") ($(awk -W version 2>&1 | head -1))"
echo "# inputs: $(wc -l < "$URLS") URL lines, $(stat -L -c %s "$URLS") bytes; $(wc -l < "$KEYS") keys, $(stat -L -c %s "$KEYS") bytes"

# time_run NAME OUTFILE CMD...: runs CMD with stdout to OUTFILE, appends a result row:
# name, wall s, user s, sys s, max RSS KiB, output lines, load average (1 min) before, after.
time_run() {
  local name=$1 out=$2
  shift 2
  local load0 load1 lines
  load0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S %M" -o "$DATA/time.txt" "$@" > "$out" 2> "$DATA/stderr.txt"
  load1=$(cut -d' ' -f1 /proc/loadavg)
  lines=$(wc -l < "$out")
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(tail -1 "$DATA/time.txt" | tr ' ' '\t')" "$lines" "$load0" "$load1" >> "$RES"
  sed "s/^/#   $name: /" "$DATA/stderr.txt"
}

: > "$RES"
cat "$URLS" > /dev/null
for r in $(seq 1 "$ROUNDS"); do
  echo "# dedup round $r"
  time_run awk "$DATA/out-awk.txt" awk '!seen[$0]++' "$URLS"
  time_run "sift-dedup-n" "$DATA/out-sift.txt" "$SIFT" dedup -n 10M -p 0.001 "$URLS"
  time_run "sift-dedup-scalable" "$DATA/out-sift-scalable.txt" "$SIFT" dedup -p 0.001 "$URLS"
  if [ -n "${SIFT_OLD:-}" ]; then
    time_run "old-sift-dedup-n" "$DATA/out-old.txt" "$SIFT_OLD" dedup -n 10M -p 0.001 "$URLS"
  fi
done
cat "$KEYS" > /dev/null
echo "# build: warm-up run"
"$SIFT" build -q -n 100M -p 0.01 -o "$DATA/keys.sift" "$KEYS"
for r in $(seq 1 "$ROUNDS"); do
  echo "# build round $r"
  time_run "sift-build" /dev/null "$SIFT" build -n 100M -p 0.01 -o "$DATA/keys.sift" "$KEYS"
  if [ -n "${SIFT_OLD:-}" ]; then
    time_run "old-sift-build" /dev/null "$SIFT_OLD" build -n 100M -p 0.01 -o "$DATA/keys-old.sift" "$KEYS"
  fi
done

python3 - "$RES" <<'EOF'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    name, wall, user, sys_, rss, lines, l0, l1 = line.rstrip('\n').split('\t')
    rows.setdefault(name, []).append(dict(wall=float(wall), cpu=float(user) + float(sys_), user=float(user),
                                          sys=float(sys_), rss=int(rss), lines=int(lines), load=(float(l0) + float(l1)) / 2))
def med(name, k):
    return st.median(r[k] for r in rows[name])
print("\n| run | rounds | wall s (median) | CPU s user+sys (median) | max RSS MiB (median) | output lines | load avg (mean) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, rs in rows.items():
    print(f"| {name} | {len(rs)} | {med(name,'wall'):.2f} | {med(name,'cpu'):.2f} | {med(name,'rss')/1024:.1f} | "
          f"{rs[-1]['lines'] if 'build' not in name else '-'} | {st.mean(r['load'] for r in rs):.1f} |")
if 'awk' in rows:
    n = 10_000_000
    print("\n| dedup, 10M lines | lines/s (wall) | × awk (wall) | × awk (CPU time) | RSS ÷ awk's | lines out − awk's |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in [k for k in rows if 'dedup' in k or k == 'awk']:
        print(f"| {name} | {n/med(name,'wall')/1e6:.2f} M | {med('awk','wall')/med(name,'wall'):.2f} | "
              f"{med('awk','cpu')/med(name,'cpu'):.2f} | {med(name,'rss')/med('awk','rss'):.3f} | "
              f"{rows[name][-1]['lines'] - rows['awk'][-1]['lines']} |")
    # Per-round ratios (same round = same moment of machine load).
    for name in [k for k in rows if 'dedup' in k]:
        per = [a['wall'] / s['wall'] for a, s in zip(rows['awk'], rows[name])]
        print(f"<!-- {name}: per-round wall ratios vs awk: {', '.join(f'{x:.2f}' for x in per)} -->")
for name in [k for k in rows if 'build' in k]:
    n = 100_000_000
    w, c = med(name, 'wall'), med(name, 'cpu')
    print(f"\n{name}: {n/w/1e6:.2f} M keys/s (wall, median of {len(rows[name])}); "
          f"CPU {c:.2f} s = {n/c/1e6:.2f} M keys per CPU-second; rounds (wall s): "
          + ", ".join("%.2f" % r["wall"] for r in rows[name]))
EOF
