// A program-specific allocator: requests of at most Slot bytes are cut from
// one big region with a bump pointer and never reused (for a program that
// builds many small objects and exits: a compiler, a batch job); everything
// else, and everything once the region is full, falls through to I.
//
// Threads take Batch slots at a time with one fetch_add on the shared cursor
// and bump their own thread-local cursor in between, so the common case is a
// few instructions with no atomic operation. Freeing an arena block does
// nothing. The region is reserved on first use: racing threads each map one,
// one CAS wins, the others unmap theirs (nobody waits).
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <tenon/layer.hpp>

namespace example {

template <class I, std::size_t Slot = 64, std::size_t RegionBytes = std::size_t{1} << 30>
struct bump_arena : tenon::pass_through<I> {
  static_assert(Slot % 16 == 0, "slots keep malloc's 16-byte alignment");
  static constexpr std::size_t kBatch = 1024;  // slots a thread takes at once

  static void* alloc(std::size_t n) noexcept {
    if (n <= Slot) {
      if (void* p = take_slot()) return p;
    }
    return I::alloc(n);
  }
  static void dealloc(void* p) noexcept {
    if (!in_region(p)) I::dealloc(p);
  }
  static std::size_t usable_size(const void* p) noexcept { return in_region(p) ? Slot : I::usable_size(p); }
  // realloc of an arena block out of the arena (or inside its slot) comes
  // from the generic realloc, built from the three functions above.

  static std::size_t slots_used() noexcept {
    std::size_t used = g_next.load(std::memory_order_relaxed);
    return used < kSlots ? used : kSlots;
  }

 private:
  static constexpr std::size_t kSlots = RegionBytes / Slot;
  static inline std::atomic<char*> g_region{nullptr};
  static inline std::atomic<std::size_t> g_next{0};  // next free slot of the region
  static inline thread_local char* t_cursor = nullptr;
  static inline thread_local char* t_end = nullptr;

  static bool in_region(const void* p) noexcept {
    char* r = g_region.load(std::memory_order_relaxed);
    auto* c = static_cast<const char*>(p);
    return r && c >= r && c < r + RegionBytes;
  }

  static void* take_slot() noexcept {
    if (t_cursor == t_end && !refill()) return nullptr;
    void* p = t_cursor;
    t_cursor += Slot;
    return p;
  }

  static bool refill() noexcept {
    char* r = region();
    if (!r) return false;
    std::size_t first = g_next.fetch_add(kBatch, std::memory_order_relaxed);
    if (first >= kSlots) return false;
    std::size_t last = first + kBatch < kSlots ? first + kBatch : kSlots;
    t_cursor = r + first * Slot;
    t_end = r + last * Slot;
    return true;
  }

  static char* region() noexcept {
    char* r = g_region.load(std::memory_order_acquire);
    if (r) return r;
    void* m = mmap(nullptr, RegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    if (g_region.compare_exchange_strong(r, static_cast<char*>(m), std::memory_order_acq_rel)) return static_cast<char*>(m);
    munmap(m, RegionBytes);
    return r;
  }
};

}  // namespace example
