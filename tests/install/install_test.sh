#!/usr/bin/env bash
# install_test.sh CASE ...: tenon as its users get it (label install).
#   prefix BUILD PREFIX                  cmake --install BUILD into PREFIX (the fixture)
#   find_package PREFIX WORK CMAKE GEN   a CMake project: find_package(tenon CONFIG)
#   pkg_config PREFIX WORK               cc/c++ with pkg-config --cflags --libs tenon
#   add_subdirectory SRC WORK CMAKE GEN  a CMake project with add_subdirectory(tenon)
#   tenon_run BUILD_RUN PREFIX WORK PROBE NOOP_LIB   the tenon-run wrapper
#   static PREFIX WORK                   gcc -static / g++ -static with libtenon-override.a
# Every command is echoed, so the log shows the consumer builds and runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
consumer=$here/consumer
run() { echo "+ $*"; "$@"; }
fail() { echo "FAILED: $*" >&2; exit 1; }
expect() {  # expect REGEX TEXT: TEXT has a line matching REGEX
  grep -Eq -- "$1" <<<"$2" || fail "expected a line matching '$1' in:
$2"
}

case_prefix() {
  local build=$1 prefix=$2
  rm -rf "$prefix"
  run cmake --install "$build" --prefix "$prefix"
  local f
  for f in include/tenon/tenon.h include/tenon/layer.hpp lib/libtenon.so.0 lib/libtenon.a \
           lib/libtenon-override.a lib/cmake/tenon/tenonConfig.cmake lib/pkgconfig/tenon.pc bin/tenon-run; do
    [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
  done
  [ "$(readlink "$prefix/lib/libtenon.so")" = libtenon.so.0 ] || fail "lib/libtenon.so is not a link to libtenon.so.0"
  local soname
  soname=$(readelf -d "$prefix/lib/libtenon.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = libtenon.so.0 ] || fail "soname is '$soname', not libtenon.so.0"
  echo "installed: soname $soname"
}

case_find_package() {
  local prefix=$1 work=$2 cmake=$3 gen=$4
  rm -rf "$work"
  run "$cmake" -S "$consumer" -B "$work" -G "$gen" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_STATIC=ON
  run "$cmake" --build "$work"
  check_consumer "$work"
  run "$work/static_check"
  run "$work/static_new"
}

# The programs a consumer build made: libtenon.so by its soname, malloc
# replaced; the tenon_* API from libtenon.a; a composition preloaded.
check_consumer() {
  local work=$1 out
  readelf -d "$work/uses_tenon" | grep -q 'NEEDED.*\[libtenon\.so\.0\]' ||
    fail "uses_tenon does not need libtenon.so.0: $(readelf -d "$work/uses_tenon" | grep NEEDED)"
  run "$work/uses_tenon" shared
  run "$work/uses_tenon_static" static
  out=$(echo "+ LD_PRELOAD=$work/libcomposition.so $work/plain_malloc" >&2;
        LD_PRELOAD="$work/libcomposition.so" "$work/plain_malloc" 2>&1)
  echo "$out"
  expect '^composition: [1-9][0-9]* allocations$' "$out"
}

case_pkg_config() {
  local prefix=$1 work=$2
  rm -rf "$work" && mkdir -p "$work"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  local version libdir
  version=$(run pkg-config --modversion tenon)
  echo "$version"
  libdir=$(pkg-config --variable=libdir tenon)
  [ "$(cd "$libdir" && pwd -P)" = "$(cd "$prefix/lib" && pwd -P)" ] || fail "tenon.pc's libdir is $libdir"
  # shellcheck disable=SC2046
  run cc -O2 "$consumer/uses_tenon.c" $(pkg-config --cflags --libs tenon) -Wl,-rpath,"$libdir" -o "$work/uses_tenon"
  # shellcheck disable=SC2046
  run cc -O2 "$consumer/uses_tenon.c" $(pkg-config --cflags tenon) "$(pkg-config --variable=staticlib tenon)" \
    -pthread -o "$work/uses_tenon_static"
  # shellcheck disable=SC2046
  run c++ -std=c++20 -O2 -fPIC -shared "$consumer/composition.cpp" $(pkg-config --cflags tenon) \
    "$(pkg-config --variable=staticlib tenon)" -o "$work/libcomposition.so"
  run cc -O2 "$consumer/plain_malloc.c" -o "$work/plain_malloc"
  check_consumer "$work"
  local out
  out=$("$work/uses_tenon" shared)
  expect "tenon $version," "$out"
}

case_add_subdirectory() {
  local src=$1 work=$2 cmake=$3 gen=$4
  # Kept between runs: a second run rebuilds only what changed. No build
  # type, as a parent that sets none: tenon must not set one.
  run "$cmake" -S "$consumer" -B "$work" -G "$gen" -DTENON_SOURCE_DIR="$src" \
    -DCMAKE_BUILD_TYPE= -DCONSUMER_EXPECTED_BUILD_TYPE=
  run "$cmake" --build "$work"
  [ -x "$work/tenon/bin/tenon-run" ] || fail "no tenon-run in the subproject's build tree"
  check_consumer "$work"
}

case_tenon_run() {
  local build_run=$1 prefix=$2 work=$3 probe=$4 noop=$5 out rc
  rm -rf "$work" && mkdir -p "$work"
  # Build tree, started from another directory: an absolute LD_PRELOAD.
  out=$(cd / && run "$build_run" "$probe") || fail "build-tree tenon-run: $out"
  echo "$out"
  expect '^LD_PRELOAD=/[^:]*/libtenon\.so\.0$' "$out"
  expect "^malloc is tenon's: yes$" "$out"
  # Installed; a child that changes directory keeps tenon.
  out=$(run "$prefix/bin/tenon-run" sh -c "cd / && exec '$probe'") || fail "installed tenon-run: $out"
  echo "$out"
  expect "^LD_PRELOAD=$prefix/lib/libtenon\.so\.0\$" "$out"
  # Appended to an LD_PRELOAD already set.
  out=$(LD_PRELOAD=$noop run "$prefix/bin/tenon-run" "$probe") || fail "with LD_PRELOAD set: $out"
  echo "$out"
  expect "^LD_PRELOAD=$noop:$prefix/lib/libtenon\.so\.0\$" "$out"
  # A variant that does not exist: exit 125 and the variants there are.
  rc=0
  out=$(run "$prefix/bin/tenon-run" --variant nosuch "$probe" 2>&1) || rc=$?
  echo "$out"
  [ $rc -eq 125 ] || fail "tenon-run --variant nosuch exited $rc, not 125"
  expect "no variant 'nosuch'.*variants found: default" "$out"
  # A copy of the install tree elsewhere, reached through a symlink, with
  # a variant library: found relative to the script, --list names it.
  mkdir -p "$work/tree/bin" "$work/tree/lib"
  cp "$prefix/bin/tenon-run" "$work/tree/bin/"
  cp -P "$prefix"/lib/libtenon.so* "$work/tree/lib/"
  cp "$prefix/lib/libtenon.so.0" "$work/tree/lib/libtenon-fake.so"
  ln -s "$work/tree/bin/tenon-run" "$work/tenon-run-link"
  out=$(run "$work/tenon-run-link" --list)
  echo "$out"
  expect "^default $work/tree/lib/libtenon\.so\.0\$" "$out"
  expect "^fake $work/tree/lib/libtenon-fake\.so\$" "$out"
  out=$(run "$work/tenon-run-link" --variant fake "$probe") || fail "--variant fake: $out"
  echo "$out"
  expect "^LD_PRELOAD=$work/tree/lib/libtenon-fake\.so\$" "$out"
  expect "^malloc is tenon's: yes$" "$out"
  # Its own errors (125) and the program's (127: not found; else its status).
  rc=0; "$prefix/bin/tenon-run" >/dev/null 2>&1 || rc=$?
  [ $rc -eq 125 ] || fail "tenon-run with no program exited $rc, not 125"
  rc=0; "$prefix/bin/tenon-run" "$work/no-such-program" >/dev/null 2>&1 || rc=$?
  [ $rc -eq 127 ] || fail "tenon-run of a missing program exited $rc, not 127"
  rc=0; "$prefix/bin/tenon-run" sh -c 'exit 3' || rc=$?
  [ $rc -eq 3 ] || fail "tenon-run did not pass the program's exit status 3 on: $rc"
  run "$prefix/bin/tenon-run" --version
  echo "tenon_run: PASS"
}

case_static() {
  local prefix=$1 work=$2 out
  rm -rf "$work" && mkdir -p "$work"
  local inc=-I$prefix/include lib=-L$prefix/lib
  run cc -static -O2 "$here/static_check.c" "$inc" "$lib" -Wl,-u,malloc -ltenon-override -o "$work/static_check"
  ! readelf -l "$work/static_check" | grep -q INTERP || fail "not a static executable (it has a program interpreter)"
  ! nm "$work/static_check" | grep -q ' _int_malloc$' || fail "glibc's malloc.o is linked in"
  run "$work/static_check"
  # A program that never calls malloc itself: tenon's only with -u malloc.
  run cc -static -O2 "$here/static_indirect.c" "$inc" "$lib" -Wl,-u,malloc -ltenon-override -o "$work/indirect"
  run "$work/indirect" tenon
  run cc -static -O2 "$here/static_indirect.c" "$inc" "$lib" -ltenon-override -o "$work/indirect_control"
  run "$work/indirect_control" glibc
  local cxx_u=-Wl,-u,malloc,-u,_ZSt17__throw_bad_allocv,-u,_ZSt15get_new_handlerv
  run c++ -std=c++20 -static -O2 "$here/static_check.cpp" "$inc" "$lib" "$cxx_u" -ltenon-override \
    -o "$work/static_check_cxx"
  run "$work/static_check_cxx"
  run c++ -std=c++20 -static -O2 "$here/static_new.cpp" "$inc" "$lib" "$cxx_u" -ltenon-override -o "$work/static_new"
  run "$work/static_new"
  echo "static: PASS"
}

name=$1; shift
"case_$name" "$@"
