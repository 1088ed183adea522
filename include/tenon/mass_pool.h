/* tenon: the typed bulk pool, C API (see docs/mass_pool.md).
 *
 * A pool hands out fixed-size, fixed-alignment slots, each with a 32-bit
 * index, from any number of threads at once without locks, and releases all
 * of them at once in time proportional to the number of blocks. Slots never
 * move. The C++ template tenon::mass_pool<T> (mass_pool.hpp) is the same
 * engine with constructors, destructors and iterators on top.
 *
 * Thread safety: tenon_pool_alloc, tenon_pool_at and tenon_pool_size may be
 * called concurrently. tenon_pool_clear and tenon_pool_free must not run
 * concurrently with any other call on the same pool.
 */
#ifndef TENON_MASS_POOL_H
#define TENON_MASS_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "tenon/tenon.h" /* TENON_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tenon_pool tenon_pool;

/* Largest number of elements a pool can hold: 2^32 - 1 (index 0xFFFFFFFF
 * is never handed out, so callers may use it as "no element"). */
#define TENON_POOL_MAX_ELEMENTS 0xFFFFFFFFull
#define TENON_POOL_NO_INDEX 0xFFFFFFFFu

/* A new, empty pool of elements of elem_size bytes aligned to align (a power
 * of two, at most 4096). The slot stride is elem_size rounded up to align.
 * Returns NULL with errno EINVAL (elem_size 0 or over 2^32, align not a
 * power of two or over 4096) or ENOMEM. */
TENON_API tenon_pool* tenon_pool_new(size_t elem_size, size_t align);

/* Like tenon_pool_new with an explicit block size of 2^block_shift elements
 * (0 picks the default: about 2 MiB per block). block_shift <= 24, else
 * NULL with EINVAL. */
TENON_API tenon_pool* tenon_pool_new_shift(size_t elem_size, size_t align, unsigned block_shift);

/* Flags for tenon_pool_new_ex. */
#define TENON_POOL_DENSE 1u /* indices exactly 0 .. size-1 under any concurrency;
                               one shared atomic increment per slot (slower with
                               many threads, see docs/mass_pool.md) */

/* Like tenon_pool_new_shift, with flags (0 or TENON_POOL_DENSE); unknown
 * flags give NULL with EINVAL. */
TENON_API tenon_pool* tenon_pool_new_ex(size_t elem_size, size_t align, unsigned block_shift,
                                        unsigned flags);

/* A slot for one element (uninitialised memory on first use, stride bytes),
 * and its index in *index_out (may be NULL). Lock-free.
 * Returns NULL with errno EOVERFLOW when the pool already holds its maximum
 * (2^32 - 1 elements, or the limit set for testing), or ENOMEM when the OS
 * has no memory for a new block; the pool stays usable in both cases. */
TENON_API void* tenon_pool_alloc(tenon_pool* pool, uint32_t* index_out);

/* The slot with this index. The index must have been returned by
 * tenon_pool_alloc since the last clear (anything else is undefined). */
TENON_API void* tenon_pool_at(const tenon_pool* pool, uint32_t index);

/* Number of slots handed out since the last clear. Exact when no
 * tenon_pool_alloc runs concurrently; a call that never returns (its thread
 * frozen, or cut off by fork) counts at most the one slot it claimed, never
 * a block. O(lanes) (64 loads), not O(1); O(blocks) until the next clear
 * after a call stopped inside a block refill. */
TENON_API size_t tenon_pool_size(const tenon_pool* pool);

/* Release every slot; the pool is empty and reusable. O(blocks). */
TENON_API void tenon_pool_clear(tenon_pool* pool);

/* Like tenon_pool_clear, but the blocks stay mapped and resident for the
 * next fill (no page faults then); they go back to the OS at the next
 * tenon_pool_clear or tenon_pool_free. Reused slots hold old bytes. */
TENON_API void tenon_pool_clear_keep_memory(tenon_pool* pool);

/* Release every slot and the pool itself. NULL is ignored. */
TENON_API void tenon_pool_free(tenon_pool* pool);

/* Test hook: lower the maximum number of elements (must be called on an
 * empty pool; max_elements in 1 .. 2^32-1). Returns 0, or EINVAL. */
TENON_API int tenon_pool_set_max_elements(tenon_pool* pool, uint64_t max_elements);

/* --- Plumbing for the header-only C++ template (not for direct use) --- */

/* Lazily committed, zero-filled memory from the platform layer, page
 * aligned. With huge != 0 and bytes >= 2 MiB (element blocks): 2 MiB aligned
 * and advised for transparent huge pages; without (the sparse directory):
 * small pages only, so touching one entry commits 4 KiB, not 2 MiB.
 * NULL on failure. */
TENON_API void* tenon_pool_reserve_block(size_t bytes, int huge);
TENON_API void tenon_pool_release_block(void* p, size_t bytes);
/* Fault a reserved block in ahead of use, contents unchanged (best effort). */
TENON_API void tenon_pool_prefault_block(void* p, size_t bytes);

/* A small number unique to the calling thread's first call, handed out in
 * order (0, 1, 2, ...); the pool maps it to a lane. */
TENON_API uint32_t tenon_pool_thread_ordinal(void);

/* 1 if the calling thread may own a pool lane (claim with plain stores in a
 * restartable sequence): the C library registered its rseq area, and the
 * process can restart other threads' sequences (membarrier, registered on
 * the first call). 0 otherwise (then every lane is claimed by CAS). */
TENON_API int tenon_pool_thread_can_own(void);

/* Restarts the restartable sequence of every other thread of the process
 * that is inside one (membarrier MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ), so
 * that a lane taken from its owner sees no more plain stores. 0, or an errno
 * value when the kernel refused. */
TENON_API int tenon_pool_restart_sequences(void);

#ifdef __cplusplus
}
#endif
#endif /* TENON_MASS_POOL_H */
