// Layer 5, thread heaps: the free key (issue 11; glibc's tcache key, adapted).
// While a small block sits on its span's local free list or in a block
// cache, its second word holds a random process-wide key; malloc clears it
// again as the block leaves (take_head), so no block a program owns ever
// holds it and no program can forge it. The owner's free fast path compares
// the freed block's second word with the key: equal means "probably freed
// already", confirmed by a walk of the lists where the block would be
// (free_keyed in heap.h) before anything is reported, so a live block whose
// data happens to equal the key is only freed slower. The per-CPU layer
// (percpu/percpu_cache.hpp) keys the blocks its stacks hold the same way and
// looks through the stacks before it reports.
//
// One key for every engine of the process (any value works for any engine:
// the walk decides), drawn before the first small span is formed: no block
// can be freed before one was handed out, and none is handed out before its
// span is formed (ensure_free_key, from form_small_span).
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/platform/os.h"
#include "tenon/span/span.h"

namespace tenon {

// Relaxed atomic: one RIP-relative load on the fast path, and no data race
// between the threads that may form their first spans at once.
__attribute__((visibility("hidden"))) inline constinit std::atomic<std::uint64_t> g_free_key{0};

__attribute__((always_inline)) inline std::uint64_t free_key() { return g_free_key.load(std::memory_order_relaxed); }

// A block's second word, read and written as a word whatever type the
// program stored there.
using alias_word = std::uint64_t __attribute__((may_alias));
__attribute__((always_inline)) inline alias_word& second_word(block* b) { return reinterpret_cast<alias_word*>(b)[1]; }

// Where else a freed small block may wait, keyed, beyond its owner's lists:
// the per-CPU layer's stacks (percpu_cache registers its look through them
// as it makes its first region). The owner's free that found the key and
// not the block on its lists asks these before it takes the block for a
// live one (free_keyed, check_realloc_own in heap.h): a block whose first
// free went to the owner's inbox from another thread, and whose second went
// onto a CPU's stack, is found there when the owner sorts its inbox (issue
// 11). Read only on those cold paths; a slot, once set, never changes.
using freed_elsewhere_fn = bool (*)(unsigned cls, const void* p);
inline constexpr unsigned kFreedElsewhereSlots = 4;
__attribute__((visibility("hidden"))) inline constinit std::atomic<freed_elsewhere_fn>
    g_freed_elsewhere[kFreedElsewhereSlots]{};

// Registers f once (a full table: f is not asked, a check missed, nothing worse).
inline void register_freed_elsewhere(freed_elsewhere_fn f) {
  for (auto& slot : g_freed_elsewhere) {
    freed_elsewhere_fn cur = slot.load(std::memory_order_acquire);
    if (cur == f) return;
    if (cur == nullptr) {
      if (slot.compare_exchange_strong(cur, f, std::memory_order_acq_rel)) return;
      if (cur == f) return;
    }
  }
}

inline bool freed_elsewhere(unsigned cls, const void* p) {
  for (auto& slot : g_freed_elsewhere) {
    freed_elsewhere_fn f = slot.load(std::memory_order_acquire);
    if (f == nullptr) return false;
    if (f(cls, p)) return true;
  }
  return false;
}

// Draws the key once (never 0: a fresh block's zero second word must not
// look freed). The first thread to store it wins; the others use its key.
inline void ensure_free_key() {
  if (__builtin_expect(free_key() != 0, 1)) return;
  std::uint64_t k = os::random_u64() | 1;
  std::uint64_t zero = 0;
  g_free_key.compare_exchange_strong(zero, k, std::memory_order_relaxed);
}

}  // namespace tenon
