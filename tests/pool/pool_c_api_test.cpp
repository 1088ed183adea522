// The typed bulk pool's C API: alloc/at/size/clear/free, errno on bad input
// and on the element limit, and concurrent alloc.
#include <gtest/gtest.h>

#include <errno.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "pool_test_scale.hpp"
#include "tenon/mass_pool.h"

namespace {

TEST(PoolCApi, BadArguments) {
  errno = 0;
  EXPECT_EQ(tenon_pool_new(0, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new(8, 3), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new(8, 8192), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new_shift(8, 8, 25), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new((size_t{1} << 32) + 1, 8), nullptr) << "element over 2^32 bytes";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new(8, 0), nullptr) << "alignment 0";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_pool_new_ex(8, 8, 0, 2u), nullptr) << "unknown flag";
  EXPECT_EQ(errno, EINVAL);
  tenon_pool_free(nullptr);  // ignored
}

TEST(PoolCApi, AllocAtSizeClear) {
  tenon_pool* p = tenon_pool_new(24, 8);
  ASSERT_NE(p, nullptr);
  std::vector<void*> slots;
  for (uint32_t i = 0; i < 10000; ++i) {
    uint32_t idx = 12345;
    void* s = tenon_pool_alloc(p, &idx);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(idx, i);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(s) % 8, 0u);
    std::memset(s, int(i & 0xFF), 24);
    slots.push_back(s);
  }
  EXPECT_EQ(tenon_pool_size(p), 10000u);
  for (uint32_t i = 0; i < 10000; ++i) {
    ASSERT_EQ(tenon_pool_at(p, i), slots[i]);
    ASSERT_EQ(static_cast<unsigned char*>(slots[i])[23], i & 0xFF);
  }
  tenon_pool_clear_keep_memory(p);  // same slots again, indices from 0
  EXPECT_EQ(tenon_pool_size(p), 0u);
  for (uint32_t i = 0; i < 10000; ++i) ASSERT_EQ(tenon_pool_alloc(p, nullptr), slots[i]);
  EXPECT_EQ(tenon_pool_size(p), 10000u);
  tenon_pool_clear(p);
  EXPECT_EQ(tenon_pool_size(p), 0u);
  uint32_t idx;
  ASSERT_NE(tenon_pool_alloc(p, &idx), nullptr);
  EXPECT_EQ(idx, 0u);
  EXPECT_NE(tenon_pool_alloc(p, nullptr), nullptr);  // index_out may be NULL
  EXPECT_EQ(tenon_pool_size(p), 2u);
  tenon_pool_free(p);
}

TEST(PoolCApi, LimitGivesEoverflowAndStaysUsable) {
  tenon_pool* p = tenon_pool_new_shift(16, 16, 3);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tenon_pool_set_max_elements(p, 0), EINVAL);
  EXPECT_EQ(tenon_pool_set_max_elements(p, TENON_POOL_MAX_ELEMENTS + 1), EINVAL);
  ASSERT_EQ(tenon_pool_set_max_elements(p, 100), 0);
  for (int i = 0; i < 100; ++i) ASSERT_NE(tenon_pool_alloc(p, nullptr), nullptr);
  uint32_t idx = 0;
  errno = 0;
  EXPECT_EQ(tenon_pool_alloc(p, &idx), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_EQ(idx, TENON_POOL_NO_INDEX);
  EXPECT_EQ(tenon_pool_size(p), 100u);
  EXPECT_NE(tenon_pool_at(p, 99), nullptr);
  tenon_pool_clear(p);
  EXPECT_NE(tenon_pool_alloc(p, &idx), nullptr);
  EXPECT_EQ(idx, 0u);
  tenon_pool_free(p);
}

// `threads` threads allocate per + t * step slots each at once, writing
// (thread, sequence) into every slot; returns every index handed out, sorted,
// after checking each slot still holds what its thread wrote.
std::vector<uint32_t> alloc_concurrently(tenon_pool* p, int threads, uint32_t per, uint32_t step) {
  std::vector<std::vector<uint32_t>> idx(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      const uint32_t n = per + step * uint32_t(t);
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t k;
        auto* s = static_cast<uint64_t*>(tenon_pool_alloc(p, &k));
        ASSERT_NE(s, nullptr);
        *s = (uint64_t(t) << 32) | i;
        idx[t].push_back(k);
      }
    });
  for (auto& th : ts) th.join();
  std::vector<uint32_t> all;
  for (int t = 0; t < threads; ++t)
    for (uint32_t i = 0; i < idx[t].size(); ++i) {
      EXPECT_EQ(*static_cast<uint64_t*>(tenon_pool_at(p, idx[t][i])), (uint64_t(t) << 32) | i);
      all.push_back(idx[t][i]);
    }
  std::sort(all.begin(), all.end());
  return all;
}

TEST(PoolCApi, ConcurrentAllocUniqueIndicesAndSlots) {
  tenon_pool* p = tenon_pool_new_shift(8, 8, 9);
  ASSERT_NE(p, nullptr);
  const uint32_t per = uint32_t(pool_test::scaled(50000, 2000));
  const auto all = alloc_concurrently(p, 8, per, 0);
  EXPECT_EQ(all.size(), size_t{8} * per);
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end());
  EXPECT_EQ(tenon_pool_size(p), all.size());
  tenon_pool_free(p);
}

TEST(PoolCApi, DenseFlagGivesExactlyDenseIndices) {
  tenon_pool* p = tenon_pool_new_ex(8, 8, 5, TENON_POOL_DENSE);
  ASSERT_NE(p, nullptr);
  const auto all = alloc_concurrently(p, 6, uint32_t(pool_test::scaled(20000, 1000)), 37);
  for (uint32_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  EXPECT_EQ(tenon_pool_size(p), all.size());
  tenon_pool_free(p);
}

}  // namespace
