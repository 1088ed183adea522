// Layer 5, thread heaps: the engine part that owns the thread heaps of one
// engine and everything they share: the partial-span stacks (unowned spans
// with free blocks, per class), the heap storage and its free-heap stack,
// and the thread-exit key. The slow paths live in src/heap/, one file per
// job; each says why it never waits.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/arena/arena.h"
#include "tenon/common/config.h"
#include "tenon/common/id_stack.h"
#include "tenon/heap/heap.h"

namespace tenon {

// The bytes of span memory an engine part may hold (a first-class heap's
// limit): taken when a span is formed, given back when it is released.
struct span_budget {
  std::atomic<std::size_t> held{0};
  std::size_t limit = ~std::size_t{0};

  bool take(std::size_t n) {
    std::size_t old = held.load(std::memory_order_relaxed);
    do {
      if (n > limit || old > limit - n) return false;
    } while (!held.compare_exchange_weak(old, old + n, std::memory_order_relaxed));
    return true;
  }
  void give(std::size_t n) { held.fetch_sub(n, std::memory_order_relaxed); }
};

template <class C>
class thread_heaps {
 public:
  using heap_t = thread_heap<C>;
  using stats_t = typename C::stats;

  constexpr explicit thread_heaps(arena<C>& chunks) : chunks_(&chunks) {}

  // Slow paths of the inline fast paths in heap.h. alloc_slow never in
  // line: three lines around find_block since branch audit2, GCC put it in
  // line at one call site of the secure build's malloc once that unit grew
  // (branch secrow), and the errno it keeps took two registers more for
  // every malloc there (the secure malloc(32)+free pair 290.25 -> 295.25).
  [[gnu::noinline]] void* alloc_slow(heap_t* h, unsigned cls);
  void* find_block(heap_t* h, unsigned cls);
  void local_free_slow(heap_t* h, span* s);
  // A block of a span of a cached class (block_cache.h) sorted from the
  // owner's inbox (the owner's free pushes it through span::push_to).
  __attribute__((always_inline)) void sort_to_cache(heap_t* h, span* s, block* b, std::uint64_t key);

  // A small block of span s, freed by a thread whose heap (h, possibly the
  // empty heap) does not own s: batched for the owner, or handed to s.
  // Inline (remote_free.h). kKept: b comes back from h's block cache
  // (cache_return), where free_cached_remote tested it as it kept it.
  template <bool kKept = false>
  __attribute__((always_inline)) void free_remote(heap_t* h, span* s, block* b);
  // free_remote for a block of a class with a block cache (block_cache.h):
  // kept in h's cache of its class for h's next allocations while h
  // allocates that class and its cache has room (cache.ipp), else
  // free_remote. Out of line, so that the remote free of the other classes
  // pays only the class's test in front of free_remote (no frame).
  [[gnu::noinline]] void free_cached_remote(heap_t* h, span* s, block* b);

  // Hand every outbox of this thread to its heap (also done on every
  // allocation slow path, at trim and at thread exit).
  void flush_remote(heap_t* h);

  // Give every block in this heap's block caches back to its span (at trim;
  // thread exit does it too), but the cache of class `except`.
  void flush_caches(heap_t* h, unsigned except = kNumClasses);

  // Sum of every heap's statistics, and the shared counts, into `out`.
  void sum_stats(stats_t& out);

  // Every heap's run cache (arena/run_cache.h) back to the arena, from any
  // thread: all of it (`all`: malloc_trim), or what a purge pass before
  // this one found there (the pass's expiry, arena::flush_cached).
  void flush_run_caches(bool all);

  // Heaps attached to threads now (relaxed: a heuristic for the caches'
  // shares of their budgets).
  std::uint32_t live_heaps() const { return live_heaps_.load(std::memory_order_relaxed); }

  arena<C>& chunks() { return *chunks_; }

  // --- heaps not bound to a thread (first-class heaps, src/frontend/heaps.cpp)

