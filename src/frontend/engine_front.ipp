// engine_front<E>: the front end's out-of-line paths: big and aligned
// requests, frees that are not the owning thread's, realloc, usable size,
// trim, and the routing of pointers that are not in a chunk (huge blocks,
// and foreign pointers, which go to foreign.cpp).
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/frontend/engine_front.h"
#include "tenon/frontend/foreign.h"
#include "tenon/frontend/large_owner.h"
#include "tenon/huge/huge.h"
#include "tenon/platform/misuse.h"

namespace tenon {

namespace front_detail {

// Zero a reused block for calloc. A big one whose pages are not (nearly) all
// resident gets them dropped instead of cleared: the kernel gives back zero
// pages as the program touches them, so a program that uses little of a big
// zeroed block does not pay for all of it (memset of 32 MiB: about 8 ms; drop
// and touch one page: 11 us), which is what glibc makes it pay at that size
// (see kCallocDropMin). A big block whose last user wrote (nearly) every page
// is cleared in place: a page fault costs many times the memset of its page
// (architecture.md, layer 7), and a program that calloc's what it freed after
// writing it all is likely to write it all again. The probe of its first pages
// (one mincore) keeps the sparse case at one system call more; only a block
// that passes it is counted whole.
// Big blocks are huge ones: page-aligned, usable up to the page-rounded size.
template <class Platform>
void clear_reused(void* p, std::size_t n) {
  if (n >= kCallocDropMin) {
    std::size_t page = Platform::page_size();
    std::size_t len = (n + page - 1) & ~(page - 1);
    std::size_t probe = kCallocProbePages * page;
    bool dense = Platform::resident_bytes(p, probe) == probe &&
                 Platform::resident_bytes(p, len) >= len - len / kCallocDenseShare;
    // A sparse block under huge-page advice (TENON_HUGE_PAGES=3 or 4 took it for
    // a dense program's) loses the advice too: else each page its caller
    // touches after the drop is a 2 MiB one to clear (size-sweep's
    // calloc-touch1 of 32-64 MiB: 5.8 us a call without advice, 198 us with).
    if (!dense && learns_density(options().thp)) Platform::unadvise_huge(p, len);
    if (!dense && Platform::purge(p, len)) return;
  }
  memset(p, 0, n);
}

// A pointer freed into small span s, by a thread that does not own it, must
// be the start of one of the blocks the owner carved, in a slice that is
// taken: else it ends the program. (The owner's own frees check the same on
// the fast path: heap.h.) Here the slice's bit; the block-start test
// against the span's carved bound where the block's second word has been
// read (thread_heaps::free_remote, free_remote_slow, free_cached_remote):
// the bound read relaxed, as the per-CPU free does (percpu_cache.hpp): the
// owner raises it before it hands out a block of the carve, and a freer of
// a live block got it after that (the program's hand-off), so it sees at
// least that bound; it is never lowered while a block of the span is out,
// and set to 0 as the span is released (span::forget_carved), which a
// stale pointer's free, its second word read first, sees. Every block
// that reaches an owner's inbox or a span's remote list has passed it, so
// the owner's sort makes no test of its own (remote.ipp, sort_inbox_chain).
// Until 2026-11-29 (branch `remote`) this bounded the block by the span's
// capacity, and the owner's sort made the carved test again, a multiply a
// block on each side; a slot never carved was reported only where the owner
// sorted it, and missed when the span had no owner. From then until branch
// `stale` (the same day) the bound was read here, before the second word:
// a stale pointer's free that read it before its span's release, and the
// rest after the span was formed again, sent a slot not carved yet to the
// new span, which handed it out twice (tests/progress/stale_free_test.cpp).
// The test, and its report apart: cold, tail-called and noipa (see
// report_keyed in heap.h), so that the remote free, inline in
// free_not_owned, sets up no stack frame for a call that never returns.
// The fast test leaves out two of in_taken_slice's: a slice no span has
// used names g_no_span, and the header's slice (0) is never a span's, so
// it names g_no_span too (arena/take.ipp), whose carved bound is 0: the
// block-start test after it admits no pointer.
inline bool in_taken_slice(const span* s, const void* p) {
  std::uint64_t bit = std::uint64_t{1} << lookup::slice_of(p);
  return s != &g_no_span && lookup::slice_of(p) != 0 && (chunk_of(p)->used.load(std::memory_order_relaxed) & bit) != 0;
}
inline bool in_used_slice(const void* p) {
  std::uint64_t bit = std::uint64_t{1} << lookup::slice_of(p);
  return (chunk_of(p)->used.load(std::memory_order_relaxed) & bit) != 0;
}
[[gnu::cold, gnu::noipa]] inline void report_not_small_block(const span* s, const void* p) {
  if (!in_taken_slice(s, p))
    report_misuse("free", p, "invalid pointer (not in a block: never allocated or already freed)", 0);
  report_not_carved_block(s, static_cast<const block*>(p));
}

// realloc of p in small span s must name a live block: a block start that
// the owner carved (another thread reads the carved bound relaxed after the
// block's second word, as its free does: in_used_slice above) and that does
// not hold the free key (free_key.h: a free block holds it wherever it
// waits). Until 2026-11-29
// another thread bounded p by the span's capacity, and a slot never carved
// was reallocated in place and handed back, to be carved and handed out
// again by the owner (ReallocMisuseDeathTest.SlotNotCarvedYet*).
template <class C>
void check_realloc_small(span* s, void* p) {
  auto* h = t_thread<C>.current;
  if (s->owner.load(std::memory_order_relaxed) == h) return check_realloc_own(h, s, p);
  bool keyed = second_word_ordered(static_cast<block*>(p)) == free_key();  // first: span::forget_carved
  if (!s->starts_carved_block_any_thread(p))
    report_misuse("realloc", p, "invalid pointer (not the start of a block)", s->block_size);
  if (keyed) report_misuse("realloc", p, "double free", s->block_size);
}

// The run cache of h, the calling thread's heap, for a large block of E:
// none without a heap (before its first call, after its exit hook), nor for
// a heap of another engine part.
template <class Engine, class Heap>
run_cache* runs_of(Engine& e, Heap* h) {
  return h != &g_empty_heap<typename Engine::config> && h->home == &e.heaps ? &h->runs : nullptr;
}

}  // namespace front_detail

template <auto& E>
void* engine_front<E>::alloc_big(std::size_t n, std::size_t align, bool zero) noexcept {
  if (n > PTRDIFF_MAX) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n == 0) n = 1;  // aligned_alloc(big alignment, 0): still a real, unique block
  bool zeroed = false;
  void* p;
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  if (n + slack <= kMaxLarge && align < kChunkSize) {
    heap_t* h = t_thread<config>.current;
    bool has_heap = h != &g_empty_heap<config>;
    chunk* local_hint = nullptr;
    auto ask = [&] {
      return E.large.alloc(n, align, &zeroed, has_heap ? &h->chunk_hint : &local_hint, has_heap ? &h->st : nullptr,
                           front_detail::runs_of(E, h));
    };
    int before = errno;
    p = ask();
    // Refused (an address-space limit): the runs every thread's run cache
    // keeps go back to the arena, where they join their free neighbours,
    // and the block is asked for once more. Until 2026-11-29 they served
    // only blocks of their own slice counts, and malloc(200000) after two
    // blocks of 100,000 B were freed at a 64 MiB limit failed
    // (preload.address_space_limit, reuse_merged).
    if (__builtin_expect(!p, 0)) {
      E.heaps.flush_run_caches(true);
      p = ask();
      if (p) errno = before;
    }
  } else {
    p = E.huge.alloc(n, align, &zeroed);
  }
  if (p && zero && !zeroed) front_detail::clear_reused<typename config::platform>(p, n);
  return p;
}

