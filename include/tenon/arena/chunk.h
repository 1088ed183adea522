// Layer 4, address space: the layout of a chunk, 4 MiB aligned to its size
// and cut into 64 slices of 64 KiB. Slice 0 is the header: the slice index
// (first, as the lookup layer expects), the occupancy and dirty bitmaps, and
// the 64 span descriptors (one per possible first slice of a run). Chunks
// are never unmapped, so descriptors are type-stable.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/span/span.h"

namespace tenon {

struct chunk {
  lookup::slice_index index;         // slice -> descriptor of its span (read by every free)
  std::atomic<std::uint64_t> used;   // bit i: slice i belongs to a span (bit 0: header)
  std::atomic<std::uint64_t> dirty;  // bit i: slice i is free but has touched pages
  std::atomic<std::uint32_t> dirty_ms[kSlicesPerChunk];  // when each slice got dirty
  span spans[kSlicesPerChunk];       // descriptor of the span starting at slice i
  // bit i: slice i was over the chunk's cap of free resident slices at a
  // release (arena::release_span); the next purge pass drops its pages
  std::atomic<std::uint64_t> trim;
  // Set when the chunk was advised MADV_HUGEPAGE at its making; cleared (and
  // the advice taken back) by the first purge of one of its slices.
  std::atomic<bool> huge_advised;
  // bit i: slice i is free and the small span released from it last had
  // carved it (its pages written, so resident unless purged since, which
  // clears the bit); such slices go to spans first (arena::find_run)
  std::atomic<std::uint64_t> dense;
  // bit i: a small span's carving reached slice i (its blocks' links and the
  // free key may be anywhere in it), or a large block held it (its program's
  // words, which may be a copy of such memory: realloc's), and no purge has
  // zeroed it since. Set at a span's release (arena::linked_slices), cleared
  // by a purge. A small span formed on slices without it hands out its
  // blocks of the cached classes untouched (span::no_links, heap/cache.ipp).
  std::atomic<std::uint64_t> linked;
  // The chunk's slot in its arena's registry (kNoSlot: not registered), for
  // its bit in the warm map (arena::mark_warm). Written once, before the
  // registry publishes the chunk.
  std::uint32_t slot;
};
inline constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};
static_assert(sizeof(chunk) <= kSliceSize, "chunk header must fit in slice 0");
static_assert(offsetof(chunk, index) == 0, "lookup::span_of reads the slice index at the chunk's base");

inline chunk* chunk_of(const void* p) {
  return reinterpret_cast<chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
}

// Span ids: 32-bit names for descriptors (unit index << 6 | slice), used by the
// tagged stacks. Id 0 is never a span (unit 0 is never mapped).
inline std::uint32_t span_id(const span* s) {
  chunk* c = chunk_of(s);
  auto slice = static_cast<std::uint32_t>(s - c->spans);
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(c) >> kChunkShift) << 6 | slice;
}
inline span* span_from_id(std::uint32_t id) {
  auto* c = reinterpret_cast<chunk*>(static_cast<std::uintptr_t>(id >> 6) << kChunkShift);
  return &c->spans[id & 63];
}

}  // namespace tenon
