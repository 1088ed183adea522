// The remote free's outbox slot of a destination heap (heap/remote_free.h):
// a thread that frees blocks of many threads at once (bench row remote-free
// at 64 threads: each thread frees a shuffled share of everyone's blocks)
// batches them per owner only if the owners take distinct slots. The heaps
// of a segment are contiguous, so its kHeapsPerSegment heaps must map to as
// many distinct slots; with fewer slots than heaps, frees bound for owners
// that share a slot flush each other's batch, one inbox CAS a block or two.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "tenon/engine/engine.h"
#include "tenon/heap/remote_free.h"

using namespace tenon;

namespace {

using heap_t = thread_heap<default_config>;

// The slots of the kHeapsPerSegment heaps of a segment reserved at `base`.
std::set<unsigned> segment_slots(std::uintptr_t base) {
  std::set<unsigned> slots;
  for (std::size_t i = 0; i < kHeapsPerSegment; ++i)
    slots.insert(outbox_slot<sizeof(heap_t)>(reinterpret_cast<const void*>(base + i * sizeof(heap_t))));
  return slots;
}

TEST(OutboxSlot, TheHeapsOfASegmentTakeDistinctSlots) {
  // Segments are page-aligned reservations anywhere below 2^47.
  for (std::uintptr_t base : {std::uintptr_t{0x7f0000000000}, std::uintptr_t{0x55d4c3a21000},
                              std::uintptr_t{0x7ffe12345000}, std::uintptr_t{0x10000}}) {
    auto slots = segment_slots(base);
    EXPECT_EQ(slots.size(), kHeapsPerSegment) << std::hex << base;
    for (unsigned s : slots) EXPECT_LT(s, kOutboxes);
  }
}

}  // namespace
