// Layer 5, thread heaps: the free key (issue 11; glibc's tcache key, adapted).
// A free small block holds a random process-wide key in its second word,
// wherever it waits: its span's local free list or a block cache (the
// owner's push), a CPU's stack (percpu/percpu_cache.hpp), another thread's
// outbox, its owner's inbox and a span's remote list (stored by the thread
// that frees it there, src/heap/remote.ipp). malloc clears it as the block
// leaves (take_head, the per-CPU pop), so no block a program owns holds it,
// and a free that finds it reports a double free at once: the owner's fast
// path compares the word with the key, as do the per-CPU free and the
// remote free. Nothing confirms it (since 2026-11-27, branch gap; a walk of
// the owner's lists did before, which could not see a block waiting in
// another thread's batch): a live block holding the key is reported too,
// and only a program that copied the key out of a freed block into it can
// make one (a random 64-bit word; docs/security.md).
//
// One key for every engine of the process, drawn before the first small
// span is formed: no block can be freed before one was handed out, and
// none is handed out before its span is formed (ensure_free_key, from
// form_small_span).
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
// The second word read by a thread that does not own b's span, before its
// test of the span's carved bound, and ordered before it: a load, then an
// acquire fence (nothing on x86-64, `dmb ishld` on aarch64), so that the
// bound and the span's geometry are read after it (span::forget_carved says
// why: a stale pointer's word found without the key means its old span was
// released, whose bound then reads 0 or the next span's). A plain load by
// memcpy, not an atomic one: b is not tested yet and may be misaligned (a
// free of p + 1), which an atomic load on aarch64 (`ldar`) turns into a bus
// error and UBSan into a report, where the program was owed tenon's report
// (heaps.HeapsDeathTest.UnalignedFreeOfAnOwnBlockIsReported failed in the
// asan and aarch64 stages with __atomic_load_n here, 2026-11-30).
__attribute__((always_inline)) inline std::uint64_t second_word_ordered(block* b) {
  std::uint64_t w;
  __builtin_memcpy(&w, reinterpret_cast<const char*>(b) + sizeof(std::uint64_t), sizeof w);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return w;
}
// The third, where a block of 32 bytes or more waiting in a batch names the
// block kOutboxAhead further down it (heap.h, outbox).
__attribute__((always_inline)) inline alias_word& third_word(block* b) { return reinterpret_cast<alias_word*>(b)[2]; }
// Word i of a batch's head block, where it names more blocks (heap.h, outbox).
__attribute__((always_inline)) inline alias_word& block_word(block* b, unsigned i) {
  return reinterpret_cast<alias_word*>(b)[i];
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
