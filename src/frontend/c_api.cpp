// The tenon_* C API (libtenon.a and libtenon.so): the standard semantics of
// <tenon/export_malloc.hpp> over the default composition, under names that
// do not replace the system allocator. docs/api.md lists every edge case.
#include "tenon/tenon.h"

#include <errno.h>

#include "tenon/layer.hpp"
#include "tenon/platform/fixed_region.h"
#include "tenon/platform/os.h"

using api_t = tenon::standard_api<tenon::default_allocator>;

extern "C" {

TENON_API void* tenon_malloc(size_t n) { return api_t::malloc(n); }
TENON_API void* tenon_calloc(size_t count, size_t size) { return api_t::calloc(count, size); }
TENON_API void* tenon_realloc(void* p, size_t n) { return api_t::realloc(p, n); }
TENON_API void* tenon_reallocarray(void* p, size_t count, size_t size) { return api_t::reallocarray(p, count, size); }
TENON_API void tenon_free(void* p) { api_t::free(p); }
TENON_API void tenon_free_sized(void* p, size_t n) { api_t::free_sized(p, n); }
TENON_API void tenon_free_aligned_sized(void* p, size_t align, size_t n) { api_t::free_aligned_sized(p, align, n); }
TENON_API void* tenon_aligned_alloc(size_t align, size_t n) { return api_t::aligned_alloc(align, n); }
TENON_API int tenon_posix_memalign(void** out, size_t align, size_t n) { return api_t::posix_memalign(out, align, n); }
TENON_API void* tenon_memalign(size_t align, size_t n) { return api_t::memalign(align, n); }
TENON_API void* tenon_valloc(size_t n) { return api_t::valloc(n); }
TENON_API void* tenon_pvalloc(size_t n) { return api_t::pvalloc(n); }
TENON_API size_t tenon_malloc_usable_size(const void* p) { return api_t::malloc_usable_size(p); }
TENON_API int tenon_malloc_trim(size_t pad) { return api_t::malloc_trim(pad); }
TENON_API int tenon_owns(const void* p) { return tenon::default_allocator::owns(p); }
TENON_API int tenon_set_memory_source(const tenon_memory_source* source) {
  if (!source || !source->reserve) return EINVAL;
  return tenon::os::set_memory_source({source->reserve, source->release, source->context}) ? 0 : EBUSY;
}

TENON_API int tenon_use_fixed_region(void* base, size_t size) {
  if (!base || size < 2 * tenon::kChunkSize) return EINVAL;
  return tenon::os::use_fixed_region(base, size) ? 0 : EBUSY;
}

TENON_API void tenon_stats_print(void) { tenon::g_default_engine.print_stats(); }

}  // extern "C"