// A class whose block size is a multiple of the alignment gives aligned
// blocks, since spans start on 64 KiB boundaries.
template <auto& E>
void* engine_front<E>::alloc_aligned_small(std::size_t n, std::size_t align) noexcept {
  for (unsigned c = size_to_class(n < align ? align : n); c < kNumClasses; ++c)
    if (kClasses.size[c] % align == 0) return heap_alloc(E.heaps, c);
  return alloc_big(n, align, false);
}

template <auto& E>
void* engine_front<E>::alloc_zeroed(std::size_t n) noexcept {
  if (n <= kMaxSmall) {
    void* p = heap_alloc(E.heaps, size_to_class(n));
    if (p) memset(p, 0, n);
    return p;
  }
  return alloc_big(n, 0, true);
}

// A block of a chunk, freed by a thread whose heap does not own its span: a
// large block straight back to the arena, a small one to its owner.
template <auto& E>
void engine_front<E>::free_not_owned(span* s, void* p) noexcept {
  heap_t* h = t_thread<config>.current;
  if (s->kind == span_kind::large) {
    // Acquire: pairs with the heap's release of the owner (heaps.cpp).
    if (auto* o = static_cast<large_owner*>(s->owner.load(std::memory_order_acquire))) {
      o->free(o, p);  // a first-class heap's block
      return;
    }
    run_cache* runs = front_detail::runs_of(E, h);
    // Its line is cold after the small calls between two large ones: its
    // miss overlaps the block's checks instead of following them.
    if (runs) __builtin_prefetch(runs, 1);
    E.large.free(s, p, h == &g_empty_heap<config> ? nullptr : &h->st, runs, runs ? E.heaps.live_heaps() : 0);
    return;
  }
  if (__builtin_expect(!front_detail::in_used_slice(p), 0)) return front_detail::report_not_small_block(s, p);
  // Between the slice's test and the reads of the block's free key, the
  // span's carved bound and its owner (free_remote): a stale pointer's span
  // may be emptied, released, purged and formed again here
  // (tests/progress/stale_free_test.cpp).
  TENON_INJECT_POINT("remote.tested");
  // A block of a cached class may stay in this thread's cache (cache.ipp,
  // free_cached_remote): a tail call, the other classes' path unchanged.
  if (kBlockCache.slot[s->cls] != block_cache_detail::kNone)
    return E.heaps.free_cached_remote(h, s, static_cast<block*>(p));
  E.heaps.free_remote(h, s, static_cast<block*>(p));
}

