// The standard C allocation names, defined by libtenon.so only: loading it
// (LD_PRELOAD or -ltenon) replaces the system allocator. Each is the same
// inline code as its tenon_* twin, so the override adds no call.
#include <errno.h>
#include <stdint.h>

#include "frontend/alloc_api.h"
#include "tenon/tenon.h"

using namespace tenon;

extern "C" {

TENON_API void* malloc(size_t n) { return api::alloc(n); }
TENON_API void free(void* p) { api::dealloc(p); }
TENON_API void* calloc(size_t count, size_t size) { return api::zalloc(count, size); }
TENON_API void* realloc(void* p, size_t n) { return api::realloc(p, n); }
TENON_API void* reallocarray(void* p, size_t count, size_t size) { return tenon_reallocarray(p, count, size); }
TENON_API void free_sized(void* p, size_t) { api::dealloc(p); }
TENON_API void free_aligned_sized(void* p, size_t, size_t) { api::dealloc(p); }
TENON_API void* aligned_alloc(size_t align, size_t n) { return tenon_aligned_alloc(align, n); }
TENON_API int posix_memalign(void** out, size_t align, size_t n) { return tenon_posix_memalign(out, align, n); }
TENON_API void* memalign(size_t align, size_t n) { return tenon_memalign(align, n); }
TENON_API void* valloc(size_t n) { return tenon_valloc(n); }
TENON_API void* pvalloc(size_t n) { return tenon_pvalloc(n); }
TENON_API size_t malloc_usable_size(void* p) { return api::usable_size(p); }
TENON_API int malloc_trim(size_t pad) { return tenon_malloc_trim(pad); }

}  // extern "C"
