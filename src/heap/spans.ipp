// thread_heaps<C>: a heap's own spans: carving, collecting remote frees,
// and moving spans between current, avail, full and empty. Owner-private
// except for the remote word, which is taken with one exchange.
#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"

namespace tenon {

namespace heap_detail {

inline void list_push(span** head, span* s) {
  TENON_CHECK(s->next == nullptr && s->prev == nullptr && *head != s);
  s->prev = nullptr;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

inline void list_unlink(span** head, span* s) {
  TENON_CHECK(s->prev ? s->prev->next == s : *head == s);
  TENON_CHECK(!s->next || s->next->prev == s);
  if (s->prev) s->prev->next = s->next; else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = nullptr;
}

// A config may name a `fresh_order` policy (the secure build's
// secure::shuffled_fresh_blocks): carved blocks then go on the free list in
// the order it draws, at least its kMinBatch at a time.
template <class C>
constexpr bool shuffles_fresh() {
  return requires { typename C::fresh_order; };
}

// The most blocks one carve takes: a page of the smallest class, or the
// policy's batch.
template <class C>
constexpr std::uint32_t max_carve() {
  if constexpr (shuffles_fresh<C>())
    return 4096 / 8 > C::fresh_order::kMinBatch ? 4096 / 8 : C::fresh_order::kMinBatch;
  else return 4096 / 8;
}

// How many local frees a full span waits for before it goes back on the
// avail list: an eighth of its blocks, at least one and at most
// kWakeAfterMax. Woken by its first free, a span went to the head of the
// avail list with one block, became current when the current one ran out,
// served that block and was parked full again: a slow path (and the remote
// word's exchange) per block or two once a class's blocks are spread over
// many spans (larson with 10,000 slots: docs/architecture.md, layer 5,
// "Where a weak row's time goes: larson, xmalloc, glibc-thread at one
// thread"). snmalloc wakes a full slab after an eighth of its blocks too
// (at most 32). The blocks freed meanwhile wait in the span: at most an
// eighth of it, and for the classes under 128 B (512 blocks and more a
// span) at most kWakeAfterMax blocks, 4 KiB of 64-byte ones. An eighth
// alone let 512 blocks of 16 B wait, for 1.1% fewer instructions on larson
// with 100,000 slots of 8-64 B (232.6 M against 235.2 M). A full span with
// sleeping blocks is still taken before an allocation fails (refill.ipp,
// take_sleeping).
constexpr std::uint32_t kWakeAfterMax = 64;
constexpr std::uint32_t wake_after(std::uint32_t capacity) {
  std::uint32_t n = capacity / 8;
  return n < 1 ? 1 : n > kWakeAfterMax ? kWakeAfterMax : n;
}

}  // namespace heap_detail

// Carve the next blocks of a span into its local free list, which must be
// empty (the carved chain replaces it): about a page at a time, so memory is
// touched only as it is used.
template <class C>
void thread_heaps<C>::carve(span* s) {
  TENON_CHECK(s->free == nullptr && s->carved < s->capacity);
  // A links policy that keys its links may need to prepare (secure/links.h).
  if constexpr (requires { C::links::before_carve(); }) C::links::before_carve();
  std::uint32_t size = s->block_size;
  std::uint32_t n = static_cast<std::uint32_t>(4096 / size);
  if (n == 0) n = 1;
  if constexpr (heap_detail::shuffles_fresh<C>())
    if (n < C::fresh_order::kMinBatch) n = C::fresh_order::kMinBatch;
  if (n > s->capacity - s->carved) n = s->capacity - s->carved;
  char* first = s->start + std::size_t{s->carved} * size;
  if constexpr (heap_detail::shuffles_fresh<C>()) {
    std::uint16_t order[heap_detail::max_carve<C>()];
    C::fresh_order::shuffle(order, n);
    block* next = nullptr;
    for (std::uint32_t i = n; i-- > 0;) {
      auto* b = reinterpret_cast<block*>(first + std::size_t{order[i]} * size);
      C::links::set_next(b, next, s);
      next = b;
    }
    s->free = next;
  } else {
    char* p = first;
    for (std::uint32_t i = 1; i < n; ++i, p += size)
      C::links::set_next(reinterpret_cast<block*>(p), reinterpret_cast<block*>(p + size), s);
    C::links::set_next(reinterpret_cast<block*>(p), nullptr, s);
    s->free = reinterpret_cast<block*>(first);
  }
  s->set_carved(s->carved + n);
}

// The biggest class whose blocks take_untouched hands out: the latency
// row's faulting mallocs were of 1-4 KiB. A block of a page or more faults
// once whichever way it goes out, and each untouched one is a slow path
// (mstress's 5-10 KiB classes: 2% more instructions without this bound).
constexpr std::uint32_t kUntouchedMaxBlock = 4096;

// The span's next uncarved block, handed out as it is: neither its link
// nor the clear of its first two words is written, so that a page the block
// lies on that is not resident faults at the program's first write rather
// than in malloc (docs/architecture.md, layer 5, "Blocks of 1-4 KiB handed
// out unwritten").
// Only where the uncarved part holds no allocator word (span::no_links) and
// the config does not shuffle fresh blocks; else nullptr.
template <class C>
block* thread_heaps<C>::take_untouched(span* s) {
  if constexpr (heap_detail::shuffles_fresh<C>()) {
    return nullptr;
  } else {
    if (!s->no_links || s->carved >= s->capacity || s->block_size > kUntouchedMaxBlock) return nullptr;
    auto* b = reinterpret_cast<block*>(s->start + std::size_t{s->carved} * s->block_size);
    // The invariant build reads what the release build must not touch: the
    // key here is a false double free at the block's first free, a link a
    // heap address handed to the program (both found too late, far from
    // here, otherwise). Uncarved memory of such a span is as the kernel left
    // it, zero. The read maps the zero page, no resident page, in that build.
    TENON_CHECK(second_word(b) != free_key());
    TENON_CHECK(block_word(b, 0) == 0 && second_word(b) == 0);
    s->set_carved(s->carved + 1);
    s->add_used(1);
    return b;
  }
}

// A chain from a span's remote list that runs on past the `count` blocks
// pushed onto it: a block was pushed twice (freed twice by threads that do
// not own the span), which closed a cycle. Names the block that comes twice
// within the first count + 1 links (at most the capacity + 1: a fatal path,
// so a quadratic search is fine), or the chain's head if none does.
template <class C>
[[noreturn, gnu::cold, gnu::noinline]] void report_remote_double_free(const span* s, block* chain,
                                                                      std::uint32_t count) {
  const char what[] = "double free (by threads that do not own its span)";
  std::uint32_t n = (count < s->capacity ? count : s->capacity) + 1;
  block* b = chain;
  for (std::uint32_t i = 0; i < n && b; ++i, b = C::links::next(b, s)) {
    block* a = chain;
    for (std::uint32_t j = 0; j < i; ++j, a = C::links::next(a, s))
      if (a == b) report_misuse("free", b, what, s->block_size);
  }
  report_misuse("free", chain, what, s->block_size);
}

// Append a chain taken from the remote list to the local free list. Each
// block gets the free key on the way (free_key.h), so that freeing it again
// is caught as for a block freed here. The whole chain is walked (before the
// key, only when the local list had blocks, for its tail): blocks the owner
// will hand out soon, whose lines malloc would bring in anyway. The walk
// stops at `count` blocks: a longer chain is a cycle (a block freed twice by
// other threads), reported before it could hang this thread or count a block
// free twice.
template <class C>
void thread_heaps<C>::merge_free(span* s, block* chain, std::uint32_t count) {
  if (!chain) return;
  std::uint64_t key = free_key();
  block* tail = chain;
  for (std::uint32_t n = 1;; ++n) {
    second_word(tail) = key;
    block* next = C::links::next(tail, s);
    if (!next) break;
    if (n >= count) report_remote_double_free<C>(s, chain, count);
    tail = next;
  }
  TENON_CHECK(count > 0 && (s->used() & ~kCurrentBias) >= count);
  s->remove_used(count);
  C::links::set_next(tail, s->free, s);
  s->free = chain;
}

// The owner takes every remotely freed block in one exchange. Also clears a
// stale kFull flag, which is right for a span that is not on the full list.
template <class C>
void thread_heaps<C>::take_remote(span* s) {
  TENON_INJECT_POINT("remote.collect");
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
}

template <class C>
bool thread_heaps<C>::collect(span* s) {
  if (!remote_word::head(s->remote.load(std::memory_order_relaxed))) return false;
  take_remote(s);
  return s->free != nullptr;
}

// Blocks freed into the span remotely first (one load when there are
// none), then fresh ones: carving past them touched new pages while freed
// ones waited, e.g. those freed into a heap while it was parked.
template <class C>
bool thread_heaps<C>::refill(span* s) {
  if (collect(s)) return true;
  if (s->carved < s->capacity) {
    carve(s);
    return true;
  }
  return false;
}

template <class C>
block* thread_heaps<C>::pop(span* s) {
  return take_head<C>(s, s->free);
}

template <class C>
void thread_heaps<C>::release_empty(heap_t* h, span* s) {
  TENON_CHECK(s->used() == 0 && s->next == nullptr && s->prev == nullptr);
  s->forget_carved();  // before the slices' release (span::forget_carved)
  s->owner.store(nullptr, std::memory_order_relaxed);
  s->state = span_state::detached;
  if (budget_) budget_->give(std::size_t{s->nslices} << kSliceShift);
  chunks_->release_span(s, &h->st);
}

// The spans this heap keeps with no block in use go back to the arena: every
// class's spare (l.empty) and every current span whose blocks are all free
// (used: the current bias alone; blocks freed by other threads and not yet
// merged still count). The block caches' classes have no current span (their
// current is the cache's front or the empty span); their spans empty when the
// caches are flushed first. True if any span went back.
template <class C>
bool thread_heaps<C>::release_unused_spans(heap_t* h) {
  bool any = false;
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    class_lists& l = h->lists[cls];
    if (span* s = l.empty) {
      l.empty = nullptr;
      release_empty(h, s);
      any = true;
    }
    any |= release_if_empty_current(h, cls);
  }
  return any;
}

// Whether class cls's current span has none of its blocks in use (used: the
// current bias alone). The block caches' classes have no current span of
// their own (their current is the cache's front or the empty span).
template <class C>
bool thread_heaps<C>::empty_current(const heap_t* h, unsigned cls) {
  if (kBlockCache.slot[cls] != block_cache_detail::kNone) return false;
  const span* s = h->current[cls];
  return s != &g_empty_span && s->used() == kCurrentBias;
}

// Class cls's current span back to the arena if it is empty (above).
template <class C>
bool thread_heaps<C>::release_if_empty_current(heap_t* h, unsigned cls) {
  if (!empty_current(h, cls)) return false;
  span* s = h->current[cls];
  s->remove_used(kCurrentBias);
  h->current[cls] = &g_empty_span;
  release_empty(h, s);
  return true;
}

// A span that just became empty (not on any list): keep it as the class's
// spare if the class is one whose spans empty often and no spare is kept,
// else give its slices back.
template <class C>
void thread_heaps<C>::retire_empty(heap_t* h, class_lists& l, span* s) {
  if (s->capacity <= kKeepEmptyMaxBlocks && !l.empty) {
    s->state = span_state::avail;
    s->set_low_mark(1);
    l.empty = s;
    return;
  }
  release_empty(h, s);
}

template <class C>
void thread_heaps<C>::make_current(heap_t* h, unsigned cls, span* s) {
  TENON_CHECK(s->cls == cls && s->owner.load(std::memory_order_relaxed) == h && s->next == nullptr);
  s->state = span_state::current;
  s->add_used(kCurrentBias);
  s->set_low_mark(1);
  h->current[cls] = s;
}

// A span with no free block goes on the full list, its remote word flagged
// so that the first remote free into it notifies us. Returns false instead if
// remote frees had arrived (merged now: the span has blocks again).
template <class C>
bool thread_heaps<C>::park_full(class_lists& l, span* s) {
  TENON_CHECK(s->free == nullptr && s->carved == s->capacity);
  TENON_INJECT_POINT("span.retire");
  std::uint64_t old = s->remote.exchange(remote_word::kFull, std::memory_order_acq_rel);
  if (remote_word::head(old)) {
    merge_free(s, remote_word::head(old), remote_word::count(old));
    // Drop the flag again; if a free raced in, the flag is consumed by it and
    // costs one spurious notification, nothing more.
    std::uint64_t expect = remote_word::kFull;
    s->remote.compare_exchange_strong(expect, 0, std::memory_order_relaxed);
    return false;
  }
  s->state = span_state::full;
  // The local free that brings the span back to avail is the wake_after-th
  // (heap_detail::wake_after), not the first: see there.
  s->set_low_mark(s->used() - heap_detail::wake_after(s->capacity) + 1);
  heap_detail::list_push(&l.full, s);
  ++l.nfull;
  return true;
}

// The current span has nothing left: park it as full. Returns true instead
// if remote frees arrived meanwhile (the span then stays current).
template <class C>
bool thread_heaps<C>::retire_full(heap_t* h, unsigned cls, span* s) {
  s->remove_used(kCurrentBias);
  if (park_full(h->lists[cls], s)) {
    h->current[cls] = &g_empty_span;
    return false;
  }
  s->add_used(kCurrentBias);
  return true;
}

// Remote frees un-fulled some of our full spans: move those back to avail.
// Called only once enough notifications have gathered (1 per 16 full spans),
// so the walk is paid for by the spans it recovers.
template <class C>
void thread_heaps<C>::scan_full(heap_t* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  l.notify.exchange(0, std::memory_order_acquire);
  h->st.add(stat_full_scans);
  for (span* s = l.full; s;) {
    span* next = s->next;
    if (remote_word::head(s->remote.load(std::memory_order_acquire))) {
      heap_detail::list_unlink(&l.full, s);
      --l.nfull;
      collect(s);
      s->set_low_mark(1);
      if (s->used() == 0) {
        retire_empty(h, l, s);
      } else {
        s->state = span_state::avail;
        heap_detail::list_push(&l.avail, s);
      }
    }
    s = next;
  }
}

// A heap just taken over: reopen its inbox (closed when it was parked) and
// take what was freed into its spans meanwhile, which waits on their remote
// lists; spans emptied so go back to the chunk layer, full ones serve
// again. Left to each span's turn (its refill), they stayed held for as
// long as the heap's new thread allocated from its other spans.
template <class C>
void thread_heaps<C>::collect_parked(heap_t* h) {
  h->inbox.store(0, std::memory_order_relaxed);
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    if (span* s = h->current[cls]; s != &g_empty_span) collect(s);
    class_lists& l = h->lists[cls];
    for (span* s = l.avail; s;) {
      span* next = s->next;
      collect(s);
      if (s->used() == 0) {
        heap_detail::list_unlink(&l.avail, s);
        retire_empty(h, l, s);
      }
      s = next;
    }
    if (l.full) scan_full(h, cls);
  }
}

template <class C>
void thread_heaps<C>::local_free_slow(heap_t* h, span* s) {
  // A cache's front past its bound: a span of a cached class takes no push
  // (span::push_to names the cache).
  if (is_cache_front(s)) return cache_overflow(h, h->cache[kBlockCache.slot[s->cls]]);
  TENON_CHECK(kBlockCache.slot[s->cls] == block_cache_detail::kNone);
  class_lists& l = h->lists[s->cls];
  if (s->state == span_state::full) {
    // wake_after blocks back in a full span: it can serve allocations again.
    heap_detail::list_unlink(&l.full, s);
    --l.nfull;
    s->set_low_mark(1);
    if (s->used() != 0) {
      s->state = span_state::avail;
      heap_detail::list_push(&l.avail, s);
      return;
    }
  } else {
    TENON_CHECK(s->state == span_state::avail && s->used() == 0);
    heap_detail::list_unlink(&l.avail, s);  // an avail span that just became empty
  }
  retire_empty(h, l, s);
}

}  // namespace tenon
