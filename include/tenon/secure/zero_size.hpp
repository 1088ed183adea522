// Secure layers: zero_size<Inner>. malloc(0) (and new of zero bytes) gets a
// unique address in a region no access may touch, so a read or write of a
// zero-size block faults (SIGSEGV) at the access. Unique among the first
// 2^26 such blocks, then the addresses come round again. The region, 1 GiB of
// address space and no memory, is reserved at the first zero-size request;
// racing first requests keep one and give the others back (lock-free).
#pragma once
#include <errno.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/layer.hpp"
#include "tenon/platform/os.h"

namespace tenon::secure {

template <layer Inner>
struct zero_size : pass_through<Inner> {
  static constexpr std::size_t kRegion = std::size_t{1} << 30;
  static constexpr std::size_t kStep = 16;

  // One signed test takes both rare sizes off the common path: 0, and the
  // impossible ones past PTRDIFF_MAX (malloc and operator new pass n on
  // unchecked: layer.hpp), which are refused so that no inner layer adds its
  // bytes to them and wraps (an inner canary's own test then folds away).
  static void* alloc(std::size_t n) noexcept {
    if (__builtin_expect(static_cast<std::ptrdiff_t>(n) > 0, 1)) return Inner::alloc(n);
    return alloc_rare(n);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    return Inner::alloc_aligned(align, n == 0 ? 1 : n);
  }
  static void dealloc(void* p) noexcept {
    if (!inside(p)) Inner::dealloc(p);
  }
  // Touches no block: the inner layers' trim (the quarantine's) applies.
  static int trim(std::size_t pad) noexcept { return layer_ops<Inner>::trim(pad); }

  // Sized frees keep their size for the inner layers' checks, but for 0: a
  // zero-size block outside the region is one alloc_rare served as one byte
  // (the region could not be had: a limit on address space below 1 GiB),
  // whose size the inner layers know as 1 (until 2026-11-27 free_sized(p, 0)
  // of malloc(0) was reported there as a size that does not match).
  static void dealloc_sized(void* p, std::size_t n) noexcept {
    if (!inside(p)) layer_ops<Inner>::dealloc_sized(p, n == 0 ? 1 : n);
  }
  // alloc_aligned served n == 0 as one byte, which the inner layers' checks
  // know as its size: the size asked, 0, is told them as that byte (until
  // 2026-11-27 free_aligned_sized(aligned_alloc(a, 0), a, 0), a correct C23
  // call, was reported as a size that does not match the block).
  static void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    if (!inside(p)) layer_ops<Inner>::dealloc_aligned_sized(p, align, n == 0 ? 1 : n);
  }
  static std::size_t usable_size(const void* p) noexcept { return inside(p) ? 0 : Inner::usable_size(p); }
  // A zero-size block has nothing to keep: realloc is a new block. Any other
  // goes to the inner layers' realloc (the canary's checks p first).
  static void* realloc(void* p, std::size_t n) noexcept {
    if (inside(p)) return alloc(n);
    return layer_ops<Inner>::realloc(p, n);
  }

 private:
  // n == 0: a unique address in the region (one real byte if the region
  // could not be had); n past PTRDIFF_MAX: NULL with ENOMEM. Out of line:
  // in line in every caller of alloc, it cost GCC's growth budget for the
  // unit, and the free path's functions were no longer inlined (273 -> 300
  // instructions a malloc(32)+free pair).
  [[gnu::noinline]] static void* alloc_rare(std::size_t n) noexcept {
    if (n != 0) {
      errno = ENOMEM;
      return nullptr;
    }
    char* r = region();
    if (!r) return Inner::alloc(1);
    std::size_t i = next().fetch_add(1, std::memory_order_relaxed) % (kRegion / kStep);
    return r + i * kStep;
  }
  static std::atomic<char*>& base() {
    static constinit std::atomic<char*> b{nullptr};
    return b;
  }
  static std::atomic<std::size_t>& next() {
    static constinit std::atomic<std::size_t> n{0};
    return n;
  }
  static char* region() {
    char* r = base().load(std::memory_order_acquire);
    if (__builtin_expect(r != nullptr, 1)) return r;
    auto* fresh = static_cast<char*>(os::reserve_inaccessible(kRegion));
    if (!fresh) return nullptr;
    if (base().compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return fresh;
    os::release(fresh, kRegion);
    return r;
  }
  // One unsigned compare for both bounds (a p below r wraps past kRegion).
  static bool inside(const void* p) {
    char* r = base().load(std::memory_order_relaxed);
    return r && reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(r) < kRegion;
  }
};

}  // namespace tenon::secure
