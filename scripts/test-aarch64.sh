#!/usr/bin/env bash
# Cross-builds tenon and its tests for aarch64 and runs them under qemu-user:
# once with the default 4 KiB pages, once with 64 KiB pages (QEMU_PAGESIZE,
# qemu-aarch64's -p; the allocator reads the page size at run time).
# Excludes the labels that LD_PRELOAD or measure (preload|bench|freeze).
# Build dirs are reused: build-aarch64-gtest (GoogleTest for aarch64, built
# once from Debian's sources in /usr/src/googletest) and build-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/install-deps.sh gcc-aarch64-linux-gnu g++-aarch64-linux-gnu \
  libc6-dev-arm64-cross qemu-user googletest

toolchain=$root/cmake/aarch64-linux-gnu.cmake
jobs=$(nproc)

# GoogleTest for aarch64: Debian ships only the host build, so build the
# sources once and install them into the build dir.
gt=$root/build-aarch64-gtest
if [ ! -f "$gt/install/lib/cmake/GTest/GTestConfig.cmake" ]; then
  echo "test-aarch64: building GoogleTest for aarch64"
  cmake -S /usr/src/googletest -B "$gt" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_INSTALL_PREFIX="$gt/install" >/dev/null
  cmake --build "$gt" -j"$jobs"
  cmake --install "$gt" >/dev/null
fi

cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DTENON_BUILD_BENCH=OFF \
  -DGTest_DIR="$gt/install/lib/cmake/GTest" >/dev/null
cmake --build build-aarch64 -j"$jobs"

status=0
for page in 4096 65536; do
  echo "test-aarch64: running the tests under qemu-aarch64 with ${page}-byte pages"
  if QEMU_PAGESIZE=$page ctest --test-dir build-aarch64 --output-on-failure -j"$jobs" \
       -LE 'preload|bench|freeze' --no-tests=ignore; then
    echo "test-aarch64: pages=$page PASS"
  else
    echo "test-aarch64: pages=$page FAIL"
    status=1
  fi
done
exit $status
