#!/usr/bin/env bash
# scripts/build.sh DIR [cmake args...]: configure (once) and build into DIR.
set -euo pipefail
dir=${1:-build}; shift || true
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
