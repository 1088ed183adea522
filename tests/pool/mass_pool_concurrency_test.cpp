// mass_pool under concurrent emplace: every index unique, indices dense up to
// the documented holes (unfilled tails of lane blocks) by default and exactly
// dense with tenon::dense_indices, every element intact, and references stable
// while other threads keep appending.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "pool_test_item.hpp"
#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

using pool_test::check_of;
using pool_test::expect_intact;
using pool_test::Item;

// Runs `threads` threads that each emplace `per_thread` items, released at
// once; returns every returned index, per thread.
std::vector<std::vector<std::uint32_t>> fill(tenon::mass_pool<Item>& pool, unsigned threads,
                                             std::uint32_t per_thread,
                                             std::uint32_t per_thread_step = 0) {
  std::vector<std::vector<std::uint32_t>> idx(threads);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const std::uint32_t n = per_thread + t * per_thread_step;  // uneven counts when step > 0
      idx[t].reserve(n);
      go.wait(false, std::memory_order_acquire);  // sleep, not spin: 96 threads share 2 cores
      for (std::uint32_t s = 0; s < n; ++s) {
        auto [i, ref] = pool.emplace(Item{t, s, check_of(t, s)});
        EXPECT_EQ(&ref, &pool[i]);
        idx[t].push_back(i);
      }
    });
  }
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (auto& th : ts) th.join();
  return idx;
}

std::vector<std::uint32_t> sorted_all(const std::vector<std::vector<std::uint32_t>>& idx) {
  std::vector<std::uint32_t> all;
  for (auto& v : idx) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  return all;
}

TEST(MassPoolConcurrency, OneThreadIsExactlyDense) {
  tenon::mass_pool<Item> pool(6);  // 64 per block: many blocks
  auto idx = fill(pool, 1, pool_test::scaled(100000, 1000));
  for (std::uint32_t s = 0; s < idx[0].size(); ++s) ASSERT_EQ(idx[0][s], s);
  EXPECT_EQ(pool.size(), idx[0].size());
  EXPECT_GE(pool.index_bound(), idx[0].size());  // block granular
  EXPECT_LT(pool.index_bound(), idx[0].size() + pool.block_elements());
  expect_intact(pool, idx);
}

TEST(MassPoolConcurrency, WholeBlocksPerThreadAreExactlyDense) {
  // When every thread emplaces a whole number of blocks, no block is left
  // partly filled, so the indices are exactly 0 .. n-1.
  tenon::mass_pool<Item> pool(8);
  const unsigned threads = 8;
  const std::uint32_t per = pool.block_elements() * std::uint32_t(pool_test::scaled(64, 4));
  auto idx = fill(pool, threads, per);
  auto all = sorted_all(idx);
  ASSERT_EQ(all.size(), std::size_t{threads} * per);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i) << "hole or duplicate";
  EXPECT_EQ(pool.size(), all.size());
  expect_intact(pool, idx);
}

TEST(MassPoolConcurrency, UniqueAndDenseExceptLaneTails) {
  // Odd counts leave each thread's last block partly filled: those tails are
  // the only holes, so each hole ends at a block boundary and there are at
  // most as many holes as threads.
  tenon::mass_pool<Item> pool(10);
  const unsigned threads = 8;
  const std::uint32_t per = std::uint32_t(pool_test::scaled(200001, 5001));
  auto idx = fill(pool, threads, per);
  auto all = sorted_all(idx);
  ASSERT_EQ(all.size(), std::size_t{threads} * per);
  ASSERT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "duplicate index";
  const std::uint64_t bound = pool.index_bound();
  ASSERT_LE(all.back(), bound - 1);
  std::size_t holes = 0;
  std::uint64_t expect = 0;
  for (std::uint32_t i : all) {
    if (i != expect) {
      ++holes;
      EXPECT_EQ(i % pool.block_elements(), 0u) << "a hole must run to the end of its block";
    }
    expect = std::uint64_t{i} + 1;
  }
  EXPECT_LE(holes + (expect != bound), threads);
  EXPECT_EQ(pool.size(), all.size());
  expect_intact(pool, idx);
}

