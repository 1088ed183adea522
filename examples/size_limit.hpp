// A budget layer: allocation fails with ENOMEM once the live bytes (usable
// sizes) would pass Limit, as a container's memory limit would, but inside
// the process and with the standard failure answer. Lock-free: one CAS loop
// on the live-bytes word (a failed CAS means another thread progressed).
// I is the default allocator or layers over it (what it hands out, tenon
// owns: tenon_owns tells charged blocks from foreign ones at free).
#pragma once
#include <errno.h>

#include <atomic>
#include <cstddef>

#include <tenon/layer.hpp>

namespace example {

inline std::atomic<std::size_t> g_live_bytes{0};

template <class I, std::size_t Limit>
struct size_limit : tenon::pass_through<I> {
  static void* alloc(std::size_t n) noexcept { return admit(I::alloc(n)); }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept { return admit(I::alloc_aligned(align, n)); }
  // Only blocks tenon owns were charged: a foreign one (glibc's, which the
  // default allocator's free passes on; docs/api.md) must not be credited,
  // or the budget wraps below zero and every smaller malloc fails.
  static void dealloc(void* p) noexcept {
    if (p && tenon_owns(p)) g_live_bytes.fetch_sub(I::usable_size(p), std::memory_order_relaxed);
    I::dealloc(p);
  }

 private:
  // Charge the block to the budget, or give it back and fail.
  static void* admit(void* p) noexcept {
    if (!p) return nullptr;
    std::size_t size = I::usable_size(p);
    std::size_t live = g_live_bytes.load(std::memory_order_relaxed);
    do {
      if (live + size > Limit) {
        I::dealloc(p);
        errno = ENOMEM;
        return nullptr;
      }
    } while (!g_live_bytes.compare_exchange_weak(live, live + size, std::memory_order_relaxed));
    return p;
  }
};

}  // namespace example
