// Statistics read while other threads attach fresh heaps, allocate and free
// blocks of every size range and exit. Meant for ThreadSanitizer (make
// test's tsan stage): a read of a heap before its construction is
// published is a reported race; in a release build it checks that reading
// never crashes, stalls or reports nonsense.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

namespace {

void read_stats_until(std::atomic<bool>& stop, std::atomic<unsigned>& reads, std::atomic<unsigned>& bad) {
  while (!stop.load()) {
    tenon_stats s{};
    s.version = TENON_STATS_VERSION;
    if (tenon_stats_get(&s) != 0 || s.in_use != s.small_in_use + s.large_in_use + s.huge_in_use)
      bad.fetch_add(1);
    reads.fetch_add(1);
  }
}

// The reader is under way before the first holder starts and reads again
// after the last one has its heap, so its reads span every construction
// whatever the machine's load: until 2026-11-29 the stop could come before
// the reader's first read (under a load of about 25, "reads 0").
TEST(StatsRace, ReadsWhileHeapsAreConstructed) {
  std::atomic<bool> stop{false}, release_holders{false};
  std::atomic<unsigned> reads{0}, bad{0}, attached{0};
  std::thread reader(read_stats_until, std::ref(stop), std::ref(reads), std::ref(bad));
  auto read_once_more = [&] {
    for (unsigned start = reads.load(); reads.load() == start;) std::this_thread::yield();
  };
  read_once_more();
  // Threads that stay alive hold their heaps, so each new one needs a heap
  // constructed in fresh storage.
  std::vector<std::thread> holders;
  for (unsigned i = 0; i < 64; ++i) {
    holders.emplace_back([&] {
      void* p = tenon_malloc(48);
      attached.fetch_add(1);
      while (!release_holders.load()) std::this_thread::yield();
      tenon_free(p);
    });
    std::this_thread::yield();
  }
  while (attached.load() < 64) std::this_thread::yield();
  read_once_more();
  stop.store(true);
  reader.join();
  release_holders.store(true);
  for (auto& t : holders) t.join();
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(bad.load(), 0u);
}

// Spans formed, filled, emptied and released, large runs and huge mappings
// made and freed, while a reader walks them.
TEST(StatsRace, ReadsWhileThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::atomic<unsigned> reads{0}, bad{0};
  std::thread reader(read_stats_until, std::ref(stop), std::ref(reads), std::ref(bad));
  std::vector<std::thread> workers;
  const std::size_t rounds = tenon_test::scaled(400);
  for (unsigned w = 0; w < 3; ++w)
    workers.emplace_back([w, rounds, &reads] {
      static constexpr std::size_t kSizes[] = {16, 200, 3000, 20000, 100000, 1u << 20, 5u << 20};
      std::vector<void*> live;
      // At least the given rounds, and on until the reader has walked the
      // chunks a few times while this thread works.
      unsigned start = reads.load();
      for (std::size_t r = 0; r < rounds || reads.load() < start + 5; ++r) {
        std::size_t n = kSizes[(r + w) % 7];
        if (void* p = tenon_malloc(n)) {
          static_cast<char*>(p)[0] = 1;
          live.push_back(p);
        }
        if (live.size() > 40) {
          for (void* p : live) tenon_free(p);
          live.clear();
        }
      }
      for (void* p : live) tenon_free(p);
    });
  for (auto& t : workers) t.join();
  stop.store(true);
  reader.join();
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(bad.load(), 0u);
}

}  // namespace
