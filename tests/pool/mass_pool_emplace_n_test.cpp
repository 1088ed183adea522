// mass_pool::emplace_n, the batched fill: a thread claims up to kBatch slots
// of its lane at once and fills them. The guarantees are emplace's: unique
// indices, every element intact, exact density with one thread (and in dense
// pools), holes only at the unfilled tails of blocks, size() and iteration
// exact, the limit filled exactly; and a claim made inside a batch (by make
// itself, or by a signal handler) gets a slot of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pool_test_item.hpp"
#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

using pool_test::check_of;
using pool_test::Item;

// Thread t's items seq first .. first + n - 1, by emplace_n; their indices
// are appended to idx in order.
void put_n(tenon::mass_pool<Item>& pool, std::uint32_t t, std::uint32_t first, std::uint32_t n,
           std::vector<std::uint32_t>& idx) {
  std::uint32_t s = first;
  pool.emplace_n(n, [&](std::uint32_t index) noexcept {
    idx.push_back(index);
    const std::uint32_t me = s++;
    return Item{t, me, check_of(t, me)};
  });
  EXPECT_EQ(s, first + n);
}

// Every thread's items are where its indices say, and iteration visits
// exactly them, once each, in index order.
void expect_intact(tenon::mass_pool<Item>& pool, const std::vector<std::vector<std::uint32_t>>& idx) {
  pool_test::expect_intact(pool, idx);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<std::uint32_t> all;
  for (auto& v : idx) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "an index handed out twice";
  ASSERT_EQ(pool.size(), all.size());
  std::size_t k = 0;
  for (auto it = pool.begin(); it != pool.end(); ++it, ++k) {
    ASSERT_LT(k, all.size());
    ASSERT_EQ(it.index(), all[k]);
    ASSERT_EQ(it->check, check_of(it->thread, it->seq));
  }
  ASSERT_EQ(k, all.size());
}

// The density promise: in every block the indices used are a prefix of it.
void expect_holes_only_at_block_tails(const tenon::mass_pool<Item>& pool,
                                      const std::vector<std::vector<std::uint32_t>>& idx) {
  std::vector<std::uint32_t> all;
  for (auto& v : idx) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  const std::uint32_t per_block = pool.block_elements();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::uint32_t slot = all[i] % per_block;
    if (slot != 0) ASSERT_TRUE(i > 0 && all[i - 1] == all[i] - 1) << "hole before index " << all[i];
  }
}

std::vector<std::vector<std::uint32_t>> fill_threads(tenon::mass_pool<Item>& pool, unsigned threads,
                                                     std::uint32_t per_thread, std::uint32_t chunk) {
  std::vector<std::vector<std::uint32_t>> idx(threads);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      idx[t].reserve(per_thread);
      go.wait(false, std::memory_order_acquire);  // sleep, not spin: many threads share 2 cores
      for (std::uint32_t s = 0; s < per_thread; s += chunk)
        put_n(pool, t, s, std::min(chunk, per_thread - s), idx[t]);
    });
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (auto& th : ts) th.join();
  return idx;
}

TEST(MassPoolEmplaceN, OneThreadIsExactlyDenseAcrossBlocks) {
  tenon::mass_pool<Item> pool(6);  // 64 per block: batches meet block ends
  std::vector<std::vector<std::uint32_t>> idx(1);
  const std::uint32_t counts[] = {0, 1, 63, 64, 65, 1, 200, 1000, 7};
  std::uint32_t s = 0;
  for (std::uint32_t n : counts) {
    put_n(pool, 0, s, n, idx[0]);
    s += n;
    // emplace between batches continues the same lane
    idx[0].push_back(pool.emplace(Item{0, s, check_of(0, s)}).index);
    ++s;
  }
  for (std::uint32_t k = 0; k < idx[0].size(); ++k) ASSERT_EQ(idx[0][k], k);
  expect_intact(pool, idx);
}

TEST(MassPoolEmplaceN, ThreadsGetUniqueIndicesWithHolesOnlyAtBlockTails) {
  tenon::mass_pool<Item> pool(8);  // 256 per block
  const std::uint32_t per_thread = pool_test::scaled(40000, 2000);
  for (std::uint32_t chunk : {per_thread, 100u, 1u}) {
    auto idx = fill_threads(pool, 8, per_thread, chunk);
    expect_intact(pool, idx);
    expect_holes_only_at_block_tails(pool, idx);
    pool.clear();
  }
}

