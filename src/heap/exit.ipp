// thread_heaps<C>: what a parked heap gives up when it is dissolved (its
// thread exited and no new thread took it over: attach.ipp), and the calls
// a thread makes after its heap is gone.
#include <errno.h>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"

namespace tenon {

// Make an unowned span with blocks in use findable by the next heap that
// needs its class: on the partial stack if it has a free or uncarved block,
// else floating until the first free into it publishes it. Never waits.
template <class C>
void thread_heaps<C>::publish_unowned(span* s, stats_t* st) {
  if (s->free || s->carved < s->capacity) {
    partial_push(s, st);
    return;
  }
  std::uint64_t expect = 0;
  TENON_INJECT_POINT("span.float");
  if (s->remote.compare_exchange_strong(expect, remote_word::kFloating, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
    return;
  // A free arrived between the exchange and the CAS: the span has blocks now.
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
  partial_push(s, st);
}

// Give up a span of a parked heap being dissolved: publish it for
// adoption, or let it float until a free into it publishes it. Never waits
// for anyone.
template <class C>
void thread_heaps<C>::abandon(heap_t* h, span* s) {
  TENON_INJECT_POINT("span.abandon");
  TENON_CHECK(s->owner.load(std::memory_order_relaxed) == h);
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
  s->next = s->prev = nullptr;
  s->set_low_mark(1);
  if (s->used() == 0) {
    release_empty(h, s);
    return;
  }
  s->state = span_state::detached;
  s->owner.store(nullptr, std::memory_order_release);
  h->st.add(stat_spans_abandoned);
  publish_unowned(s, &h->st);
}

// An allocation on a thread whose heap was released at its exit: borrow an
// unowned span of the class (or form one), take one block, and publish the
// span again at once, exactly as a dissolved heap does. No heap is attached,
// so nothing is left behind. The cost, a pop and a push on the partial stack
// (about what giving up a heap costs per span), is paid only by calls made
// after the thread-exit hook; the malloc fast path is unchanged.
template <class C>
void* thread_heaps<C>::alloc_heapless(unsigned cls) {
  unsigned retries = 0;
  span* s;
  if (std::uint32_t id = partial_[cls].pop(&retries)) {
    s = span_from_id(id);
    // Off every list and owned by nobody: its owner-only fields are ours
    // until we publish it again; frees into it meanwhile go to its remote list.
    take_remote(s);
  } else {
    chunk* hint = nullptr;
    s = form_small_span(nullptr, cls, &hint, nullptr);
    if (!s) {
      errno = ENOMEM;
      return nullptr;
    }
  }
  if (retries) chunks_->shared_stats().add_shared(stat_retry_partial_stack, retries);
  TENON_INJECT_POINT("span.borrow");
  // A span on the partial stack has a free or an uncarved block (it is
  // published only then, or with the remote frees just taken).
  if (!s->free) carve(s);
  block* b = pop(s);
  publish_unowned(s, nullptr);
  return b;
}

// A small block freed on a thread with no heap (released at its exit, or
// none to be had): to its owner's inbox, or to its span's remote list when
// the span has no owner. One CAS, unbatched: such frees are rare.
template <class C>
void thread_heaps<C>::free_heapless(span* s, block* b) {
  if (second_word(b) == free_key()) report_misuse("free", b, "double free", s->block_size);
  second_word(b) = free_key();  // on every list of free blocks (free_key.h)
  C::links::set_next(b, nullptr, s);
  // Acquire: see free_remote.
  if (auto* dest = static_cast<heap_t*>(s->owner.load(std::memory_order_acquire)))
    deliver(dest, b, b, nullptr);
  else
    push_remote(s, b, b, 1, nullptr);
}

}  // namespace tenon
