// A statistics layer: counts allocations and frees, over any layer.
#pragma once
#include <atomic>
#include <cstddef>

#include <tenon/layer.hpp>

namespace example {

inline std::atomic<long> g_allocs{0}, g_frees{0};

template <class I>
struct counting : tenon::pass_through<I> {
  static void* alloc(std::size_t n) noexcept {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return I::alloc(n);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return I::alloc_aligned(align, n);
  }
  static void dealloc(void* p) noexcept {
    if (p) g_frees.fetch_add(1, std::memory_order_relaxed);
    I::dealloc(p);
  }
  // realloc and calloc are not overridden: because this layer changes alloc
  // and dealloc, tenon builds them from the three above (so they are counted).
};

}  // namespace example
