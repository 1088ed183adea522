#!/bin/bash
# The TENON_* options, as a user meets them (docs/options.md): one warning
# line for a bad value or an unknown name, "tenon: " first, printed once per
# process although the options are parsed again at first use; test knobs
# (TENON_TEST_*, TENON_BENCH_*) never reported; TENON_VERBOSE=1 lists every
# setting with its source. The program runs in a clean environment (env -i)
# so that only the variables a case sets are seen.
#
# usage: options_check.sh CASE PROGRAM [PRELOAD_LIBRARY]
set -u
case_name=$1 program=$2 preload=${3:-}
fail() { echo "FAIL ($case_name): $*"; echo "--- stderr:"; cat "$err"; exit 1; }
err=$(mktemp); trap 'rm -f "$err"' EXIT

# run VAR=VALUE...: the program under tenon with only these variables.
run() {
  env -i PATH="$PATH" ${preload:+LD_PRELOAD=$preload} "$@" "$program" 2>"$err" >/dev/null
  local rc=$?
  [ $rc = 0 ] || fail "exit status $rc"
}
# expect_only LINE...: stderr is exactly these lines, each once.
expect_only() {
  local want
  want=$(printf '%s\n' "$@")
  [ "$(cat "$err")" = "$want" ] || { echo "expected:"; echo "$want"; fail "stderr differs"; }
}
expect_line() { [ "$(grep -cxF -- "$1" "$err")" = 1 ] || fail "expected once: $1"; }

known="TENON_PURGE_DELAY_MS, TENON_BACKGROUND_PURGE, TENON_POPULATE, TENON_HUGE_PAGES, TENON_STATS, TENON_VERBOSE, TENON_LATENCY, TENON_LATENCY_SAMPLE, TENON_TRACE"
case $case_name in
  quiet)
    run; expect_only
    run TENON_PURGE_DELAY_MS=100 TENON_BACKGROUND_PURGE=0 TENON_STATS=0 TENON_LATENCY=1 TENON_LATENCY_SAMPLE=1
    expect_only
    # every value of the fresh-memory options, which the probe's huge blocks use
    for v in 0 1 65536 4294967295; do run "TENON_POPULATE=$v"; expect_only; done
    for v in 0 1 2 3 4; do run "TENON_HUGE_PAGES=$v" TENON_POPULATE=1; expect_only; done ;;
  bad_number)
    for v in abc -1 12ms 86400001 99999999999999999999 " 5"; do
      run "TENON_PURGE_DELAY_MS=$v"
      expect_only "tenon: TENON_PURGE_DELAY_MS=$v is not a number of milliseconds from 0 to 86400000; using 500"
    done
    run TENON_LATENCY_SAMPLE=0
    expect_only "tenon: TENON_LATENCY_SAMPLE=0 is not a sampling interval from 1 to 1073741823; using 8"
    for v in 4294967296 1M 64KiB -1; do
      run "TENON_POPULATE=$v"
      expect_only "tenon: TENON_POPULATE=$v is not a block size in bytes from 0 to 4294967295; using 0"
    done ;;
  bad_mode)
    run TENON_BACKGROUND_PURGE=3
    expect_only "tenon: TENON_BACKGROUND_PURGE=3 is not a purger mode from 0 to 2; using 1"
    for v in 5 on yes; do
      run "TENON_HUGE_PAGES=$v"
      expect_only "tenon: TENON_HUGE_PAGES=$v is not a huge-page mode from 0 to 4; using 0"
    done ;;
  bad_flag)
    run TENON_STATS=maybe
    # the fallback is off: no statistics either
    expect_only "tenon: TENON_STATS=maybe is not 1 or 0 (on/off, yes/no, true/false); using 0" ;;
  flag_words)
    for v in 1 on yes true; do
      run "TENON_STATS=$v"
      [ "$(head -1 "$err")" = "tenon statistics" ] || fail "TENON_STATS=$v printed no statistics"
      grep -q "^tenon: " "$err" && fail "TENON_STATS=$v warned"
    done
    for v in 0 off no false; do run "TENON_STATS=$v"; expect_only; done ;;
  unknown)
    run TENON_STATSS=1 TENON_STATS=0
    expect_only "tenon: unknown option TENON_STATSS (known: $known)" ;;
  test_knobs)
    run TENON_TEST_EMULATED=1 TENON_BENCH_PRELOAD=x TENON_TEST_ANYTHING=1
    expect_only ;;
  verbose)
    run TENON_VERBOSE=1 TENON_PURGE_DELAY_MS=100 TENON_STATS=off TENON_HUGE_PAGES=1
    [ "$(grep -c '^tenon: settings of .* (default or environment):$' "$err")" = 1 ] || fail "no settings header"
    expect_line "tenon:   TENON_PURGE_DELAY_MS=100 (environment)"
    expect_line "tenon:   TENON_BACKGROUND_PURGE=1 (default)"
    expect_line "tenon:   TENON_POPULATE=0 (default)"
    expect_line "tenon:   TENON_HUGE_PAGES=1 (environment)"
    expect_line "tenon:   TENON_STATS=0 (environment)"
    expect_line "tenon:   TENON_VERBOSE=1 (environment)"
    expect_line "tenon:   TENON_LATENCY=0 (default)"
    expect_line "tenon:   TENON_LATENCY_SAMPLE=8 (default)"
    expect_line "tenon:   TENON_TRACE= (default)"
    [ "$(wc -l <"$err")" = 10 ] || fail "expected the header and 9 settings" ;;
  verbose_bad)
    run TENON_VERBOSE=yes TENON_BACKGROUND_PURGE=x TENON_POPULATE=big
    expect_line "tenon: TENON_BACKGROUND_PURGE=x is not a purger mode from 0 to 2; using 1"
    expect_line "tenon:   TENON_BACKGROUND_PURGE=1 (default)"
    expect_line "tenon: TENON_POPULATE=big is not a block size in bytes from 0 to 4294967295; using 0"
    expect_line "tenon:   TENON_POPULATE=0 (default)"
    expect_line "tenon:   TENON_HUGE_PAGES=0 (default)" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "ok ($case_name)"
