#include "tenon/lookup/unit_map.h"

#include <errno.h>

#include "tenon/platform/os.h"

namespace tenon::lookup {

namespace {

constexpr std::size_t kLeafUnits = std::size_t{1} << kUnitLeafBits;
static_assert(kUnitDirBits + kUnitLeafBits + kChunkShift == kAddressBits);

// A unit's two words: its entry, and the count of calls reading its huge
// block in place (readers_of). Side by side: a reader touches one line.
struct unit_slot {
  std::atomic<std::uint64_t> entry;
  std::atomic<std::uint64_t> readers;
};
using leaf = unit_slot;
constexpr std::size_t kLeafBytes = kLeafUnits * sizeof(leaf);
constinit std::atomic<leaf*> g_leaves[std::size_t{1} << kUnitDirBits]{};

leaf* leaf_for(std::uintptr_t unit) {
  return g_leaves[unit >> kUnitLeafBits].load(std::memory_order_acquire);
}

// The slot of a unit whose leaf exists.
unit_slot& slot_of(const void* unit_base) {
  std::uintptr_t u = unit_of(unit_base);
  return leaf_for(u)[u & (kLeafUnits - 1)];
}
std::atomic<std::uint64_t>& entry_ref(const void* unit_base) { return slot_of(unit_base).entry; }

}  // namespace

unit_entry entry_of(const void* p) {
  std::uintptr_t u = unit_of(p);
  if (u >= kMapUnits) return unit_entry{};
  leaf* l = leaf_for(u);
  if (!l) return unit_entry{};
  return unit_entry(l[u & (kLeafUnits - 1)].entry.load(std::memory_order_acquire));
}

unit_entry entry_after_reader(const void* unit_base) {
  return unit_entry(entry_ref(unit_base).load(std::memory_order_seq_cst));
}

std::atomic<std::uint64_t>& readers_of(const void* unit_base) { return slot_of(unit_base).readers; }

bool prepare(const void* unit_base) {
  std::uintptr_t u = unit_of(unit_base);
  if (u >= kMapUnits) {
    errno = ENOMEM;
    return false;
  }
  std::atomic<leaf*>& slot = g_leaves[u >> kUnitLeafBits];
  if (slot.load(std::memory_order_acquire)) return true;
  // Racers each reserve a leaf (fresh pages are zero: no entry set); one CAS
  // wins, the others give theirs back. Nobody waits for anybody.
  auto* fresh = static_cast<leaf*>(os::reserve(kLeafBytes, os::page_size()));
  if (!fresh) {
    errno = ENOMEM;
    return false;
  }
  leaf* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
    os::release(fresh, kLeafBytes);
  return true;
}

void set(const void* unit_base, unit_entry e) {
  std::atomic<std::uint64_t>& entry = entry_ref(unit_base);
  entry.store(e.after(unit_entry(entry.load(std::memory_order_acquire))).word(), std::memory_order_release);
}

void clear(const void* unit_base) { set(unit_base, unit_entry{}); }

bool replace(const void* unit_base, unit_entry expected, unit_entry desired) {
  std::uint64_t w = expected.word();
  return entry_ref(unit_base).compare_exchange_strong(w, desired.word(), std::memory_order_seq_cst,
                                                      std::memory_order_relaxed);
}

}  // namespace tenon::lookup
