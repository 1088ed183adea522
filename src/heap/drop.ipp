// thread_heaps<C>: dropping everything a part's heaps hold (destroying or
// resetting a first-class heap): every span goes back to the arena as it
// is, whatever blocks in it are still in use, without visiting a block.
// O(spans + heaps). Only for a part whose heaps are not bound to threads
// (attach_unbound), while no other thread uses them.
#include <bit>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"

namespace tenon {

// A span of ours, on no list now: back to the arena with its blocks.
template <class C>
void thread_heaps<C>::drop_span(heap_t* h, span* s) {
  s->next = s->prev = nullptr;
  s->free = nullptr;
  s->set_used(0);
  // Pending remote frees and flags die with the span (form_small_span and
  // large_runs::alloc clear the word again when the slices are reused).
  s->remote.store(0, std::memory_order_relaxed);
  release_empty(h, s);
}

template <class C>
void thread_heaps<C>::drop_heap(heap_t* h) {
  // Blocks in the inbox belong to spans this heap owns (a span with blocks
  // in flight is never empty, so never released): they go with the spans.
  h->inbox.store(0, std::memory_order_relaxed);
  // Only the slots that hold blocks: the others are empty already (count 0,
  // which no free takes for a started batch), and writing all 64 faulted in
  // 6 KiB of every heap.
  for (std::uint64_t m = h->out_pending; m; m &= m - 1) h->out[std::countr_zero(m)] = outbox{};
  h->out_pending = 0;
  drop_caches(h);
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    if (span* s = h->current[cls]; s != &g_empty_span) {
      h->current[cls] = &g_empty_span;
      drop_span(h, s);
    }
    class_lists& l = h->lists[cls];
    for (span* first : {l.avail, l.full})
      for (span* s = first; s;) {
        span* next = s->next;
        drop_span(h, s);
        s = next;
      }
    if (l.empty) drop_span(h, l.empty);
    l.avail = l.full = l.empty = nullptr;
    l.nfull = 0;
    l.notify.store(0, std::memory_order_relaxed);
  }
  h->forms_since_sweep = 0;
}

template <class C>
void thread_heaps<C>::drop_all() {
  TENON_INJECT_POINT("heap.drop");
  std::uint32_t n = heap_count_.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i) drop_heap(heap_at(i));
  // Unowned spans (none while heaps are unbound: nothing abandons them; kept
  // correct should that change).
  if (n == 0) return;
  for (unsigned cls = 0; cls < kNumClasses; ++cls)
    for (std::uint32_t id = partial_[cls].pop_all(); id;) {
      span* s = span_from_id(id);
      id = s->stack_next.load(std::memory_order_relaxed);
      drop_span(heap_at(0), s);
    }
}

}  // namespace tenon
