#!/usr/bin/env bash
# The README's test command (make test) and what .ci/run calls: every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)"
