// thread_heaps<C>: blocks freed by a thread that does not own their span:
// batched per owner heap in the freeing thread's outboxes, handed to the
// owner's inbox with one CAS, sorted into the owner's spans on its next
// allocation slow path; straight onto the span's remote list when the span
// has no owner.
#include <algorithm>
#include <bit>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/relaxed_compare.h"
#include "tenon/lookup/slice_index.h"

namespace tenon {

namespace remote_detail {
// classes with bit cls set, for the inbox sort: one `bts` on x86-64, where
// GCC makes the shift of a 1 a move, a shift and an or, plus a move of the
// class into `cl` (callgrind: three instructions a sorted block).
__attribute__((always_inline)) inline void add_class(std::uint64_t& classes, std::uint64_t cls) {
#if defined(__x86_64__)
  asm("btsq %1, %0" : "+r"(classes) : "r"(cls) : "cc");
#else
  classes |= std::uint64_t{1} << cls;
#endif
}

// Whether b and c lie in one 64 KiB slice, and so in one span (a slice is
// never shared): a run's test, instead of c's lookup and its span's
// tests. A null c is in no slice of b's (b is far above 64 KiB).
__attribute__((always_inline)) inline bool same_slice(const block* b, const block* c) {
  return (reinterpret_cast<std::uintptr_t>(b) ^ reinterpret_cast<std::uintptr_t>(c)) < kSliceSize;
}
}  // namespace remote_detail

// Hand a chain of blocks to a span we do not own, in one CAS.
template <class C>
void thread_heaps<C>::push_remote(span* s, block* head, block* tail, std::uint32_t n, stats_t* st) {
  // Read before the CAS, while the chain's blocks are still out of s and s
  // cannot be released: once they are on its list, the owner may collect
  // them, empty s and give its slices back, and another thread may form a
  // span there, writing cls as we read it (ThreadSanitizer,
  // stress.HeapHandover). The owner read after it may be stale (heaps are
  // type-stable: a needless scan at most); a plain field must not race.
  const unsigned cls = s->cls;
  std::uint64_t old = s->remote.load(std::memory_order_relaxed);
  for (;;) {
    // Already at the head of the list: freed twice in a row (a repeat
    // further down is caught where the list is collected, merge_free).
    if (__builtin_expect(remote_word::head(old) == head, 0))
      report_misuse("free", head, "double free (by threads that do not own its span)", s->block_size);
    C::links::set_next(tail, remote_word::head(old), s);
    std::uint64_t desired = remote_word::make(head, remote_word::count(old) + n, 0);
    TENON_INJECT_POINT("remote.push");
    if (s->remote.compare_exchange_weak(old, desired, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
    count(st, chunks_->shared_stats(), stat_retry_remote_push);
  }
  // Whoever clears a flag does what the flag asks (exactly one pusher can).
  if (old & remote_word::kFull) {
    if (auto* o = static_cast<heap_t*>(s->owner.load(std::memory_order_acquire)))
      o->lists[cls].notify.fetch_add(1, std::memory_order_release);
  } else if (old & remote_word::kFloating) {
    partial_push(s, st);
  }
}

// Sort a chain taken from our inbox into our spans. A block whose span we no
// longer own (we gave it up, or it was freed to us after our thread's exit
// and a new thread now uses this heap) goes to that span's own remote list.
// Every block holds the free key (the freeing thread stored it), which
// says nothing here, and passed the block-start test against the blocks
// this heap carved at its free (remote_free.h, free_remote: the carved
// bound only rises while a block of the span is out, and reads 0 once the
// span was released, which a stale pointer's free sees: it reads the bound
// after the block's second word, span::forget_carved), so the sort makes no
// test of its own (a TENON_CHECK in the debug build); until 2026-11-29
// (branch `remote`) that free bounded it by the capacity only and the test
// was made again here. A block of a class with a block cache
// goes to the cache (sort_to_cache), its span's list and count untouched;
// one of an uncached class begins a run of its span (sort_run).
// serving: the class whose allocation slow path drains (kNumClasses: none);
// the other classes the sort brought blocks of are let go of (let_go_of).
template <class C>
void thread_heaps<C>::sort_inbox_chain(heap_t* h, block* b, unsigned serving) {
  static_assert(kNumClasses <= 64, "one bit a class");
  std::uint64_t classes = 0;  // those whose spans got blocks
  // Read once: drawn before the first span was formed, never changed.
  const std::uint64_t key = free_key();
  while (b) {
    span* s = lookup::span_of(b);
    block* next = take_sort_link(b, s, s->block_size > 16);
    // Compared in memory (a relaxed load: only this thread makes a span
    // this heap's, and a stale other owner sends the block on to its span).
    if (__builtin_expect(os::equals_relaxed(s->owner, h), 1)) {
      remote_detail::add_class(classes, s->cls);
      TENON_CHECK(s->starts_carved_block(b));
      if (__builtin_expect(s->push_target() != s, 0))
        sort_to_cache(h, s, b, key);
      else
        next = sort_run(h, s, b, next, key);
    } else {
      C::links::set_next(b, nullptr, s);
      push_remote(s, b, b, 1, &h->st);
    }
    b = next;
  }
  if (classes | h->idle_currents) let_go_of(h, classes, serving);
}

// The link out of b, a block of s from the inbox, read as the sort takes b.
// The block kOutboxAhead further down, which a batch's block of 32 bytes
// or more names in its third word (outbox), is prefetched first; a block
// that names no such block (a batch's first, one delivered alone) holds
// the program's data there, and a prefetch of any address is harmless. A
// 16-byte block has no third word. A batch's head names more (heap.h,
// outbox: the blocks walked after it and the next batch's head), prefetched
// and cleared with its third word.
// clear_ahead: the third word is cleared once read, here and where a closed
// inbox's blocks go to their spans, the two places a batch is taken apart:
// left there, the next malloc of the block handed the program a heap
// address, in libtenon-secure.so in the first word it gets (its block
// starts 16 bytes into the inner one; FreshBlocks.BlocksFreedByAnother
// ThreadHoldNoPointerInTheirFirstThreeWords: 17,496 of 80,000 fresh 64-byte
// blocks until 2026-11-27, seventh session).
// names: b is over 16 bytes (it has a third word).
template <class C>
__attribute__((always_inline)) inline block* thread_heaps<C>::take_sort_link(block* b, span* s, bool names) {
  if (names) __builtin_prefetch(reinterpret_cast<const void*>(take_names(b, s, true)), 1);
  return C::links::next(b, s);
}

// b, a block of s (this heap's, its class uncached: its frees go to its own
// list), onto s's list, and the blocks after it in the chain while they lie
// in b's 64 KiB slice, which is s's: a run of one span, for which the
// lookup, the owner, class and push target's tests are made once
// (producer-consumer's batches are allocated in order and freed so: its
// chains are mostly such runs). The run ends at the first block in another
// slice, which the caller sorts as any (an uncached class's span is one
// slice today; a longer one's next slice would begin a run of its own), and
// after a push that took the span's slow path (local_free_slow may have
// retired the span). Returns the block after the run. next: b's link,
// already taken. A block that begins no run (most of xmalloc's mixed sizes)
// pays the push and the slice test only; the third word's size test is
// made once a run, the loop built for each answer (GCC does not unswitch it
// at -O2: two instructions a block).
template <class C>
__attribute__((always_inline)) inline block* thread_heaps<C>::sort_run(heap_t* h, span* s, block* b, block* next,
                                                                      std::uint64_t key) {
  if (push_local_free<C>(*this, h, s, b, key) || !remote_detail::same_slice(b, next)) return next;
  return s->block_size > 16 ? sort_run_on<true>(h, s, next, key) : sort_run_on<false>(h, s, next, key);
}

// The run after its first block, from b.
template <class C>
template <bool kNames>
__attribute__((always_inline)) inline block* thread_heaps<C>::sort_run_on(heap_t* h, span* s, block* b,
                                                                         std::uint64_t key) {
  for (;;) {
    TENON_CHECK(lookup::span_of(b) == s && s->starts_carved_block(b));
    block* next = take_sort_link(b, s, kNames);
    if (push_local_free<C>(*this, h, s, b, key) || !remote_detail::same_slice(b, next)) return next;
    b = next;
  }
}

// A current span left with no block in use by the inbox sort, of a class
// other than `serving`, goes back to the arena at the next sort that brings
// no block of its class, if it is still empty then. Kept, it stayed the
// thread's for good once the thread had moved on to other sizes, however
// much of it was resident, while the thread took fresh memory for the new
// size (remote-free T64: architecture.md, layer 5, "Spans held for sizes a
// thread no longer allocates"). Released at once, it went and was formed
// again in a thread that still allocated its class, whose blocks others
// freed as fast as it made them (xmalloc's producers: 1.15x the page faults
// in pairs): a class whose blocks still arrive is not let go of. The
// block caches' classes have no current span of their own and are left as
// they are: emptying their caches here cost mstress 17% more page faults.
// classes: those this sort brought blocks of (bit c: class c).
template <class C>
void thread_heaps<C>::let_go_of(heap_t* h, std::uint64_t classes, unsigned serving) {
  std::uint64_t look = classes | h->idle_currents;
  if (serving < kNumClasses) look &= ~(std::uint64_t{1} << serving);
  h->idle_currents &= ~look;
  for (; look; look &= look - 1) {
    auto cls = static_cast<unsigned>(std::countr_zero(look));
    if (!empty_current(h, cls)) continue;
    std::uint64_t bit = std::uint64_t{1} << cls;
    if (classes & bit)
      h->idle_currents |= bit;  // blocks still arrive: looked at again next time
    else
      release_if_empty_current(h, cls);
  }
}

template <class C>
void thread_heaps<C>::drain_inbox(heap_t* h, unsigned serving) {
  if (h->inbox.load(std::memory_order_relaxed) == 0) return;
  TENON_INJECT_POINT("inbox.drain");
  auto chain = h->inbox.exchange(0, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain), serving);
}

// Hand a chain to its destination heap's inbox in one CAS. If that heap's
// thread has exited (inbox closed), each block goes to its span instead.
// named: the head carries names (name_batch), the next batch's among them.
template <class C>
void thread_heaps<C>::deliver(heap_t* dest, block* head, block* tail, stats_t* st, bool named) {
  span* tail_span = lookup::span_of(tail);
  std::uintptr_t old = dest->inbox.load(std::memory_order_relaxed);
  for (;;) {
    if (old == kInboxClosed) {
      // A failed CAS may have linked the tail to a stale chain: cut it there.
      C::links::set_next(tail, nullptr, tail_span);
      for (block* b = head; b;) {
        span* s = lookup::span_of(b);
        block* next = C::links::next(b, s);
        C::links::set_next(b, nullptr, s);
        if (s->block_size > 16) take_names(b, s, false);
        push_remote(s, b, b, 1, st);
        b = next;
      }
      return;
    }
    C::links::set_next(tail, reinterpret_cast<block*>(old), tail_span);
    if (named) block_word(head, kHeadNextWord) = old;  // the next batch of the owner's walk
    TENON_INJECT_POINT("inbox.push");
    if (dest->inbox.compare_exchange_weak(old, reinterpret_cast<std::uintptr_t>(head), std::memory_order_release,
                                          std::memory_order_relaxed))
      return;
    count(st, chunks_->shared_stats(), stat_retry_inbox);
  }
}

template <class C>
void thread_heaps<C>::flush_outbox(heap_t* h, outbox& ob) {
  TENON_CHECK(ob.count > 0 && ob.head && ob.tail);
  h->st.add(stat_remote_batches);
  auto* dest = static_cast<heap_t*>(ob.dest);
  block *head = ob.head, *tail = ob.tail;
  // The block that began the batch links nowhere until the delivery links
  // it: a link there means it was freed again and joined the batch's head
  // (join_batch), closing a cycle that the delivery's link would cut,
  // losing the blocks freed between. Reported here, once a batch, so that
  // the free path pays nothing for it.
  span* tail_span = lookup::span_of(tail);
  if (__builtin_expect(C::links::next(tail, tail_span) != nullptr, 0))
    report_misuse("free", tail, "double free (by a thread that does not own its span)", tail_span->block_size);
  bool named = name_batch(ob);
  ob.dest = &g_no_span;  // empty (heap.h, outbox)
  ob.count = 0;
  ob.head = ob.tail = nullptr;
  h->out_pending &= ~(std::uint64_t{1} << (&ob - h->out));
  deliver(dest, head, tail, &h->st, named);
}

// The batch's head names the blocks the owner's walk takes after it, which
// no block's third word names (heap.h, outbox): the newest of `ahead`, as
// many as its words hold. Its third word is tagged for the walk to look.
// The head is the block this thread freed last: the stores hit its cache.
template <class C>
bool thread_heaps<C>::name_batch(const outbox& ob) {
  block* head = ob.head;
  std::uint32_t words = lookup::span_of(head)->block_size / sizeof(std::uintptr_t);
  if (words <= kHeadNextWord) return false;
  std::uint32_t end = std::min<std::uint32_t>(words, kHeadNamesWord + kHeadNames);
  std::uint32_t i = kHeadNamesWord;
  for (std::uint32_t back = 1; i < end && back < ob.count; ++i, ++back)
    block_word(head, i) = reinterpret_cast<std::uintptr_t>(ob.ahead[(ob.count - 1 - back) % kOutboxAhead]);
  if (i < end) block_word(head, i) = 0;  // a shorter list ends here
  third_word(head) |= kHeadNamesTag;
  return true;
}

// A head's names (name_batch, deliver), prefetched if asked and cleared, as
// the third word is (clear_ahead). Read only below the block's end: a
// batch's first block (never a head of a longer one) may hold the
// program's data in its third word, a tag among it.
template <class C>
void thread_heaps<C>::take_head_names(block* b, span* s, bool prefetch) {
  std::uint32_t words = s->block_size / sizeof(std::uintptr_t);
  if (words <= kHeadNextWord) return;
  std::uint32_t end = std::min<std::uint32_t>(words, kHeadNamesWord + kHeadNames);
  for (std::uint32_t i = kHeadNamesWord; i < end; ++i) {
    std::uintptr_t w = block_word(b, i);
    if (!w) break;
    if (prefetch) __builtin_prefetch(reinterpret_cast<const void*>(w), 1);
    block_word(b, i) = 0;
  }
  if (prefetch) __builtin_prefetch(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(block_word(b, kHeadNextWord))), 1);
  block_word(b, kHeadNextWord) = 0;
}

template <class C>
void thread_heaps<C>::flush_remote(heap_t* h) {
  while (h->out_pending) flush_outbox(h, h->out[std::countr_zero(h->out_pending)]);
}

template <class C>
void thread_heaps<C>::free_remote_slow(heap_t* h, span* s, block* b) {
  // A thread that only frees (the consumer of a producer/consumer pair) gets
  // a heap too, so that its remote frees are batched like everyone else's;
  // not once its heap was released at exit, nor when no heap is to be had.
  // Its first free: the heap that owns the block, if that one is parked,
  // becomes this thread's (attach).
  // Free already: it holds the key (free_key.h), wherever it waits.
  if (second_word_ordered(b) == free_key()) report_misuse("free", b, "double free", s->block_size);
  // After the second word, before anything else (free_remote).
  if (!s->starts_carved_block_any_thread(b)) report_not_carved_remote(s, b);
  void* dest = s->owner.load(std::memory_order_acquire);  // as in free_remote
  if (h == &g_empty_heap<C>) {
    if (t_thread<C>.released || !(h = attach(dest, true))) {
      free_heapless(s, b);
      return;
    }
    // Read again: while this thread attached, the heap read above may have
    // been given up (dissolved: s abandoned) and be the very heap it
    // attached now, from the free-heap stack, or a heap taken over after it
    // was parked again. Now that h is ours, s's owner reads h only if h
    // owns s (nobody else can make a span h's).
    dest = s->owner.load(std::memory_order_acquire);
  }
  if (dest == h) {  // the heap attached just now already owns it
    free_to_own_span(*this, h, s, b);
    return;
  }
  second_word(b) = free_key();  // on every list of free blocks (free_key.h)
  if (!dest) {  // an unowned span (its thread exited): straight to its list
    C::links::set_next(b, nullptr, s);
    push_remote(s, b, b, 1, &h->st);
    return;
  }
  outbox& ob = h->out[outbox_slot<sizeof(heap_t)>(dest)];
  if (ob.dest != dest) {  // no batch started for dest (heap.h, outbox)
    // A heap of another engine part (a first-class heap's): straight to its
    // inbox, never batched, so that no outbox holds a block of it when that
    // heap is destroyed and its spans reused. Checked only when a batch
    // starts (such a heap never has one), so the destination heap's memory
    // is read once a batch, not once a free. Its `home` is fixed before it
    // owned any span (the acquire above makes it visible).
    if (static_cast<heap_t*>(dest)->home != this) {
      C::links::set_next(b, nullptr, s);
      deliver(static_cast<heap_t*>(dest), b, b, &h->st);
      return;
    }
    if (ob.count) flush_outbox(h, ob);
    ob.dest = dest;
    C::links::set_next(b, nullptr, s);
    ob.head = ob.tail = b;
    ob.count = 1;
    ob.ahead[0] = b;
    for (unsigned i = 1; i < kOutboxAhead; ++i) ob.ahead[i] = nullptr;
    h->out_pending |= std::uint64_t{1} << (&ob - h->out);
    return;
  }
  join_batch(h, ob, s, b, free_key());
}

}  // namespace tenon
