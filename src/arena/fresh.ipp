// arena<C>: what fresh memory gets from the OS beyond the mapping itself:
// pre-faulting (TENON_POPULATE) and transparent huge pages (TENON_HUGE_PAGES).
// Both are best effort: a kernel that refuses (MADV_POPULATE_WRITE before
// Linux 5.14, no THP) leaves the pages to fault in on first touch as usual.
#include <bit>

#include "tenon/arena/arena.h"
#include "tenon/platform/options.h"

namespace tenon {

template <class C>
void arena<C>::prefault(const span* s, void* p, std::size_t bytes, std::size_t size) {
  // A run whose slices were all freed recently is resident already (up to
  // what its last user touched): asking again would cost a system call on
  // every reuse of a warm run, the free-then-allocate loop the purge delay
  // exists for.
  if (!s->some_clean) return;
  prefault_fresh<typename C::platform>(p, bytes, size);
}

template <class C>
bool arena<C>::advise_chunk(chunk* c) {
  if (options().thp != huge_pages::chunks) return false;
  // The whole chunk, so that the VMA flags of neighbouring chunks stay equal
  // and the kernel keeps merging their mappings into one VMA (advice on part
  // of a chunk would split it, and each chunk would cost VMAs of its own).
  C::platform::advise_huge(c, kChunkSize);
  return true;
}

template <class C>
void arena<C>::count_untouched_as_dirty(chunk* c) {
  // Under a huge page the first touch of any slice (the header's, a span's)
  // makes all 32 slices of its 2 MiB resident. Untouched slices would then
  // stay resident for good under "clean, never used", which the purge skips;
  // counted as dirty from the start, the purge, the per-chunk cap and
  // malloc_trim give their pages back like a used slice's (splitting the
  // huge page). Nobody else sees the chunk yet: plain stores.
  std::uint32_t now = C::platform::now_ms();
  std::uint64_t untouched = ~c->used.load(std::memory_order_relaxed);
  for (std::uint64_t d = untouched; d; d &= d - 1)
    c->dirty_ms[std::countr_zero(d)].store(now, std::memory_order_relaxed);
  c->dirty.store(untouched, std::memory_order_relaxed);
  count_kept(std::popcount(untouched));  // free and (under the huge page) resident
}

}  // namespace tenon
