// thread_heaps<C>: the allocation slow path: a heap whose current span for a
// class is empty finds it another one (its own, an unowned one, or fresh
// slices from the arena).
#include <errno.h>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"

namespace tenon {

template <class C>
void thread_heaps<C>::partial_push(span* s, stats_t* st) {
  TENON_CHECK(s->owner.load(std::memory_order_relaxed) == nullptr && s->kind == span_kind::small);
  unsigned retries = partial_[s->cls].push(span_id(s));
  if (retries) count(st, chunks_->shared_stats(), stat_retry_partial_stack, retries);
}

// Makes h (or nobody: nullptr) s's owner, and where h's frees into s go
// (span::push_to): the span, or h's cache of its class. Before the owner's
// store, so that the thread that finds h there finds the push target too.
template <class C>
void thread_heaps<C>::set_owner(span* s, heap_t* h) {
  unsigned i = kBlockCache.slot[s->cls];
  s->set_push_target(h && i != block_cache_detail::kNone ? &h->cache[i].front : s);
  s->owner.store(h, std::memory_order_release);  // see free_remote
}

// A fresh span of a class owned by `owner`, or by nobody (nullptr) when a
// thread without a heap forms it (see alloc_heapless).
template <class C>
span* thread_heaps<C>::form_small_span(heap_t* owner, unsigned cls, chunk** hint, stats_t* st) {
  ensure_free_key();  // before any block of the span can be freed (free_key.h)
  std::size_t bytes = std::size_t{kClasses.slices[cls]} << kSliceShift;
  if (budget_ && !budget_->take(bytes)) return nullptr;  // a first-class heap at its limit
  span* s = chunks_->take_span(kClasses.slices[cls], hint, st, /*dense_first=*/true);
  if (!s) {
    if (budget_) budget_->give(bytes);
    return nullptr;
  }
  // TENON_POPULATE: the whole span, whether its slices are fresh, purged or
  // dirty. A dirty slice's pages that its last user never wrote (a large
  // block the program wrote only the start of) are not resident either, and
  // carving faulted them in inside malloc, a page or four blocks at a time
  // (docs/architecture.md, "The first fill's faults"); pages still resident
  // cost the call a page-table walk, once per span formed.
  prefault_fresh<typename C::platform>(s->start, bytes, bytes);
  // The slices are ours and the index names s, but s still holds the
  // geometry and carved bound of the span it last described.
  TENON_INJECT_POINT("span.form");
  s->kind = span_kind::small;
  s->cls = static_cast<std::uint8_t>(cls);
  s->block_size = kClasses.size[cls];
  s->capacity = static_cast<std::uint32_t>((std::size_t{s->nslices} << kSliceShift) / s->block_size);
  s->block_mult = kClasses.block_mult[cls];
  s->set_carved(0);
  s->free = nullptr;
  s->low_mark = 1;
  s->set_used(0);
  s->next = s->prev = nullptr;
  s->remote.store(0, std::memory_order_relaxed);
  set_owner(s, owner);
  count(st, chunks_->shared_stats(), stat_spans_formed);
  return s;
}

// An unowned span just popped from the partial stack becomes ours, with
// the blocks other threads freed into it meanwhile.
template <class C>
void thread_heaps<C>::adopt(heap_t* h, span* s, unsigned cls) {
  TENON_INJECT_POINT("span.adopt");
  TENON_CHECK(s->owner.load(std::memory_order_relaxed) == nullptr && s->kind == span_kind::small && s->cls == cls);
  set_owner(s, h);
  h->st.add(stat_spans_adopted);
  take_remote(s);
  s->set_low_mark(1);
}

// The sweep: adopt up to `limit` unowned spans of a class and file them:
// empty ones go back, the others join our lists. Unowned spans only receive
// remote frees onto their own lists; a class nobody allocates any more
// would keep them unowned for good, receiving frees that could never empty
// them (mstress, where each round's threads exit, grew round after round).
// Owned again, their frees reach us through the inbox and they empty and
// are released like any other.
template <class C>
void thread_heaps<C>::absorb_partials(heap_t* h, unsigned cls, unsigned limit) {
  class_lists& l = h->lists[cls];
  unsigned retries = 0;
  for (unsigned n = 0; n < limit; ++n) {
    std::uint32_t id = partial_[cls].pop(&retries);
    if (!id) break;
    span* s = span_from_id(id);
    adopt(h, s, cls);
    if (s->used() == 0) {
      retire_empty(h, l, s);
    } else if (s->free || s->carved < s->capacity || !park_full(l, s)) {
      s->state = span_state::avail;
      heap_detail::list_push(&l.avail, s);
    }
  }
  if (retries) count(&h->st, chunks_->shared_stats(), stat_retry_partial_stack, retries);
}

// A heap that needs a span of a class takes the unowned ones one at a time,
// until one has a free block; that one, empty or not, serves it as it is
// (its blocks are warm, and walking them was the price of collecting them).
// Taking the class's whole stack at once (pop_all) left the other threads
// nothing: the taker walked every block of every span and gave the empty
// ones back while seven others formed fresh ones (a batch of threads
// reallocating what exited threads had made and others freed: 7,813 spans
// walked in 449 ms, 300 MiB formed meanwhile; RemoteGrowth test).
template <class C>
span* thread_heaps<C>::adopt_partial(heap_t* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  unsigned retries = 0;
  span* found = nullptr;
  for (unsigned n = 0; n < kAdoptPerGrowth && !found; ++n) {
    std::uint32_t id = partial_[cls].pop(&retries);
    if (!id) break;
    span* s = span_from_id(id);
    adopt(h, s, cls);
    if (s->free || s->carved < s->capacity || !park_full(l, s)) found = s;
  }
  if (retries) count(&h->st, chunks_->shared_stats(), stat_retry_partial_stack, retries);
  return found;
}

// Before this heap takes fresh memory: a parked heap that no new thread
// took over within kParkedGraceMs, or whose thread exited after ours
// started, is given up (its spans join the partial stacks; one at a time,
// so that the work is paid for by the spans it recovers), and once every
// kSweepEvery times up to kSweepPerClass unowned spans of every other class
// are absorbed (so that a class nobody allocates any more is still
// reclaimed; those of `cls` are adopted as they serve, see adopt_partial:
// swept, the empty ones went back to the chunk layer, walked for nothing).
// Sweeping every class every time made each starting thread take all spans
// (mstress: 66,157 absorptions in 320 thread lifetimes, 1.5x glibc's time at
// 16 threads).
template <class C>
void thread_heaps<C>::absorb_before_growing(heap_t* h, unsigned cls) {
  if (!parked_heaps_.empty()) dissolve_parked(h);
  if (++h->forms_since_sweep < kSweepEvery) return;
  h->forms_since_sweep = 0;
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (c != cls && !partial_[c].empty()) absorb_partials(h, c, kSweepPerClass);
}

namespace heap_detail {

// A span this heap already owns for the class: partly used ones first, then
// the kept empty one.
inline span* take_owned(class_lists& l) {
  if (span* s = l.avail) {
    list_unlink(&l.avail, s);
    return s;
  }
  span* s = l.empty;
  l.empty = nullptr;
  return s;
}

// A full span with blocks freed into it that have not yet woken it (fewer
// than wake_after, spans.ipp): the last resort when no memory can be had,
// so that a program at its address-space limit still gets back a block it
// freed (preload address_space_limit: 64 MiB of 16-byte blocks, one freed,
// the next malloc failed). A walk of the full list, on that path only.
inline span* take_sleeping(class_lists& l) {
  for (span* s = l.full; s; s = s->next)
    if (s->free) {
      list_unlink(&l.full, s);
      --l.nfull;
      return s;
    }
  return nullptr;
}

}  // namespace heap_detail

template <class C>
span* thread_heaps<C>::find_span(heap_t* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  std::uint32_t notes = l.notify.load(std::memory_order_relaxed);
  if (notes && notes >= 1 + l.nfull / 16) scan_full(h, cls);
  if (span* s = heap_detail::take_owned(l)) return s;
  // Before taking fresh memory: whatever remote frees gave back to our full
  // spans, and unowned spans.
  absorb_before_growing(h, cls);
  if (notes) scan_full(h, cls);
  if (span* s = heap_detail::take_owned(l)) return s;
  if (!partial_[cls].empty()) {
    if (span* s = adopt_partial(h, cls)) return s;
  }
  if (span* s = form_small_span(h, cls, &h->chunk_hint, &h->st)) return s;
  if (span* s = heap_detail::take_sleeping(l)) return s;
  if (budget_ && make_room(h, cls)) return form_small_span(h, cls, &h->chunk_hint, &h->st);
  return nullptr;
}

// A first-class heap at its limit (budget_): the spans it keeps with no block
// in use are counted against the limit for as long as it keeps them, so they
// go back before an allocation fails: the cached blocks to their spans (but
// those of `serving`, a class whose cache is being refilled), then every
// spare and empty current span. Only this thread's sub-heap: the other
// threads' are theirs alone. True if any span went back.
template <class C>
bool thread_heaps<C>::make_room(heap_t* h, unsigned serving) {
  flush_caches(h, serving);
  return release_unused_spans(h);
}

// A call that succeeds leaves errno as it was (docs/api.md): on the way to
// the block it hands out, find_block may have been refused memory (a new
// chunk past an address-space limit, ENOMEM) before it found a span with
// free blocks (found 2026-11-29, branch audit2: malloc(16) at a 64 MiB
// RLIMIT_AS, one block freed, succeeded with errno ENOMEM).
template <class C>
void* thread_heaps<C>::alloc_slow(heap_t* h, unsigned cls) {
  int saved = errno;
  void* p = find_block(h, cls);
  if (p) errno = saved;
  return p;
}

template <class C>
void* thread_heaps<C>::find_block(heap_t* h, unsigned cls) {
  if (h == &g_empty_heap<C>) {
    if (t_thread<C>.released) return alloc_heapless(cls);
    h = attach();
    if (!h) {
      errno = ENOMEM;
      return nullptr;
    }
  }
  if (__builtin_expect(!h->traded, 0)) h = trade_for_parked(h);
  flush_remote(h);
  drain_inbox(h, cls);
  if (kBlockCache.slot[cls] != block_cache_detail::kNone) {
    void* p = cache_alloc(h, cls);
    if (!p) errno = ENOMEM;
    return p;
  }
  span* s = h->current[cls];
  if (s != &g_empty_span) {
    // The drain may have put blocks back on this very span: hand those out
    // first. Carving over them dropped them from the free list, and retiring
    // the span with them parked it as full with nothing left to free into it
    // (a producer whose consumers follow closely leaked span after span).
    if (s->free || refill(s)) return pop(s);
    if (retire_full(h, cls, s)) return pop(s);
  }
  for (;;) {
    s = find_span(h, cls);
    if (!s) {
      errno = ENOMEM;
      return nullptr;
    }
    make_current(h, cls, s);
    if (s->free || refill(s)) return pop(s);
    if (retire_full(h, cls, s)) return pop(s);
  }
}

}  // namespace tenon
