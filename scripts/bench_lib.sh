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
