#!/usr/bin/env bash
# tests/freeze/run-peers.sh PROBE LIBTENON [probe args...]
# Runs the freeze probe under glibc, tenon and every peer allocator installed
# (jemalloc, tcmalloc, mimalloc), one after another, and prints one line per
# allocator: "<name> RESULT freezes=... stalled=... max_stall_ms=...".
# A measurement for the report, not a test: stalls are expected from peers.
set -uo pipefail
probe=$1; tenon=$2; shift 2
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--freezes 2000 --deadline-ms 300 --max-seconds 90)
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
declare -A libs=([glibc]="" [tenon]=$tenon [jemalloc]=$lib/libjemalloc.so.2
                 [tcmalloc]=$lib/libtcmalloc_minimal.so.4 [mimalloc]=$lib/libmimalloc.so.2)
for name in glibc tenon jemalloc tcmalloc mimalloc; do
  so=${libs[$name]}
  if [ -n "$so" ] && [ ! -e "$so" ]; then echo "$name not installed ($so)"; continue; fi
  out=$(LD_PRELOAD=$so "$probe" "${args[@]}" 2>&1)
  echo "$out" | grep -E 'threads=|time cap' | sed "s/^/$name /"
  echo "$out" | grep '^RESULT' | sed "s/^/$name /"
done
