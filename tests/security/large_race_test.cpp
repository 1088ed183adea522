// A large or huge block freed by two threads at the same instant (issue 11).
// Large blocks: both
// frees used to read the span's count of live blocks (1) before either
// wrote 0, both passed the double-free check, and each thread kept the run
// in its own run cache: the next large malloc of that size on each thread
// handed out the same address (or the run went back to the arena twice).
// The count now goes from 1 to 0 by one CAS, and the free that loses it
// reports the double free. Huge blocks (past 2 MiB): both frees read the
// header's freed mark (usable 0) before either set it, in the cache's put,
// and both put the block in the huge cache: two slots named one mapping, and
// the next two huge mallocs handed out one address (or, the second put
// refused, the mapping was unmapped under the first). The mark is now taken
// by one exchange (huge_maps::free), and the free that finds it taken
// reports. In process, through the tenon_* API of
// libtenon.a; each round is a child (a death test), since the report ends it.
#include <gtest/gtest.h>
#include <signal.h>
#include <tenon/tenon.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

namespace {

constexpr std::size_t kLarge = 100000;  // 2 slices: a run a thread's run cache keeps
constexpr std::size_t kHuge = 5000000;  // past 2 MiB: a huge block, which the huge cache keeps

// One round, in the child: two threads that have heaps (a small block
// first) free p, a block of n bytes, together, then, once both are done,
// each takes a block of p's size. Ends
// with the report (SIGABRT), or exits 3 when both were handed one address.
void race_once(std::size_t n) {
  alarm(20);
  void* p = tenon_malloc(n);
  std::atomic<int> ready{0};
  void* again[2] = {nullptr, nullptr};
  auto freer = [&](int t) {
    tenon_free(tenon_malloc(16));
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    tenon_free(p);
    // Both frees done before either allocates: else the first could take
    // p back, live again, before the second free began (a free of a live
    // block, which nothing tells from a right one).
    ready.fetch_add(1);
    while (ready.load() < 4) {
    }
    again[t] = tenon_malloc(n);
  };
  std::thread a(freer, 0), b(freer, 1);
  a.join();
  b.join();
  if (again[0] == again[1]) {
    std::fprintf(stderr, "%p handed out to both threads\n", again[0]);
    _exit(3);
  }
  _exit(0);  // neither free reported: a double free missed
}

// Rounds of race_once(n) until one fails; the race window is a few
// instructions, so most rounds are two frees one after the other, which were
// reported before too. The first failing round ends the loop.
void expect_every_round_reported(std::size_t n) {
  GTEST_FLAG_SET(death_test_style, "fast");
  constexpr int kRounds = 400;
  for (int round = 0; round < kRounds && !::testing::Test::HasFailure(); ++round) {
    SCOPED_TRACE(round);
    EXPECT_EXIT(race_once(n), testing::KilledBySignal(SIGABRT), "tenon: free\\(0x[0-9a-f]+\\): double free");
  }
}

TEST(LargeRaceDeathTest, TwoThreadsFreeingOneLargeBlockAtOnce) { expect_every_round_reported(kLarge); }

// The same for a huge block: before the fix, 5 of 30 guard-probe runs at
// 5,000,000 bytes went unreported (docs/security.md, "Frees racing").
TEST(LargeRaceDeathTest, TwoThreadsFreeingOneHugeBlockAtOnce) { expect_every_round_reported(kHuge); }

// realloc(p, m) in one thread and free(p) in another at the same instant,
// p a huge block and m a huge size that p's mapping holds (realloc resizes
// it in place and returns p), then free of realloc's answer: p is freed
// twice in all, and one of the three calls must report it, whatever the
// order. Until 2026-11-29 realloc tested the freed mark with a load and
// wrote the block's new size later: a free between the two put p in the
// huge cache, realloc made the cached block look live again and returned
// it, the last free put it in the cache a second time, and the next two
// huge mallocs handed out one address (exit 3). realloc now claims the
// block as free does (one exchange of the mark).
void realloc_races_free_once(std::size_t n, std::size_t m) {
  alarm(20);
  void* p = tenon_malloc(n);
  std::atomic<int> ready{0};
  void* resized = nullptr;
  auto both_at = [&](int count) {
    ready.fetch_add(1);
    while (ready.load() < count) {
    }
  };
  std::thread a([&] {
    tenon_free(tenon_malloc(16));
    both_at(2);
    resized = tenon_realloc(p, m);
  });
  std::thread b([&] {
    tenon_free(tenon_malloc(16));
    both_at(2);
    tenon_free(p);
  });
  a.join();
  b.join();
  tenon_free(resized);
  void* x = tenon_malloc(m);
  void* y = tenon_malloc(m);
  if (x == y) {
    std::fprintf(stderr, "%p handed out twice\n", x);
    _exit(3);
  }
  _exit(0);  // none reported: a double free missed
}

TEST(LargeRaceDeathTest, ReallocAndFreeOfOneHugeBlockAtOnce) {
  GTEST_FLAG_SET(death_test_style, "fast");
  constexpr int kRounds = 400;
  for (int round = 0; round < kRounds && !::testing::Test::HasFailure(); ++round) {
    SCOPED_TRACE(round);
    EXPECT_EXIT(realloc_races_free_once(kHuge, kHuge - 1000000), testing::KilledBySignal(SIGABRT),
                "tenon: (free|realloc)\\(0x[0-9a-f]+\\): double free");
  }
}

}  // namespace
