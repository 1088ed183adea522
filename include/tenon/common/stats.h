// Statistics and contention counters. Counters live in the thread heap and are
// bumped only on slow paths (never on the malloc/free fast path), by the owning
// thread alone, with relaxed load+store (no read-modify-write), so they cost a
// few instructions where a CAS or a syscall already costs hundreds. They are
// always compiled in and printed at exit with TENON_STATS=1.
#pragma once
#include <atomic>
#include <cstdint>

namespace tenon {

#define TENON_STAT_LIST(X)                                                   \
  X(heaps_attached, "thread heaps attached")                                 \
  X(heaps_released, "thread heaps released")                                 \
  X(spans_formed, "small spans formed")                                      \
  X(spans_released, "spans returned to the chunk layer")                     \
  X(spans_adopted, "spans adopted from the partial lists")                   \
  X(spans_abandoned, "spans abandoned at thread exit")                       \
  X(full_scans, "full-list scans after remote-free notifications")          \
  X(remote_batches, "remote-free batches handed to owner heaps")                       \
  X(large_allocs, "large allocations")                                       \
  X(huge_allocs, "huge mappings made")                                         \
  X(huge_cache_hits, "huge allocations served from the cache")              \
  X(chunks_mapped, "chunks mapped")                                          \
  X(purges, "slice runs purged")                                             \
  X(retry_remote_push, "CAS retries: span remote-free lists")                \
  X(retry_inbox, "CAS retries: heap inboxes")                 \
  X(retry_partial_stack, "CAS retries: partial-span stacks")                 \
  X(retry_chunk_bitmap, "CAS retries: chunk slice bitmaps")                  \
  X(retry_heap_stack, "CAS retries: free-heap stack")                        \
  X(retry_huge_cache, "CAS retries: huge cache slots")

enum stat_id : unsigned {
#define TENON_STAT_ENUM(name, text) stat_##name,
  TENON_STAT_LIST(TENON_STAT_ENUM)
#undef TENON_STAT_ENUM
  stat_count
};

struct stats {
  std::atomic<std::uint64_t> v[stat_count]{};
  void add(stat_id id, std::uint64_t n = 1) {
    v[id].store(v[id].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// Counters of threads that have no heap (during thread teardown) land here
// with a relaxed atomic add: rare, and correct under concurrency.
stats& orphan_stats();
inline void stat_add_shared(stats& s, stat_id id, std::uint64_t n = 1) {
  s.v[id].fetch_add(n, std::memory_order_relaxed);
}

void stats_print_all();

}  // namespace tenon
