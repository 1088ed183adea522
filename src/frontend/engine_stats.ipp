// engine_front<E>::stats: the engine's figures and counters as the public
// struct tenon_stats (the `stats` hook of the layer API; tenon_stats_get,
// mallinfo2, malloc_info and malloc_stats answer from it).
#include <errno.h>

#include "tenon/frontend/engine_front.h"

namespace tenon {

template <auto& E>
int engine_front<E>::stats(tenon_stats* out) noexcept {
  if (!out || out->version != TENON_STATS_VERSION) return EINVAL;
  // The calling thread's cached blocks go back to their spans first, so that
  // a thread that freed everything sees nothing of its own in use (other
  // threads' caches count as in use until they flush: layer 5's block cache).
  if (thread_heap<config>* h = t_thread<config>.current; h != &g_empty_heap<config>) E.heaps.flush_caches(h);
  memory_figures f;
  typename config::stats counts{};
  E.figures(f, counts);
  auto get = [&counts](stat_id id) { return static_cast<unsigned long long>(counts.get(id)); };
  *out = tenon_stats{};
  out->version = TENON_STATS_VERSION;
  out->small_in_use = f.small_in_use;
  out->large_in_use = f.large_in_use;
  out->huge_in_use = f.huge_in_use;
  out->in_use = f.small_in_use + f.large_in_use + f.huge_in_use;
  out->peak_in_use = f.peak_held > out->in_use ? f.peak_held : out->in_use;
  out->mapped = f.chunk_bytes + f.huge_mapped;
  out->resident = f.chunk_resident + f.huge_mapped;
  out->retained = f.free_dirty + f.huge_cached;
  out->large_blocks = f.large_blocks;
  out->huge_blocks = f.huge_blocks;
  out->chunks = f.chunks;
  out->os_maps = get(stat_chunks_mapped) + get(stat_huge_allocs);
  out->os_unmaps = get(stat_huge_unmaps);
  out->os_purges = get(stat_purges);
  out->os_remaps = get(stat_huge_remaps);
  out->cas_retries = get(stat_retry_remote_push) + get(stat_retry_inbox) + get(stat_retry_partial_stack) +
                     get(stat_retry_chunk_bitmap) + get(stat_retry_heap_stack) + get(stat_retry_huge_cache);
  out->heaps_attached = get(stat_heaps_attached);
  out->heaps_released = get(stat_heaps_released);
  out->large_allocs = get(stat_large_allocs);
  out->huge_allocs = get(stat_huge_allocs) + get(stat_huge_cache_hits);
  static_assert(kNumClasses <= TENON_STATS_CLASSES);
  out->classes = kNumClasses;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    tenon_class_stats& k = out->class_stats[c];
    k.block_size = kClasses.size[c];
    k.blocks_in_use = f.cls[c].blocks_in_use;
    k.bytes_in_use = k.blocks_in_use * k.block_size;
    k.spans = f.cls[c].spans;
    k.span_bytes = f.cls[c].span_bytes;
  }
  return 0;
}

}  // namespace tenon
