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
 * read-write memory at a multiple of `alignment` (a power of two) whose
 * bytes read as zeros, as a fresh mapping's do (calloc and the blocks
 * handed out unwritten rely on it), or NULL;
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
 * memory that reads as zeros (a static array never written, a fresh mmap'ed
 * range): tenon drops the pages of its
 * free parts with madvise. Returns 0, EBUSY as above, EINVAL if the region
 * cannot hold two 4 MiB chunks. */
TENON_API int tenon_use_fixed_region(void* base, size_t size);

/* First-class heaps (docs/heaps.md): allocate from any number of threads,
 * then release every block of the heap at once.
 *
 * tenon_heap_new: a heap, or NULL with errno ENOMEM. options may be NULL;
 * limit (0: none) caps the bytes the heap holds (its 64 KiB spans, its
 * large blocks' slice runs, its huge blocks): past it, allocation fails with
 * ENOMEM.
 * tenon_heap_malloc/_calloc/_realloc/_aligned_alloc: as malloc, calloc,
 * realloc, aligned_alloc, the block from heap h (realloc moves a block of
 * another heap or of the default allocator into h); h NULL: EINVAL.
 * A heap's block is freed with tenon_heap_free, tenon_free or free (with
 * libtenon.so preloaded), from any thread; realloc/tenon_realloc of it may
 * move it to the default allocator.
 * tenon_heap_destroy: every block of h, whatever thread allocated it, is
 * released at once (cost: the heap's spans, not its blocks); h and every
 * pointer into it are then invalid. tenon_heap_reset: the same, but h stays
 * usable. Neither may run while another thread allocates from h or frees
 * one of its blocks (the caller orders them, for example by joining). */
typedef struct tenon_heap tenon_heap_t;
typedef struct tenon_heap_options {
  size_t limit; /* bytes; 0: no limit */
} tenon_heap_options;
TENON_API tenon_heap_t* tenon_heap_new(const tenon_heap_options* options);
TENON_API void tenon_heap_destroy(tenon_heap_t* heap);
TENON_API void tenon_heap_reset(tenon_heap_t* heap);
TENON_API TENON_MALLOC_ATTR void* tenon_heap_malloc(tenon_heap_t* heap, size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_heap_calloc(tenon_heap_t* heap, size_t count, size_t size);
TENON_API void* tenon_heap_realloc(tenon_heap_t* heap, void* ptr, size_t size);
TENON_API TENON_MALLOC_ATTR void* tenon_heap_aligned_alloc(tenon_heap_t* heap, size_t alignment, size_t size);
TENON_API void tenon_heap_free(tenon_heap_t* heap, void* ptr);

/* Statistics a program reads: the bytes tenon holds and the events it
 * counted. Byte figures are gathered when asked (tenon_stats_get walks the
 * chunks and reads the counters): exact while no other thread allocates or
 * frees, a close approximation while others do (each span is read as it is
 * at its own moment). docs/api.md defines every field.
 *
 * Versioned: set `version` to TENON_STATS_VERSION before the call; a later
 * tenon only appends fields and keeps answering older versions. */
#define TENON_STATS_VERSION 1
#define TENON_STATS_CLASSES 64 /* room for every small size class */

typedef struct tenon_class_stats {
  size_t block_size;    /* bytes of each block of the class */
  size_t blocks_in_use; /* blocks handed out and not yet back in their span */
  size_t bytes_in_use;  /* blocks_in_use x block_size */
  size_t spans;         /* spans of the class */
  size_t span_bytes;    /* bytes of those spans (in use, free and not yet carved) */
} tenon_class_stats;

typedef struct tenon_stats {
  unsigned version; /* in: TENON_STATS_VERSION */
  unsigned classes; /* out: entries of class[] filled (the small size classes) */
  /* Bytes. in_use counts small blocks at their class size, large and huge
   * blocks at their page-rounded size. */
  size_t in_use;       /* small_in_use + large_in_use + huge_in_use */
  size_t small_in_use; /* blocks of at most 32 KiB */
  size_t large_in_use; /* blocks of at most 2 MiB, in slice runs of their own */
  size_t huge_in_use;  /* blocks of their own mappings */
  size_t peak_in_use;  /* highest bytes held by spans, large and huge blocks since
                          start: an upper bound of the peak of in_use (a small
                          span counts whole while it has a block in use) */
  size_t mapped;       /* address space tenon mapped for blocks: 4 MiB chunks
                          and huge mappings (cached ones too) */
  size_t resident;     /* of mapped, bytes in memory: the chunks' resident pages
                          (mincore), huge mappings counted whole */
  size_t retained;     /* free memory kept resident for reuse: freed slices not
                          yet purged, freed large blocks' runs that threads
                          keep for their next ones, and cached huge mappings */
  size_t large_blocks; /* live large blocks */
  size_t huge_blocks;  /* live huge blocks */
  size_t chunks;       /* chunks mapped (never unmapped) */
  /* Counts since start. */
  unsigned long long os_maps;    /* mappings made: chunks, huge blocks */
  unsigned long long os_unmaps;  /* huge mappings given back */
  unsigned long long os_purges;  /* page runs given back (madvise) */
  unsigned long long os_remaps;  /* huge mappings grown, shrunk or moved (mremap) */
  unsigned long long cas_retries; /* failed compare-and-swaps on shared structures */
  unsigned long long heaps_attached;
  unsigned long long heaps_released;
  unsigned long long large_allocs; /* large blocks handed out */
  unsigned long long huge_allocs;  /* huge blocks handed out (mapped or from the cache) */
  tenon_class_stats class_stats[TENON_STATS_CLASSES];
} tenon_stats;

/* Fills *stats. Returns 0, or EINVAL (nothing written) when stats is NULL or
 * its version is not one this tenon knows. Never allocates, never waits. */
TENON_API int tenon_stats_get(tenon_stats* stats);

/* Print the statistics (tenon_stats_get's figures, then every event counter
 * and the CAS retries per shared structure) to stderr, without allocating.
 * Also done at exit when the environment has TENON_STATS=1. */
TENON_API void tenon_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif /* TENON_TENON_H */
