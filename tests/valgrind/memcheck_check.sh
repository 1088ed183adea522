#!/bin/bash
# memcheck on tenon's own heap (docs/install.md, "Under valgrind"): a program
# preloading libtenon-valgrind.so, run with the documented valgrind flags.
#   planted: a leak, an overflow, a read after free, a double free and an
#            uninitialised read are each reported, exactly those five;
#   clean:   a churn of every allocation function across threads shows no
#            error and no leak (tenon's own free-list work is not blamed on
#            the program).
# Both also check that tenon served the calls (TENON_STATS: heaps attached).
# Exit 77 (skipped) when valgrind is not installed.
#
# usage: memcheck_check.sh CASE PROGRAM LIBTENON_VALGRIND SUPPRESSIONS
set -u
case_name=$1 program=$2 lib=$3 supp=$4
command -v valgrind >/dev/null || { echo "valgrind is not installed: skipped"; exit 77; }
out=$(mktemp); trap 'rm -f "$out"' EXIT
fail() { echo "FAIL ($case_name): $*"; echo "--- valgrind's output:"; cat "$out"; exit 1; }

LD_PRELOAD=$lib TENON_STATS=1 valgrind --soname-synonyms=somalloc=nouserintercepts --suppressions="$supp" \
  --leak-check=full "$program" "$case_name" >"$out" 2>&1 || fail "exit status $?"
grep -Eq '^ *[1-9][0-9]* +thread heaps attached' "$out" || fail "tenon did not serve the program's calls"
has() { grep -Eq -- "$1" "$out" || fail "expected /$1/"; }
case $case_name in
  planted)
    has 'Invalid write of size 1'
    has 'is 0 bytes after a block of size 20 alloc.d'
    has 'Invalid read of size 1'
    has 'is 10 bytes inside a block of size 64 free.d'
    has 'Invalid free\(\)'
    has 'Conditional jump or move depends on uninitialised value'
    has '100 bytes in 1 blocks are definitely lost'
    has 'ERROR SUMMARY: 5 errors from 5 contexts' ;;
  clean)
    has 'All heap blocks were freed -- no leaks are possible'
    has 'ERROR SUMMARY: 0 errors from 0 contexts' ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "ok ($case_name)"
