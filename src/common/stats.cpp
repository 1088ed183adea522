// Printing of the statistics: summed over every heap ever created (heaps are
// never unmapped) plus the counters of heap-less threads. Formats numbers by
// hand and writes with write(2): nothing here allocates.
#include "tenon/common/stats.h"

#include <unistd.h>

#include "tenon/common/options.h"
#include "tenon/heap/heap.h"

namespace tenon {

namespace {
stats g_orphan_stats;

void put(const char* s) {
  std::size_t n = 0;
  while (s[n]) ++n;
  ssize_t r = write(2, s, n);
  (void)r;
}

void put_u64(std::uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = 0;
  do { *--p = static_cast<char>('0' + v % 10); v /= 10; } while (v);
  put(p);
}

const char* const kNames[] = {
#define TENON_STAT_TEXT(name, text) text,
    TENON_STAT_LIST(TENON_STAT_TEXT)
#undef TENON_STAT_TEXT
};
}  // namespace

stats& orphan_stats() { return g_orphan_stats; }

void stats_print_all() {
  stats total;
  heap_sum_stats(total);
  put("tenon statistics\n");
  for (unsigned k = 0; k < stat_count; ++k) {
    put("  ");
    put_u64(total.v[k].load(std::memory_order_relaxed) + g_orphan_stats.v[k].load(std::memory_order_relaxed));
    put("  ");
    put(kNames[k]);
    put("\n");
  }
}

// TENON_STATS=1: print once at exit (or when the library is unloaded).
__attribute__((destructor)) static void print_at_exit() {
  if (options().stats) stats_print_all();
}

}  // namespace tenon
