// arena<C>: giving slice runs back, and the per-chunk cap on free slices
// that stay resident.
#include <bit>

#include "slice_bits.h"
#include "tenon/arena/arena.h"
#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/common/sync.h"

namespace tenon {

// The slices of a small span that its carving reached (3/4 of a slice or
// more), as chunk bits: carving wrote the blocks' first words and their
// users the blocks. None for a large block: its user may have written two
// bytes of it (mstress), and it says nothing of where.
inline std::uint64_t carved_slices(const span* s) {
  if (s->kind != span_kind::small) return 0;
  std::size_t carved = std::size_t{s->carved} * s->block_size;
  unsigned whole = static_cast<unsigned>((carved + kSliceSize / 4) >> kSliceShift);
  if (whole > s->nslices) whole = s->nslices;
  return whole ? slice_bits::run_mask(s->first_slice, whole) : 0;
}

// The slices that may hold a link or the free key once s is free, as chunk
// bits (chunk::linked). A small span's: those its carving reached at all
// (wherever a block was carved, its link and the key may stay after it). A
// large block's: all of them. Its memory is its program's, which may be a
// copy of memory that held free blocks (realloc copies a block whole, the
// words its user never wrote included, and so may the program), so the
// keys land on slices no small span wrote, at the same offsets in a slice:
// spans formed there handed out blocks unwritten with the key in their
// second word, whose first free was a false double free (freeze_probe
// --churn; FreshBlocks.ReallocCopyIntoALargeBlockLeavesNoKeyInAFreshBlock).
inline std::uint64_t linked_slices(const span* s) {
  if (s->kind != span_kind::small) return slice_bits::run_mask(s->first_slice, s->nslices);
  if (s->carved == 0) return 0;
  std::size_t carved = std::size_t{s->carved} * s->block_size;
  unsigned n = static_cast<unsigned>((carved + kSliceSize - 1) >> kSliceShift);
  return slice_bits::run_mask(s->first_slice, n < s->nslices ? n : s->nslices);
}

template <class C>
void arena<C>::release_span(span* s, stats_t* st, std::uint32_t idle_ms) {
  chunk* c = chunk_of(s);
  unsigned first = s->first_slice, n = s->nslices;
  std::uint64_t mask = slice_bits::run_mask(first, n);
  TENON_CHECK(n >= 1 && first >= 1 && first + n <= kSlicesPerChunk);
  TENON_CHECK((c->used.load(std::memory_order_relaxed) & mask) == mask);
  start_purger_before_release(n);
  std::uint32_t now = C::platform::now_ms();
  {
    [[maybe_unused]] section<typename C::sync, shared_structure::chunks> guard;
    for (unsigned i = first; i < first + n; ++i) c->dirty_ms[i].store(now - idle_ms, std::memory_order_relaxed);
    if (c->dirty.fetch_or(mask, std::memory_order_relaxed) == 0) mark_warm(c);
    if (std::uint64_t carved = carved_slices(s)) mark_dense(c, carved);
    if (std::uint64_t written = linked_slices(s)) c->linked.fetch_or(written, std::memory_order_relaxed);
    TENON_INJECT_POINT("chunk.release");
    // Release: the descriptor and dirty bits are written before the slices are
    // visible as free to the next taker (who acquires).
    c->used.fetch_and(~mask, std::memory_order_release);
  }
  count(st, shared_stats_, stat_spans_released);
  shared_stats_.hold(-static_cast<std::int64_t>(std::size_t{n} << kSliceShift));
  count_kept(n);
  mark_over_cap(c, mask, now);
  std::uint32_t next = next_purge_ms_.load(std::memory_order_relaxed);
  if (static_cast<std::int32_t>(now - next) >= 0) purge(false, st);
}

// Brings the next purge pass forward to `when` if it is due later: a CAS
// retry loop (a failure means another thread moved the time).
template <class C>
void arena<C>::purge_due_by(std::uint32_t when) {
  std::uint32_t next = next_purge_ms_.load(std::memory_order_relaxed);
  while (static_cast<std::int32_t>(next - when) > 0 &&
         !next_purge_ms_.compare_exchange_weak(next, when, std::memory_order_relaxed)) {
  }
}

// Keep at most kMaxDirtyPerChunk free-but-resident slices in a chunk: past
// that, the oldest of those free for kDirtyGraceMs are marked for the purge
// pass (younger ones wait for a later release in this chunk or for the
// delay). Dirty slices are reused first, but a run that does not fit the
// next request stays resident: without the cap a program's peak RSS creeps
// up to its peak address space (mstress: 618 slices in use at peak, all of
// them resident). Marked, not purged here: purged by each release that left
// a chunk over the cap, the system call (and its TLB shootdown) was the free
// path's tail (architecture.md, layer 4). The pass runs as soon as
// kMaxMarkedSlices are marked, so one over-cap release in that many pays,
// for every chunk's marks, adjacent slices in one call. The run just
// released (`keep`) is never marked: a loop that frees and reallocates a
// 2 MiB block would otherwise fault it in every time (15x glibc's time on
// thread-chunks before this exemption). Memory kept resident for reuse (a
// sizeable run, or a chunk over its cap with young slices) starts the
// background purger, which gives it back on time if the program goes idle;
// so does 1 MiB kept in all (kept_slices_): a few slices in each of many
// chunks, every chunk under its cap, no run of 1 MiB (an idle program kept
// them resident for good before, found outside the tests, 2026-11-27).
template <class C>
void arena<C>::mark_over_cap(chunk* c, std::uint64_t keep, std::uint32_t now) {
  std::uint64_t free_dirty = c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed);
  unsigned resident = static_cast<unsigned>(slice_bits::count(free_dirty));
  std::uint64_t marks = 0;
  if (resident > kMaxDirtyPerChunk) {
    marks = oldest_past_grace(c, free_dirty & ~keep, resident - kMaxDirtyPerChunk, now);
    std::uint64_t fresh = marks & ~c->trim.fetch_or(marks, std::memory_order_relaxed);
    auto n = static_cast<std::uint32_t>(slice_bits::count(fresh));
    if (n && marked_.fetch_add(n, std::memory_order_relaxed) + n >= kMaxMarkedSlices) purge_due_by(now);
  }
  if (slice_bits::count(keep) >= kPurgerStartSlices ||
      resident - static_cast<unsigned>(slice_bits::count(marks)) > kMaxDirtyPerChunk ||
      kept_slices_.load(std::memory_order_relaxed) >= static_cast<std::int64_t>(kPurgerStartSlices))
    note_retained();
}

