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

// Guarded configs (arena/guard_pages.h): a live large block is followed by an
// inaccessible page inside its run, so a linear overflow faults at the
// access. Each guard splits its chunk's mapping (two VMAs more), so at most
// kMaxLargeGuards live blocks have one (at most a quarter of Linux's default
// vm.max_map_count, 65530, whatever the program does); past that a block has
// none (the canary still finds the overflow at its free).
constexpr std::uint32_t kMaxLargeGuards = 8192;

template <class C>
std::atomic<std::uint32_t>& live_guards() {
  static constinit std::atomic<std::uint32_t> n{0};
  return n;
}

// The page after the block made inaccessible, if the budget allows.
template <class C>
void guard_after(span* s, char* p) {
  s->guarded = false;
  if (live_guards<C>().fetch_add(1, std::memory_order_relaxed) < kMaxLargeGuards &&
      C::platform::protect(p + s->large_usable, C::platform::page_size(), false)) {
    s->guarded = true;
    return;
  }
  live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
}

// The guard opened again before the run goes back to the arena.
template <class C>
void unguard(span* s, char* p) {
  if (!s->guarded) return;
  s->guarded = false;
  C::platform::protect(p + s->large_usable, C::platform::page_size(), true);
  live_guards<C>().fetch_sub(1, std::memory_order_relaxed);
}
}  // namespace large_detail

template <class C>
void* large_runs<C>::alloc(std::size_t n, std::size_t align, bool* zeroed, chunk** hint, stats_t* st) {
  // Slices start 64 KiB aligned; a larger alignment needs slack in the run.
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  std::size_t guard = has_guard_pages<C>() ? C::platform::page_size() : 0;  // room for the guard
  std::size_t nslices = (n + guard + slack + kSliceSize - 1) >> kSliceShift;
  span* s = chunks_->take_span(static_cast<unsigned>(nslices), hint, st);
  if (!s) {
    errno = ENOMEM;
    return nullptr;
  }
  s->kind = span_kind::large;
  s->owner.store(nullptr, std::memory_order_relaxed);
  s->remote.store(0, std::memory_order_relaxed);
  char* p = reinterpret_cast<char*>(
      large_detail::round_up(reinterpret_cast<std::uintptr_t>(s->start), align < kSliceSize ? kSliceSize : align));
  s->large_usable = large_detail::round_up(n, C::platform::page_size());
  chunks_->prefault(s, p, s->large_usable, n);
  // A large span has no free list: `free` keeps the block's pointer and
  // `used` says it is live, for the check on free (large_runs::check_free).
  s->free = reinterpret_cast<block*>(p);
  s->set_used(1);
  if constexpr (has_guard_pages<C>()) large_detail::guard_after<C>(s, p);
  count(st, chunks_->shared_stats(), stat_large_allocs);
  *zeroed = s->zeroed;
  // Slices a small span gave back may hold, where this block starts, a free
  // block's link and the free key: cleared, as take_head clears a small
  // block's (docs/security.md, "A fresh block's first words hold no heap
  // address"). Known-zero memory is left untouched.
  if (!s->zeroed) __builtin_memset(p, 0, 2 * sizeof(void*));
  return p;
}

template <class C>
void large_runs<C>::free(span* s, void* p, stats_t* st) {
  std::uint64_t bit = std::uint64_t{1} << lookup::slice_of(p);
  bool taken = (chunk_of(p)->used.load(std::memory_order_relaxed) & bit) != 0;
  if (p != s->free) report_misuse("free", p, "invalid pointer (not the start of a block)", 0);
  if (!taken || s->used() != 1) report_misuse("free", p, "double free", s->large_usable);
  s->set_used(0);
  if constexpr (has_guard_pages<C>()) large_detail::unguard<C>(s, static_cast<char*>(p));
  chunks_->release_span(s, st);
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
