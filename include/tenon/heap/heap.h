// Layer 5, thread heaps: each thread owns a heap; the heap owns spans, one
// "current" span per size class from which the fast path allocates.
//
// Fast paths (inline here, no atomic read-modify-write):
//   malloc: pop the current span's local free list.
//   free:   if the block's span is owned by this thread's heap, push it on the
//           span's local free list; one decrement of `until_slow` (used
//           less low_mark) and a sign test
//           sends the rare cases (span became empty, span was full) to a
//           slow path.
// Everything else (refill, remote frees, retiring full spans, adoption,
// thread exit) belongs to the engine part thread_heaps<C>
// (thread_heaps.h, src/heap/); every one of those paths is lock-free.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/arena/chunk.h"
#include "tenon/arena/run_cache.h"
#include "tenon/common/checks.h"
#include "tenon/common/size_classes.h"
#include "tenon/heap/block_cache.h"
#include "tenon/heap/free_key.h"
#include "tenon/platform/misuse.h"
#include "tenon/span/span.h"

namespace tenon {

template <class C>
class thread_heaps;

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
//
// The owner's walk over a batch is a chain of loads from lines another core
// wrote last, each waiting for the one before. So a block of 32 bytes or
// more joining a batch gets, in its third word, the block that joined
// kOutboxAhead frees before it (that far down the chain: `ahead` holds the
// last kOutboxAhead to join), and the walk prefetches it: kOutboxAhead
// misses in flight instead of one. Its second word holds the free key
// (free_key.h), as on every list of free blocks; a 16-byte block has no
// third word and is not prefetched.
constexpr unsigned kOutboxAhead = 8;
// The walk's first kOutboxAhead blocks of each batch (its newest) are named
// by none of the above, and a short batch is mostly those (mstress T16: 12
// blocks a batch, 8 of them walked one miss after another). So the batch's
// head, when it has the words for it (32 bytes or more), carries more: its
// third word is tagged (kHeadNamesTag), its fourth names the head of the
// batch delivered before it (the inbox it was pushed onto: the next batch
// of the walk) and the words from its fifth name the batch's blocks walked
// after it, up to kHeadNames of them, a null word ending a shorter list.
// The owner reads them once the head is in, prefetches them all and clears
// them (remote.ipp, take_head_names).
constexpr std::uintptr_t kHeadNamesTag = 1;
constexpr unsigned kHeadNextWord = 3;
constexpr unsigned kHeadNamesWord = 4;
constexpr unsigned kHeadNames = kOutboxAhead - 1;
struct outbox {
  // First, so that the remote free addresses a slot of it from the outbox
  // with the index alone (after the fields, GCC added their size to the
  // index: an instruction a free).
  block* ahead[kOutboxAhead] = {};  // ahead[i]: the last block to join with count % kOutboxAhead == i
  // The destination heap (a thread_heap<C>) while the outbox holds blocks;
  // g_no_span's address while it is empty, which no span's owner ever is
  // (nor is null, an unowned span's), so that the remote free tells a
  // started batch for its block's owner with one compare (remote_free.h;
  // until 2026-11-29, branch `remote`, a compare and a test of the count).
  void* dest = &g_no_span;
  block* head = nullptr;
  block* tail = nullptr;
  std::uint32_t count = 0;
};
// Direct-mapped by destination heap address (remote_free.h, outbox_slot):
// one slot for each heap of a segment, so that a thread freeing the blocks
// of up to kHeapsPerSegment threads at once batches for every one of them.
// With 16, the 64 threads of remote-free T64 shared each slot four ways and
// flushed each other's batches: 1.33 blocks a batch, an inbox CAS and the
// slow path almost every free (architecture.md, layer 5, "Outbox slots").
constexpr unsigned kOutboxes = kHeapsPerSegment;
static_assert((kOutboxes & (kOutboxes - 1)) == 0 && kOutboxes <= 64, "a power of 2, one bit of out_pending each");

// A heap's inbox word: a chain of blocks pushed by other threads, taken by
// the owner in one exchange; kInboxClosed once the heap's thread has exited.
constexpr std::uintptr_t kInboxClosed = 1;

template <class C>
struct thread_heap {
  span* current[kNumClasses];  // read by the malloc fast path
  std::atomic<std::uintptr_t> inbox{0};
  // Where the 16 slots were: moved last, after runs, threadtest T64 (no
  // remote free) took 4-8% more task-clock, interleaved (architecture.md,
  // layer 5, "Outbox slots").
  outbox out[kOutboxes];
  std::uint64_t out_pending = 0;  // bit i: out[i] holds blocks
  class_lists lists[kNumClasses];
  chunk* chunk_hint = nullptr;
  std::uint32_t forms_since_sweep = 0;  // see absorb_before_growing
  std::uint64_t idle_currents = 0;      // owner-only: bit c, see thread_heaps::let_go_of
  std::atomic<std::uint32_t> stack_next{0};  // link on the free-heap or parked-heap stack
  std::atomic<std::uint32_t> park{0};        // kParked, kOnParkedStack (thread_heaps.h)
  std::atomic<std::uint32_t> parked_ms{0};   // when it was parked last (platform now_ms)
  std::atomic<std::uint32_t> parked_seq{0};  // its place in the order of parkings (thread_heaps::park_seq_)
  std::uint32_t attached_seq = 0;            // park_seq_ when its thread attached it (owner-only)
  bool traded = true;  // owner-only: false while a thread that attached it on a free has not allocated yet
  std::uint32_t index = 0;                   // position in the heap storage
  thread_heaps<C>* home = nullptr;           // the engine part it belongs to
  typename C::stats st{};
  block_cache cache[kCachedClasses];  // classes with few blocks a span (block_cache.h)
  // Runs of this thread's freed large blocks, for its next ones (layer 4's
  // run_cache.h; filled and taken by the front end's large path). Its own
  // line: other threads write it only to flush it.
  run_cache runs;

