// The tenon_* C API (libtenon.a and libtenon.so): standard semantics, see
// docs/api.md for every edge case.
#include <errno.h>
#include <stdint.h>

#include <bit>

#include "frontend/alloc_api.h"
#include "platform/os.h"
#include "tenon/tenon.h"

using namespace tenon;

extern "C" {

TENON_API void* tenon_malloc(size_t n) { return api::alloc(n); }

TENON_API void* tenon_calloc(size_t count, size_t size) { return api::zalloc(count, size); }

TENON_API void* tenon_realloc(void* p, size_t n) { return api::realloc(p, n); }

TENON_API void* tenon_reallocarray(void* p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  return api::realloc(p, n);
}

TENON_API void tenon_free(void* p) { api::dealloc(p); }

TENON_API void tenon_free_sized(void* p, size_t) { api::dealloc(p); }

TENON_API void tenon_free_aligned_sized(void* p, size_t, size_t) { api::dealloc(p); }

TENON_API void* tenon_aligned_alloc(size_t align, size_t n) {
  if (!api::valid_alignment(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return api::alloc_aligned(align, n);
}

TENON_API int tenon_posix_memalign(void** out, size_t align, size_t n) {
  if (!api::valid_alignment(align) || align < sizeof(void*)) return EINVAL;
  int saved = errno;
  void* p = api::alloc_aligned(align, n);
  if (!p) {
    errno = saved;  // posix_memalign reports through its result, not errno
    return ENOMEM;
  }
  *out = p;
  return 0;
}

// memalign follows glibc rather than aligned_alloc's C17 rule (programs
// written against glibc pass such alignments): one that is not a power of two
// is rounded up to the next (0 asks for no alignment: malloc's); only one
// above SIZE_MAX / 2 + 1, with no power of two to round to, is EINVAL.
TENON_API void* tenon_memalign(size_t align, size_t n) {
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return nullptr;
  }
  return api::alloc_aligned(align == 0 ? 1 : std::bit_ceil(align), n);
}

TENON_API void* tenon_valloc(size_t n) { return api::alloc_aligned(os::page_size(), n); }

TENON_API void* tenon_pvalloc(size_t n) {
  size_t page = os::page_size();
  if (n > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t rounded = n == 0 ? page : (n + page - 1) & ~(page - 1);
  return api::alloc_aligned(page, rounded);
}

TENON_API size_t tenon_malloc_usable_size(const void* p) { return api::usable_size(p); }

TENON_API int tenon_malloc_trim(size_t) { return api::trim(); }

TENON_API int tenon_owns(const void* p) { return api::owns(p); }

TENON_API void tenon_stats_print(void) { stats_print_all(); }

}  // extern "C"
