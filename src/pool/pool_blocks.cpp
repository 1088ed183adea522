// The typed bulk pool's link to the platform layer: block memory and the
// per-thread lane ordinal. Kept out of the header so that user code needs only
// <tenon/mass_pool.hpp> and -ltenon, and so that every block of every pool
// comes from tenon::os (huge pages where the kernel allows them).
#include <errno.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/platform/os.h"
#include "tenon/mass_pool.h"
#include "tenon/mass_pool.hpp"  // TENON_POOL_RSEQ: whether the pool's fast path is built with rseq

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::atomic<std::uint32_t> g_next_thread_ordinal{0};

// Whether this process can restart other threads' restartable sequences:
// 0 not asked yet, 1 yes, -1 no. Racing first callers all register (the
// kernel makes that idempotent) and store the same answer; nobody waits.
std::atomic<int> g_restart_ready{0};

[[maybe_unused]] bool restart_ready() {  // unused where the pool is built without rseq
  int s = g_restart_ready.load(std::memory_order_acquire);
  if (s == 0) {
    s = tenon::os::register_sequence_restarts() ? 1 : -1;
    g_restart_ready.store(s, std::memory_order_release);
  }
  return s == 1;
}
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

int tenon_pool_thread_can_own(void) {
#if TENON_POOL_RSEQ
  // glibc registers one rseq area per thread and says so in __rseq_size; the
  // kernel writes the area's cpu_id (negative until registered, or when the
  // registration failed). A program that registered an area of its own
  // leaves __rseq_size at 0: then a sequence here would not be restarted.
  if (__rseq_size == 0) return 0;
  const auto* area =
      reinterpret_cast<const struct rseq*>(tenon::detail::this_thread_id() + std::uintptr_t(__rseq_offset));
  if (static_cast<std::int32_t>(area->cpu_id) < 0) return 0;
  return restart_ready() ? 1 : 0;
#else
  return 0;
#endif
}

int tenon_pool_restart_sequences(void) {
  const int r = tenon::os::restart_sequences();
  // A process that never registered (an owner exists only where the
  // registration worked, so only through the test hook) registers now.
  if (r == EPERM && tenon::os::register_sequence_restarts()) return 0;
  return r;
}

}  // extern "C"
