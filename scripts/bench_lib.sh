# Shared by the benchmark scripts (sourced, not run): logging, free ports, waiting for a server,
# and a work directory whose servers are stopped and removed on exit.

log() { printf '%s\n' "$*" >&2; }

# A TCP port free on 127.0.0.1 at the time of the call.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits (up to 10 s) until the server on port $1 answers PING; exits the script otherwise.
wait_ping() {
  for _ in $(seq 1 200); do
    redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  log "server on port $1 does not answer"; exit 1
}

# Sets `work` to a new temporary directory named after $1 and `pids` to an empty list; on exit,
# every pid appended to `pids` is killed and waited for, and the directory is removed.
bench_workdir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}

# Starts a server for MODE `server` (the sift-server binary $2, --appendonly no) or `module`
# (redis-server loading the module $2), with its files in directory $3; sets `srv_pid` and
# `srv_port`, appends the pid to `pids`, and waits until it answers.
start_bench_server() {
  local mode=$1 build=$2 dir=$3
  mkdir -p "$dir"
  if [ "$mode" = server ]; then
    RUST_LOG=warn "$build" --port 0 --dir "$dir/data" --appendonly no >"$dir/out" 2>"$dir/err" &
    srv_pid=$!
    for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
    srv_port=$(sed -n 's/.*listening on .*://p' "$dir/out" | head -1)
  else
    srv_port=$(free_port)
    redis-server --port "$srv_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/log" --loadmodule "$(realpath "$build")" &
    srv_pid=$!
  fi
  pids+=("$srv_pid")
  wait_ping "$srv_port"
}

# redis-benchmark drivers shared by bench_server.sh and bench_sketches.sh. They use the caller's
# $work, $BIN, $CLIENTS, $KEYSPACE, $THREADS and pids array.

# start_redis -> sets REDIS_PORT
start_redis() {
  mkdir -p "$work/redis"
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work/redis" --logfile "$work/redis/log" &
  pids+=($!)
  wait_ping "$REDIS_PORT"
}

# start_sift NAME [flags...] -> sets SIFT_PORT and SIFT_PID
start_sift() {
  local name=$1; shift
  local dir="$work/sift-$name"
  mkdir -p "$dir"
  RUST_LOG=warn "$BIN" --port 0 --dir "$dir/data" "$@" >"$dir/out" 2>"$dir/err" &
  SIFT_PID=$!
  pids+=("$SIFT_PID")
  for _ in $(seq 1 200); do grep -q "listening on" "$dir/out" && break; sleep 0.05; done
  local addr
  addr=$(sed -n 's/.*listening on //p' "$dir/out" | head -1)
  [ -n "$addr" ] || { log "sift-server $name did not start: $(cat "$dir/err")"; exit 1; }
  SIFT_PORT=${addr##*:}
  wait_ping "$SIFT_PORT"
}

# bench PORT REQUESTS PIPELINE COMMAND... -> requests/s
bench() {
  local port=$1 n=$2 p=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$n" -P "$p" -r "$KEYSPACE" \
    --threads "$THREADS" --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f-%.0f", lo, hi}'; }

# Exits unless every program named is on PATH.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { log "missing $tool (apt-get install redis-server redis-tools)"; exit 1; }
  done
}

# Sets BIN to the sift-server to measure: the one given in BIN, or this tree's release build.
sift_server_bin() {
  if [ -z "${BIN:-}" ]; then
    log "building sift-server (release)"
    cargo build --release -p sift-server >&2
    BIN="${CARGO_TARGET_DIR:-target}/release/sift-server"
  fi
  [ -x "$BIN" ] || { log "no binary at $BIN"; exit 1; }
}
