// The thread heaps' caches of freed large runs (arena/run_cache.h): their
// bounds, and that what a cache keeps is never out of reach: malloc_trim
// from any thread takes an idle thread's runs, a thread's exit gives its
// runs back, the purge pass expires runs left unused, and a block freed
// into the cache is still a live-or-freed block for the misuse checks.
// White-box where a bound is the point (the arena's calls on a cache of the
// test's own), through the tenon_* API otherwise. Its own process: it
// flushes every heap's cache and runs purge passes.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tenon/engine/engine.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/tenon.h"

namespace {

using tenon::g_default_engine;

// One slice each (over the largest small class, under a slice).
constexpr std::size_t kBlock = 60000;

bool slice_taken(const void* p) {
  return (tenon::chunk_of(p)->used.load(std::memory_order_relaxed) >> tenon::lookup::slice_of(p) & 1) != 0;
}

std::size_t resident_pages(const void* p, std::size_t n) {
  long page = sysconf(_SC_PAGESIZE);
  auto start = reinterpret_cast<std::uintptr_t>(p) & ~static_cast<std::uintptr_t>(page - 1);
  std::size_t len = reinterpret_cast<std::uintptr_t>(p) + n - start;
  std::vector<unsigned char> vec((len + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
  if (mincore(reinterpret_cast<void*>(start), len, vec.data()) != 0) return ~std::size_t{0};
  std::size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

tenon::span* take_run(unsigned nslices) {
  static tenon::chunk* hint = nullptr;
  return g_default_engine.chunks.take_span(nslices, &hint, nullptr);
}

TEST(RunCache, HoldsAtMostItsBudgetOfSlicesAndItsSlots) {
  tenon::run_cache rc;
  std::vector<tenon::span*> kept;
  // A run longer than kRunCacheMaxRunSlices is never kept, whatever the budget.
  tenon::span* longer = take_run(tenon::kRunCacheMaxRunSlices + 1);
  ASSERT_NE(longer, nullptr);
  EXPECT_FALSE(g_default_engine.chunks.keep_cached(rc, longer, 64));
  g_default_engine.chunks.release_span(longer, nullptr);
  // Within the budget: 3 slices at a budget of 3, then nothing more.
  for (unsigned i = 0; i < 3; ++i) {
    tenon::span* s = take_run(1);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(g_default_engine.chunks.keep_cached(rc, s, 3)) << i;
    kept.push_back(s);
  }
  tenon::span* over = take_run(1);
  EXPECT_FALSE(g_default_engine.chunks.keep_cached(rc, over, 3));
  // A bigger budget, but never more runs than slots.
  EXPECT_TRUE(g_default_engine.chunks.keep_cached(rc, over, 64));
  kept.push_back(over);
  while (kept.size() < tenon::kRunCacheSlots) {
    tenon::span* s = take_run(1);
    ASSERT_TRUE(g_default_engine.chunks.keep_cached(rc, s, 64));
    kept.push_back(s);
  }
  tenon::span* extra = take_run(1);
  EXPECT_FALSE(g_default_engine.chunks.keep_cached(rc, extra, 64));
  g_default_engine.chunks.release_span(extra, nullptr);
  // Taken by exact slice count only; every kept run is still taken in its chunk.
  EXPECT_EQ(g_default_engine.chunks.take_cached(rc, 2), nullptr);
  for (tenon::span* s : kept) EXPECT_TRUE(slice_taken(s->start));
  tenon::span* back = g_default_engine.chunks.take_cached(rc, 1);
  ASSERT_NE(back, nullptr);
  EXPECT_NE(std::find(kept.begin(), kept.end(), back), kept.end());
  g_default_engine.chunks.release_span(back, nullptr);
  kept.erase(std::find(kept.begin(), kept.end(), back));
  // A flush by any thread takes the rest back to the arena.
  g_default_engine.chunks.flush_cached(rc, true, nullptr);
  EXPECT_TRUE(rc.empty());
  for (tenon::span* s : kept) EXPECT_FALSE(slice_taken(s->start));
}

TEST(RunCache, ThePassExpiresARunAtItsSecondLook) {
  tenon::run_cache rc;
  tenon::span* s = take_run(2);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(g_default_engine.chunks.keep_cached(rc, s, 8));
  g_default_engine.chunks.flush_cached(rc, false, nullptr);  // ages it
  EXPECT_FALSE(rc.empty());
  EXPECT_TRUE(slice_taken(s->start));
  // Reused between two passes, it is not idle: aged again from scratch.
  tenon::span* again = g_default_engine.chunks.take_cached(rc, 2);
  ASSERT_EQ(again, s);
  ASSERT_TRUE(g_default_engine.chunks.keep_cached(rc, s, 8));
  g_default_engine.chunks.flush_cached(rc, false, nullptr);
  EXPECT_FALSE(rc.empty());
  g_default_engine.chunks.flush_cached(rc, false, nullptr);  // idle for a whole pass period: back
  EXPECT_TRUE(rc.empty());
  EXPECT_FALSE(slice_taken(s->start));
}

TEST(RunCache, BudgetIsAShareAmongHeapsWithinItsBounds) {
  EXPECT_EQ(tenon::run_cache_budget(0), tenon::kRunCacheHeapSlices);
  EXPECT_EQ(tenon::run_cache_budget(1), tenon::kRunCacheHeapSlices);
  EXPECT_EQ(tenon::run_cache_budget(65535), 1u);
  for (std::uint32_t heaps = 1; heaps < 1000; ++heaps) {
    EXPECT_LE(tenon::run_cache_budget(heaps + 1), tenon::run_cache_budget(heaps));
    EXPECT_GE(tenon::run_cache_budget(heaps), 1u);
    if (heaps * tenon::run_cache_budget(heaps) > tenon::kRunCacheBudgetSlices)
      EXPECT_EQ(tenon::run_cache_budget(heaps), 1u) << heaps;
  }
}

// A thread that frees large blocks, written whole, then waits until told.
struct idle_thread {
  std::vector<char*> blocks;
  std::atomic<bool> freed{false}, go{false};
  std::thread t;

  explicit idle_thread(int count) {
    t = std::thread([this, count] {
      tenon_free(tenon_malloc(16));  // a heap: a thread's first call attaches it
      for (int i = 0; i < count; ++i) {
        blocks.push_back(static_cast<char*>(tenon_malloc(kBlock)));
        std::memset(blocks.back(), 0x5a, kBlock);
      }
      for (char* p : blocks) tenon_free(p);
      freed.store(true, std::memory_order_release);
      while (!go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!freed.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void finish() {
    go.store(true, std::memory_order_release);
    t.join();
  }
  int taken() const {
    int n = 0;
    for (char* p : blocks) n += slice_taken(p);
    return n;
  }
  std::size_t resident() const {
    std::size_t n = 0;
    for (char* p : blocks) n += resident_pages(p, kBlock);
    return n;
  }
};

TEST(RunCache, TrimFromAnotherThreadReachesAnIdleThreadsRuns) {
  idle_thread a(8), b(8);
  int cached = a.taken() + b.taken();
  std::printf("runs kept by two idle threads: %d of 16\n", cached);
  EXPECT_GT(cached, 0);  // the caches kept some: else this test tests nothing
  EXPECT_LE(cached, 2 * static_cast<int>(tenon::kRunCacheHeapSlices));
  tenon_malloc_trim(0);
  std::size_t left = a.resident() + b.resident();
  std::printf("pages of their freed blocks resident after another thread's trim: %zu\n", left);
  EXPECT_EQ(a.taken() + b.taken(), 0);
  EXPECT_EQ(left, 0u);
  a.finish();
  b.finish();
}

TEST(RunCache, AThreadsExitGivesItsRunsBack) {
  idle_thread a(8);
  EXPECT_GT(a.taken(), 0);
  a.finish();
  EXPECT_EQ(a.taken(), 0);
}

TEST(RunCache, AnIdleThreadsRunsExpireWithoutTrim) {
  idle_thread a(8);
  EXPECT_GT(a.taken(), 0);
  // The purge pass runs when due (TENON_PURGE_DELAY_MS / 2 + 1 apart); the
  // second pass that finds a run there gives it back.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a.taken() && std::chrono::steady_clock::now() < until) {
    g_default_engine.chunks.purge(false, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(a.taken(), 0);
  a.finish();
}

TEST(RunCache, FreedBlocksInTheCacheAreNotInUse) {
  tenon_free(tenon_malloc(16));
  tenon_malloc_trim(0);
  tenon_stats before{};
  before.version = TENON_STATS_VERSION;
  ASSERT_EQ(tenon_stats_get(&before), 0);
  void* p = tenon_malloc(kBlock);
  std::memset(p, 1, kBlock);
  tenon_free(p);
  tenon_stats after{};
  after.version = TENON_STATS_VERSION;
  ASSERT_EQ(tenon_stats_get(&after), 0);
  EXPECT_EQ(after.large_blocks, before.large_blocks);
  EXPECT_EQ(after.in_use, before.in_use);
}

}  // namespace
