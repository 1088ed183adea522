// Layer 3, metadata lookup: from a pointer inside a chunk to the descriptor
// of its span. Every chunk begins with its slice index (the arena lays its
// header out so), one descriptor pointer per 64 KiB slice, so the question
// costs one load and no arithmetic on descriptor sizes: it sits on the free
// fast path. Entries are written by the taker of a slice run for every slice
// of the run, before any block of it is handed out; a freer got its pointer
// from such an allocation (ordered by the program's hand-off or by tenon's
// remote lists), so it reads them relaxed.
//
// The index is read with the low byte of p >> kSliceShift (a `movzbl`, no
// mask), which holds the slice's 6 bits and the 2 low bits of the chunk's
// unit: the header keeps room for the four windows of 64 entries those
// bits can name and uses the one of its own unit (window_base). The free
// fast path then shifts p once for both its questions, the chunk table's
// slot and the slice: one instruction a free fewer than two shifts and a
// mask, which paid for span::push_to (docs/architecture.md, layer 5, "The
// owner's free: one push for cached and uncached classes"). 1.5 KiB of the
// header's first page unused.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/lookup/chunk_map.h"
#include "tenon/span/span.h"

namespace tenon::lookup {

constexpr unsigned kSliceByteBits = 8;
constexpr unsigned kSliceWindows = (1u << kSliceByteBits) / kSlicesPerChunk;
static_assert(kSliceWindows * kSlicesPerChunk == 1u << kSliceByteBits && kSlicesPerChunk << kSliceShift == kChunkSize);

// The first entry of the window that a chunk at `chunk_base` uses.
inline unsigned window_base(const void* chunk_base) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(chunk_base) >> kChunkShift & (kSliceWindows - 1)) *
         kSlicesPerChunk;
}

struct slice_index {
  std::atomic<span*> window[kSliceWindows * kSlicesPerChunk];
  // The entry of slice i of the chunk whose header this is.
  std::atomic<span*>& span_at(unsigned i) { return window[window_base(this) + i]; }
  const std::atomic<span*>& span_at(unsigned i) const { return window[window_base(this) + i]; }
};

inline unsigned slice_of(const void* p) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) >> kSliceShift) & (kSlicesPerChunk - 1);
}

// p's slice number in the whole address space (p >> kSliceShift), for the
// free fast path's two lookups: `entry`, its low byte, names p's entry in
// its chunk's index; `n`, from bit kChunkShift - kSliceShift up, holds its
// unit. The empty asm makes GCC take the byte (a `movzbl`, which copies)
// before it shifts n on for the unit, instead of folding that shift back
// into one of p and shifting and masking p again for the slice.
struct numbered {
  std::uintptr_t n;
  std::uintptr_t entry;
};
__attribute__((always_inline)) inline numbered slice_number(const void* p) {
  std::uintptr_t n = reinterpret_cast<std::uintptr_t>(p) >> kSliceShift;
  std::uintptr_t entry = static_cast<std::uint8_t>(n);
  asm("" : "+r"(n), "+r"(entry));
  return {n, entry};
}

// is_regular_tagged (chunk_map.h) from p's slice number.
__attribute__((always_inline)) inline bool is_regular_numbered(numbered x, std::uintptr_t tag) {
  std::uintptr_t s = x.n >> (kChunkShift - kSliceShift) & ((std::uintptr_t{1} << kChunkTableBits) - 1);
  return os::equals_relaxed(g_chunk_table.slot[s], tag);
}

// span_of for the free fast path, from p's tag (is_regular_numbered or
// is_regular_tagged) and its entry's number.
__attribute__((always_inline)) inline span* span_of_entry(std::uintptr_t entry, std::uintptr_t tag) {
  auto* index = reinterpret_cast<const slice_index*>(tag - kTagBits);
  return index->window[entry].load(std::memory_order_relaxed);
}

// span_of from p's tag (tag_of: is_regular_tagged).
inline span* span_of_tagged(const void* p, std::uintptr_t tag) {
  return span_of_entry(static_cast<std::uint8_t>(reinterpret_cast<std::uintptr_t>(p) >> kSliceShift), tag);
}

// The span containing p; p must be inside a chunk (is_regular or in_chunk).
inline span* span_of(const void* p) {
  auto* index = reinterpret_cast<const slice_index*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
  return index->window[static_cast<std::uint8_t>(reinterpret_cast<std::uintptr_t>(p) >> kSliceShift)].load(
      std::memory_order_relaxed);
}

}  // namespace tenon::lookup
