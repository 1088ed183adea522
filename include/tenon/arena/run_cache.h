// Layer 4, address space: a thread heap's cache of freed runs of slices.
//
// A large block's run goes back to the arena through the chunk's shared
// words (occupancy, dirty bits, the dirty cap's marks), lines that every
// take and release in that chunk writes, from any thread: the tail of free
// and malloc of large blocks (architecture.md, layer 6). A heap keeps
// instead a few of its thread's freed runs, still taken in the arena, and
// its next large block of the same slice count reuses one: that pair
// touches only this line, which other threads write only when they flush it.
//
// Each slot is one word: the run's descriptor (64-byte aligned), its slice
// count in the low bits, and an "aged" bit. Only the owner fills an empty
// slot (a release store); the owner takes a run out with a CAS to 0, and so
// does any other thread that flushes the cache (malloc_trim, the purge
// pass's expiry): whoever wins the CAS has the run, nobody waits. The purge
// pass sets the aged bit of a run it finds; a run still there, aged, at the
// next pass has been idle for a pass period and goes back to the arena.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/span/span.h"

namespace tenon {

struct alignas(64) run_cache {
  std::atomic<std::uintptr_t> slot[kRunCacheSlots]{};

  static constexpr std::uintptr_t kSlicesMask = 15;
  static constexpr std::uintptr_t kAged = 16;

  static std::uintptr_t make(span* s) { return reinterpret_cast<std::uintptr_t>(s) | s->nslices; }
  static span* span_in(std::uintptr_t w) { return reinterpret_cast<span*>(w & ~(kSlicesMask | kAged)); }
  static unsigned slices(std::uintptr_t w) { return static_cast<unsigned>(w & kSlicesMask); }

  // Whether no run is cached (a heap on the free-heap stack; a read by the
  // owner, or by anyone with no owner running).
  bool empty() const {
    for (const auto& s : slot)
      if (s.load(std::memory_order_relaxed)) return false;
    return true;
  }
};
static_assert(alignof(span) > run_cache::kSlicesMask + run_cache::kAged, "the low bits of a descriptor's address are free");
static_assert(kRunCacheMaxRunSlices <= run_cache::kSlicesMask, "a cached run's slice count fits its slot's low bits");
static_assert(sizeof(run_cache) == 64, "one line: the owner's scan of it is one cache line");

// A heap's share of the slices its run cache may hold: kRunCacheBudgetSlices
// divided among `heaps` attached heaps, between 1 and kRunCacheHeapSlices.
constexpr unsigned run_cache_budget(std::uint32_t heaps) {
  unsigned share = heaps ? kRunCacheBudgetSlices / heaps : kRunCacheHeapSlices;
  return share < 1 ? 1 : share > kRunCacheHeapSlices ? kRunCacheHeapSlices : share;
}

}  // namespace tenon
