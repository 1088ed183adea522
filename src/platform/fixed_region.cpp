#include "tenon/platform/fixed_region.h"

#include <atomic>
#include <cstdint>

#include "tenon/common/config.h"

namespace tenon::os {

namespace {

struct region {
  std::uintptr_t end = 0;
  std::atomic<std::uintptr_t> cursor{0};
};
region g_region;

// The next aligned range, or nullptr once the region is used up. A failed
// CAS means another thread took a range: retry from where it left the cursor.
void* cut(std::size_t size, std::size_t align, void* context) {
  auto* r = static_cast<region*>(context);
  std::uintptr_t at = r->cursor.load(std::memory_order_relaxed);
  for (;;) {
    std::uintptr_t start = (at + align - 1) & ~static_cast<std::uintptr_t>(align - 1);
    if (start < at || start > r->end || r->end - start < size) return nullptr;
    if (r->cursor.compare_exchange_weak(at, start + size, std::memory_order_relaxed)) return reinterpret_cast<void*>(start);
  }
}

}  // namespace

bool use_fixed_region(void* base, std::size_t size) {
  auto start = reinterpret_cast<std::uintptr_t>(base);
  if (!base || size < 2 * kChunkSize || start + size < start) return false;
  g_region.end = start + size;
  g_region.cursor.store(start, std::memory_order_relaxed);
  return set_memory_source(memory_source{cut, nullptr, &g_region});
}

}  // namespace tenon::os
