// Layer 7, front end: the allocation API composed from the layers below.
// Header-only so that both the tenon_* functions (c_api.cpp) and the standard
// names (override.cpp) inline the same fast paths with no extra call.
#pragma once
#include <errno.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/common/size_classes.h"
#include "tenon/heap/heap.h"
#include "tenon/large/large.h"
#include "tenon/lookup/chunk_map.h"

namespace tenon::api {

// Out-of-line pieces (frontend/alloc_slow.cpp).
void* alloc_big(std::size_t n, std::size_t align, bool zero);
void* alloc_aligned_small(std::size_t n, std::size_t align);
void free_irregular(void* p);  // NULL, huge, or foreign
void* realloc_slow(void* p, std::size_t n);
std::size_t usable_size(const void* p);
int trim();
int owns(const void* p);

__attribute__((always_inline)) inline void* alloc(std::size_t n) {
  // Most requests are at most 1 KiB: test that first, one table load.
  if (__builtin_expect(n <= 1024, 1)) return heap_alloc(kClasses.small[(n + 7) >> 3]);
  if (n <= kMaxSmall) return heap_alloc(size_to_class(n));
  return alloc_big(n, 0, false);
}

__attribute__((always_inline)) inline void dealloc(void* p) {
  if (__builtin_expect(lookup::is_regular(p), 1)) {
    heap_free(p);
    return;
  }
  free_irregular(p);
}

inline void* zalloc(std::size_t count, std::size_t size) {
  std::size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n <= kMaxSmall) {
    void* p = heap_alloc(size_to_class(n));
    if (p) memset(p, 0, n);
    return p;
  }
  return alloc_big(n, 0, true);
}

inline bool valid_alignment(std::size_t align) { return align != 0 && (align & (align - 1)) == 0; }

// align must be a power of two.
inline void* alloc_aligned(std::size_t align, std::size_t n) {
  if (align <= kMinAlign && (n >= kMinAlign || align <= 8)) return alloc(n);
  if (n <= kMaxSmall && align <= kMaxSmall) return alloc_aligned_small(n, align);
  return alloc_big(n, align, false);
}

inline void* realloc(void* p, std::size_t n) {
  if (!p) return alloc(n);
  if (n <= kMaxSmall && lookup::is_regular(p)) {
    span* s = span_of(p);
    if (s->kind == span_kind::small && n <= s->block_size && n >= s->block_size / 2) return p;
  }
  return realloc_slow(p, n);
}

}  // namespace tenon::api
