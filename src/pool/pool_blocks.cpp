// The typed bulk pool's link to the platform layer: block memory and the
// per-thread lane ordinal. Kept out of the header so that user code needs only
// <tenon/mass_pool.hpp> and -ltenon, and so that every block of every pool
// comes from tenon::os (huge pages where the kernel allows them).
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/platform/os.h"
#include "tenon/mass_pool.h"

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::atomic<std::uint32_t> g_next_thread_ordinal{0};
}  // namespace

extern "C" {

void* tenon_pool_reserve_block(size_t bytes, int huge) {
  if (bytes == 0) return nullptr;
  const std::size_t page = tenon::os::page_size();
  bytes = (bytes + page - 1) & ~(page - 1);
  if (!huge || bytes < kHugePage) return tenon::os::reserve(bytes, page);
  // Huge-page aligned so the kernel can back every whole 2 MiB of the block
  // with one huge page: 512 times fewer page faults, and munmap frees a huge
  // page at a time, which is what makes clear() cheap.
  void* p = tenon::os::reserve(bytes, kHugePage);
  if (p) tenon::os::advise_huge(p, bytes);
  return p;
}

void tenon_pool_release_block(void* p, size_t bytes) {
  if (!p) return;
  const std::size_t page = tenon::os::page_size();
  tenon::os::release(p, (bytes + page - 1) & ~(page - 1));
}

void tenon_pool_prefault_block(void* p, size_t bytes) {
  if (p && bytes) tenon::os::populate(p, bytes);
}

uint32_t tenon_pool_thread_ordinal(void) {
  // Relaxed: only uniqueness matters, and one RMW per thread's first use.
  return g_next_thread_ordinal.fetch_add(1, std::memory_order_relaxed);
}

}  // extern "C"
