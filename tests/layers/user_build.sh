#!/usr/bin/env bash
# user_build.sh SOURCE_DIR LIBTENON_A: the README's contract, as a user would
# follow it: a layer written in a file outside the tree, compiled with the
# documented line from the source root, preloaded into a program.
set -euo pipefail
src=$1 lib=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/my.cpp" <<'CPP'
#include <tenon/layer.hpp>
#include <unistd.h>
#include <atomic>

static std::atomic<unsigned long> g_calls{0};

template <class I> struct my : tenon::pass_through<I> {
  static void* alloc(std::size_t n) noexcept { g_calls.fetch_add(1, std::memory_order_relaxed); return I::alloc(n); }
};

TENON_EXPORT_MALLOC(my<tenon::default_allocator>)

__attribute__((destructor)) static void done() {
  if (g_calls.load() > 0) (void)!write(2, "my layer was called\n", 20);
}
CPP
cd "$src"
# The documented line, with this build's libtenon.a for build/src/libtenon.a.
echo "+ c++ -std=c++20 -O2 -fPIC -shared -I include $work/my.cpp $lib -o $work/libmy.so"
c++ -std=c++20 -O2 -fPIC -shared -I include "$work/my.cpp" "$lib" -o "$work/libmy.so"
# A program that allocates and keeps stderr open to the end (ls closes it
# at exit, so the layer's report would be lost).
printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { char* p = malloc(100); snprintf(p, 100, "%%s", "allocated"); puts(p); free(p); return 0; }\n' >"$work/prog.c"
cc -O2 -fno-builtin "$work/prog.c" -o "$work/prog"
out=$(LD_PRELOAD="$work/libmy.so" "$work/prog" 2>&1)
echo "$out"
case $out in
  *"my layer was called"*) echo "user_build: PASS" ;;
  *) echo "user_build: FAIL: the composition was not the allocator in use"; exit 1 ;;
esac
