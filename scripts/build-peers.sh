#!/usr/bin/env bash
# scripts/build-peers.sh [BUILD]: builds the peers that Debian does not ship
# (mimalloc 3, a current mimalloc 2 and the same in its secure mode, snmalloc,
# rpmalloc) as preloadable
# libraries in BUILD/peers (default build/peers), from the C/C++ sources that
# their Rust -sys crates carry. cargo fetches the crates (versions pinned
# below) into BUILD/peers/vendor; nothing of theirs enters the repository.
#
# For each peer NAME it leaves BUILD/peers/NAME.so and NAME.version, or
# NAME.skipped with the reason (no cargo, registry unreachable, a failed
# build; the log is BUILD/peers/log/NAME.log). bench/run.py reads these.
# A build is done once: NAME.stamp records what it was built from (crate
# version, compiler line, compiler version) and a later call with the same
# recipe does nothing, without asking the registry. Remove BUILD/peers to
# force a rebuild. Never fails: a peer that cannot be built is only skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-${BUILD:-build}}
peers=$(mkdir -p "$build/peers" && cd "$build/peers" && pwd)
vendor=$peers/vendor
mkdir -p "$peers/log"

# Pinned so that every machine compares against the same code; bump here
# (the stamps then rebuild every peer whose recipe changed).
MIMALLOC_CRATE=libmimalloc-sys MIMALLOC_PIN=0.1.49  # carries mimalloc 2 and 3
SNMALLOC_CRATE=snmalloc-sys SNMALLOC_PIN=0.7.6
RPMALLOC_CRATE=rpmalloc-sys RPMALLOC_PIN=0.2.3
NAMES=(mimalloc3 mimalloc2-src mimalloc-secure snmalloc rpmalloc)
# mimalloc's secure mode, the anchor the hardened build is measured against
# beside scudo (issue 11): guard pages, encoded free lists, double-free
# detection, randomised allocation (MI_SECURE=4, its highest level).
MIMALLOC_SECURE_FLAGS=(-DMI_SECURE=4)

# Release flags as each project's own build uses them for a shared library
# on Linux with GCC: mimalloc's CMakeLists.txt (its crate lacks the cmake/
# folder that file includes, so the same line is given here; static.c is
# its single-file form of the same sources), rpmalloc's configure.py
# (ninja generator, release config, the rpmallocwrap target), and snmalloc's
# own CMake build (target snmallocshim, C++20, -mcx16 where supported).
MIMALLOC_CFLAGS=(-std=gnu11 -O3 -DNDEBUG -fPIC -Wall -Wextra -Wno-unknown-pragmas -fvisibility=hidden
  -Wstrict-prototypes -ftls-model=initial-exec -fno-builtin-malloc -DMI_BUILD_RELEASE
  -DMI_CMAKE_BUILD_TYPE=release -DMI_SHARED_LIB -DMI_SHARED_LIB_EXPORT -DMI_MALLOC_OVERRIDE)
MIMALLOC_LIBS=(-lpthread -lrt -latomic)
RPMALLOC_CFLAGS=(-std=c11 -O3 -g -funroll-loops -funit-at-a-time -fstrict-aliasing -DBUILD_RELEASE=1
  -DBUILD_DYNAMIC_LINK=1 -D_GNU_SOURCE=1 -DENABLE_PRELOAD=1 -DENABLE_OVERRIDE=1 -fPIC -Wall -Wextra)
RPMALLOC_LIBS=(-pthread -ldl)
SNMALLOC_CMAKE=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_BUILD_TESTING=OFF)

CC=${CC:-cc}
CXX=${CXX:-c++}
say() { echo "build-peers: $*" >&2; }
tool_version() { "$@" 2>/dev/null | head -n1; }

