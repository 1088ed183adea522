// Layer 6, large blocks (kMaxSmall < n <= kMaxLarge): a run of slices of its
// own, owned by no heap; freed from any thread straight back to the arena
// (one atomic fetch_and). Usable size is page-granular; its untouched pages
// cost nothing.
#pragma once
#include <cstddef>

#include "tenon/arena/arena.h"
#include "tenon/arena/guard_pages.h"
#include "tenon/span/span.h"

namespace tenon {

template <class C>
class large_runs {
 public:
  using stats_t = typename C::stats;

  constexpr explicit large_runs(arena<C>& chunks) : chunks_(&chunks) {}

  // A block of n bytes at a multiple of align (a power of two), from a run
  // of the calling thread's run cache `runs` (nullptr: none) or slices near
  // *hint. nullptr (errno ENOMEM) when memory cannot be had. *zeroed tells
  // whether the block is known to read as zeros (calloc skips its memset).
  void* alloc(std::size_t n, std::size_t align, bool* zeroed, chunk** hint, stats_t* st, run_cache* runs = nullptr);
  // Frees p, a pointer into span s: its run into the calling thread's run
  // cache `runs` if it fits there (the share of `heaps` attached heaps,
  // run_cache_budget), else back to the arena. Ends the program (report_misuse) unless p is s's block and it is
  // live: a second free of it finds `used` 0 or its slices no longer taken;
  // any other pointer is not s's block. Guarded configs cache no run here
  // (free_closed does: a cached run of theirs is closed whole).
  void free(span* s, void* p, stats_t* st, run_cache* runs = nullptr, std::uint32_t heaps = 0);
  // Guarded configs: frees p, whose `closed` bytes (all its usable pages) a
  // quarantine closed, as free does, keeping its run closed whole in `runs`
  // (its guards are closed already: the run is then one closed range, and
  // its next block opens its own pages only). False, nothing done, unless p
  // is a guarded block at its run's start and all its pages are closed.
  // Constrained: not emitted for other configs by the class's explicit
  // instantiation (libtenon.so stays as it was).
  bool free_closed(span* s, void* p, std::size_t closed, stats_t* st, run_cache& runs, std::uint32_t heaps)
    requires(has_guard_pages<C>());
  // Ends the program (report_misuse, naming `op`) unless p is s's block and
  // it is live: what free checks first, and realloc before it keeps or
  // copies the block.
  static void check_live(const span* s, const void* p, const char* op);
  // Bytes usable from p, a large block of span s.
  static std::size_t usable(const span* s, const void* p);
  // Resize in place within the span's slices; false if it does not fit.
  static bool resize(span* s, const void* p, std::size_t n);

 private:
  arena<C>* chunks_;
};

}  // namespace tenon