  // A heap of this part that no thread-exit hook releases and no thread's
  // t_thread names: its caller decides which thread uses it. nullptr if no
  // heap can be had.
  heap_t* attach_unbound();
  // Count formed and released spans against `b` (nullptr: no limit).
  void set_budget(span_budget* b) { budget_ = b; }
  // At the limit: give back the spans heap h keeps with no block in use
  // (refill.ipp). True if any went.
  bool make_room(heap_t* h, unsigned serving = kNumClasses);
  // Give every span of every heap of this part back to the arena, whatever
  // blocks are in use, and leave each heap empty and usable (drop.ipp). The
  // caller guarantees that no other thread uses these heaps meanwhile and
  // that no free of their blocks is pending (frees into heaps of another
  // part are never batched: see free_remote).
  void drop_all();

 private:
  // Partial spans: spans without an owner that have free blocks, per class:
  // published by dissolved parked heaps and by the first remote free into a
  // floating span; popped ("adopted") by any heap that needs a span of that
  // class.
  struct span_link {
    std::atomic<std::uint32_t>& operator()(std::uint32_t id) const { return span_from_id(id)->stack_next; }
  };
  // Heaps by index + 1 (0 is no heap), for the free-heap stack.
  struct heap_link {
    thread_heaps* self;
    std::atomic<std::uint32_t>& operator()(std::uint32_t id) const;
  };

  // attach.ipp: heap storage, the thread-exit key, attach and release.
  heap_t* heap_at(std::uint32_t index);
  heap_t* heap_segment(std::uint32_t index);
  long thread_key();
  heap_t* attach(void* wanted = nullptr, bool freeing = false);
  heap_t* claim_heap(bool parked = true);
  heap_t* claim_parked();
  bool take_over(heap_t* h);
  static void on_thread_exit(void* arg);
  void release(heap_t* h);
  void dissolve(heap_t* h);
  bool dissolve_parked(heap_t* grower);
  void collect_parked(heap_t* h);
  heap_t* trade_for_parked(heap_t* h);
  void attached(heap_t* h);

  // spans.ipp: the owner's span lists and transitions.
  void carve(span* s);
  block* take_untouched(span* s);
  void merge_free(span* s, block* chain, std::uint32_t count);
  void take_remote(span* s);
  bool collect(span* s);
  bool refill(span* s);
  block* pop(span* s);
  void release_empty(heap_t* h, span* s);
  bool release_unused_spans(heap_t* h);
  static bool empty_current(const heap_t* h, unsigned cls);
  bool release_if_empty_current(heap_t* h, unsigned cls);
  void retire_empty(heap_t* h, class_lists& l, span* s);
  void make_current(heap_t* h, unsigned cls, span* s);
  bool park_full(class_lists& l, span* s);
  bool retire_full(heap_t* h, unsigned cls, span* s);
  void scan_full(heap_t* h, unsigned cls);

  // refill.ipp: finding a span for a class.
  span* form_small_span(heap_t* owner, unsigned cls, chunk** hint, stats_t* st);
  void adopt(heap_t* h, span* s, unsigned cls);
  void set_owner(span* s, heap_t* h);
  void absorb_partials(heap_t* h, unsigned cls, unsigned limit);
  span* adopt_partial(heap_t* h, unsigned cls);
  void absorb_before_growing(heap_t* h, unsigned cls);
  span* find_span(heap_t* h, unsigned cls);
  void partial_push(span* s, stats_t* st);

  // cache.ipp: the block cache of the classes with few blocks a span.
  bool cache_put_back(class_lists& l, span* s);
  bool cache_refill(heap_t* h, unsigned cls, block_cache& c, block** untouched);
  block* untouched_on_avail(class_lists& l);
  void* cache_alloc(heap_t* h, unsigned cls);
  void cache_return(heap_t* h, block* b);
  [[gnu::noinline]] void cache_trim(heap_t* h, block_cache& c, std::uint32_t keep);
  [[gnu::noinline]] void cache_overflow(heap_t* h, block_cache& c);
  void cache_push(heap_t* h, span* s, block* b, std::uint64_t key, block_cache& c);
  void drop_caches(heap_t* h);