template <auto& E>
template <class Span>
bool engine_front<E>::dealloc_closed(void* p, std::size_t closed) noexcept {
  if (!lookup::in_chunk(p)) return false;
  Span* s = lookup::span_of(p);
  if (s->kind != span_kind::large || s->owner.load(std::memory_order_acquire)) return false;
  heap_t* h = t_thread<config>.current;
  run_cache* runs = front_detail::runs_of(E, h);
  return runs && E.large.free_closed(s, p, closed, &h->st, *runs, E.heaps.live_heaps());
}

template <auto& E>
void engine_front<E>::free_irregular(void* p) noexcept {
  if (!p) return;
  if (lookup::in_chunk(p)) {  // a chunk without a fast-table slot, or p not a multiple of 8
    span* s = lookup::span_of(p);
    // Not a multiple of 8: no block starts there. The owner reports it as
    // its fast path did before the chunk-table tag took over the test; any
    // other thread's path checks the block start itself.
    bool misaligned = (reinterpret_cast<std::uintptr_t>(p) & 7) != 0;
    if (misaligned && s->owner.load(std::memory_order_relaxed) == t_thread<config>.current)
      report_misuse("free", p, "invalid pointer (not the start of a block)", s->block_size);
    free_in_chunk(p, s);
    return;
  }
  std::size_t usable;
  if (huge_header* h = huge_take(p, &usable)) {
    // Taken first (one CAS on its unit map entry), read after: of two frees
    // at once one reports, and reads no header the other may have unmapped
    // or moved (until 2026-11-29, branch hugeread).
    if (usable == 0) report_misuse("free", p, "double free", 0);
    if (auto* o = static_cast<large_owner*>(h->owner)) {
      huge_release(h, usable);  // a first-class heap's block: its heap frees it
      o->free(o, p);
      return;
    }
    E.huge.free_claimed(h, usable);
    return;
  }
  // Only a pointer inside a huge block's own range is tenon's (an interior
  // pointer: invalid); anything else in its unit is foreign.
  if (huge_contains(p)) report_misuse("free", p, "invalid pointer (inside a huge block, not its start)", 0);
  foreign::free(p);
}

template <auto& E>
std::size_t engine_front<E>::usable_size(const void* p) noexcept {
  if (!p) return 0;
  if (lookup::in_chunk(p)) {
    const span* s = lookup::span_of(p);
    return s->kind == span_kind::small ? s->block_size : large_runs<config>::usable(s, p);
  }
  huge_view v;
  if (huge_view_of(p, &v)) return v.usable;  // from its unit map entry: no read of a block a free may unmap
  if (huge_contains(p)) return 0;  // inside a huge block, not its start: not a block
  return foreign::usable_size(p);
}

// realloc of p in chunk span s (p's own, looked up by the caller). A moved
// block is freed into s without a second lookup: s stays p's span, since p
// is live until that free.
template <auto& E>
void* engine_front<E>::realloc_in_chunk(void* p, std::size_t n, span* s) noexcept {
  TENON_CHECK(p != nullptr && n > 0 && n <= PTRDIFF_MAX && lookup::in_chunk(p) && lookup::span_of(p) == s);
  std::size_t old;
  if (s->kind == span_kind::large) {
    // A live block only, as its free checks (large_runs::check_live): kept
    // in place, a freed block's run (or an interior pointer's) would be
    // handed out again by the next malloc; copied, the free after the copy
    // went unnoticed (until 2026-11-27).
    large_runs<config>::check_live(s, p, "realloc");
    // Stay in place when the new size still fits the run and wastes < 3/4.
    std::size_t room = large_runs<config>::usable(s, p);
    if (n > kMaxSmall && n >= room / 4 && large_runs<config>::resize(s, p, n)) return p;
    old = room;
  } else {
    front_detail::check_realloc_small<config>(s, p);
    if (n <= s->block_size && n >= s->block_size / 2) return p;  // as realloc's inline test
    old = s->block_size;
  }
  void* q = alloc(n);
  if (!q) return nullptr;  // errno is ENOMEM; p is untouched
  memcpy(q, p, old < n ? old : n);
  free_in_chunk(p, s);
  return q;
}

