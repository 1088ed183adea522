#!/usr/bin/env bash
# compare_with_and_without.sh LIBTENON CASE_SCRIPT
# Runs CASE_SCRIPT (a bash script printing its results on stdout) twice in the
# same scratch directory: once plainly, once with LD_PRELOAD=LIBTENON exported
# (so bash and every process it starts use tenon). Passes when both runs exit
# 0 and print the same stdout and stderr.
set -uo pipefail
lib=$1
case_script=$2
export SRC
SRC=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$case_script" .sh)

if [ ! -f "$lib" ]; then
  echo "FAIL: $lib does not exist" >&2
  exit 1
fi
# A mistyped or unloadable library is ignored by ld.so with a warning, which
# would make every comparison pass vacuously: check that it really loads.
if ! LD_PRELOAD=$lib grep -q libtenon /proc/self/maps; then
  echo "FAIL: LD_PRELOAD=$lib does not load it into a process" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tenon-preload-$name.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
work=$scratch/work   # the same path for both runs (gcc -g records it)
results=$scratch/results
mkdir -p "$results"

run() {  # run LABEL [LD_PRELOAD value]
  local label=$1 preload=${2:-}
  rm -rf "$work" && mkdir -p "$work"
  local rc
  (cd "$work" && if [ -n "$preload" ]; then export LD_PRELOAD=$preload; fi &&
    exec timeout 240 bash "$case_script") >"$results/$label.out" 2>"$results/$label.err"
  rc=$?
  echo "$rc" >"$results/$label.rc"
}

start=$(date +%s.%N)
run plain
mid=$(date +%s.%N)
run tenon "$lib"
end=$(date +%s.%N)
printf '%s: plain %.2f s, with tenon %.2f s\n' "$name" "$(echo "$mid - $start" | bc)" "$(echo "$end - $mid" | bc)"

status=0
for label in plain tenon; do
  rc=$(cat "$results/$label.rc")
  if [ "$rc" != 0 ]; then
    echo "FAIL: $name exited with $rc ($label run; 124 = timed out after 240 s); its stderr:" >&2
    tail -n 30 "$results/$label.err" >&2
    status=1
  fi
done
if ! diff -u "$results/plain.out" "$results/tenon.out" >"$results/out.diff"; then
  echo "FAIL: $name: stdout differs with LD_PRELOAD=$lib (- plain, + tenon):" >&2
  head -n 40 "$results/out.diff" >&2
  status=1
fi
if ! diff -u "$results/plain.err" "$results/tenon.err" >"$results/err.diff"; then
  echo "FAIL: $name: stderr differs with LD_PRELOAD=$lib (- plain, + tenon):" >&2
  head -n 40 "$results/err.diff" >&2
  status=1
fi
[ $status = 0 ] && echo "$name: same output ($(wc -l <"$results/plain.out") lines) with and without tenon"
exit $status
