// The front end's out-of-line paths: big and aligned requests, frees that are
// not into a chunk, realloc, usable size, trim; foreign pointers go to
// foreign.cpp.
#include <stdint.h>

#include "arena/chunk.h"
#include "frontend/alloc_api.h"
#include "frontend/foreign.h"
#include "platform/os.h"

namespace tenon::api {

namespace {

// Zero a reused block for calloc. A big one gets its pages dropped instead of
// cleared: the kernel gives back zero pages as the program touches them, so a
// program that uses little of a big zeroed block does not pay for all of it
// (memset of 32 MiB: about 8 ms; drop and touch one page: 11 us). A program
// that touches every page pays a page fault for each instead of the memset,
// which is what glibc makes it pay at that size (see kCallocDropMin).
// Big blocks are huge ones: page-aligned, usable up to the page-rounded size.
void clear_reused(void* p, std::size_t n) {
  if (n >= kCallocDropMin) {
    std::size_t page = os::page_size();
    if (os::purge(p, (n + page - 1) & ~(page - 1))) return;
  }
  memset(p, 0, n);
}

}  // namespace

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
  if (p && zero && !zeroed) clear_reused(p, n);
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
  if (lookup::in_chunk(p)) {  // a chunk without a fast-table slot
    heap_free(p);
    return;
  }
  if (huge_header* h = huge_lookup(p)) {
    huge_free(h);
    return;
  }
  // Only a pointer inside a huge block's own range is tenon's (an interior
  // pointer: invalid, ignored); anything else in its unit is foreign.
  if (huge_contains(p)) return;
  foreign_free(p);
}

std::size_t usable_size(const void* p) {
  if (!p) return 0;
  if (lookup::in_chunk(p)) {
    const span* s = span_of(p);
    return s->kind == span_kind::small ? s->block_size : large_usable(s, p);
  }
  if (huge_header* h = huge_lookup(p)) return h->usable;
  if (huge_contains(p)) return 0;  // inside a huge block, not its start: not a block
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
  if (lookup::in_chunk(p)) {
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
  } else if (huge_contains(p)) {
    // Inside a huge block, not its start: not a block. Never handed to
    // glibc, which would take the bytes before it for a chunk header.
    errno = EINVAL;
    return nullptr;
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
  if (lookup::in_chunk(p)) return 1;
  return huge_lookup(p) != nullptr;
}

}  // namespace tenon::api