template <auto& E>
void* engine_front<E>::realloc_slow(void* p, std::size_t n) noexcept {
  TENON_CHECK(p != nullptr && n > 0 && n <= PTRDIFF_MAX);  // standard_api answered the rest
  if (lookup::in_chunk(p)) return realloc_in_chunk(p, n, lookup::span_of(p));
  std::size_t old;
  if (huge_header* h = huge_take(p, &old)) {
    if (old == 0) report_misuse("realloc", p, "double free", 0);
    return realloc_taken(h, p, n, old);
  } else if (huge_contains(p)) {
    // Inside a huge block, not its start: not a block. Never read as a
    // glibc block, whose header would be the huge block's own bytes.
    errno = EINVAL;
    return nullptr;
  } else {
    switch (foreign::plan_resize(p, n, &old)) {
      case foreign::resize::stay: return p;
      case foreign::resize::invalid:
      case foreign::resize::nothing_mapped: errno = EINVAL; return nullptr;
      case foreign::resize::move: break;
    }
  }
  return move_block(p, n, old);
}

// p's `old` bytes copied to a new block of n, then p freed.
template <auto& E>
void* engine_front<E>::move_block(void* p, std::size_t n, std::size_t old) noexcept {
  void* q = alloc(n);
  if (!q) return nullptr;  // errno is ENOMEM; p is untouched
  memcpy(q, p, old < n ? old : n);
  dealloc(p);
  return q;
}

// The huge block h (at p), taken (huge_take gave `old`), realloc'd: by
// realloc_slow, or handed on still taken by an outer layer (the secure
// canary, through the quarantine: since 2026-11-29, branch usize; it gave
// the block back first, and a free between that unmapped it left no block
// here: RacingFrees.HugeBlockReallocHeldWhileAFreeUnmapsIt). Given back
// whatever the answer.
template <auto& E>
void* engine_front<E>::realloc_taken(huge_header* h, void* p, std::size_t n, std::size_t old) noexcept {
  if (!h->owner) return realloc_huge(h, p, n, old);
  // A heap's block is not moved in place (its heap records the pointer),
  // and its free goes through its heap, whose slot takes it once (a
  // second free is ignored there, heaps.cpp).
  huge_release(h, old);
  return move_block(p, n, old);
}

// realloc of huge block h (at p), taken first as free takes it (huge_take
// gave `old`; since 2026-11-29, branch hugeread, by its unit map entry
// before its header is read, so that a free racing a move of the block
// never reads the old header): a freed block (waiting in the
// huge cache, where resized it would be handed out twice and copied freed
// twice, until 2026-11-27) gives 0 and is reported, and so is whichever of a
// free and this realloc racing on one block comes second. Until 2026-11-29
// the test was a load and the block's new size was written later: a free
// between put the block in the cache, the resize made it look live there
// and returned it, and the next huge malloc handed it out again
// (LargeRaceDeathTest.ReallocAndFreeOfOneHugeBlockAtOnce). The claim is
// held through the resize or the copy: nothing else frees, resizes or
// closes the block meanwhile, and the copy's source ends freed by this
// call alone.
template <auto& E>
void* engine_front<E>::realloc_huge(huge_header* h, void* p, std::size_t n, std::size_t old) noexcept {
  if (n > kMaxLarge) {
    if (void* q = E.huge.resize(h, old, n)) return q;
  }
  void* q = alloc(n);
  if (!q) {
    huge_release(h, old);  // errno is ENOMEM; p is untouched, live again
    return nullptr;
  }
  memcpy(q, p, old < n ? old : n);
  E.huge.free_claimed(h, old);
  return q;
}

template <auto& E>
int engine_front<E>::trim(std::size_t) noexcept {
  return E.trim(t_thread<config>.current);
}

template <auto& E>
int engine_front<E>::owns(const void* p) noexcept {
  if (!p) return 0;
  if (lookup::in_chunk(p)) return 1;
  return huge_lookup(p) != nullptr;
}

}  // namespace tenon

#include "engine_stats.ipp"
