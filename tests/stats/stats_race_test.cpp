// Statistics read while other threads attach fresh heaps, allocate and exit:
// a reader walks every heap's counters while a new heap's storage is being
// constructed. Meant for ThreadSanitizer (make test's tsan stage), where a
// read of a heap before its construction is published is a reported race;
// in a release build it checks that reading never crashes or stalls.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

namespace {

TEST(StatsRace, ReadsWhileHeapsAreConstructed) {
  // tenon_stats_print writes to stderr: send it to /dev/null meanwhile.
  int null_fd = open("/dev/null", O_WRONLY);
  ASSERT_GE(null_fd, 0);
  int saved = dup(2);
  std::atomic<bool> stop{false};
  std::atomic<unsigned> reads{0};
  // Threads that stay alive hold their heaps, so each new one needs a heap
  // constructed in fresh storage.
  std::atomic<bool> release_holders{false};
  std::vector<std::thread> holders;
  dup2(null_fd, 2);
  std::thread reader([&] {
    while (!stop.load()) {
      tenon_stats_print();
      reads.fetch_add(1);
    }
  });
  // Each holder attaches a heap that nobody released before: a fresh one.
  for (unsigned i = 0; i < 64; ++i) {
    holders.emplace_back([&] {
      void* p = tenon_malloc(48);
      while (!release_holders.load()) std::this_thread::yield();
      tenon_free(p);
    });
    std::this_thread::yield();
  }
  stop.store(true);
  reader.join();
  release_holders.store(true);
  for (auto& t : holders) t.join();
  dup2(saved, 2);
  close(saved);
  close(null_fd);
  EXPECT_GT(reads.load(), 0u);
}

}  // namespace