TEST(MassPoolConcurrency, MoreThreadsThanLanesShareLanesSafely) {
  // 96 threads on 64 lanes and 16-element blocks: lanes are shared and
  // refills race constantly (the spare-block path); nothing may be lost.
  tenon::mass_pool<Item> pool(4);
  const unsigned threads = 96;
  const std::uint32_t per = std::uint32_t(pool_test::scaled(3000, 300));
  auto idx = fill(pool, threads, per);
  auto all = sorted_all(idx);
  ASSERT_EQ(all.size(), std::size_t{threads} * per);
  ASSERT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "duplicate index";
  EXPECT_EQ(pool.size(), all.size());
  expect_intact(pool, idx);
  // Iteration sees exactly the emplaced elements, in index order.
  std::size_t n = 0;
  for (auto it = pool.begin(); it != pool.end(); ++it, ++n) ASSERT_EQ(it.index(), all[n]);
  EXPECT_EQ(n, all.size());
}

TEST(MassPoolConcurrency, AllThreadsOnOneLaneRaceForRefills) {
  // Force every thread onto lane 0 (test-only use of the lane seed): with
  // 8-element blocks nearly every refill races, losers park their block on
  // the spare stack and later refills take it back. Spare blocks left at the
  // end are holes that size() and iteration must skip.
  tenon::mass_pool<Item> pool(3);
  const unsigned threads = 8;
  const std::uint32_t per = std::uint32_t(pool_test::scaled(20000, 2000));
  std::vector<std::vector<std::uint32_t>> idx(threads);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      tenon::detail::tl_pool_lane_plus1 = 1;
      go.wait(false);
      for (std::uint32_t s = 0; s < per; ++s) idx[t].push_back(pool.emplace(Item{t, s, check_of(t, s)}).index);
    });
  go = true;
  go.notify_all();
  for (auto& th : ts) th.join();
  // Not asserted (scheduling decides), but shows the spare path ran.
  std::printf("refill races: %llu, spare slots left as holes: %llu\n",
              (unsigned long long)pool.refill_races(),
              (unsigned long long)(pool.index_bound() - pool.size()));
  auto all = sorted_all(idx);
  ASSERT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "duplicate index";
  EXPECT_EQ(pool.size(), all.size());
  expect_intact(pool, idx);
  std::size_t n = 0;
  for (auto it = pool.begin(); it != pool.end(); ++it, ++n) ASSERT_EQ(it.index(), all[n]);
  EXPECT_EQ(n, all.size());
}

// size() during emplace is an estimate, but it must be safe to call: with
// 8-element blocks and every thread on one lane, refills (and so size()'s walk
// over blocks, taken while a refill is unfinished) run all the time.
TEST(MassPoolConcurrency, SizeWhileOthersEmplaceIsSafe) {
  tenon::mass_pool<Item> pool(3);
  const unsigned threads = 4;
  const std::uint32_t per = std::uint32_t(pool_test::scaled(20000, 2000));
  std::atomic<unsigned> running{threads};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      tenon::detail::tl_pool_lane_plus1 = 1;
      for (std::uint32_t s = 0; s < per; ++s) pool.emplace(Item{t, s, check_of(t, s)});
      running.fetch_sub(1);
    });
  std::uint64_t reads = 0, largest = 0;
  while (running.load() != 0) {
    largest = std::max<std::uint64_t>(largest, pool.size());
    ++reads;
  }
  for (auto& th : ts) th.join();
  std::printf("size() read %llu times during emplace, largest %llu\n", (unsigned long long)reads,
              (unsigned long long)largest);
  EXPECT_LE(largest, pool.index_bound()) << "an estimate, but never above the claimed frontier";
  EXPECT_EQ(pool.size(), std::size_t{threads} * per);
}

