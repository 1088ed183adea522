// large_runs<C>: blocks of a slice run of their own.
#include <errno.h>

#include "tenon/arena/guard_pages.h"
#include "tenon/large/large.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon {

namespace large_detail {
inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }
inline char* span_end(const span* s) { return s->start + (std::size_t{s->nslices} << kSliceShift); }

// Guarded configs (arena/guard_pages.h): a live large block's run is
// inaccessible but for the block's own pages: before it (the block starts
// one page into the run, or its alignment's offset: an underflow faults at
// the access) and after its usable bytes to the run's end (an overflow
// does). Since 2026-11-29 (branch secrow) the guards are those whole ranges,
// not a page each: in the same two calls, and a run whose block a quarantine
// closed is then closed whole, so that the run cache keeps it so (free_closed)
// and its next block opens its own pages in one call, where the block's way
// out and in took four (docs/security.md, "What the checks cost"). Each guard
// splits its chunk's mapping: a guarded block adds up to four VMAs (fewer
// where a neighbouring run's guard is adjacent and the kernel merges them),
// so at most kMaxLargeGuards live blocks have guards (16,384 VMAs, a quarter
// of Linux's default vm.max_map_count, 65530, whatever the program does);
// past that a block has none (the canary still finds an overflow or an
// underflow at its free).
constexpr std::uint32_t kMaxLargeGuards = 4096;

template <class C>
std::atomic<std::uint32_t>& live_guards() {
  static constinit std::atomic<std::uint32_t> n{0};
  return n;
}

// The bytes of a guarded block's run that are closed: all but the block's.
inline std::size_t guarded_bytes(const span* s) {
  return (std::size_t{s->nslices} << kSliceShift) - s->large_usable;
}

// The run before and after the block made inaccessible, if the budget
// allows (both, or neither: a refused mprotect opens the other again). If
// the kernel refuses that opening too (RLIMIT_DATA, the share the closed
// pages lent taken meanwhile), the block counts as guarded: its free opens
// both, or keeps the run for good (unguard), so that no block is ever
// carved over a closed page (until 2026-11-27 the run went back to the
// arena with it: preload.protect_refused).
template <class C>
void guard_block(span* s, char* p) {
  s->guarded = false;
  char* tail = p + s->large_usable;
  auto lead = static_cast<std::size_t>(p - s->start);
  if (live_guards<C>().fetch_add(1, std::memory_order_relaxed) < kMaxLargeGuards) {
    if (C::platform::protect(s->start, lead, false)) {
      if (C::platform::protect(tail, static_cast<std::size_t>(span_end(s) - tail), false) ||
          !C::platform::protect(s->start, lead, true)) {
        s->guarded = true;
        C::platform::owe_reopening(static_cast<std::ptrdiff_t>(guarded_bytes(s)));
        return;
      }
    }
  }
  live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
}

// A run from the run cache, closed whole (free_closed): its block's pages
// opened, the rest of the run its guards, one call. Past the guards' budget
// the whole run is opened instead (a block with no guard). False if the
// kernel refused: the run stays closed and taken for good (a leak of its
// size, never a block over closed pages).
template <class C>
bool open_cached(span* s, char* p, std::size_t usable) {
  s->large_usable = usable;
  s->guarded = false;
  if (live_guards<C>().fetch_add(1, std::memory_order_relaxed) < kMaxLargeGuards) {
    if (C::platform::protect(p, usable, true)) {
      s->guarded = true;
      C::platform::owe_reopening(-static_cast<std::ptrdiff_t>(usable));
      return true;
    }
  }
  live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
  return open_closed_run<C>(s);
}

