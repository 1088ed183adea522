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

// Draws the key once (never 0: a fresh block's zero second word must not
// look freed). The first thread to store it wins; the others use its key.
inline void ensure_free_key() {
  if (__builtin_expect(free_key() != 0, 1)) return;
  std::uint64_t k = os::random_u64() | 1;
  std::uint64_t zero = 0;
  g_free_key.compare_exchange_strong(zero, k, std::memory_order_relaxed);
}

}  // namespace tenon
