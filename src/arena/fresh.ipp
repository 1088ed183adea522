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
  huge_pages mode = options().thp;
  if (mode != huge_pages::chunks && !(mode == huge_pages::grown && full_for_huge_pages())) return false;
  // The whole chunk, so that the VMA flags of neighbouring chunks stay equal
  // and the kernel keeps merging their mappings into one VMA (advice on part
  // of a chunk would split it, and each chunk would cost VMAs of its own).
  C::platform::advise_huge(c, kChunkSize);
  c->huge_advised.store(true, std::memory_order_relaxed);  // nobody else sees the chunk yet
  return true;
}

// TENON_HUGE_PAGES=4: whether the chunk being made is likely to be filled,
// read from the arena's newest chunks (kHugeChunksAfter, config.h). Called
// when no chunk had a free run for the request, so for a small span they
// are full of spans; a large run may find none in chunks that are mostly
// free, which the 7/8 test of their bitmaps tells apart. Spans taken are not
// pages written (glibc-thread's program never writes its blocks: advised on
// the bitmaps alone it doubled its peak RSS), so their pages are counted
// too (mincore, one call a chunk, once per chunk made), in the chunks not
// advised themselves: an advised chunk is resident whole by its huge pages,
// whatever its spans hold.
template <class C>
bool arena<C>::full_for_huge_pages() {
  std::uint32_t n = nchunks_.load(std::memory_order_acquire);
  if (n > kMaxChunks) n = kMaxChunks;
  if (n < kHugeChunksAfter) return false;
  for (std::uint32_t idx = n - kHugeChunksAfter; idx < n; ++idx) {
    chunk* c = registered(idx);
    if (!c || std::popcount(c->used.load(std::memory_order_relaxed)) < static_cast<int>(kHugeChunkMinUsed)) return false;
  }
  for (std::uint32_t idx = n - kHugeChunksAfter; idx < n; ++idx) {
    chunk* c = registered(idx);
    if (c->huge_advised.load(std::memory_order_relaxed)) continue;
    if (C::platform::resident_bytes(c, kChunkSize) < std::size_t{kHugeChunkMinUsed} << kSliceShift) return false;
  }
  return true;
}

// Before a purge drops pages of c, an advised chunk loses its advice:
// khugepaged collapses any 2 MiB of an advised range with a page resident
// into a huge page, filling the rest with zeros (max_ptes_none is 511 by
// default), so purged slices would come back resident behind the purge's
// back. Taken back once (the exchange); the chunk then goes on as one never
// advised, its huge pages kept until a purge splits them.
template <class C>
void arena<C>::before_purge(chunk* c) {
  if (!c->huge_advised.load(std::memory_order_relaxed)) return;
  if (c->huge_advised.exchange(false, std::memory_order_relaxed)) C::platform::unadvise_huge(c, kChunkSize);
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