  constexpr thread_heap() {
    for (auto& c : current) c = &g_empty_span;
    for (unsigned cls = 0; cls < kNumClasses; ++cls)
      if (unsigned i = kBlockCache.slot[cls]; i != block_cache_detail::kNone) {
        cache[i].front.cls = static_cast<std::uint8_t>(cls);
        cache[i].front.block_size = kClasses.size[cls];
        cache[i].front.capacity = kCacheFrontCapacity;  // its used count is no span's
        cache[i].front.low_mark = 0;
        cache[i].front.until_slow = 0;
        set_cache_limit(cache[i], kBlockCache.limit[cls]);
      }
  }
};

// What a thread knows of its engine's thread heaps: its heap (the empty heap
// until it attaches one), and whether the thread-exit hook already released
// it (then calls are served without a heap: see thread_heaps::alloc_slow).
template <class C>
struct thread_state {
  thread_heap<C>* current;
  bool released;
};

// The heap of a thread that has none yet (or whose heap was released at
// thread exit): every class points at g_empty_span, so its allocations take
// the slow path, which attaches a heap.
// Hidden: every library that contains an engine (libtenon.so, a user's
// composition over libtenon.a) has its own.
template <class C>
__attribute__((visibility("hidden"))) inline constinit thread_heap<C> g_empty_heap{};

// Each thread's state for the engines of config C. Initial-exec in every
// translation unit that reads it, not only in the core: a composition
// compiled elsewhere with -fPIC would otherwise reach it through
// __tls_get_addr on every malloc and free (11 instructions a pair).
template <class C>
__attribute__((visibility("hidden"))) inline constinit thread_local thread_state<C> t_thread
    __attribute__((tls_model("initial-exec"))) = {&g_empty_heap<C>, false};

// Hands out b, the head of s's free list: the one place a small block
// leaves its span or a block cache (the fast path here, the slow path's pop,
// a first-class heap's allocation), so that neither its link nor the free
// key (free_key.h) goes with it.
template <class C>
__attribute__((always_inline)) inline block* take_head(span* s, block* b) {
  s->free = C::links::next(b, s);
  b->next = nullptr;  // the link leaves no heap address in the fresh block (docs/security.md)
  second_word(b) = 0;  // nor the key, which a program could otherwise copy into a live block
  s->add_used(1);
  return b;
}

template <class C>
__attribute__((always_inline)) inline void* heap_alloc(thread_heaps<C>& home, std::size_t cls) {
  thread_heap<C>* h = t_thread<C>.current;
  span* s = h->current[cls];
  block* b = s->free;
  if (__builtin_expect(b != nullptr, 1)) {
    take_head<C>(s, b);
    TENON_CHECK(s->used() - kCurrentBias <= s->capacity);
    return b;
  }
  // A copy made here, on the slow path: without it the compiler loads the
  // class straight into the slow call's argument register and copies it for
  // the index on the fast path (callgrind: one instruction a malloc).
  std::size_t slow_cls = cls;
  asm("" : "+r"(slow_cls));
  return home.alloc_slow(h, static_cast<unsigned>(slow_cls));
}

// Pushes b, a block of a span this heap owns, on t, where the span's frees
// go (span::push_to: the span's local free list, or the heap's block cache
// of its class), with the free key (free_key.h) in its second word. The
// slow path is the span's (used < low_mark) or the cache's (past its bound).
// Returns whether it took the slow path (the inbox sort's run of one span
// ends there, remote.ipp, sort_run; the frees ignore it, at no cost).
template <class C>
__attribute__((always_inline)) inline bool push_local_free(thread_heaps<C>& home, thread_heap<C>* h, span* t, block* b,
                                                           std::uint64_t key) {
  TENON_CHECK((reinterpret_cast<std::uintptr_t>(b) & 7) == 0);
  TENON_CHECK(is_cache_front(t) ||
              (t->owner.load(std::memory_order_relaxed) == h && t->used() != 0 && t->used() != kCurrentBias));
  C::links::set_next(b, t->free, t);
  second_word(b) = key;
  t->free = b;
  if (__builtin_expect(--t->until_slow >= 0, 1)) return false;
  home.local_free_slow(h, t);  // used < low_mark
  return true;
}

// What a span must be for its owner's free of a block to be pushed: owned
// by h, with a block out, and its pushes going to itself or, for a class
// with a block cache, to h's cache of its class, the span never current
// (TENON_DEBUG).
template <class C>
bool pushes_where_it_should(const thread_heap<C>* h, const span* s) {
  if (s->owner.load(std::memory_order_relaxed) != h || s->used() == 0) return false;
  unsigned i = kBlockCache.slot[s->cls];
  if (i == block_cache_detail::kNone) return s->push_to == s;
  return s->push_to == &h->cache[i].front && s->state != span_state::current;
}

// realloc of p, a block of small span s that heap h owns (the thread heaps'
// realloc, engine_front; a first-class heap's, heaps.cpp): p must start a
// block s carved and must not be free. Kept in place, a freed block would
// be handed out again by the next malloc; an interior pointer would be
// taken for a block.
template <class C>
void check_realloc_own(thread_heap<C>*, span* s, void* p) {
  if (!s->starts_carved_block(p))
    report_misuse("realloc", p, "invalid pointer (not the start of a block)", s->block_size);
  if (second_word(static_cast<block*>(p)) == free_key()) report_misuse("realloc", p, "double free", s->block_size);
}

// The owner's free that found the key in b: b is free already, wherever it
// waits (free_key.h: its span's list, a block cache, a CPU's stack, another
// thread's batch or this heap's inbox, a span's remote list); also the
// remote free that found b at the head of its batch (remote_free.h).
// Tail-called, and noipa: GCC, seeing that it never returns, made the call
// no tail call and set up a stack frame on the free fast path (2
// instructions).
[[gnu::cold, gnu::noipa]] inline void report_keyed(const span* s, const block* b) {
  report_misuse("free", b, "double free", s->block_size);
}

// The owner's free of b, which starts no block this heap handed out from s:
// inside a block, or a slot not carved yet (or past the span's last block).
[[noreturn, gnu::cold, gnu::noinline]] inline void report_not_carved_block(const span* s, const block* b) {
  auto offset = static_cast<std::size_t>(reinterpret_cast<const char*>(b) - s->start);
  report_misuse("free", b,
                offset % s->block_size ? "invalid pointer (not the start of a block)"
                                       : "invalid pointer (never allocated)",
                s->block_size);
}

// A thread that does not own s freed b, which s's carved bound, read after
// b's second word (span::forget_carved), does not admit: a slot not carved
// yet or inside a block (as the owner's free reports them), or a block of a
// span released since, or of no span (the bound 0: a stale pointer, freed
// already, or one never handed out). Tail-called, noipa (report_keyed).
[[gnu::cold, gnu::noipa]] inline void report_not_carved_remote(const span* s, const block* b) {
  if (__atomic_load_n(&s->carved_limit, __ATOMIC_RELAXED) == 0)
    report_misuse("free", b, "invalid pointer (not in a block: never allocated or already freed)", 0);
  report_not_carved_block(s, b);
}

// A block of a span this heap owns goes back on the span's local free list,
// or, for a class with a block cache, on the heap's cache of its class
// (span::push_to: one push for both, no branch on the class; a branch taken
// at random in a program that mixes the two cost glibc-thread a mispredict
// every few frees). b is a multiple of 8 (the lookup that found s tested
// it: the chunk-table tag, or the irregular path, which reports free(p + 1)
// as glibc's alignment check does), and must start a block this heap
// carved: an aligned interior pointer, or one into the span's uncarved
// rest, would put memory a live block holds, or was never handed out, on
// the free list.
template <class C>
__attribute__((always_inline)) inline void free_to_own_span(thread_heaps<C>& home, thread_heap<C>* h, span* s, block* b) {
  // Before the invariant checks: a bad free is the program's error,
  // reported as such.
  if (__builtin_expect(!s->starts_carved_block(b), 0)) return report_not_carved_block(s, b);
  // A double free, immediate or delayed, finds the key that the first free
  // stored (free_key.h); it also covers the block that heads the list.
  std::uint64_t key = free_key();
  if (__builtin_expect(second_word(b) == key, 0)) return report_keyed(s, b);
  TENON_CHECK(pushes_where_it_should(h, s));
  push_local_free<C>(home, h, s->push_target(), b, key);
}

}  // namespace tenon
