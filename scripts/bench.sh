#!/usr/bin/env bash
# scripts/bench.sh [run.py options]: what `make bench` runs. Installs the
# peers and chart library when missing (skipped, not fatal, when that is not
# possible), builds everything into BUILD (default build), then runs the
# default suite and writes the report folder (default bench-report/).
# Examples: bash scripts/bench.sh --only larson --repeat 5
#           BUILD=build-rel bash scripts/bench.sh --baseline tenon
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bash scripts/install-bench-deps.sh
bash scripts/build.sh "$build"
# Prefer Debian's interpreter: python3-matplotlib is installed for it.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then py=/usr/bin/python3; fi
exec "$py" bench/run.py --build "$build" "$@"
