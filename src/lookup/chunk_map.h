// Layer 3, metadata lookup: from any pointer to its owner in O(1), no locks.
//
// The address space (2^48 bytes) is divided into 4 MiB units, the size and
// alignment of a chunk. Three bitmaps, one bit per unit, say what a unit
// holds; they live in .bss (8 MiB each of address space, untouched pages cost
// nothing) and need no initialisation, so a lookup works before anything else
// has run and on any pointer at all:
//   regular:   the unit is a chunk; its header is at the unit's base.
//   huge_near: a huge block's user pointer lies in the unit and its header is
//              at the unit's base.
//   huge_far:  a huge block aligned to 4 MiB or more starts at the unit's base;
//              its header is one unit below.
// A pointer in no marked unit was not handed out by tenon ("foreign").
// Bits are set (release) after the header is written and cleared before the
// memory is unmapped; a reader holding a live pointer we handed out is ordered
// after the set by the program's own hand-off of that pointer.
#pragma once
#include <atomic>
#include <cstdint>

#include "common/config.h"

namespace tenon::lookup {

enum class map_kind { regular, huge_near, huge_far };

struct unit_bitmap {
  std::atomic<std::uint64_t> words[kMapUnits / 64];
};

extern unit_bitmap g_regular;
extern unit_bitmap g_huge_near;
extern unit_bitmap g_huge_far;

inline std::uintptr_t unit_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) >> kChunkShift;
}

inline bool test(const unit_bitmap& m, std::uintptr_t unit) {
  if (unit >= kMapUnits) return false;
  return (m.words[unit >> 6].load(std::memory_order_relaxed) >> (unit & 63)) & 1u;
}

// The fast-path question: is p inside a regular chunk? The unit index is
// masked rather than range-checked (one instruction less on every free):
// user-space pointers are below 2^48, so only a non-canonical garbage pointer
// could alias, and freeing one is undefined anyway.
inline bool is_regular(const void* p) {
  std::uintptr_t u = unit_of(p) & (kMapUnits - 1);
  return (g_regular.words[u >> 6].load(std::memory_order_relaxed) >> (u & 63)) & 1u;
}

void mark(map_kind kind, const void* unit_base);
void unmark(map_kind kind, const void* unit_base);

}  // namespace tenon::lookup
