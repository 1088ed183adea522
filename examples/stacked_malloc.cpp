// libstacked_malloc.so: layers on layers. Counting over a 4 GiB budget over
// fill-on-free over the default allocator: every call is counted, live bytes
// are charged to the budget, and freed blocks are overwritten (0xDF) before
// the default allocator takes them back.
#include "counting.hpp"
#include "fill_on_free.hpp"
#include "report.hpp"
#include "size_limit.hpp"

using stacked = example::counting<example::size_limit<example::fill_on_free<tenon::default_allocator>, std::size_t{4} << 30>>;
TENON_EXPORT_MALLOC(stacked)

__attribute__((destructor)) static void print_counts() {
  example::report("stacked: %ld allocations, %ld frees, %zu bytes live at exit\n", example::g_allocs.load(),
                  example::g_frees.load(), example::g_live_bytes.load());
}
