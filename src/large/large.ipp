// large_runs<C>: blocks of a slice run of their own.
#include <errno.h>

#include "tenon/large/large.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon {

namespace large_detail {
inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }
inline char* span_end(const span* s) { return s->start + (std::size_t{s->nslices} << kSliceShift); }
}  // namespace large_detail

template <class C>
void* large_runs<C>::alloc(std::size_t n, std::size_t align, bool* zeroed, chunk** hint, stats_t* st) {
  // Slices start 64 KiB aligned; a larger alignment needs slack in the run.
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  std::size_t nslices = (n + slack + kSliceSize - 1) >> kSliceShift;
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
  count(st, chunks_->shared_stats(), stat_large_allocs);
  *zeroed = s->zeroed;
  return p;
}

template <class C>
void large_runs<C>::free(span* s, void* p, stats_t* st) {
  std::uint64_t bit = std::uint64_t{1} << lookup::slice_of(p);
  bool taken = (chunk_of(p)->used.load(std::memory_order_relaxed) & bit) != 0;
  if (p != s->free) report_misuse("free", p, "invalid pointer (not the start of a block)", 0);
  if (!taken || s->used() != 1) report_misuse("free", p, "double free", s->large_usable);
  s->set_used(0);
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
  s->large_usable = large_detail::round_up(n, C::platform::page_size());
  return true;
}

}  // namespace tenon
