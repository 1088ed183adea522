// Layer 9, front end: the layer over an engine instance E. Requests are
// routed by size on the way in (small classes to the thread heaps, then
// large runs, then huge mappings) and by the lookup layer on the way out
// (a chunk's span, a huge block, or a pointer tenon did not hand out).
// The fast paths are inline here, so that every composition over it
// (libtenon.so's exported names, the tenon_* functions, a user's layers)
// compiles them in with no call; the rest is in src/frontend/.
// tenon::default_allocator is engine_front<g_default_engine>.
#pragma once
#include <cstddef>
#include <type_traits>

#include "tenon/common/config.h"
#include "tenon/common/size_classes.h"
#include "tenon/engine/engine.h"
#include "tenon/heap/heap.h"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/tenon.h"

namespace tenon {

template <auto& E>
struct engine_front {
  using config = typename std::remove_reference_t<decltype(E)>::config;
  using heap_t = thread_heap<config>;

  // --- the layer (tenon::layer, with the realloc, alloc_zeroed and trim hooks)

  __attribute__((always_inline)) static void* alloc(std::size_t n) noexcept {
    // Most requests are at most 1 KiB: test that first, one table load.
    if (__builtin_expect(n <= 1024, 1)) return heap_alloc(E.heaps, small_class(n));
    if (n <= kMaxSmall) return heap_alloc(E.heaps, size_to_class(n));
    return alloc_big(n, 0, false);
  }

  // p's slice number serves both lookups (slice_index.h: one shift of p).
  __attribute__((always_inline)) static void dealloc(void* p) noexcept {
    std::uintptr_t tag = lookup::tag_of(p);
    lookup::numbered n = lookup::slice_number(p);
    if (__builtin_expect(lookup::is_regular_numbered(n, tag), 1)) {
      free_in_chunk(p, lookup::span_of_entry(n.entry, tag));
      return;
    }
    free_irregular(p);
  }

  // dealloc of p, a live block of chunk span s that the caller has looked
  // up already (lookup::is_regular(p), then lookup::span_of(p)): the same
  // free without a second lookup. The secure quarantine's way out
  // (secure/quarantine.hpp): its ring keeps the span found on the way in,
  // and the block, live for the engine while it waits, keeps its span.
  // A member template, so that the class's explicit instantiation (the
  // engine's .cpp) does not emit it into a build that never calls it.
  template <class Span = span>
  __attribute__((always_inline)) static void dealloc_in_span(void* p, Span* s) noexcept {
    free_in_chunk(p, s);
  }

  // A large block whose every usable page an outer quarantine closed
  // (`closed` bytes from p), freed: its run kept closed whole in the calling
  // thread's run cache (large_runs::free_closed), so that neither its way
  // out nor its run's next block opens more than that block's pages. False,
  // nothing done, for any other block (the caller opens it and frees it as
  // usual). A member template, as dealloc_in_span: emitted only where called.
  template <class Span = span>
  static bool dealloc_closed(void* p, std::size_t closed) noexcept;
  // The runs dealloc_closed kept, every thread's, back to the arena (opened):
  // before an outer quarantine's retry of an allocation Inner failed, so
  // that the retry can have them at any size. A member template likewise.
  template <class Span = span>
  static void release_closed_runs() noexcept {
    E.heaps.flush_run_caches(true);
  }

  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    if (align <= kMinAlign && (n >= kMinAlign || align <= 8)) return alloc(n);
    if (n <= kMaxSmall && align <= kMaxSmall) return alloc_aligned_small(n, align);
    return alloc_big(n, align, false);
  }

  static void* alloc_zeroed(std::size_t n) noexcept;
  static std::size_t usable_size(const void* p) noexcept;

  // A small block stays in place when the new size fits it and wastes less
  // than half; here for the owner's live blocks (a block start it carved,
  // without the free key), in realloc_in_chunk for everything else, which
  // first checks that p is a live block (a pointer into a block, or a freed
  // block kept in place, would be handed out twice). The span found here
  // goes with it: looked up again there and in the move's free, it cost
  // sqlite's moving reallocs 25 instructions each (docs/architecture.md).
  static void* realloc(void* p, std::size_t n) noexcept {
    if (n <= kMaxSmall && lookup::is_regular(p)) {
      span* s = lookup::span_of(p);
      if (s->kind == span_kind::small && n <= s->block_size && n >= s->block_size / 2 &&
          s->owner.load(std::memory_order_relaxed) == t_thread<config>.current && s->starts_carved_block(p) &&
          second_word(static_cast<block*>(p)) != free_key())
        return p;
      return realloc_in_chunk(p, n, s);
    }
    return realloc_slow(p, n);
  }

  static int trim(std::size_t pad) noexcept;
  // The statistics (the stats hook): 0, or EINVAL for a null pointer or an
  // unknown version (src/frontend/engine_stats.ipp).
  static int stats(tenon_stats* out) noexcept;

  // --- beyond the layer

  // 1 when p lies in memory tenon handed out as a block (docs/api.md says
  // exactly which pointers), else 0.
  static int owns(const void* p) noexcept;

  // Out of line (src/frontend/engine_front.ipp).
  static void* alloc_big(std::size_t n, std::size_t align, bool zero) noexcept;
  static void* alloc_aligned_small(std::size_t n, std::size_t align) noexcept;
  static void free_irregular(void* p) noexcept;  // NULL, huge, foreign, or a chunk off the fast table
  static void free_not_owned(span* s, void* p) noexcept;  // a block of a chunk, s not this thread's heap's
  static void* realloc_slow(void* p, std::size_t n) noexcept;
  static void* realloc_in_chunk(void* p, std::size_t n, span* s) noexcept;  // s: p's span, p in a chunk
  // a huge block no heap owns, taken (huge_take gave `old`)
  static void* realloc_huge(huge_header* h, void* p, std::size_t n, std::size_t old) noexcept;
  // The hook an outer layer that has taken a huge block hands it on by
  // (layer.hpp's realloc_taken: the secure canary, through the quarantine):
  // any huge block, taken (huge_take gave `old`), realloc'd to n and given
  // back whatever the answer (nullptr: ENOMEM, p live and unchanged).
  static void* realloc_taken(huge_header* h, void* p, std::size_t n, std::size_t old) noexcept;
  // p's `old` bytes copied to a new block of n, then p freed (nullptr:
  // ENOMEM, p untouched).
  static void* move_block(void* p, std::size_t n, std::size_t old) noexcept;

 private:
  // p is inside a chunk: free it into its span.
  // The thread's heap is only compared here (the owner that matched stands
  // for it, and free_not_owned reads it again), so that the compare takes it
  // straight from thread-local storage: loaded into a register for the slow
  // call, it cost an instruction a free.
  __attribute__((always_inline)) static void free_in_chunk(void* p, span* s) noexcept {
    void* owner = s->owner.load(std::memory_order_relaxed);
    if (__builtin_expect(owner == t_thread<config>.current, 1)) {
      free_to_own_span(E.heaps, static_cast<heap_t*>(owner), s, static_cast<block*>(p));
      return;
    }
    free_not_owned(s, p);
  }
};

}  // namespace tenon
