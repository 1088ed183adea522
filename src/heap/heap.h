// Layer 5, thread heaps: each thread owns a heap; the heap owns spans, one
// "current" span per size class from which the fast path allocates.
//
// Fast paths (inline here, no atomic read-modify-write):
//   malloc: pop the current span's local free list.
//   free:   if the block's span is owned by this thread's heap, push it on the
//           span's local free list; one compare of `used` against `low_mark`
//           sends the rare cases (span became empty, span was full) to a
//           slow path.
// Everything else (refill, remote frees, retiring full spans, adoption,
// thread exit) is in heap.cpp; every one of those paths is lock-free.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "arena/chunk.h"
#include "common/size_classes.h"
#include "common/stats.h"
#include "lookup/chunk_map.h"
#include "span/span.h"

namespace tenon {

// Per class, the spans a heap owns besides its current one (owner-private
// doubly-linked lists), and the counter remote freers bump when they free
// into one of this heap's full spans.
struct class_lists {
  span* avail = nullptr;
  span* full = nullptr;
  span* empty = nullptr;  // one emptied span kept back (low-capacity classes only)
  std::uint32_t nfull = 0;
  std::atomic<std::uint32_t> notify{0};
};

// Remote frees bound for one heap, gathered by the freeing thread and handed
// to that heap's inbox in a single CAS, whatever spans they belong to (the
// lesson of the cross-thread-free benchmarks: batch per owner, not per span).
struct outbox {
  heap* dest = nullptr;
  block* head = nullptr;
  block* tail = nullptr;
  std::uint32_t count = 0;
};
constexpr unsigned kOutboxes = 16;  // direct-mapped by destination heap index

// A heap's inbox word: a chain of blocks pushed by other threads, taken by
// the owner in one exchange; kInboxClosed once the heap's thread has exited.
constexpr std::uintptr_t kInboxClosed = 1;

struct heap {
  span* current[kNumClasses];  // read by the malloc fast path
  std::atomic<std::uintptr_t> inbox{0};
  outbox out[kOutboxes];
  std::uint32_t out_pending = 0;  // bit i: out[i] holds blocks
  class_lists lists[kNumClasses];
  chunk* chunk_hint = nullptr;
  std::uint32_t forms_since_sweep = 0;  // see absorb_before_growing
  std::atomic<std::uint32_t> stack_next{0};  // link on the free-heap stack
  std::uint32_t index = 0;                   // position in the heap storage (segment, slot)
  stats st;

  constexpr explicit heap(span* none) {
    for (auto& c : current) c = none;
  }
};

// A span with nothing to give: every class of a fresh heap points here, so
// the fast path needs no null test.
extern constinit span g_empty_span;
// The heap of a thread that has none yet (or whose heap was released at
// thread exit): its allocations take the slow path, which attaches a heap.
extern constinit heap g_empty_heap;
// Initial-exec in every translation unit that reads it, not only in ours: a
// composition compiled elsewhere with -fPIC would otherwise reach it through
// __tls_get_addr on every malloc and free (11 instructions a pair).
extern constinit thread_local heap* t_heap __attribute__((tls_model("initial-exec")));

void* heap_alloc_slow(heap* h, unsigned cls);
void heap_local_free_slow(heap* h, span* s);
void heap_free_other(heap* h, span* s, void* p);  // remote small block, or a large one

__attribute__((always_inline)) inline void* heap_alloc(unsigned cls) {
  heap* h = t_heap;
  span* s = h->current[cls];
  block* b = s->free;
  if (__builtin_expect(b != nullptr, 1)) {
    s->free = b->next;
    ++s->used;
    return b;
  }
  return heap_alloc_slow(h, cls);
}

// A block of a span this heap owns goes back on the span's local free list.
__attribute__((always_inline)) inline void free_to_own_span(heap* h, span* s, block* b) {
  b->next = s->free;
  s->free = b;
  if (__builtin_expect(--s->used < s->low_mark, 0)) heap_local_free_slow(h, s);
}

// p must be inside a regular chunk (lookup::is_regular).
__attribute__((always_inline)) inline void heap_free(void* p) {
  span* s = span_of(p);
  heap* h = t_heap;
  if (__builtin_expect(s->owner.load(std::memory_order_relaxed) == h, 1)) {
    free_to_own_span(h, s, static_cast<block*>(p));
    return;
  }
  heap_free_other(h, s, p);
}

// Hand every outbox of this thread to its heap (also done on every slow path).
void heap_flush_remote(heap* h);
// Sum of every heap's statistics into `out`.
void heap_sum_stats(stats& out);

}  // namespace tenon
