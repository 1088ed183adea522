// The front end's out-of-line paths: big and aligned requests, frees that are
// not into a chunk, realloc, usable size, trim; foreign pointers go to
// foreign.cpp.
#include <stdint.h>

#include "arena/chunk.h"
#include "frontend/alloc_api.h"
#include "frontend/foreign.h"
#include "platform/os.h"

namespace tenon::api {

void* alloc_big(std::size_t n, std::size_t align, bool zero) {
  bool zeroed = false;
  void* p;
  if (n > PTRDIFF_MAX) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n == 0) n = 1;  // aligned_alloc(big alignment, 0): still a real, unique block
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  if (n + slack <= kMaxLarge && align < kChunkSize)
    p = large_alloc(n, align, &zeroed);
  else
    p = huge_alloc(n, align, &zeroed);
  if (p && zero && !zeroed) memset(p, 0, n);
  return p;
}

// A class whose block size is a multiple of the alignment gives aligned
// blocks, since spans start on 64 KiB boundaries.
void* alloc_aligned_small(std::size_t n, std::size_t align) {
  for (unsigned c = size_to_class(n < align ? align : n); c < kNumClasses; ++c)
    if (kClasses.size[c] % align == 0) return heap_alloc(c);
  return alloc_big(n, align, false);
}

void free_irregular(void* p) {
  if (!p) return;
  if (huge_header* h = huge_lookup(p)) {
    huge_free(h);
    return;
  }
  if (lookup::test(lookup::g_huge_near, lookup::unit_of(p)) || lookup::test(lookup::g_huge_far, lookup::unit_of(p)))
    return;  // an interior pointer of a huge block: invalid; ignored
  foreign_free(p);
}

std::size_t usable_size(const void* p) {
  if (!p) return 0;
  if (lookup::is_regular(p)) {
    const span* s = span_of(p);
    return s->kind == span_kind::small ? s->block_size : large_usable(s, p);
  }
  if (huge_header* h = huge_lookup(p)) return h->usable;
  return foreign_usable_size(p);
}

void* realloc_slow(void* p, std::size_t n) {
  if (n > PTRDIFF_MAX) {  // no block can be that big; p stays as it is
    errno = ENOMEM;
    return nullptr;
  }
  if (n == 0) {
    // Free p and return a unique minimal block, like malloc(0).
    dealloc(p);
    return alloc(0);
  }
  std::size_t old;
  if (lookup::is_regular(p)) {
    span* s = span_of(p);
    if (s->kind == span_kind::large) {
      // Stay in place when the new size still fits the run and wastes < 3/4.
      std::size_t room = large_usable(s, p);
      if (n > kMaxSmall && n >= room / 4 && large_resize(s, p, n)) return p;
      old = room;
    } else {
      old = s->block_size;
    }
  } else if (huge_header* h = huge_lookup(p)) {
    if (n > kMaxLarge) {
      if (void* q = huge_resize(h, n)) return q;
    }
    old = h->usable;
  } else {
    return foreign_realloc(p, n);
  }
  void* q = alloc(n);
  if (!q) return nullptr;  // errno is ENOMEM; p is untouched
  memcpy(q, p, old < n ? old : n);
  dealloc(p);
  return q;
}

int trim() {
  if (t_heap != &g_empty_heap) heap_flush_remote(t_heap);
  bool a = arena::purge(true, nullptr);
  bool b = huge_cache_flush();
  return a || b;
}

int owns(const void* p) {
  if (!p) return 0;
  if (lookup::is_regular(p)) return 1;
  return huge_lookup(p) != nullptr;
}

}  // namespace tenon::api