// Exact density: whatever the interleaving, the indices handed out are
// 0 .. n-1. Uneven per-thread counts, many small blocks (block turnover and
// the prefault of the next block race with claims), and more threads than
// cores.
void expect_exactly_dense(unsigned block_shift, unsigned threads, std::uint32_t per,
                          std::uint32_t step) {
  tenon::mass_pool<Item> pool(tenon::dense_indices, block_shift);
  ASSERT_TRUE(pool.dense());
  auto idx = fill(pool, threads, per, step);
  auto all = sorted_all(idx);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i) << "hole or duplicate";
  EXPECT_EQ(pool.size(), all.size());
  EXPECT_GE(pool.index_bound(), all.size());
  EXPECT_LT(pool.index_bound(), all.size() + pool.block_elements());
  expect_intact(pool, idx);
  // Iteration: rank == index, since there are no holes.
  std::size_t n = 0;
  for (auto it = pool.begin(); it != pool.end(); ++it, ++n) ASSERT_EQ(it.index(), n);
  EXPECT_EQ(n, all.size());
}

TEST(MassPoolConcurrency, DenseIndicesAreExactlyDenseWithUnevenThreads) {
  expect_exactly_dense(10, 8, std::uint32_t(pool_test::scaled(100003, 3001)), 7919);
}

TEST(MassPoolConcurrency, DenseIndicesAreExactlyDenseWithTinyBlocksAndManyThreads) {
  // 4-element blocks: nearly every claim races a block turnover.
  expect_exactly_dense(2, 32, std::uint32_t(pool_test::scaled(5003, 501)), 13);
}

TEST(MassPoolConcurrency, DenseIndicesAfterClearStartAtZero) {
  tenon::mass_pool<Item> pool(tenon::dense_indices, 3);
  fill(pool, 4, 1001, 3);
  pool.clear();
  EXPECT_EQ(pool.size(), 0u);
  auto idx = fill(pool, 4, 999, 5);
  auto all = sorted_all(idx);
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  expect_intact(pool, idx);
}

TEST(MassPoolConcurrency, ReferencesStayValidWhileOthersAppend) {
  tenon::mass_pool<std::uint64_t> pool(6);
  std::vector<std::uint64_t*> early;
  for (std::uint64_t v = 0; v < 1000; ++v) {
    auto [i, ref] = pool.emplace(v);
    early.push_back(&ref);
    ASSERT_EQ(i, v);
  }
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (std::size_t k = 0; k < pool_test::scaled(100000, 2000); ++k) pool.emplace(std::uint64_t{7});
    });
  for (auto& th : ts) th.join();
  for (std::uint64_t v = 0; v < 1000; ++v) {
    ASSERT_EQ(early[v], &pool[std::uint32_t(v)]);
    ASSERT_EQ(*early[v], v);
  }
}

TEST(MassPoolConcurrency, ManyPoolsPerThreadDoNotMix) {
  // The per-thread state is only a lane number; all claims live in the pool,
  // so a thread alternating between pools fills each one densely.
  constexpr int kPools = 100;
  std::vector<std::unique_ptr<tenon::mass_pool<int>>> pools;
  for (int p = 0; p < kPools; ++p) pools.push_back(std::make_unique<tenon::mass_pool<int>>(5));
  for (int round = 0; round < 100; ++round)
    for (int p = 0; p < kPools; ++p) {
      auto [i, ref] = pools[p]->emplace(p * 1000 + round);
      ASSERT_EQ(i, std::uint32_t(round));
    }
  for (int p = 0; p < kPools; ++p) {
    ASSERT_EQ(pools[p]->size(), 100u);
    for (int round = 0; round < 100; ++round) ASSERT_EQ((*pools[p])[round], p * 1000 + round);
  }
}

}  // namespace
