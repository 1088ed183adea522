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

/* Where tenon's memory comes from. By default every reservation is an mmap;
 * a program that must not map memory after start-up (embedded, real-time)
 * or that hands tenon a prepared region installs a source before tenon's
 * first allocation. reserve returns `size` bytes of anonymous, private,
 * read-write memory at a multiple of `alignment` (a power of two), or NULL;
 * release (may be NULL) takes back a range reserve gave. With a source,
 * tenon never moves or resizes mappings (realloc of huge blocks copies).
 * Returns 0, EBUSY if tenon has already reserved memory or a source is set,
 * EINVAL if source or its reserve is NULL. */
typedef struct tenon_memory_source {
  void* (*reserve)(size_t size, size_t alignment, void* context);
  void (*release)(void* ptr, size_t size, void* context);
  void* context;
} tenon_memory_source;
TENON_API int tenon_set_memory_source(const tenon_memory_source* source);

/* A memory source over [base, base + size): ranges are cut from it in order
 * and not reused once released (tenon keeps its chunks anyway; only huge
 * blocks are released). The region must be anonymous, private, read-write
 * memory (a static array, an mmap'ed range): tenon drops the pages of its
 * free parts with madvise. Returns 0, EBUSY as above, EINVAL if the region
 * cannot hold two 4 MiB chunks. */
TENON_API int tenon_use_fixed_region(void* base, size_t size);

/* Print allocator statistics (counts, CAS retries per shared structure) to
 * stderr. Also done at exit when the environment has TENON_STATS=1. */
TENON_API void tenon_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif /* TENON_TENON_H */
