// arena<C>: the thread heaps' caches of freed runs (tenon/arena/run_cache.h).
// The owner's take and keep touch only the cache's own line (and the run's
// descriptor); a run goes back through release_span only when it does not
// fit, or when a flush (malloc_trim, thread exit, the purge pass's expiry)
// takes it out.
#include "tenon/arena/arena.h"
#include "tenon/arena/guard_pages.h"
#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/platform/options.h"

namespace tenon {

template <class C>
span* arena<C>::take_cached(run_cache& rc, unsigned nslices) {
  for (auto& slot : rc.slot) {
    std::uintptr_t w = slot.load(std::memory_order_relaxed);
    // A failed CAS means a flush took the run or the pass aged it: look again.
    while (w && run_cache::slices(w) == nslices) {
      TENON_INJECT_POINT("runs.take");
      if (slot.compare_exchange_weak(w, 0, std::memory_order_acquire, std::memory_order_relaxed)) {
        count_kept(-static_cast<std::int64_t>(nslices));
        return run_cache::span_in(w);
      }
    }
  }
  return nullptr;
}

// Only the owner fills an empty slot, and other threads only ever empty a
// full one or age it: a release store is enough (the descriptor's fields
// written before it are seen by a flusher that takes the run).
template <class C>
bool arena<C>::keep_cached(run_cache& rc, span* s, unsigned budget) {
  unsigned n = s->nslices, held = 0;
  if (n > kRunCacheMaxRunSlices || n > budget) return false;
  std::atomic<std::uintptr_t>* empty = nullptr;
  for (auto& slot : rc.slot) {
    std::uintptr_t w = slot.load(std::memory_order_relaxed);
    if (w) {
      held += run_cache::slices(w);
    } else if (!empty) {
      empty = &slot;
    }
  }
  if (!empty || held + n > budget) return false;
  TENON_CHECK((chunk_of(s)->used.load(std::memory_order_relaxed) & (std::uint64_t{1} << s->first_slice)) != 0);
  // Its last user wrote it: neither zero nor fresh for the next one.
  s->zeroed = false;
  s->some_clean = false;
  empty->store(run_cache::make(s), std::memory_order_release);
  // Kept resident for reuse, as a release would have: counts towards the
  // lazy start of the background purger, which expires it if the program
  // goes idle (one relaxed load once the purger started or cannot start).
  if (may_count_kept()) {
    count_kept(n);
    if (kept_slices_.load(std::memory_order_relaxed) >= static_cast<std::int64_t>(kPurgerStartSlices)) note_retained();
  }
  return true;
}

template <class C>
void arena<C>::flush_cached(run_cache& rc, bool all, stats_t* st) {
  // A run aged by the pass before this one has waited at least one pass
  // period: its slices count as free since then, so the pass after this one
  // purges them if nobody takes them (the delay's promise, t + 1.5 x delay).
  std::uint32_t delay = options().purge_delay_ms;
  std::uint32_t idle = all ? 0 : delay / 2 + 1;
  for (auto& slot : rc.slot) {
    std::uintptr_t w = slot.load(std::memory_order_relaxed);
    if (!w) continue;
    if (all) {
      w = slot.exchange(0, std::memory_order_acquire);  // whatever is there now, aged or not
      if (!w) continue;
    } else if (!(w & run_cache::kAged)) {
      // Lost to the owner's take or another flush: that run is not idle.
      slot.compare_exchange_strong(w, w | run_cache::kAged, std::memory_order_relaxed);
      continue;
    } else if (!slot.compare_exchange_strong(w, 0, std::memory_order_acquire, std::memory_order_relaxed)) {
      continue;  // taken by its owner (or reused and cached again: not idle)
    }
    // Ours alone now: a flusher stopped here forever leaks this run only.
    TENON_INJECT_POINT("runs.flush");
    count_kept(-static_cast<std::int64_t>(run_cache::slices(w)));  // release_span counts them again
    // A guarded config's cached run is closed whole (large.ipp, free_closed).
    if constexpr (has_guard_pages<C>())
      if (!open_closed_run<C>(run_cache::span_in(w))) continue;
    release_span(run_cache::span_in(w), st, idle);
  }
}

}  // namespace tenon
