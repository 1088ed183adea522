// engine<C>: what concerns every part at once: trim, and the statistics.
#include "tenon/engine/engine.h"
#include "tenon/platform/os.h"

namespace tenon {

template <class C>
bool engine<C>::trim(thread_heap<C>* calling_thread_heap) {
  if (calling_thread_heap != &g_empty_heap<C>) {
    heaps.flush_caches(calling_thread_heap);
    // After the caches: their blocks of other heaps' spans (cache.ipp,
    // free_cached_remote) went to the outboxes.
    heaps.flush_remote(calling_thread_heap);
  }
  // Every thread's cached runs, an idle thread's too (docs/security.md,
  // "idle threads"): the forced pass below purges them with the rest.
  heaps.flush_run_caches(true);
  bool slices = chunks.purge(true, nullptr);
  bool cached = huge.flush_cache();
  return slices || cached;
}

template <class C>
bool engine<C>::purge_hook(void* self) {
  auto* e = static_cast<engine*>(self);
  e->heaps.flush_run_caches(false);
  return huge_maps<C>::purge_hook(&e->huge);
}

namespace engine_detail {

// "  <value>  <text>\n" to stderr, the number formatted by hand and written
// with write(2): nothing here allocates.
inline void print_line(std::uint64_t v, const char* text) {
  char number[24];
  char* p = number + sizeof number;
  *--p = 0;
  do *--p = static_cast<char>('0' + v % 10); while (v /= 10);
  os::write_error("  ");
  os::write_error(p);
  os::write_error("  ");
  os::write_error(text);
  os::write_error("\n");
}

}  // namespace engine_detail

// The byte figures, then every counter summed over every heap ever created
// (heaps are never unmapped) plus the shared counts.
template <class C>
void engine<C>::print_stats() {
  using engine_detail::print_line;
  memory_figures f;
  typename C::stats total{};
  figures(f, total);
  os::write_error("tenon statistics\n");
  print_line(f.small_in_use + f.large_in_use + f.huge_in_use, "bytes in use");
  print_line(f.small_in_use, "bytes in use in small blocks");
  print_line(f.large_in_use, "bytes in use in large blocks");
  print_line(f.huge_in_use, "bytes in use in huge blocks");
  print_line(f.peak_held, "peak bytes held by spans and blocks (bound of the peak in use)");
  print_line(f.chunk_bytes + f.huge_mapped, "bytes mapped");
  print_line(f.chunk_resident + f.huge_mapped, "bytes resident (huge mappings counted whole)");
  print_line(f.free_dirty + f.huge_cached, "bytes retained for reuse");
  for (unsigned k = 0; k < stat_count; ++k) print_line(total.get(static_cast<stat_id>(k)), kStatNames[k]);
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const class_figures& k = f.cls[c];
    if (!k.spans) continue;
    os::write_error("  class ");
    char number[24];
    char* p = number + sizeof number;
    *--p = 0;
    std::uint64_t v = kClasses.size[c];
    do *--p = static_cast<char>('0' + v % 10); while (v /= 10);
    os::write_error(p);
    os::write_error(" B:\n");
    print_line(k.blocks_in_use, "  blocks in use");
    print_line(k.blocks_in_use * kClasses.size[c], "  bytes in use");
    print_line(k.spans, "  spans");
    print_line(k.span_bytes, "  bytes of spans");
  }
}

}  // namespace tenon
