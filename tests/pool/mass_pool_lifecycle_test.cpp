// mass_pool lifetime: clear and reuse (also keeping the memory), destructors
// run exactly once, the 2^32-1 element limit (through the test hook), and
// constructors that throw.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

std::atomic<long> g_live{0};
std::atomic<long> g_destroyed{0};

struct Counted {
  explicit Counted(int v) noexcept : value(v), alive(0xA11CE) { g_live.fetch_add(1); }
  ~Counted() {
    EXPECT_EQ(alive, 0xA11CEu) << "destroyed twice or never constructed";
    alive = 0xDEAD;
    g_live.fetch_sub(1);
    g_destroyed.fetch_add(1);
  }
  int value;
  unsigned alive;
};

TEST(MassPoolLifecycle, ClearAndReuse) {
  tenon::mass_pool<int> pool(6);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5000; ++i) {
      auto [idx, ref] = pool.emplace(i + round);
      ASSERT_EQ(idx, std::uint32_t(i));
      ASSERT_EQ(ref, i + round);
    }
    EXPECT_EQ(pool.size(), 5000u);
    pool.clear();
    EXPECT_EQ(pool.size(), 0u);
    EXPECT_TRUE(pool.empty());
    EXPECT_EQ(pool.begin(), pool.end());
  }
}

TEST(MassPoolLifecycle, DestructorsRunOnceOnClearAndDestruction) {
  g_live = 0;
  g_destroyed = 0;
  const int threads = 6;
  const int per = int(pool_test::scaled(20001, 1001));
  {
    tenon::mass_pool<Counted> pool(7);
    auto fill = [&] {
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&] { for (int i = 0; i < per; ++i) pool.emplace(i); });
      for (auto& th : ts) th.join();
    };
    fill();  // leaves partly filled lane blocks: their tails must not be "destroyed"
    EXPECT_EQ(g_live.load(), long{threads} * per);
    pool.clear();
    EXPECT_EQ(g_live.load(), 0);
    EXPECT_EQ(g_destroyed.load(), long{threads} * per);
    fill();
    EXPECT_EQ(g_live.load(), long{threads} * per);
  }
  EXPECT_EQ(g_live.load(), 0);
  EXPECT_EQ(g_destroyed.load(), 2L * threads * per);
}

TEST(MassPoolLifecycle, TriviallyDestructibleElementsAreNotVisited) {
  static_assert(std::is_trivially_destructible_v<int>);
  tenon::mass_pool<int> pool;
  for (int i = 0; i < 1000; ++i) pool.emplace(i);
  pool.clear();  // nothing to observe but that it is fine and the pool is empty
  EXPECT_EQ(pool.size(), 0u);
}

TEST(MassPoolLifecycle, LimitIsAClearErrorNotAWrap) {
  tenon::mass_pool<std::uint32_t> pool(4);
  ASSERT_TRUE(pool.set_max_elements_for_testing(1000));
  std::vector<bool> seen(1000, false);
  for (std::uint32_t i = 0; i < 1000; ++i) {
    auto [idx, ref] = pool.emplace(i);
    ASSERT_LT(idx, 1000u);
    ASSERT_FALSE(seen[idx]);
    seen[idx] = true;
  }
  EXPECT_THROW(pool.emplace(0u), std::length_error);
  auto r = pool.try_emplace(0u);
  EXPECT_EQ(r.ptr, nullptr);
  EXPECT_EQ(r.index, TENON_POOL_NO_INDEX);
  EXPECT_EQ(pool.size(), 1000u);
  // The limit counts elements, not claimed blocks: it is reached exactly even
  // when other threads' lanes hold partly filled blocks.
  pool.clear();
  std::vector<std::thread> ts;
  std::atomic<int> ok{0}, refused{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 400; ++i) (pool.try_emplace(1u).ptr ? ok : refused).fetch_add(1);
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(ok.load(), 1000);
  EXPECT_EQ(refused.load(), 600);
  EXPECT_EQ(pool.size(), 1000u);
}