// The guards opened again before the run goes back to the arena: the whole
// run in one call (the kernel skips the block's own mappings, already open:
// it changes only the guards). False if the kernel refused: making a page
// writable again counts against RLIMIT_DATA (the closed page had given its
// share to whatever came next), and splitting or merging a mapping against
// vm.max_map_count. A run with a closed page left inside must not be
// reused: the next block there would fault at the access
// (preload.data_limit).
//
// Not also the quarantine's closed pages of the block (free_closed keeps
// such a run closed in the run cache; where it cannot, the quarantine opens
// them before the block reaches here): tried, one call fewer a large block,
// but at RLIMIT_DATA a call refused halfway leaked runs in other places, and
// preload.data_limit's case 40000 then 300000 found no 300000 block in its
// third round in 7 runs of 12.
template <class C>
bool unguard(span* s) {
  if (!s->guarded) return true;
  s->guarded = false;
  std::size_t closed = guarded_bytes(s);
  bool opened = C::platform::protect(s->start, std::size_t{s->nslices} << kSliceShift, true);
  C::platform::owe_reopening(-static_cast<std::ptrdiff_t>(closed));  // opened, or given up with the run
  live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
  return opened;
}
}  // namespace large_detail

template <class C>
void* large_runs<C>::alloc(std::size_t n, std::size_t align, bool* zeroed, chunk** hint, stats_t* st,
                           run_cache* runs) {
  // Slices start 64 KiB aligned; a larger alignment needs slack in the run.
  // A guarded config's block starts past a guard page, at a multiple of the
  // alignment (of the page at least): at most max(page, align) into the
  // run; its other guard follows the block.
  std::size_t page = C::platform::page_size();
  std::size_t lead = align > kSliceSize ? align - kSliceSize : 0;
  if constexpr (has_guard_pages<C>()) lead = align > page ? align : page;
  std::size_t guard = has_guard_pages<C>() ? page : 0;  // room for the guard after it
  std::size_t nslices = (n + guard + lead + kSliceSize - 1) >> kSliceShift;
  span* s = nullptr;
  if constexpr (!has_guard_pages<C>()) {
    if (runs && nslices <= kRunCacheMaxRunSlices) s = chunks_->take_cached(*runs, static_cast<unsigned>(nslices));
  } else if (runs && align <= page && nslices <= kRunCacheMaxRunSlices) {
    // A guarded config's cached run is closed whole (free_closed): its
    // block's pages opened, or the run kept for good if that is refused.
    s = chunks_->take_cached(*runs, static_cast<unsigned>(nslices));
    if (s && !large_detail::open_cached<C>(s, s->start + page, large_detail::round_up(n, page))) s = nullptr;
  }
  bool cached = s != nullptr;
  if (!s) s = chunks_->take_span(static_cast<unsigned>(nslices), hint, st);
  if (!s) {
    errno = ENOMEM;
    return nullptr;
  }
  s->kind = span_kind::large;
  s->owner.store(nullptr, std::memory_order_relaxed);
  s->remote.store(0, std::memory_order_relaxed);
  char* p;
  if constexpr (has_guard_pages<C>())
    p = reinterpret_cast<char*>(
        large_detail::round_up(reinterpret_cast<std::uintptr_t>(s->start) + page, align > page ? align : page));
  else
    p = reinterpret_cast<char*>(
        large_detail::round_up(reinterpret_cast<std::uintptr_t>(s->start), align < kSliceSize ? kSliceSize : align));
  s->large_usable = large_detail::round_up(n, page);
  chunks_->prefault(s, p, s->large_usable, n);
  // A large span has no free list: `free` keeps the block's pointer and
  // `used` says it is live, for the check on free (large_runs::check_free).
  s->free = reinterpret_cast<block*>(p);
  s->set_used(1);
  if constexpr (has_guard_pages<C>())
    if (!cached) large_detail::guard_block<C>(s, p);
  count(st, chunks_->shared_stats(), stat_large_allocs);
  *zeroed = s->zeroed;
  // Slices a small span gave back may hold, where this block starts, a free
  // block's link and the free key: cleared, as take_head clears a small
  // block's (docs/security.md, "A fresh block's first words hold no heap
  // address"). Known-zero memory is left untouched, and so is a cached run
  // at its start: only a block that began there is cached (free, below),
  // and what its first words hold since this clear is its user's data. The
  // store was a cold line's miss in malloc (architecture.md, layer 6); the
  // program's own first write now takes it.
  if (!s->zeroed && !(cached && p == s->start)) __builtin_memset(p, 0, 2 * sizeof(void*));
  return p;
}