recipe() {  # recipe NAME: every input of NAME's build, one line
  case $1 in
    mimalloc3|mimalloc2-src)
      echo "$MIMALLOC_CRATE=$MIMALLOC_PIN $1 $CC ${MIMALLOC_CFLAGS[*]} ${MIMALLOC_LIBS[*]} | $(tool_version "$CC" --version)" ;;
    mimalloc-secure)
      echo "$MIMALLOC_CRATE=$MIMALLOC_PIN $1 $CC ${MIMALLOC_CFLAGS[*]} ${MIMALLOC_SECURE_FLAGS[*]} ${MIMALLOC_LIBS[*]} | $(tool_version "$CC" --version)" ;;
    snmalloc)
      echo "$SNMALLOC_CRATE=$SNMALLOC_PIN ${SNMALLOC_CMAKE[*]} | $(tool_version "$CXX" --version) | $(tool_version cmake --version)" ;;
    rpmalloc)
      echo "$RPMALLOC_CRATE=$RPMALLOC_PIN $CC ${RPMALLOC_CFLAGS[*]} ${RPMALLOC_LIBS[*]} | $(tool_version "$CC" --version)" ;;
  esac
}

up_to_date() {  # up_to_date NAME
  [ -f "$peers/$1.so" ] && [ -f "$peers/$1.stamp" ] && [ "$(cat "$peers/$1.stamp")" = "$(recipe "$1")" ]
}

skip() {  # skip NAME REASON: no library, and why
  rm -f "$peers/$1.so" "$peers/$1.version" "$peers/$1.stamp"
  echo "$2" >"$peers/$1.skipped"
  say "$1 skipped: $2"
}

done_ok() {  # done_ok NAME BUILT_FILE VERSION_TEXT
  cp -f "$2" "$peers/$1.so.tmp" && mv -f "$peers/$1.so.tmp" "$peers/$1.so" || { skip "$1" "could not copy $2"; return; }
  echo "$3" >"$peers/$1.version"
  recipe "$1" >"$peers/$1.stamp"
  rm -f "$peers/$1.skipped"
  say "$1 built: $peers/$1.so ($3)"
}

