/* tenon: a lock-free, multithreaded memory allocator — public C API.
 *
 * Every function here is available without overriding the system allocator
 * (link libtenon.a, or libtenon.so). libtenon.so additionally defines the
 * standard names (malloc, free, ..., operator new/delete) so that
 * LD_PRELOAD=libtenon.so or -ltenon replaces the system allocator.
 *
 * Semantics follow POSIX and ISO C exactly; see docs/api.md for the edge cases
 * (errno values, zero sizes, foreign pointers).
 */
#ifndef TENON_TENON_H
#define TENON_TENON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TENON_API __attribute__((visibility("default")))
#define TENON_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define TENON_API
#define TENON_MALLOC_ATTR
#endif

TENON_API TENON_MALLOC_ATTR void* tenon_malloc(size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_calloc(size_t count, size_t size);
TENON_API void* tenon_realloc(void* ptr, size_t size);
TENON_API void* tenon_reallocarray(void* ptr, size_t count, size_t size);
TENON_API void tenon_free(void* ptr);
TENON_API void tenon_free_sized(void* ptr, size_t size);
TENON_API void tenon_free_aligned_sized(void* ptr, size_t alignment, size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_aligned_alloc(size_t alignment, size_t size);
TENON_API int tenon_posix_memalign(void** out, size_t alignment, size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_memalign(size_t alignment, size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_valloc(size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_pvalloc(size_t size);
TENON_API size_t tenon_malloc_usable_size(const void* ptr);
TENON_API int tenon_malloc_trim(size_t pad);

/* Non-zero when ptr lies in memory tenon holds: anywhere in the chunks of
 * small and large blocks (also inside a block, or in a freed one), or at
 * the start of a huge block. It does not say that ptr is a live block.
 * 0 for NULL and for memory of others (stack, globals, glibc's blocks,
 * foreign mappings); docs/api.md has the details. */
TENON_API int tenon_owns(const void* ptr);

/* The version of the tenon library in use, "MAJOR.MINOR.PATCH" (a static
 * string; the same as the CMake package's and tenon.pc's version). */
TENON_API const char* tenon_version(void);

/* Print allocator statistics (counts, CAS retries per shared structure) to
 * stderr. Also done at exit when the environment has TENON_STATS=1. */
TENON_API void tenon_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif /* TENON_TENON_H */
