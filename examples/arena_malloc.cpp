// libarena_malloc.so: a program-specific allocator. Requests up to 64 bytes
// come from a bump-pointer arena and are never reused; the rest, and all of
// it once the 1 GiB arena is full, from the default allocator.
#include "bump_arena.hpp"
#include "report.hpp"

using arena = example::bump_arena<tenon::default_allocator, 64>;
TENON_EXPORT_MALLOC(arena)

__attribute__((destructor)) static void print_usage() {
  example::report("arena: %zu slots of 64 bytes used\n", arena::slots_used());
}
