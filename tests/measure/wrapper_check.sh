#!/usr/bin/env bash
# wrapper_check.sh TRACE_LIB NEXT PYTHON REPLAY RUN_EXAMPLE
# libtenon-trace.so preloaded in front of NEXT (glibc, or the file of another
# allocator) under a real program (Python with threads, run_example.sh):
#  - the program's output is the same as without any preload;
#  - the latency report names NEXT as the allocator the calls went to and
#    has samples of malloc and free;
#  - with TENON_TRACE the same program's trace replays intact under NEXT.
# Exits 77 (skipped) when NEXT is not installed.
set -euo pipefail
trace_lib=$1 next=$2 py=$3 replay=$4 run_example=$5
if [ "$next" = glibc ]; then
  preload=$trace_lib want='libc\.so'
else
  [ -e "$next" ] || { echo "wrapper_check: $next not installed: skipped"; exit 77; }
  preload="$trace_lib $next" want=$(basename "$next" | sed 's/\./\\./g')
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
TENON_LATENCY=1 bash "$run_example" "$preload" "$py" >"$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
cat "$dir/out"
grep -Eq "calls forwarded to malloc in .*$want" "$dir/out" || { echo "wrapper_check: FAIL: the calls did not go to $next"; exit 1; }
grep -Eq '^malloc +[1-9][0-9]* +ns' "$dir/out" || { echo "wrapper_check: FAIL: no malloc samples"; exit 1; }
grep -Eq '^free +[1-9][0-9]* +ns' "$dir/out" || { echo "wrapper_check: FAIL: no free samples"; exit 1; }
# Trace a threaded Python run under NEXT and replay it under NEXT.
PYTHONMALLOC=malloc TENON_TRACE=$dir/t LD_PRELOAD="$preload" "$py" -c '
import threading, json
def work(k): json.loads(json.dumps([{"k": i, "s": str(i) * (i % 9)} for i in range(20000 + k)]))
ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
print("traced")'
out=$(LD_PRELOAD=${preload#"$trace_lib"} "$replay" "$dir/t")
echo "$out" | grep -E '^(TRACE|REPLAY|OK|ERROR)'
grep -Eq '^TRACE calls=[0-9]{5,}.* threads=[4-9]' <<<"$out" || { echo "wrapper_check: FAIL: the trace lacks the threads' calls"; exit 1; }
grep -q '^OK replay' <<<"$out" || { echo "wrapper_check: FAIL: the replay did not finish intact"; exit 1; }
echo "wrapper_check: PASS ($next)"
