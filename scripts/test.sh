#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive (redis-cli, redis-server
# and libclang-dev from Debian, redis-py from PyPI) when missing, then runs `cargo test --workspace`.
# Extra arguments go to cargo test (e.g. `scripts/test.sh -p sift`).
#
# Why the packages: the client tests run redis-cli and redis-py against sift-server; the RDB tests
# and the sift-redis module tests start a real redis-server; the redis-module crate's bindgen needs
# libclang to build the module. Without root (or sudo), install them by hand and re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt-get)" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c "import redis" 2>/dev/null || python3 -m pip install --quiet redis

redis-cli --version
redis-server --version
python3 -c "import redis; print('redis-py', redis.__version__)"

exec cargo test --workspace "$@"
