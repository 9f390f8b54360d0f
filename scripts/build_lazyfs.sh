#!/usr/bin/env bash
# Builds LazyFS (https://github.com/dsrhaslab/lazyfs, MIT) for the power-loss test
# (crates/sift-server/tests/powerloss.rs), out of its source tree, with Debian's packages:
#
#   scripts/build_lazyfs.sh SRC OUT      -> OUT/bin/lazyfs (nothing is done when it exists)
#
# SRC is a LazyFS checkout (../shared/tools/lazyfs, read-only in CI): it is copied to OUT/src
# and built there. LazyFS's CMake fetches toml11 v3.7.1 and spdlog v1.10.0 from GitHub; Debian's
# libtoml11-dev (3.7.1) and libspdlog-dev (1.10.0) stand in for them through
# FETCHCONTENT_SOURCE_DIR_* overrides, so no network is needed and the source is not changed.
# The packages (g++ cmake make pkg-config libfuse3-dev fuse3 libtoml11-dev libspdlog-dev) are
# installed by scripts/test.sh.
set -euo pipefail
src=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
[ -x "$out/bin/lazyfs" ] && exit 0
log() { echo "[build_lazyfs] $*" >&2; }
for tool in g++ cmake make pkg-config; do
  command -v "$tool" >/dev/null || { log "$tool is missing (scripts/test.sh installs it)"; exit 1; }
done
pkg-config --exists fuse3 || { log "libfuse3-dev is missing (scripts/test.sh installs it)"; exit 1; }

work="$out/build.$$"
rm -rf "$work"
mkdir -p "$work/deps/toml" "$work/deps/spdlog"
cp -r "$src/." "$work/src"
chmod -R u+w "$work/src"
cat > "$work/deps/toml/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.19)
project(toml11_debian CXX)
# Debian's libtoml11-dev (header-only /usr/include/toml.hpp) in place of the v3.7.1 checkout
add_library(toml11_debian INTERFACE)
add_library(toml11::toml11 ALIAS toml11_debian)
CMAKE
cat > "$work/deps/spdlog/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(spdlog_debian CXX)
# Debian's libspdlog-dev (1.10.0, shared, external fmt) in place of the v1.10.0 tarball
find_package(spdlog REQUIRED GLOBAL)
add_library(spdlog INTERFACE)
target_link_libraries(spdlog INTERFACE spdlog::spdlog)
CMAKE
jobs=$(nproc)
log "building libpcache (log: $work/libpcache.log)"
(cd "$work/src/libs/libpcache" && mkdir -p build && cd build &&
  cmake -DFETCHCONTENT_SOURCE_DIR_TOML="$work/deps/toml" \
        -DFETCHCONTENT_SOURCE_DIR_SPDLOG="$work/deps/spdlog" .. &&
  cmake --build . -j"$jobs") > "$work/libpcache.log" 2>&1 ||
  { tail -30 "$work/libpcache.log" >&2; log "libpcache build failed"; exit 1; }
log "building lazyfs (log: $work/lazyfs.log)"
# Debian's spdlog headers expect the compiled library with an external fmt.
(cd "$work/src/lazyfs" && mkdir -p build && cd build &&
  cmake -DLAZYFS_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS="-DSPDLOG_COMPILED_LIB" \
        -DCMAKE_CXX_STANDARD_LIBRARIES="-lspdlog -lfmt" \
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$out/lib" .. &&
  cmake --build . -j"$jobs") > "$work/lazyfs.log" 2>&1 ||
  { tail -30 "$work/lazyfs.log" >&2; log "lazyfs build failed"; exit 1; }
mkdir -p "$out/lib" "$out/bin"
cp -a "$work/src/libs/libpcache/build/"libpcache.so* "$out/lib/"
cp "$work/src/lazyfs/build/lazyfs" "$out/bin/lazyfs.tmp"
mv "$out/bin/lazyfs.tmp" "$out/bin/lazyfs"
rm -rf "$work"
log "built $out/bin/lazyfs"
