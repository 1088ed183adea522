#include "tenon/large/large.h"

#include <errno.h>

#include "tenon/arena/chunk.h"
#include "tenon/heap/heap.h"
#include "tenon/platform/os.h"

namespace tenon {

namespace {
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }
char* span_end(const span* s) { return s->start + (std::size_t{s->nslices} << kSliceShift); }
}  // namespace

void* large_alloc(std::size_t n, std::size_t align, bool* zeroed) {
  // Slices start 64 KiB aligned; a larger alignment needs slack in the run.
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  std::size_t nslices = (n + slack + kSliceSize - 1) >> kSliceShift;
  heap* h = t_heap;
  chunk* local_hint = nullptr;
  bool has_heap = h != &g_empty_heap;
  stats* st = has_heap ? &h->st : nullptr;
  span* s = arena::take_span(static_cast<unsigned>(nslices), has_heap ? &h->chunk_hint : &local_hint, st);
  if (!s) {
    errno = ENOMEM;
    return nullptr;
  }
  s->kind = span_kind::large;
  s->owner.store(nullptr, std::memory_order_relaxed);
  s->remote.store(0, std::memory_order_relaxed);
  char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(s->start), align < kSliceSize ? kSliceSize : align));
  s->large_usable = round_up(n, os::page_size());
  if (st) st->add(stat_large_allocs);
  *zeroed = s->zeroed;
  return p;
}

void large_free(span* s, stats* st) { arena::release_span(s, st); }

std::size_t large_usable(const span* s, const void* p) {
  std::size_t room = static_cast<std::size_t>(span_end(s) - static_cast<const char*>(p));
  return s->large_usable < room ? s->large_usable : room;
}

bool large_resize(span* s, const void* p, std::size_t n) {
  std::size_t room = static_cast<std::size_t>(span_end(s) - static_cast<const char*>(p));
  if (n > room) return false;
  s->large_usable = round_up(n, os::page_size());
  return true;
}

}  // namespace tenon
