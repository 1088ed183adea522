// engine<C>: what concerns every part at once: trim, and the statistics.
#include "tenon/engine/engine.h"
#include "tenon/platform/os.h"

namespace tenon {

template <class C>
bool engine<C>::trim(heap<C>* calling_thread_heap) {
  if (calling_thread_heap != &g_empty_heap<C>) heaps.flush_remote(calling_thread_heap);
  bool slices = chunks.purge(true, nullptr);
  bool cached = huge.flush_cache();
  return slices || cached;
}

// Summed over every heap ever created (heaps are never unmapped) plus the
// shared counts. Numbers are formatted by hand and written with write(2):
// nothing here allocates.
template <class C>
void engine<C>::print_stats() {
  typename C::stats total{};
  heaps.sum_stats(total);
  os::write_error("tenon statistics\n");
  for (unsigned k = 0; k < stat_count; ++k) {
    char number[24];
    char* p = number + sizeof number;
    *--p = 0;
    std::uint64_t v = total.get(static_cast<stat_id>(k));
    do *--p = static_cast<char>('0' + v % 10); while (v /= 10);
    os::write_error("  ");
    os::write_error(p);
    os::write_error("  ");
    os::write_error(kStatNames[k]);
    os::write_error("\n");
  }
}

}  // namespace tenon