// 80 threads on 64 lanes: lanes taken from their owners and shared, so the
// batches there are claimed by CAS.
TEST(MassPoolEmplaceN, MoreThreadsThanLanes) {
  tenon::mass_pool<Item> pool(5);
  auto idx = fill_threads(pool, 80, pool_test::scaled(3000, 300), 50);
  expect_intact(pool, idx);
  expect_holes_only_at_block_tails(pool, idx);
}

TEST(MassPoolEmplaceN, DensePoolIsExactlyDense) {
  tenon::mass_pool<Item> pool(tenon::dense_indices, 6);
  auto idx = fill_threads(pool, 4, pool_test::scaled(5000, 500), 77);
  expect_intact(pool, idx);
  std::vector<std::uint32_t> all;
  for (auto& v : idx) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (std::uint32_t k = 0; k < all.size(); ++k) ASSERT_EQ(all[k], k);
}

// The limit: the pool fills to exactly its last slot, batches included, and
// then emplace_n throws; what it made before stays.
TEST(MassPoolEmplaceN, FillsTheLimitExactlyThenThrows) {
  tenon::mass_pool<Item> pool(6);
  ASSERT_TRUE(pool.set_max_elements_for_testing(1000));
  std::vector<std::vector<std::uint32_t>> idx(2);
  std::atomic<int> thrown{0};
  std::vector<std::thread> ts;
  for (std::uint32_t t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      try {
        put_n(pool, t, 0, 700, idx[t]);
      } catch (const std::length_error&) {
        thrown.fetch_add(1);
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_GE(thrown.load(), 1);  // 1400 asked, 1000 fit: one thread (or both) ran out
  EXPECT_EQ(idx[0].size() + idx[1].size(), 1000u);
  expect_intact(pool, idx);
  EXPECT_THROW(pool.emplace_n(1, [](std::uint32_t) noexcept { return Item{9, 0, check_of(9, 0)}; }),
               std::length_error);
  EXPECT_EQ(pool.size(), 1000u);
}

// A claim made while a batch is claimed but not yet filled, on the same
// thread and lane: by make itself, and by a signal handler that interrupts
// make. Each must get a slot outside the batch.
tenon::mass_pool<Item>* g_pool = nullptr;
std::vector<std::uint32_t>* g_handler_idx = nullptr;
std::uint32_t g_handler_seq = 0;
void emplace_in_handler(int) {
  const std::uint32_t s = g_handler_seq++;
  g_handler_idx->push_back(g_pool->emplace(Item{1, s, check_of(1, s)}).index);  // reserved ahead: no allocation
}

TEST(MassPoolEmplaceN, ClaimsInsideABatchGetSlotsOfTheirOwn) {
  tenon::mass_pool<Item> pool(6);
  const std::uint32_t n = 5000;
  std::vector<std::vector<std::uint32_t>> idx(3);
  idx[0].reserve(n);
  idx[1].reserve(n);
  idx[2].reserve(n);
  g_pool = &pool;
  g_handler_idx = &idx[1];
  struct sigaction sa {}, old {};
  sa.sa_handler = emplace_in_handler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  std::uint32_t s = 0, nested = 0;
  pool.emplace_n(n, [&](std::uint32_t index) noexcept {
    idx[0].push_back(index);
    if (s % 7 == 3) raise(SIGUSR1);  // the handler emplaces now
    if (s % 11 == 5) {
      idx[2].push_back(pool.emplace(Item{2, nested, check_of(2, nested)}).index);
      ++nested;
    }
    const std::uint32_t me = s++;
    return Item{0, me, check_of(0, me)};
  });
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_GT(idx[1].size(), 0u);
  ASSERT_GT(idx[2].size(), 0u);
  expect_intact(pool, idx);
  // One thread: still exactly dense.
  EXPECT_EQ(pool.index_bound() - pool.size() < pool.block_elements(), true);
  std::vector<std::uint32_t> all;
  for (auto& v : idx) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (std::uint32_t k = 0; k < all.size(); ++k) ASSERT_EQ(all[k], k);
}

}  // namespace
