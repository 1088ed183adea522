// The statistics policy of the engines. `counting_stats` (the default): each
// thread heap has a block of counters, bumped only on slow paths (never on
// the malloc/free fast path) by the owning thread alone, with relaxed
// load+store (no read-modify-write): a few instructions where a CAS or a
// syscall already costs hundreds; counts made without a heap (thread
// teardown, huge blocks) go to the engine's shared block with a relaxed
// atomic add. `no_stats`: every count compiles to nothing. Printed at exit
// with TENON_STATS=1, or by tenon_stats_print().
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
  X(full_scans, "full-list scans after remote-free notifications")           \
  X(remote_batches, "remote-free batches handed to owner heaps")             \
  X(large_allocs, "large allocations")                                       \
  X(huge_allocs, "huge mappings made")                                       \
  X(huge_cache_hits, "huge allocations served from the cache")               \
  X(chunks_mapped, "chunks mapped")                                          \
  X(purges, "slice runs purged")                                             \
  X(retry_remote_push, "CAS retries: span remote-free lists")                \
  X(retry_inbox, "CAS retries: heap inboxes")                                \
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

// The text printed beside each counter.
extern const char* const kStatNames[stat_count];

struct counting_stats {
  std::atomic<std::uint64_t> v[stat_count]{};
  // By the owner of the block only.
  void add(stat_id id, std::uint64_t n = 1) {
    v[id].store(v[id].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // By any thread (a shared block).
  void add_shared(stat_id id, std::uint64_t n = 1) { v[id].fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t get(stat_id id) const { return v[id].load(std::memory_order_relaxed); }
};

struct no_stats {
  void add(stat_id, std::uint64_t = 1) {}
  void add_shared(stat_id, std::uint64_t = 1) {}
  std::uint64_t get(stat_id) const { return 0; }
};

// A count for a thread's own block if it has one (st), else the shared one.
template <class Stats>
inline void count(Stats* st, Stats& shared, stat_id id, std::uint64_t n = 1) {
  if (st) st->add(id, n);
  else shared.add_shared(id, n);
}

}  // namespace tenon
