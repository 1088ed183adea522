#!/usr/bin/env bash
# zero_cost.sh FASTPATH LIBTENON PASSTHROUGH3 HANDFUSED
# Instructions per malloc(32)+free pair (callgrind: (I(2N) - I(N)) / N, which
# cancels start-up) for libtenon.so (a), the same composition under three
# pass_through layers (b), and the fast path fused by hand (c). Composition
# must cost nothing: fails unless (a) == (b) exactly. Exit 77 (skipped)
# without valgrind.
set -euo pipefail
fastpath=$1 a=$2 b=$3 c=$4
command -v valgrind >/dev/null || { echo "zero_cost: valgrind not installed"; exit 77; }
n=100000
instr() {  # instr LIB N
  LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$fastpath" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_pair() {  # per_pair LIB -> instructions per pair, two decimals
  local i1 i2
  i1=$(instr "$1" $n); i2=$(instr "$1" $((2 * n)))
  [ -n "$i1" ] && [ -n "$i2" ] || { echo "zero_cost: callgrind failed for $1" >&2; exit 1; }
  python3 -c "print(f'{($i2 - $i1) / $n:.2f}')"
}
ia=$(per_pair "$a"); ib=$(per_pair "$b"); ic=$(per_pair "$c")
echo "zero_cost: instructions per malloc(32)+free pair, including the loop's own"
echo "  (a) libtenon.so                       $ia"
echo "  (b) three pass_through layers over it $ib"
echo "  (c) fast path fused by hand           $ic"
if [ "$ia" != "$ib" ]; then
  echo "zero_cost: FAIL: the pass_through layers cost $ib - $ia instructions a pair"
  exit 1
fi
echo "zero_cost: PASS: composition costs nothing ((a) == (b))"
