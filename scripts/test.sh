#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive (redis-cli, redis-server,
# libclang-dev, strace and LazyFS's build dependencies from Debian, redis-py and xxhash from PyPI) when
# missing, then runs `cargo test --workspace`. Extra arguments go to cargo test (e.g.
# `scripts/test.sh -p sift-filters`).
#
# Why the packages: the client tests run redis-cli and redis-py against sift-server; the RDB tests,
# the sift-redis module tests and the sift-client tests start a real redis-server (sift-client's
# also a 3-node cluster with redis-cli); the redis-module crate's bindgen needs libclang to build
# the module; sift-client's interoperability test runs scripts/redis_bitmap_bloom.py (redis-py,
# xxhash); sift-server's power-loss test (tests/powerloss.rs) builds LazyFS (g++, cmake, make,
# pkg-config, libfuse3-dev, fuse3, libtoml11-dev, libspdlog-dev: see scripts/build_lazyfs.sh) and
# mounts it (root, /dev/fuse), and it and the durability tests slow fdatasync with strace. Without
# root (or sudo), install them by hand and re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
for p in strace g++ cmake make pkg-config libfuse3-dev fuse3 libtoml11-dev libspdlog-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt-get)" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c "import redis" 2>/dev/null || python3 -m pip install --quiet redis
# xxhash: scripts/redis_bitmap_bloom.py (sift-client's interoperability test) hashes with XXH3.
python3 -c "import xxhash" 2>/dev/null || python3 -m pip install --quiet xxhash

redis-cli --version
redis-server --version
python3 -c "import redis; print('redis-py', redis.__version__)"
python3 -c "import xxhash; print('xxhash', xxhash.VERSION)"

exec cargo test --workspace "$@"
