#!/usr/bin/env bash
# run_example.sh LIB PYTHON: run a small Python workload with and without LIB
# preloaded; the outputs must match. LIB's report line (stderr) is echoed for
# the test's pass pattern.
set -euo pipefail
lib=$1 py=$2
script='
import json, random, threading
random.seed(7)
data = [{"k": i, "v": "x" * (i % 300), "l": list(range(i % 50))} for i in range(20000)]
text = json.dumps(data)
back = json.loads(text)
def work(seed, out):
    r = random.Random(seed)
    out.append(sum(len(str(r.random())) for _ in range(20000)))
out = []
ts = [threading.Thread(target=work, args=(s, out)) for s in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(len(text), back == data, sorted(out))
'
expected=$("$py" -c "$script")
err=$(mktemp)
trap 'rm -f "$err"' EXIT
got=$(LD_PRELOAD="$lib" "$py" -c "$script" 2>"$err")
grep -q "cannot be preloaded" "$err" && { cat "$err"; echo "run_example: $lib was not preloaded"; exit 1; }
cat "$err"
if [ "$got" != "$expected" ]; then
  echo "run_example: output differs with $lib: '$got' vs '$expected'"
  exit 1
fi
echo "run_example: same output with and without $lib"
