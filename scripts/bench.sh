#!/usr/bin/env bash
# scripts/bench.sh [run.py options]: what `make bench` runs. Installs the
# peers and chart library when missing (skipped, not fatal, when that is not
# possible), builds everything into BUILD (default build), builds the peers
# Debian lacks from their crates into BUILD/peers (once; TENON_BENCH_PEERS=0
# skips that step), then runs the default suite and writes the report folder
# (default bench-report/).
# Examples: bash scripts/bench.sh --only larson --repeat 5
#           BUILD=build-rel bash scripts/bench.sh --baseline tenon
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bash scripts/install-bench-deps.sh
bash scripts/build.sh "$build"
if [ "${TENON_BENCH_PEERS:-1}" != 0 ]; then
  bash scripts/build-peers.sh "$build"
fi
# Prefer Debian's interpreter: python3-matplotlib is installed for it.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then py=/usr/bin/python3; fi
exec "$py" bench/run.py --build "$build" "$@"
