#!/usr/bin/env bash
# The README's test command (make test) and what .ci/run calls: every stage.
#   release  Release build (build/), the whole suite
#   debug    -DTENON_DEBUG=ON (build-debug/): every span, list and counter
#            invariant checked as it changes; the whole suite but the bench
#   tsan     ThreadSanitizer build (build-tsan/), all but preload|bench|freeze
#   asan     AddressSanitizer+UBSan build (build-asan/), all but preload|bench|freeze
#   inject   -DTENON_INJECT=ON build (build-inject/), label progress (with the
#            heap hand-over soak, stalled at the injection points)
#   aarch64  cross build run under qemu-user, 4 KiB and 64 KiB pages
# A sanitizer runtime and an LD_PRELOADed allocator do not mix, hence the
# exclusions; the sanitizer stages check the tenon_* API through libtenon.a.
# Every stage runs even after one fails; the exit status says whether all
# passed. TENON_TEST_STAGES="release asan" runs a subset. Build dirs are
# reused, so a second run only rebuilds what changed.
set -uo pipefail
cd "$(dirname "$0")/.."
stages=${TENON_TEST_STAGES:-release debug tsan asan inject aarch64}
jobs=$(nproc)
no_preload='preload|bench|freeze'

# A sanitizer finding must fail the test that hit it, not scroll past.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="halt_on_error=1 abort_on_error=1 detect_leaks=1 strict_string_checks=1 check_initialization_order=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"

bash scripts/install-deps.sh || exit 1
# The peers and matplotlib, so that bench_smoke runs rather than skips.
bash scripts/install-bench-deps.sh || exit 1

build() { bash scripts/build.sh "$@"; }  # build DIR [cmake args...]
run_ctest() {  # run_ctest DIR [ctest args...]
  local dir=$1; shift
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --no-tests=ignore "$@"
}

# Sanitizer builds at -O1 -g (what the sanitizers recommend; about a third
# less compile time than -O3 for the same checks), NDEBUG like Release.
sanitizer_flags=(-DTENON_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG")

# Builds only the folders whose tests carry label $2: ninja's per-folder
# "<dir>/all" targets, the folder found from ctest's listing (a test's
# working directory is its folder's build dir unless set otherwise). Builds
# everything when that can't be told, so that it never builds too little.
build_for_label() {  # build_for_label DIR LABEL [cmake args...]
  local dir=$1 label=$2; shift 2
  bash scripts/install-deps.sh &&
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null || return 1
  local targets
  targets=$(ctest --test-dir "$dir" -N -L "$label" --show-only=json-v1 | python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
dirs = set()
for t in json.load(sys.stdin).get("tests", []):
    wd = [p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"]
    if not wd or not os.path.realpath(wd[0]).startswith(root + os.sep):
        sys.exit(0)  # unknown folder: print nothing, build everything
    dirs.add(os.path.relpath(os.path.realpath(wd[0]), root) + "/all")
print(" ".join(sorted(dirs)))
' "$dir") || return 1
  # shellcheck disable=SC2086
  cmake --build "$dir" -j"$jobs" ${targets:+-- $targets}
}

stage_release() { build build && run_ctest build; }
stage_debug() {
  build build-debug -DTENON_DEBUG=ON -DTENON_BUILD_BENCH=OFF && run_ctest build-debug -LE bench
}
stage_tsan() {
  # setarch -R (no ASLR): ThreadSanitizer aborts with "unexpected memory
  # mapping" on kernels with more mmap randomisation bits than it expects.
  local norandom=()
  setarch "$(uname -m)" -R true 2>/dev/null && norandom=(setarch "$(uname -m)" -R)
  build build-tsan -DTENON_SANITIZE=thread "${sanitizer_flags[@]}" &&
    "${norandom[@]}" ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
      --no-tests=ignore -LE "$no_preload"
}
stage_asan() {
  build build-asan -DTENON_SANITIZE=address "${sanitizer_flags[@]}" &&
    run_ctest build-asan -LE "$no_preload"
}
stage_inject() {
  # The progress label: one test per injection point, take_over, the stalled soak.
  build_for_label build-inject progress -DTENON_INJECT=ON -DTENON_BUILD_BENCH=OFF &&
    run_ctest build-inject -L progress
}
stage_aarch64() { bash scripts/test-aarch64.sh; }

summary=()
failed=0
all_start=$SECONDS
for s in $stages; do
  if ! declare -F "stage_$s" >/dev/null; then
    echo "test-all: unknown stage '$s'"; failed=1; continue
  fi
  echo "=== test-all: stage $s"
  start=$SECONDS
  if "stage_$s"; then result=PASS; else result=FAIL; failed=1; fi
  line=$(printf 'test-all: stage %-8s %s in %4d s' "$s" "$result" $((SECONDS - start)))
  echo "$line"
  summary+=("$line")
done
echo "=== test-all: summary"
printf '%s\n' "${summary[@]}"
if [ $failed -eq 0 ]; then
  echo "test-all: every stage passed in $((SECONDS - all_start)) s"
else
  echo "test-all: FAILED (see the stages above) after $((SECONDS - all_start)) s"
fi
exit $failed
