// Layer 3, metadata lookup: from a pointer inside a chunk to the descriptor
// of its span. Every chunk begins with its slice index (the arena lays its
// header out so), one descriptor pointer per 64 KiB slice, so the question
// costs one load and no arithmetic on descriptor sizes: it sits on the free
// fast path. Entries are written by the taker of a slice run for every slice
// of the run, before any block of it is handed out; a freer got its pointer
// from such an allocation (ordered by the program's hand-off or by tenon's
// remote lists), so it reads them relaxed.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/lookup/chunk_map.h"
#include "tenon/span/span.h"

namespace tenon::lookup {

struct slice_index {
  std::atomic<span*> span_at[kSlicesPerChunk];
};

inline unsigned slice_of(const void* p) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) >> kSliceShift) & (kSlicesPerChunk - 1);
}

// span_of for the free fast path, from p's tag (tag_of: is_regular_tagged).
inline span* span_of_tagged(const void* p, std::uintptr_t tag) {
  auto* index = reinterpret_cast<const slice_index*>(tag - kTagBits);
  return index->span_at[slice_of(p)].load(std::memory_order_relaxed);
}

// The span containing p; p must be inside a chunk (is_regular or in_chunk).
inline span* span_of(const void* p) {
  auto* index = reinterpret_cast<const slice_index*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
  return index->span_at[slice_of(p)].load(std::memory_order_relaxed);
}

}  // namespace tenon::lookup
