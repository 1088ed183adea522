// arena<C>: the purge pass, which gives back to the OS the pages of slices
// free for longer than TENON_PURGE_DELAY_MS and of those the dirty cap marked.
#include <bit>

#include "slice_bits.h"
#include "tenon/arena/arena.h"
#include "tenon/common/inject.h"
#include "tenon/platform/options.h"

namespace tenon {

// Purge one free slice whose pages are resident: claim it like an allocation
// (CAS its used bit), drop its pages, give it back. False if it was taken.
template <class C>
bool arena<C>::purge_slice(chunk* c, unsigned i, stats_t* st) {
  return purge_run(c, i, 1, st) != 0;
}

// The same for the free run [first, first + n), in one system call: claimed
// whole or not at all (a slice of it taken meanwhile is the taker's; the run
// is then left to a later pass). The number of dirty slices purged.
template <class C>
unsigned arena<C>::purge_run(chunk* c, unsigned first, unsigned n, stats_t* st) {
  std::uint64_t mask = slice_bits::run_mask(first, n);
  std::uint64_t used = c->used.load(std::memory_order_relaxed);
  for (;;) {
    if (used & mask) return 0;
    if (c->used.compare_exchange_weak(used, used | mask, std::memory_order_acquire, std::memory_order_relaxed)) break;
    count(st, shared_stats_, stat_retry_chunk_bitmap);  // other slices of the chunk moved: try again
  }
  TENON_INJECT_POINT("chunk.purge");
  unsigned done = 0;
  std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed) & mask;
  if (dirty) before_purge(c);
  if (dirty && C::platform::purge(reinterpret_cast<char*>(c) + (std::size_t{first} << kSliceShift),
                                  std::size_t{n} << kSliceShift)) {
    if (!(c->dirty.fetch_and(~dirty, std::memory_order_relaxed) & ~dirty)) unmark_warm(c);
    clear_dense(c, mask);
    c->linked.fetch_and(~mask, std::memory_order_relaxed);  // zero again
    done = static_cast<unsigned>(std::popcount(dirty));
    count_kept(-static_cast<std::int64_t>(done));
    count(st, shared_stats_, stat_purges);  // one run, one system call
  }
  c->used.fetch_and(~mask, std::memory_order_release);
  return done;
}

// Milliseconds until the next purge pass is due (0 if it is due now).
template <class C>
std::uint32_t arena<C>::ms_until_purge_due() {
  auto left = static_cast<std::int32_t>(next_purge_ms_.load(std::memory_order_relaxed) - C::platform::now_ms());
  return left > 0 ? static_cast<std::uint32_t>(left) : 0;
}

template <class C>
bool arena<C>::purge(bool force, stats_t* st) {
  std::uint32_t now = C::platform::now_ms();
  std::uint32_t delay = options().purge_delay_ms;
  std::uint32_t next = next_purge_ms_.load(std::memory_order_relaxed);
  if (!force) {
    // One purger at a time; whoever loses the CAS just goes on.
    if (static_cast<std::int32_t>(now - next) < 0) return false;
    if (!next_purge_ms_.compare_exchange_strong(next, now + (delay ? delay / 2 + 1 : 1), std::memory_order_relaxed))
      return false;
  }
  bool any = false;
  marked_.store(0, std::memory_order_relaxed);  // this pass purges them (marks made meanwhile count again)
  std::uint32_t n = nchunks_.load(std::memory_order_acquire);
  if (n > kMaxChunks) n = kMaxChunks;
  for (std::uint32_t idx = 0; idx < n; ++idx) {
    chunk* c = registered(idx);
    if (!c) continue;
    std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
    while (dirty) {
      unsigned i = static_cast<unsigned>(std::countr_zero(dirty));
      dirty &= dirty - 1;
      if (!force && now - c->dirty_ms[i].load(std::memory_order_relaxed) < delay) continue;
      // Claimed as if allocated while its pages drop: nobody takes it meanwhile.
      if (purge_slice(c, i, st)) any = true;
    }
    trim_marked(c, now, st);  // after the delay's: a forced pass has none left
  }
  if (hook_ && hook_(hook_context_)) any = true;
  return any;
}

}  // namespace tenon
