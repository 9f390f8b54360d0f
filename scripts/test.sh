#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests drive (redis-cli, redis-server,
# libclang-dev, strace, LazyFS's build dependencies and postgresql from Debian, redis-py and xxhash from PyPI) when
# missing, then runs `cargo test --workspace`. Extra arguments go to cargo test; with a package
# (`scripts/test.sh -p sift-filters`) only that package is tested.
#
# Why the packages: the client tests run redis-cli and redis-py against sift-server; the RDB tests,
# the sift-redis module tests and the sift-client tests start a real redis-server (sift-client's
# also a 3-node cluster with redis-cli); the redis-module crate's bindgen needs libclang to build
# the module; sift-client's interoperability test runs scripts/redis_bitmap_bloom.py (redis-py,
# xxhash); sift-server's power-loss test (tests/powerloss.rs) builds LazyFS (g++, cmake, make,
# pkg-config, libfuse3-dev, fuse3, libtoml11-dev, libspdlog-dev: see scripts/build_lazyfs.sh) and
# mounts it (root, /dev/fuse), and it and the durability tests slow fdatasync with strace; the
# examples' tests (examples/) start their own PostgreSQL instances with initdb and pg_ctl (as the
# `postgres` account the package creates, when run as root). Without root (or sudo), install them
# by hand and re-run. Not installed here: Valkey 8.0.1, which sift-redis's tests also load the
# module into, comes from ../shared/bin beside the repository (Debian 12 has no package; or
# SIFT_VALKEY_SERVER); under CI=true those tests fail when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
for p in strace g++ cmake make pkg-config libfuse3-dev fuse3 libtoml11-dev libspdlog-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if [[ " ${need[*]} " == *" postgresql "* ]]; then
  # The tests make their own instances: no system-wide cluster created and started on 5432.
  $sudo mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/sift-tests.conf >/dev/null
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (apt-get)" >&2
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
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
  # The examples' tests fail without it too (they never skip): say why once, here.
  echo "PostgreSQL's server programs are missing (apt-get install -y postgresql)" >&2
  exit 1
fi
"$pg_bin/postgres" --version

# `--workspace` would win over a `-p`: leave it out when a package is named.
for arg in "$@"; do
  case "$arg" in -p | -p* | --package | --package=*) exec cargo test "$@" ;; esac
done
exec cargo test --workspace "$@"