// Always in line, as it was written in free before realloc shared it: out of
// line, GCC's inlining in the secure unit moved (its malloc(32)+free pair
// 273.35 -> 283.35 instructions).
template <class C>
__attribute__((always_inline)) inline void large_runs<C>::check_live(const span* s, const void* p, const char* op) {
  std::uint64_t bit = std::uint64_t{1} << lookup::slice_of(p);
  bool taken = (chunk_of(p)->used.load(std::memory_order_relaxed) & bit) != 0;
  if (p != s->free) report_misuse(op, p, "invalid pointer (not the start of a block)", 0);
  if (!taken || s->used_any_thread() != 1) report_misuse(op, p, "double free", s->large_usable);
}

template <class C>
void large_runs<C>::free(span* s, void* p, stats_t* st, run_cache* runs, std::uint32_t heaps) {
  check_live(s, p, "free");
  // Two frees of p racing both pass the check above (a CAS, not a store:
  // each used to keep the run in its own thread's run cache, and the next
  // large malloc on each handed out p: LargeRaceDeathTest). The one that
  // loses finds 0 and reports.
  if (!s->take_only_block_back()) report_misuse("free", p, "double free", s->large_usable);
  if constexpr (has_guard_pages<C>()) {
    // A guard that would not open: the run stays taken for good (its slices'
    // `used` bits set, never released), a leak of at most 2 MiB rather than a
    // block that faults. A second free of p is still a double free (used 0).
    if (!large_detail::unguard<C>(s)) return;
  } else if (runs && p == s->start && s->nslices <= kRunCacheMaxRunSlices &&
             chunks_->keep_cached(*runs, s, run_cache_budget(heaps))) {
    return;  // still taken: a second free of p finds `used` 0
  }
  chunks_->release_span(s, st);
}

template <class C>
bool large_runs<C>::free_closed(span* s, void* p, std::size_t closed, stats_t* st, run_cache& runs,
                                std::uint32_t heaps)
  requires(has_guard_pages<C>())
{
  if (!s->guarded || static_cast<char*>(p) != s->start + C::platform::page_size() || closed != s->large_usable)
    return false;
  check_live(s, p, "free");
  if (!s->take_only_block_back()) report_misuse("free", p, "double free", s->large_usable);
  // The quarantine's mark (span.h) cleared once `used` says freed, before
  // the run can reach anyone else: a second free reads one or the other,
  // never the closed header.
  s->waits_in_quarantine.store(false, std::memory_order_relaxed);
  s->guarded = false;
  large_detail::live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
  C::platform::owe_reopening(static_cast<std::ptrdiff_t>(closed));  // the run is closed whole now
  if (chunks_->keep_cached(runs, s, run_cache_budget(heaps))) return true;
  if (open_closed_run<C>(s)) chunks_->release_span(s, st);
  return true;
}

template <class C>
std::size_t large_runs<C>::usable(const span* s, const void* p) {
  std::size_t room = static_cast<std::size_t>(large_detail::span_end(s) - static_cast<const char*>(p));
  return s->large_usable < room ? s->large_usable : room;
}

template <class C>
bool large_runs<C>::resize(span* s, const void* p, std::size_t n) {
  std::size_t room = static_cast<std::size_t>(large_detail::span_end(s) - static_cast<const char*>(p));
  if (n > room) return false;
  if constexpr (has_guard_pages<C>())
    if (s->guarded) return false;  // the guard sits where the block would grow
  s->large_usable = large_detail::round_up(n, C::platform::page_size());
  return true;
}

}  // namespace tenon
