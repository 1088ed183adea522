#!/usr/bin/env bash
# trace_roundtrip.sh TRACE_LIB REPLAY PROGRAM TENON_LIB
# Trace a program with known calls (trace_program.c), then check:
#  - the trace holds exactly the calls and bytes its worker threads made;
#  - tenon-replay replays every one of them (same calls, same bytes) under
#    glibc and under tenon, every block intact;
#  - a forked child does not write into the parent's trace (TENON_TRACE
#    without %p: the child stops tracing), and with %p writes its own file.
set -euo pipefail
trace_lib=$1 replay=$2 program=$3 tenon=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "trace_roundtrip: FAIL: $*"; exit 1; }
field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<"$1" | head -1; }  # field LINE KEY

expect=$(LD_PRELOAD=$trace_lib TENON_TRACE=$dir/t "$program" 4 2000 fork)
echo "$expect"
[ -s "$dir/t" ] || fail "no trace written"
summary=$("$replay" --summary "$dir/t")
echo "$summary"
# The workers are every thread but the first (main).
workers=$(grep '^THREAD' <<<"$summary" | grep -v '^THREAD n=1 ' || true)
[ "$(wc -l <<<"$workers")" = 8 ] || fail "expected 8 worker threads (4 per phase) in the trace"
# The C library's thread teardown calls free(NULL) through the interposed
# name; the program's own calls are the rest.
sum() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$workers" | awk '{s += $1} END {print s}'; }
nulls=$(sum null_frees)
for key in calls malloc calloc realloc aligned free bytes; do
  want=$(field " $expect" "$key")
  got=$(sum "$key")
  case $key in calls|free) got=$((got - nulls)) ;; esac
  [ "$want" = "$got" ] || fail "workers' $key: the program made $want, the trace holds $got (besides $nulls free(NULL))"
done
main_calls=$(sed -n 's/^THREAD n=1 calls=\([0-9]*\).*/\1/p' <<<"$summary")
[ "${main_calls:-0}" -lt 1000 ] || fail "the main thread has $main_calls calls: the forked child's 10000 got into the parent's trace"
traced=$(grep '^TRACE' <<<"$summary")
[ "$(field "$traced" skipped)" = 0 ] || fail "the planner skipped calls of a clean program"

for under in glibc tenon; do
  preload=""; [ $under = tenon ] && preload=$tenon
  out=$(LD_PRELOAD=$preload "$replay" "$dir/t")
  echo "$out" | grep -E '^(REPLAY|OK|ERROR)'
  replayed=$(grep '^REPLAY' <<<"$out")
  for key in calls malloc calloc realloc aligned free bytes null_frees; do
    [ "$(field "$replayed" $key)" = "$(field "$traced" $key)" ] ||
      fail "replay under $under: $key $(field "$replayed" $key), the trace has $(field "$traced" $key)"
  done
  grep -q '^OK replay' <<<"$out" || fail "replay under $under did not finish intact"
  grep -q '^LAT op=malloc unit=ns n=[1-9]' <<<"$out" || fail "replay under $under printed no malloc latency"
done

# With %p every process writes its own file: the parent's holds the same
# worker calls, the child's its 5000 pairs.
LD_PRELOAD=$trace_lib TENON_TRACE=$dir/p.%p "$program" 4 2000 fork >/dev/null
files=("$dir"/p.*)
[ ${#files[@]} = 2 ] || fail "TENON_TRACE with %p: expected 2 files (parent, child), found ${#files[@]}"
child_ok=0
for f in "${files[@]}"; do
  s=$("$replay" --summary "$f" | grep '^TRACE')
  if [ "$(field "$s" threads)" = 1 ]; then
    [ "$(field "$s" malloc)" -ge 5000 ] && [ "$(field "$s" free)" -ge 5000 ] || fail "child's trace: $s"
    child_ok=1
  else
    [ "$(field "$s" calls)" = "$(field "$traced" calls)" ] || fail "parent's %p trace differs: $s vs $traced"
  fi
done
[ $child_ok = 1 ] || fail "no trace of the forked child"
echo "trace_roundtrip: PASS"
