// TEMPORARY STUB: forwards to glibc so that tests and benchmarks can be
// developed while the real layers are written. Replaced by the real core.
#include "tenon/tenon.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <malloc.h>
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
void* tenon_malloc(size_t n) { return __libc_malloc(n); }
void* tenon_calloc(size_t c, size_t n) { return __libc_calloc(c, n); }
void* tenon_realloc(void* p, size_t n) { return __libc_realloc(p, n); }
void* tenon_reallocarray(void* p, size_t c, size_t n) {
  size_t t;
  if (__builtin_mul_overflow(c, n, &t)) { errno = ENOMEM; return nullptr; }
  return __libc_realloc(p, t);
}
void tenon_free(void* p) { __libc_free(p); }
void tenon_free_sized(void* p, size_t) { __libc_free(p); }
void tenon_free_aligned_sized(void* p, size_t, size_t) { __libc_free(p); }
void* tenon_aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
int tenon_posix_memalign(void** o, size_t a, size_t n) {
  if (a < sizeof(void*) || (a & (a - 1))) return EINVAL;
  void* p = __libc_memalign(a, n); if (!p) return ENOMEM; *o = p; return 0; }
void* tenon_memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void* tenon_valloc(size_t n) { return __libc_memalign(4096, n); }
void* tenon_pvalloc(size_t n) { return __libc_memalign(4096, (n + 4095) & ~(size_t)4095); }
size_t tenon_malloc_usable_size(const void* p) { return malloc_usable_size((void*)p); }
int tenon_malloc_trim(size_t) { return 0; }
int tenon_owns(const void*) { return 1; }
void tenon_stats_print(void) {}
}