  // remote.ipp: blocks crossing threads.
  void push_remote(span* s, block* head, block* tail, std::uint32_t n, stats_t* st);
  void sort_inbox_chain(heap_t* h, block* b, unsigned serving = kNumClasses);
  __attribute__((always_inline)) static block* take_sort_link(block* b, span* s, bool names);
  __attribute__((always_inline)) block* sort_run(heap_t* h, span* s, block* b, block* next, std::uint64_t key);
  template <bool kNames>
  __attribute__((always_inline)) block* sort_run_on(heap_t* h, span* s, block* b, std::uint64_t key);
  void let_go_of(heap_t* h, std::uint64_t classes, unsigned serving);
  void drain_inbox(heap_t* h, unsigned serving);
  void deliver(heap_t* dest, block* head, block* tail, stats_t* st, bool named = false);
  void flush_outbox(heap_t* h, outbox& ob);
  static bool name_batch(const outbox& ob);
  static void take_head_names(block* b, span* s, bool prefetch);
  // b's third word, the block it names (clear_ahead: cleared once read),
  // and a batch head's further names (heap.h, outbox). b is over 16 bytes.
  // Returned with its tag, for a prefetch only: the tag is the low bit of
  // an 8-byte-aligned address, whose line it leaves as it is (one `and` a
  // sorted block less).
  __attribute__((always_inline)) static std::uintptr_t take_names(block* b, span* s, bool prefetch) {
    std::uintptr_t ahead = third_word(b);
    third_word(b) = 0;
    if (ahead & kHeadNamesTag) take_head_names(b, s, prefetch);
    return ahead;
  }
  __attribute__((always_inline)) void join_batch(heap_t* h, outbox& ob, span* s, block* b, std::uint64_t key);
  [[gnu::noinline]] void free_remote_slow(heap_t* h, span* s, block* b);

  // exit.ipp: giving spans up, and calls after a thread's heap is gone.
  void publish_unowned(span* s, stats_t* st);
  void abandon(heap_t* h, span* s);
  void* alloc_heapless(unsigned cls);
  void free_heapless(span* s, block* b);

  // drop.ipp: destroying a first-class heap's contents.
  void drop_heap(heap_t* h);
  void drop_span(heap_t* h, span* s);

  arena<C>* chunks_;
  id_stack<span_link, typename C::sync> partial_[kNumClasses]{};
  // Heaps live in segments of kHeapsPerSegment, each reserved when the heap
  // count first reaches it, and are never unmapped (type-stable: a freer may
  // bump a notify counter of a heap that has since been recycled; that only
  // causes one needless scan).
  std::atomic<heap_t*> segments_[kMaxHeaps / kHeapsPerSegment]{};
  std::atomic<std::uint32_t> heap_count_{0};
  // Bit i of word i / 64: heap i is constructed. An index is claimed (the
  // count bumped) before its heap is built, so a reader walking the heaps
  // (sum_stats) must skip one whose bit it does not see: set with release
  // after the construction, read with acquire.
  std::atomic<std::uint64_t> constructed_[kMaxHeaps / 64]{};
  id_stack<heap_link, typename C::sync> free_heaps_{heap_link{this}};
  // Heaps whose thread exited, parked whole with their spans (attach.ipp):
  // taken over by a thread that attaches (the heap that owns the block a new
  // thread frees first, else the one parked last), or given up (dissolved)
  // by a heap about to take fresh memory. A heap taken over by name leaves
  // its entry on the stack (a Treiber stack cannot unlink from the middle):
  // the heap's `park` word tells a popper whether the entry still stands
  // for a parked heap (kParked) and a parking thread whether the heap still
  // has an entry (kOnParkedStack), so that it is never pushed twice.
  id_stack<heap_link, typename C::sync> parked_heaps_{heap_link{this}};
  static constexpr std::uint32_t kParked = 1;
  static constexpr std::uint32_t kOnParkedStack = 2;
  // Parkings so far: a heap parked after a grower attached (its thread was
  // the grower's contemporary, not its predecessor) may be given up at once.
  std::atomic<std::uint32_t> park_seq_{0};
  // Heaps attached and not released (first-class heaps' sub-heaps count
  // from their attach on, for good): what the block caches' budget is
  // divided by (block_cache_limit). A heuristic: relaxed.
  std::atomic<std::uint32_t> live_heaps_{0};
  // The pthread key whose destructor releases a thread's heap (-1: none yet).
  std::atomic<long> key_{-1};
  // Span bytes counted against a limit (first-class heaps only).
  span_budget* budget_ = nullptr;
};

}  // namespace tenon

#include "tenon/heap/remote_free.h"  // the inline remote free, which needs the class whole