TEST(MassPoolLifecycle, DenseLimitIsExactAndRefusalsDoNotWrap) {
  // A limit inside a block: the dense pool hands out exactly 0 .. 1002, then
  // refuses. Refused claims overshoot the shared lane word and are undone,
  // so a million refusals cannot wrap it into the next block's indices.
  tenon::mass_pool<std::uint32_t> pool(tenon::dense_indices, 4);
  ASSERT_TRUE(pool.set_max_elements_for_testing(1003));
  std::vector<std::thread> ts;
  std::vector<std::vector<std::uint32_t>> got(4);
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 250000; ++i) {
        auto r = pool.try_emplace(std::uint32_t(t));
        if (r.ptr) got[t].push_back(r.index); else refused.fetch_add(1);
      }
    });
  for (auto& th : ts) th.join();
  std::vector<std::uint32_t> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 1003u);
  for (std::uint32_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  EXPECT_EQ(refused.load(), 1000000 - 1003);
  EXPECT_EQ(pool.size(), 1003u);
  EXPECT_EQ(pool.index_bound(), 1003u);
  EXPECT_THROW(pool.emplace(0u), std::length_error);
  pool.clear();
  EXPECT_EQ(pool.emplace(7u).index, 0u);
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// clear(keep_memory): empty, indices from 0 again, destructors run, and the
// next fill reuses the same slots without faulting their pages in again;
// clear() afterwards still gives everything back.
template <class Pool>
void keep_memory_round_trip(Pool& pool) {
  const std::uint32_t n = 4 * pool.block_elements() + 123;
  std::vector<std::uint64_t*> first;
  for (std::uint32_t i = 0; i < n; ++i) first.push_back(&pool.emplace(std::uint64_t{i}).ref);
  pool.clear(tenon::keep_memory);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.index_bound(), 0u);
  const long before = minor_faults();
  for (std::uint32_t i = 0; i < n; ++i) {
    auto [idx, ref] = pool.emplace(std::uint64_t{i} * 3);
    ASSERT_EQ(idx, i);
    ASSERT_EQ(&ref, first[i]) << "the kept block is reused in place";
  }
  EXPECT_LE(minor_faults() - before, 8) << "kept pages must not fault again";
  EXPECT_EQ(pool.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(pool[i], std::uint64_t{i} * 3);
  pool.clear();  // back to the OS; the pool is still usable
  EXPECT_EQ(pool.emplace(std::uint64_t{5}).index, 0u);
  EXPECT_EQ(pool.size(), 1u);
}

TEST(MassPoolLifecycle, ClearKeepMemoryReusesBlocksInPlace) {
  tenon::mass_pool<std::uint64_t> lanes(12);
  keep_memory_round_trip(lanes);
  tenon::mass_pool<std::uint64_t> dense(tenon::dense_indices, 12);
  keep_memory_round_trip(dense);
}

TEST(MassPoolLifecycle, ClearKeepMemoryRunsDestructors) {
  g_destroyed = 0;
  {
    tenon::mass_pool<Counted> pool(4);
    for (int i = 0; i < 100; ++i) pool.emplace(i);
    pool.clear(tenon::keep_memory);
    EXPECT_EQ(g_destroyed.load(), 100);
    for (int i = 0; i < 50; ++i) pool.emplace(i);
  }
  EXPECT_EQ(g_destroyed.load(), 150);
}

TEST(MassPoolLifecycle, BadBlockShiftIsAClearError) {
  EXPECT_THROW(tenon::mass_pool<int>(25), std::invalid_argument);
  tenon::mass_pool<int> smallest(1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(smallest.emplace(i).index, std::uint32_t(i));
}

TEST(MassPoolLifecycle, LimitHookRules) {
  tenon::mass_pool<int> pool;
  EXPECT_FALSE(pool.set_max_elements_for_testing(0));
  EXPECT_FALSE(pool.set_max_elements_for_testing(tenon::mass_pool<int>::max_size() + 1));
  EXPECT_TRUE(pool.set_max_elements_for_testing(tenon::mass_pool<int>::max_size()));
  pool.emplace(1);
  EXPECT_FALSE(pool.set_max_elements_for_testing(10)) << "only on an empty pool";
}

struct ThrowsOnNegative {
  explicit ThrowsOnNegative(int v) : s(std::to_string(v)) {
    if (v < 0) throw std::invalid_argument("negative");
  }
  std::string s;  // non-trivial, nothrow move
};

TEST(MassPoolLifecycle, ThrowingConstructorUsesNoSlot) {
  tenon::mass_pool<ThrowsOnNegative> pool(4);
  pool.emplace(1);
  EXPECT_THROW(pool.emplace(-1), std::invalid_argument);
  auto [idx, ref] = pool.emplace(2);
  EXPECT_EQ(idx, 1u) << "the failed emplace must not leave a hole";
  EXPECT_EQ(ref.s, "2");
  EXPECT_EQ(pool.size(), 2u);
}

TEST(MassPoolLifecycle, OverAlignedAndOddSizedElements) {
  struct alignas(64) Wide { char c[65]; };  // stride 128
  struct Odd { char c[24]; };               // stride 24, 3 MiB default blocks
  tenon::mass_pool<Wide> w;
  tenon::mass_pool<Odd> o;
  for (int i = 0; i < 1000; ++i) {
    auto [wi, wr] = w.emplace();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&wr) % 64, 0u);
    wr.c[64] = char(i);
    auto [oi, orf] = o.emplace();
    orf.c[23] = char(i);
  }
  for (std::uint32_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(w[i].c[64], char(i));
    EXPECT_EQ(o[i].c[23], char(i));
  }
}

}  // namespace
