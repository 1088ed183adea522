// Layer 5, thread heaps: the per-class block cache of a heap, for the classes
// whose spans hold few blocks (kBlockCacheMaxSpanBlocks or fewer: 1 KiB and up).
//
// Such a span fills and empties all the time when blocks are replaced at
// random, and every change costs a slow path (park it as full, take another,
// move it back to avail, give it up). The cache keeps freed blocks of these
// classes in front of the spans, the tcmalloc shape: a block freed into the
// cache stays "in use" as far as its span knows, until the cache overflows
// (or is flushed: at trim, at thread exit) and gives blocks back to their
// spans; a dropped heap's cache goes with its spans. Owner-private: nothing
// here is shared. It also keeps reuse last-in first-out per class: a block
// freed into a span that is not the current one waits there, cold, while
// malloc takes the current span's older blocks (docs/architecture.md,
// "Where a weak row's time goes: glibc-thread").
//
// The malloc fast path needs no change: the cache's list is the free list of
// a span descriptor that belongs to no memory (`front`), and current[cls]
// points at it. Frees of these classes reach the cache through the free
// slow path: a span of a cached class keeps low_mark at its used count, so
// every local free takes that path, which takes the block back off the
// span's list and puts it on the cache's (src/heap/cache.ipp).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/common/size_classes.h"
#include "tenon/span/span.h"

namespace tenon {

// The cache keeps at most this many bytes of a class (and at least 2
// blocks), more while few heaps are attached (block_cache_limit), and gives
// back down to half when it has more: with kCachedClasses classes, what the
// cache may add to a thread's footprint. A bound on all classes together,
// enforced by halving the biggest class, emptied and refilled the caches so
// often that they cost more than they saved.
constexpr std::size_t kBlockCacheClassBytes = 256 * 1024;

// The classes cached: those whose spans hold at most this many blocks. Those
// of more than kBlockCacheFewBlocks a span (1-7 KiB) keep at most
// kBlockCacheManyLimit blocks, a bound on what they add to a thread's
// footprint (616 KiB for the twelve of them).
constexpr unsigned kBlockCacheMaxSpanBlocks = 64;
constexpr unsigned kBlockCacheFewBlocks = 8;
constexpr std::size_t kBlockCacheManyLimit = 16;

namespace block_cache_detail {

constexpr std::uint32_t span_blocks(unsigned cls) {
  return static_cast<std::uint32_t>((std::size_t{kClasses.slices[cls]} << kSliceShift) / kClasses.size[cls]);
}

struct table {
  unsigned count = 0;
  std::array<std::uint8_t, kNumClasses> slot{};  // kNone: not cached
  std::array<std::uint16_t, kNumClasses> limit{};
  std::array<std::uint16_t, kNumClasses> limit_max{};  // with kBlockCacheMaxClassBytes
};
constexpr std::uint8_t kNone = 0xff;

constexpr table make_table() {
  table t{};
  for (unsigned c = 0; c < kNumClasses; ++c) {
    t.slot[c] = kNone;
    if (span_blocks(c) > kBlockCacheMaxSpanBlocks) continue;
    t.slot[c] = static_cast<std::uint8_t>(t.count++);
    std::size_t n = kBlockCacheClassBytes / kClasses.size[c];
    if (span_blocks(c) > kBlockCacheFewBlocks && n > kBlockCacheManyLimit) n = kBlockCacheManyLimit;
    t.limit[c] = static_cast<std::uint16_t>(n < 2 ? 2 : n);
    std::size_t m = kBlockCacheMaxClassBytes / kClasses.size[c];
    t.limit_max[c] = span_blocks(c) > kBlockCacheFewBlocks || m < t.limit[c] ? t.limit[c] : static_cast<std::uint16_t>(m);
  }
  return t;
}

}  // namespace block_cache_detail

inline constexpr block_cache_detail::table kBlockCache = block_cache_detail::make_table();
constexpr unsigned kCachedClasses = kBlockCache.count;
static_assert(kCachedClasses > 0 && kCachedClasses < block_cache_detail::kNone);

// The bound of class cls's cache in a heap of a part with `live` heaps
// attached to threads: its share of kBlockCacheBudgetBytes, no less than
// the fixed bound and no more than kBlockCacheMaxClassBytes'. The classes
// bounded in blocks (kBlockCacheManyLimit) keep their bound.
constexpr std::uint32_t block_cache_limit(unsigned cls, std::uint32_t live) {
  std::size_t share = kBlockCacheBudgetBytes / (live ? live : 1) / kClasses.size[cls];
  if (share < kBlockCache.limit[cls]) return kBlockCache.limit[cls];
  return share < kBlockCache.limit_max[cls] ? static_cast<std::uint32_t>(share) : kBlockCache.limit_max[cls];
}

// One class's cache: `front.free` is the list, on which the owner's free
// pushes a block of the class as on a span's (span::push_to). `front` keeps
// the count the way a span does, with the bound as its low mark: used() is
// minus the blocks cached and low_mark minus `limit`, so that until_slow is
// limit - cached, which the free's push decrements and sends to the slow
// path (local_free_slow: cache_overflow) below zero, past the bound, and
// the malloc fast path's pop increments, as on any span.
// `limit`: its bound, block_cache_limit as of its last overflow.
struct block_cache {
  span front;
  std::uint32_t limit = 0;
};

// A cache's front, which the malloc and free fast paths take for a span:
// its capacity is no span's (thread_heap's constructor sets it).
constexpr std::uint32_t kCacheFrontCapacity = ~std::uint32_t{0};
inline bool is_cache_front(const span* s) { return s->capacity == kCacheFrontCapacity; }

inline std::uint32_t cached_blocks(const block_cache& c) { return 0u - c.front.used(); }
inline void set_cached_blocks(block_cache& c, std::uint32_t n) { c.front.set_used(0u - n); }
constexpr void set_cache_limit(block_cache& c, std::uint32_t limit) {
  std::uint32_t used = c.front.used();
  c.limit = limit;
  c.front.low_mark = 0u - limit;
  c.front.set_used(used);
}

}  // namespace tenon