# One build at a time per build folder (two bench runs started together).
exec 9>"$peers/.lock"
flock 9 2>/dev/null || true
todo=()
for n in "${NAMES[@]}"; do up_to_date "$n" || todo+=("$n"); done
[ ${#todo[@]} -eq 0 ] && { say "all peers up to date in $peers"; exit 0; }

if ! command -v cargo >/dev/null 2>&1; then
  for n in "${todo[@]}"; do skip "$n" "cargo not found (install Rust with rustup to fetch the crate)"; done
  exit 0
fi

# A throwaway Cargo project whose only job is to name the crates; cargo
# vendor copies their sources (and those of their build dependencies,
# small) into $vendor. Retries and timeouts are short so that an
# unreachable registry costs seconds, not minutes.
fetch() {
  mkdir -p "$peers/fetch/src"
  : >"$peers/fetch/src/lib.rs"
  cat >"$peers/fetch/Cargo.toml" <<EOF
[package]
name = "tenon-bench-peers"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
$MIMALLOC_CRATE = "=$MIMALLOC_PIN"
$SNMALLOC_CRATE = { version = "=$SNMALLOC_PIN", default-features = false }
$RPMALLOC_CRATE = "=$RPMALLOC_PIN"
EOF
  (cd "$peers/fetch" && CARGO_NET_RETRY=1 CARGO_HTTP_TIMEOUT=30 \
     cargo vendor --versioned-dirs "$vendor") >"$peers/log/fetch.log" 2>&1
}
crate_dir() {  # crate_dir CRATE PIN: the vendored folder (a pin may match 1.2.3+meta)
  local d
  for d in "$vendor/$1-$2" "$vendor/$1-$2"+*; do
    [ -d "$d" ] && { echo "$d"; return 0; }
  done
  return 1
}
vendored() {
  crate_dir "$MIMALLOC_CRATE" "$MIMALLOC_PIN" >/dev/null && crate_dir "$SNMALLOC_CRATE" "$SNMALLOC_PIN" >/dev/null &&
    crate_dir "$RPMALLOC_CRATE" "$RPMALLOC_PIN" >/dev/null
}
# Sources already vendored at these pins (a rebuild after a compiler
# change) need no registry.
if ! vendored && ! fetch; then
  why="could not fetch the crates with cargo (registry unreachable?): $(tail -n2 "$peers/log/fetch.log" | tr '\n' ' ' | cut -c1-200)"
  for n in "${todo[@]}"; do skip "$n" "$why"; done
  exit 0
fi

mimalloc_version() {  # 30302 -> 3.3.2
  local v
  v=$(sed -n 's/^#define MI_MALLOC_VERSION \([0-9]*\).*/\1/p' "$1/include/mimalloc.h" | head -n1)
  [ -n "$v" ] && echo "$((v / 10000)).$((v / 100 % 100)).$((v % 100))"
}

build_mimalloc() {  # build_mimalloc NAME v2|v3 [EXTRA_CFLAGS...]
  local name=$1 v=$2 src out log=$peers/log/$1.log
  shift 2
  src=$(crate_dir "$MIMALLOC_CRATE" "$MIMALLOC_PIN")/c_src/mimalloc/$v || { skip "$name" "crate $MIMALLOC_CRATE not vendored"; return; }
  out=$peers/$name.build.so
  if "$CC" "${MIMALLOC_CFLAGS[@]}" "$@" -shared -I"$src/include" "$src/src/static.c" -o "$out" "${MIMALLOC_LIBS[@]}" >"$log" 2>&1; then
    done_ok "$name" "$out" "mimalloc $(mimalloc_version "$src")${*:+ ($*)} from crate $MIMALLOC_CRATE $MIMALLOC_PIN"
  else
    skip "$name" "compile failed (log/$name.log): $(grep -m1 -i error "$log" | cut -c1-160)"
  fi
  rm -f "$out"
}

build_snmalloc() {
  local src log=$peers/log/snmalloc.log bdir=$peers/snmalloc-build
  src=$(crate_dir "$SNMALLOC_CRATE" "$SNMALLOC_PIN")/upstream || { skip snmalloc "crate $SNMALLOC_CRATE not vendored"; return; }
  command -v cmake >/dev/null 2>&1 || { skip snmalloc "cmake not found"; return; }
  command -v ninja >/dev/null 2>&1 || { skip snmalloc "ninja not found"; return; }
  rm -rf "$bdir"
  if CXX=$CXX cmake -S "$src" -B "$bdir" "${SNMALLOC_CMAKE[@]}" >"$log" 2>&1 &&
     cmake --build "$bdir" --target snmallocshim -j"$(nproc)" >>"$log" 2>&1; then
    done_ok snmalloc "$bdir/libsnmallocshim.so" "snmalloc from crate $SNMALLOC_CRATE $SNMALLOC_PIN"
  else
    skip snmalloc "CMake build failed (log/snmalloc.log): $(grep -m1 -i error "$log" | cut -c1-160)"
  fi
}

build_rpmalloc() {
  local dir src out=$peers/rpmalloc.build.so log=$peers/log/rpmalloc.log
  dir=$(crate_dir "$RPMALLOC_CRATE" "$RPMALLOC_PIN") || { skip rpmalloc "crate $RPMALLOC_CRATE not vendored"; return; }
  src=$dir/rpmalloc/rpmalloc/rpmalloc.c
  if "$CC" "${RPMALLOC_CFLAGS[@]}" -shared "$src" -o "$out" "${RPMALLOC_LIBS[@]}" >"$log" 2>&1; then
    done_ok rpmalloc "$out" "rpmalloc $(head -n1 "$dir/rpmalloc/CHANGELOG" | tr -d "\r") from crate $(basename "$dir" | sed 's/^rpmalloc-sys-/rpmalloc-sys /')"
  else
    skip rpmalloc "compile failed (log/rpmalloc.log): $(grep -m1 -i error "$log" | cut -c1-160)"
  fi
  rm -f "$out"
}

for n in "${todo[@]}"; do
  start=$SECONDS
  case $n in
    mimalloc3) build_mimalloc mimalloc3 v3 ;;
    mimalloc2-src) build_mimalloc mimalloc2-src v2 ;;
    mimalloc-secure) build_mimalloc mimalloc-secure v2 "${MIMALLOC_SECURE_FLAGS[@]}" ;;
    snmalloc) build_snmalloc ;;
    rpmalloc) build_rpmalloc ;;
  esac
  say "$n: $((SECONDS - start)) s"
done
exit 0
