// The statistics policy of the engines. `counting_stats` (the default): each
// thread heap has a block of counters, bumped only on slow paths (never on
// the malloc/free fast path) by the owning thread alone, with relaxed
// load+store (no read-modify-write): a few instructions where a CAS or a
// syscall already costs hundreds; counts made without a heap (thread
// teardown, huge blocks) go to the engine's shared block with a relaxed
// atomic add. `no_stats`: every count compiles to nothing. Printed at exit
// with TENON_STATS=1, or by tenon_stats_print(); read by tenon_stats_get().
//
// Bytes are not counted on the fast path either: the engine derives the
// bytes in use when asked, from the spans' own counts (engine::figures). The
// one byte gauge kept as it goes is `held` (bytes of slice runs taken for
// spans and large blocks, plus huge blocks), in the engine's shared block,
// moved by one atomic add where a run is taken or given back or a huge
// block mapped or freed (each already a CAS on a chunk word or a system
// call), so that its peak can be kept.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/common/size_classes.h"

namespace tenon {

#define TENON_STAT_LIST(X)                                                   \
  X(heaps_attached, "thread heaps attached")                                 \
  X(heaps_released, "thread heaps released")                                 \
  X(heaps_taken_over, "parked heaps taken over by a new thread")             \
  X(heaps_dissolved, "parked heaps given up before growing")                 \
  X(spans_formed, "small spans formed")                                      \
  X(spans_released, "spans returned to the chunk layer")                     \
  X(spans_adopted, "spans adopted from the partial lists")                   \
  X(spans_abandoned, "spans abandoned by parked heaps given up")             \
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
  X(retry_huge_cache, "CAS retries: huge cache slots")                       \
  X(huge_frees, "huge blocks freed")                                         \
  X(huge_unmaps, "huge mappings unmapped")                                   \
  X(huge_remaps, "huge mappings resized or moved (mremap)")                  \
  X(huge_bytes_given, "bytes of huge blocks handed out")                     \
  X(huge_bytes_taken, "bytes of huge blocks freed")                          \
  X(huge_bytes_mapped, "bytes of huge mappings made")                        \
  X(huge_bytes_unmapped, "bytes of huge mappings unmapped")

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

  // The held-bytes gauge and its peak (the shared block only, any thread).
  // The peak is raised with a CAS loop that stops as soon as it is at least
  // this thread's value: lock-free, and exact at the gauge's granularity.
  void hold(std::int64_t delta) {
    std::uint64_t now = held_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed) +
                        static_cast<std::uint64_t>(delta);
    if (delta <= 0) return;
    std::uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  std::uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  std::uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> held_{0};
  std::atomic<std::uint64_t> peak_{0};
};

struct no_stats {
  void add(stat_id, std::uint64_t = 1) {}
  void add_shared(stat_id, std::uint64_t = 1) {}
  std::uint64_t get(stat_id) const { return 0; }
  void hold(std::int64_t) {}
  std::uint64_t held() const { return 0; }
  std::uint64_t peak() const { return 0; }
};

// The figures an engine derives when asked (engine::figures), in bytes
// unless named otherwise. Exact while no thread allocates or frees;
// otherwise each span is read as it is at its own moment.
struct class_figures {
  std::size_t blocks_in_use = 0;
  std::size_t spans = 0;
  std::size_t span_bytes = 0;
};
struct memory_figures {
  std::size_t small_in_use = 0;
  std::size_t large_in_use = 0;
  std::size_t huge_in_use = 0;
  std::size_t peak_held = 0;  // the held gauge's highest value
  std::size_t chunk_bytes = 0;
  std::size_t chunk_resident = 0;
  std::size_t free_dirty = 0;  // free slices whose pages are still resident
  std::size_t huge_mapped = 0;
  std::size_t huge_cached = 0;
  std::size_t large_blocks = 0;
  std::size_t huge_blocks = 0;
  std::size_t chunks = 0;
  class_figures cls[kNumClasses]{};
};

// A count for a thread's own block if it has one (st), else the shared one.
template <class Stats>
inline void count(Stats* st, Stats& shared, stat_id id, std::uint64_t n = 1) {
  if (st) st->add(id, n);
  else shared.add_shared(id, n);
}

}  // namespace tenon
