// arena<C>: giving slice runs back, and the per-chunk cap on free slices
// that stay resident.
#include <bit>

#include "slice_bits.h"
#include "tenon/arena/arena.h"
#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/common/sync.h"

namespace tenon {

template <class C>
void arena<C>::release_span(span* s, stats_t* st) {
  chunk* c = chunk_of(s);
  unsigned first = s->first_slice, n = s->nslices;
  std::uint64_t mask = slice_bits::run_mask(first, n);
  TENON_CHECK(n >= 1 && first >= 1 && first + n <= kSlicesPerChunk);
  TENON_CHECK((c->used.load(std::memory_order_relaxed) & mask) == mask);
  std::uint32_t now = C::platform::now_ms();
  {
    [[maybe_unused]] section<typename C::sync, shared_structure::chunks> guard;
    for (unsigned i = first; i < first + n; ++i) c->dirty_ms[i].store(now, std::memory_order_relaxed);
    c->dirty.fetch_or(mask, std::memory_order_relaxed);
    TENON_INJECT_POINT("chunk.release");
    // Release: the descriptor and dirty bits are written before the slices are
    // visible as free to the next taker (who acquires).
    c->used.fetch_and(~mask, std::memory_order_release);
  }
  count(st, shared_stats_, stat_spans_released);
  shared_stats_.hold(-static_cast<std::int64_t>(std::size_t{n} << kSliceShift));
  trim_chunk(c, mask, st);
  // Memory now kept resident for reuse: the background purger gives it back
  // on time if the program goes idle. Only for a sizeable run, or a chunk the
  // cap below could not bring down (its free slices are all young).
  if (n >= kPurgerStartSlices ||
      std::popcount(c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed)) >
          static_cast<int>(kMaxDirtyPerChunk))
    note_retained();
  std::uint32_t next = next_purge_ms_.load(std::memory_order_relaxed);
  if (static_cast<std::int32_t>(now - next) >= 0) purge(false, st);
}

// Keep at most kMaxDirtyPerChunk free-but-resident slices in a chunk: past
// that, the oldest are purged now rather than after the delay, once they have
// been free for kDirtyGraceMs (younger ones wait for a later release in this
// chunk or for the purge pass). Dirty slices are reused first, so a
// program's peak RSS otherwise creeps up to its peak address space (mstress:
// 618 slices in use at peak, all of them resident). The run just released
// (`keep`) is never purged here: a loop that frees and reallocates a 2 MiB
// block would otherwise fault it in every time (15x glibc's time on
// thread-chunks before this exemption).
template <class C>
void arena<C>::trim_chunk(chunk* c, std::uint64_t keep, stats_t* st) {
  std::uint32_t now = C::platform::now_ms();
  for (;;) {
    std::uint64_t free_dirty = c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed);
    if (static_cast<unsigned>(std::popcount(free_dirty)) <= kMaxDirtyPerChunk) return;
    free_dirty &= ~keep;
    if (!free_dirty) return;
    unsigned oldest = 0;
    std::uint32_t oldest_age = 0;
    for (std::uint64_t d = free_dirty; d; d &= d - 1) {
      unsigned i = static_cast<unsigned>(std::countr_zero(d));
      std::uint32_t age = now - c->dirty_ms[i].load(std::memory_order_relaxed);
      if (age >= oldest_age) {
        oldest_age = age;
        oldest = i;
      }
    }
    if (oldest_age < kDirtyGraceMs) return;   // all younger: a bulk free about to be refilled keeps them
    if (!purge_slice(c, oldest, st)) return;  // raced with a taker: it is theirs now
  }
}

}  // namespace tenon
