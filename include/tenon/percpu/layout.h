// Per-CPU caches, the layout of one CPU's region: a region_header (each
// cached class's top, begin and end), then each class's slots (block
// pointers). Fixed at
// compile time, so that the sequences need only the class's header offset.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tenon/common/size_classes.h"
#include "tenon/percpu/rseq_stack.h"

namespace tenon::percpu {

// Requests up to this size are cached: the 20 classes of 16 to 1024 bytes,
// where most requests are and where the size's class is one table load.
constexpr std::size_t kMaxCached = 1024;
constexpr unsigned kCachedClasses = size_to_class(kMaxCached) + 1;
static_assert(kCachedClasses <= kHeaderClasses);

// Slots per class: about kClassBytes of blocks, at least kMinSlots and at
// most kMaxSlots. A region is then 72 KiB of address space (pages touched as
// stacks grow) and a CPU holds at most 1.15 MiB of cached blocks
// (tcmalloc's per-CPU caches: up to 1.5 MiB). Chosen by measurement over 16
// KiB / 128 slots and 32 KiB / 512 (docs/architecture.md, "Per-CPU caches").
constexpr std::uint32_t kClassBytes = 64 * 1024;
constexpr std::uint32_t kMinSlots = 16;
constexpr std::uint32_t kMaxSlots = 1024;

constexpr std::uint32_t slots_of(unsigned c) {
  std::uint32_t k = kClassBytes / kClasses.size[c];
  return k < kMinSlots ? kMinSlots : (k > kMaxSlots ? kMaxSlots : k);
}

struct region_layout {
  std::uint32_t begin[kCachedClasses]{};
  std::uint32_t end[kCachedClasses]{};
  std::uint32_t bytes = 0;  // the region's size, a multiple of 4 KiB
};

constexpr region_layout make_layout() {
  region_layout l{};
  std::uint32_t off = (sizeof(region_header) + 63) & ~63u;  // slots start on a cache line
  for (unsigned c = 0; c < kCachedClasses; ++c) {
    l.begin[c] = off;
    off += slots_of(c) * 8;
    l.end[c] = off;
  }
  l.bytes = (off + 4095) & ~4095u;
  return l;
}

inline constexpr region_layout kLayout = make_layout();
static_assert(kLayout.bytes <= 80 * 1024, "a region is meant to be at most 80 KiB");

}  // namespace tenon::percpu
