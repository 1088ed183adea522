// libcounting_malloc.so: the default allocator with a counting layer on top.
//   LD_PRELOAD=./libcounting_malloc.so python3 -c 'print(1)'
// prints "counting: N allocations, M frees" at exit.
#include "counting.hpp"
#include "report.hpp"

TENON_EXPORT_MALLOC(example::counting<tenon::default_allocator>)

__attribute__((destructor)) static void print_counts() {
  example::report("counting: %ld allocations, %ld frees\n", example::g_allocs.load(), example::g_frees.load());
}
