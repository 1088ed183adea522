// thread_heaps<C>: the block cache of the classes whose spans hold few
// blocks (include/tenon/heap/block_cache.h): filled from the heap's spans in
// batches, given back to them in batches. Owner-private; the only shared
// word touched is a span's remote word, through park_full and refill, as on
// the uncached path.
#include "tenon/common/checks.h"
#include "tenon/heap/thread_heaps.h"
#include "tenon/lookup/slice_index.h"

namespace tenon {

// A span of a cached class whose free blocks the cache just took: back on
// the avail list if it still has blocks to give, else parked as full. Every
// later local free into it takes the slow path (low_mark = used), which
// hands the block to the cache. False if remote frees arrived while parking
// (merged: the span has free blocks again and is still ours to take).
template <class C>
bool thread_heaps<C>::cache_put_back(class_lists& l, span* s) {
  if (s->free || s->carved < s->capacity) {
    s->state = span_state::avail;
    s->set_low_mark(s->used());
    heap_detail::list_push(&l.avail, s);
    return true;
  }
  return park_full(l, s);  // sets low_mark = used too
}

// Fill an empty cache with a quarter of its limit (carving more touched
// memory for blocks nobody asked for), from the heap's spans (the same
// search as for a current span: avail, the kept empty span, unowned spans,
// fresh slices). False if no block could be had. Where the cache is still
// empty and the span has no free block but uncarved ones that hold no
// allocator word, one of those is taken unwritten into *untouched instead
// (take_untouched), and the cache stays empty: each such block is a slow
// path, and its page faults the program's.
template <class C>
bool thread_heaps<C>::cache_refill(heap_t* h, unsigned cls, block_cache& c, block** untouched) {
  class_lists& l = h->lists[cls];
  std::uint32_t want = c.limit / 4 ? c.limit / 4 : 1;
  while (want) {
    span* s = find_span(h, cls);
    if (!s) return c.front.free != nullptr;
    TENON_CHECK(s->cls == cls && s->owner.load(std::memory_order_relaxed) == h && s->next == nullptr);
    do {
      while (want) {
        if (!s->free && !collect(s)) {
          if (!c.front.free && (*untouched = take_untouched(s)) != nullptr) want = 0;
          if (!want || s->carved == s->capacity) break;
          carve(s);
        }
        block* b = pop(s);
        C::links::set_next(b, c.front.free, &c.front);
        second_word(b) = free_key();  // pop cleared it; a cached block is a free one
        c.front.free = b;
        c.front.until_slow -= 1;
        --want;
      }
    } while (!cache_put_back(l, s));
  }
  return true;
}

// The next untouched block (take_untouched) of the span at the head of the
// class's avail list, left there, if that span has no free block and no
// remote one waiting: what cache_refill would take, without its search and
// the span's unlink and push, paid once a block on this path.
template <class C>
block* thread_heaps<C>::untouched_on_avail(class_lists& l) {
  span* s = l.avail;
  if (!s || s->free || remote_word::head(s->remote.load(std::memory_order_relaxed))) return nullptr;
  block* b = take_untouched(s);
  if (b) s->set_low_mark(s->used());  // as cache_put_back left it: its frees take the slow path
  return b;
}

template <class C>
void* thread_heaps<C>::cache_alloc(heap_t* h, unsigned cls) {
  block_cache& c = h->cache[kBlockCache.slot[cls]];
  block* untouched = nullptr;
  if (!c.front.free && !(untouched = untouched_on_avail(h->lists[cls])) && !cache_refill(h, cls, c, &untouched))
    return nullptr;
  h->current[cls] = &c.front;
  if (untouched) return untouched;
  return pop(&c.front);
}

// One block given back by the cache to its span (ours: a span with a block
// out is never released, abandoned only after the cache is flushed), or,
// a block of another heap's span that this thread freed, to
// its owner as a remote free (free_cached_remote kept it): the key off
// first, which free_remote would take for a double free (it stores it
// again).
template <class C>
void thread_heaps<C>::cache_return(heap_t* h, block* b) {
  span* s = lookup::span_of(b);
  if (s->owner.load(std::memory_order_relaxed) != h) {
    second_word(b) = 0;
    free_remote<true>(h, s, b);
    return;
  }
  TENON_CHECK(s->owner.load(std::memory_order_relaxed) == h && s->used() != 0 && s->state != span_state::current);
  class_lists& l = h->lists[s->cls];
  C::links::set_next(b, s->free, s);
  s->free = b;
  s->remove_used(1);
  std::uint32_t used = s->used();
  if (s->state == span_state::full) {
    heap_detail::list_unlink(&l.full, s);
    --l.nfull;
    if (used == 0) {
      retire_empty(h, l, s);
      return;
    }
    s->state = span_state::avail;
    heap_detail::list_push(&l.avail, s);
  } else if (used == 0) {
    heap_detail::list_unlink(&l.avail, s);
    retire_empty(h, l, s);
    return;
  }
  s->set_low_mark(used);
}

// Give back all but the `keep` blocks freed last (the ones likeliest still
// in the processor's cache).
template <class C>
void thread_heaps<C>::cache_trim(heap_t* h, block_cache& c, std::uint32_t keep) {
  if (cached_blocks(c) <= keep) return;
  block* b = c.front.free;
  if (keep) {
    block* last = b;
    for (std::uint32_t i = 1; i < keep; ++i) last = C::links::next(last, &c.front);
    b = C::links::next(last, &c.front);
    C::links::set_next(last, nullptr, &c.front);
  } else {
    c.front.free = nullptr;
  }
  set_cached_blocks(c, keep);
  while (b) {
    block* next = C::links::next(b, &c.front);
    cache_return(h, b);
    b = next;
  }
}

// b, a block of s taken from the owner's inbox (sort_inbox_chain), of a
// class with a block cache: to the cache as they go, without the key test
// (every block in the inbox holds the key: the freeing thread stored it).
// Until 2026-11-29 it went on its span's list and local_free_slow took it
// back off for the cache (docs/architecture.md, layer 5, "The remote
// free's instructions and the inbox sort's cached blocks"). Its block-start
// test was made at the free (remote_free.h, free_remote; here until
// 2026-11-29, branch `remote`).
template <class C>
__attribute__((always_inline)) inline void thread_heaps<C>::sort_to_cache(heap_t* h, span* s, block* b,
                                                                          std::uint64_t key) {
  unsigned i = kBlockCache.slot[s->cls];
  TENON_CHECK(i != block_cache_detail::kNone);  // push_to names a cache only for a cached class
  block_cache& c = h->cache[i];
  // The block cached last, sent again by another thread: a double free that
  // the key missed (the program wrote over it), caught as on a span's list.
  if (__builtin_expect(b == c.front.free, 0)) report_misuse("free", b, "double free", s->block_size);
  cache_push(h, s, b, key, c);
}

// b, a block of s, from the owner's inbox: on the cache's list with the key,
// as the owner's free pushes it (push_local_free).
template <class C>
__attribute__((always_inline)) inline void thread_heaps<C>::cache_push(heap_t* h, span* s, block* b, std::uint64_t key,
                                                                       block_cache& c) {
  TENON_CHECK(pushes_where_it_should(h, s));
  (void)s;
  push_local_free<C>(*this, h, &c.front, b, key);
}

// A cache past its bound (the push found until_slow below 0): the bound
// again from the heaps attached now (the budget's share, read only here),
// and back to half of it if still past.
template <class C>
void thread_heaps<C>::cache_overflow(heap_t* h, block_cache& c) {
  set_cache_limit(c, block_cache_limit(c.front.cls, live_heaps_.load(std::memory_order_relaxed)));
  if (cached_blocks(c) > c.limit) cache_trim(h, c, c.limit / 2);
}

// Every cache's blocks back to their spans, but the cache of class `except`
// (one being refilled; kNumClasses: none).
template <class C>
void thread_heaps<C>::flush_caches(heap_t* h, unsigned except) {
  for (block_cache& c : h->cache) {
    if (c.front.cls == except) continue;
    cache_trim(h, c, 0);
    h->current[c.front.cls] = &g_empty_span;
  }
}

// A block of a class with a block cache, of a span another heap owns, freed
// by this thread: kept in this thread's cache for its own next allocations
// of the class, the way tcmalloc's thread cache keeps what its thread
// frees, instead of going to its owner's inbox. There it waited for the
// owner's next allocation slow path, and an owner whose thread is not
// running (16 threads on 2 cores) takes none: mstress T16 had 34-49
// thousand freed blocks waiting in inboxes at once against its 20,000 live
// ones, while the running threads formed fresh spans for the same classes
// (docs/architecture.md, layer 5, "Blocks waiting in inboxes"). The block
// stays in use as far as its span knows, as every cached block does; the
// cache gives it back to its owner when it trims (cache_return) and at the
// thread's exit.
// Kept only where h allocates the class (its current is the cache's front:
// a thread that only frees it, a consumer, keeps nothing, nor does the
// empty heap, whose currents are the empty span), the cache is under its
// bound (until_slow: bound less cached), and the owner is a heap of this
// part (a first-class heap's blocks go home: its destroy drops its spans
// whatever is cached elsewhere; an unowned span's go to its list). The
// tests the owner's free makes are made before it is kept: the block must
// start a carved block (tested here, after the key's read:
// span::forget_carved) and must not hold the free key (a double free,
// here): kept unchecked, a slot never carved would be handed out here and
// again by its owner's carve.
template <class C>
void thread_heaps<C>::free_cached_remote(heap_t* h, span* s, block* b) {
  block_cache& c = h->cache[kBlockCache.slot[s->cls]];
  // Acquire, as in free_remote: the owner's fields were written before it
  // was published as the owner (its `home` among them).
  auto* owner = static_cast<heap_t*>(s->owner.load(std::memory_order_acquire));
  if (h->current[s->cls] != &c.front || c.front.until_slow <= 0 || !owner || owner->home != this)
    return free_remote(h, s, b);
  // The block-start test against the carved bound, after the second word's
  // read (span::forget_carved; the caller tested the slice only).
  std::uint64_t key = free_key();
  // Both reports tail-called: called, they kept s and b live across the
  // call, a callee-saved register more on this path (push and pop).
  if (__builtin_expect(second_word_ordered(b) == key, 0)) return report_keyed(s, b);
  if (__builtin_expect(!s->starts_carved_block_any_thread(b), 0)) return report_not_carved_remote(s, b);
  // until_slow > 0: the push leaves it at 0 or more, so no slow path.
  push_local_free<C>(*this, h, &c.front, b, key);
}

// A dropped heap's cache: its blocks go with their spans (drop.ipp).
template <class C>
void thread_heaps<C>::drop_caches(heap_t* h) {
  for (block_cache& c : h->cache) {
    c.front.free = nullptr;
    set_cached_blocks(c, 0);
    h->current[c.front.cls] = &g_empty_span;
  }
}

}  // namespace tenon