// The pass's part of the cap: purge the chunk's marked slices that are still
// free and resident, oldest first, as many as the chunk is still over its
// cap (takers may have reused others since) and only past the grace (one
// taken and freed again since its mark is young), adjacent ones in one call.
template <class C>
void arena<C>::trim_marked(chunk* c, std::uint32_t now, stats_t* st) {
  if (!c->trim.load(std::memory_order_relaxed)) return;
  std::uint64_t marks = c->trim.exchange(0, std::memory_order_relaxed);
  std::uint64_t free_dirty = c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed);
  unsigned resident = static_cast<unsigned>(slice_bits::count(free_dirty));
  if (resident <= kMaxDirtyPerChunk) return;
  marks = oldest_past_grace(c, marks & free_dirty, resident - kMaxDirtyPerChunk, now);
  while (marks) {
    unsigned first = static_cast<unsigned>(std::countr_zero(marks));
    unsigned n = static_cast<unsigned>(std::countr_one(marks >> first));
    marks &= ~slice_bits::run_mask(first, n);
    purge_run(c, first, n, st);  // a slice taken meanwhile is the taker's now
  }
}

// Up to `want` of the slices in `candidates`, oldest first, that have been
// free for at least kDirtyGraceMs (a bulk free about to be refilled keeps
// its younger ones).
template <class C>
std::uint64_t arena<C>::oldest_past_grace(chunk* c, std::uint64_t candidates, unsigned want, std::uint32_t now) {
  std::uint64_t picked = 0;
  for (; want; --want) {
    unsigned oldest = 0;
    std::uint32_t oldest_age = 0;
    bool found = false;
    for (std::uint64_t d = candidates & ~picked; d; d &= d - 1) {
      unsigned i = static_cast<unsigned>(std::countr_zero(d));
      std::uint32_t age = now - c->dirty_ms[i].load(std::memory_order_relaxed);
      if (age >= kDirtyGraceMs && (!found || age > oldest_age)) {
        oldest_age = age;
        oldest = i;
        found = true;
      }
    }
    if (!found) break;
    picked |= std::uint64_t{1} << oldest;
  }
  return picked;
}

}  // namespace tenon
