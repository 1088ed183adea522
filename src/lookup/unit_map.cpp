#include "tenon/lookup/unit_map.h"

#include <errno.h>

#include "tenon/platform/os.h"

namespace tenon::lookup {

namespace {

constexpr std::size_t kLeafUnits = std::size_t{1} << kUnitLeafBits;
constexpr std::size_t kLeafBytes = kLeafUnits * sizeof(std::atomic<std::uint64_t>);
static_assert(kUnitDirBits + kUnitLeafBits + kChunkShift == kAddressBits);

using leaf = std::atomic<std::uint64_t>;
constinit std::atomic<leaf*> g_leaves[std::size_t{1} << kUnitDirBits]{};

leaf* leaf_for(std::uintptr_t unit) {
  return g_leaves[unit >> kUnitLeafBits].load(std::memory_order_acquire);
}

// The entry of a unit whose leaf exists.
leaf& entry_ref(const void* unit_base) {
  std::uintptr_t u = unit_of(unit_base);
  return leaf_for(u)[u & (kLeafUnits - 1)];
}

}  // namespace

unit_entry entry_of(const void* p) {
  std::uintptr_t u = unit_of(p);
  if (u >= kMapUnits) return unit_entry{};
  leaf* l = leaf_for(u);
  if (!l) return unit_entry{};
  return unit_entry(l[u & (kLeafUnits - 1)].load(std::memory_order_acquire));
}

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
  leaf& entry = entry_ref(unit_base);
  entry.store(e.after(unit_entry(entry.load(std::memory_order_acquire))).word(), std::memory_order_release);
}

void clear(const void* unit_base) { set(unit_base, unit_entry{}); }

bool replace(const void* unit_base, unit_entry expected, unit_entry desired) {
  std::uint64_t w = expected.word();
  return entry_ref(unit_base).compare_exchange_strong(w, desired.word(), std::memory_order_acq_rel,
                                                      std::memory_order_relaxed);
}

}  // namespace tenon::lookup
