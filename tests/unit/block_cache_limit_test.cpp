// The block cache's bound of a class (heap/block_cache.h): a heap's share of
// kBlockCacheBudgetBytes among the heaps attached to threads, never below the
// fixed bound nor above kBlockCacheMaxClassBytes'.
#include <gtest/gtest.h>

#include "tenon/heap/block_cache.h"

using namespace tenon;

namespace {

bool cached(unsigned c) { return kBlockCache.slot[c] != block_cache_detail::kNone; }
bool bounded_in_bytes(unsigned c) { return block_cache_detail::span_blocks(c) <= kBlockCacheFewBlocks; }

TEST(BlockCacheLimit, AHeapAloneGetsTheBiggerBound) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    if (!cached(c)) continue;
    EXPECT_EQ(block_cache_limit(c, 1), kBlockCache.limit_max[c]) << kClasses.size[c];
    EXPECT_EQ(block_cache_limit(c, 0), block_cache_limit(c, 1)) << kClasses.size[c];  // none counted: alone
    if (bounded_in_bytes(c)) {
      EXPECT_GT(kBlockCache.limit_max[c], kBlockCache.limit[c]) << kClasses.size[c];
      EXPECT_LE(kBlockCache.limit_max[c] * kClasses.size[c], kBlockCacheMaxClassBytes) << kClasses.size[c];
    }
  }
}

TEST(BlockCacheLimit, ManyHeapsKeepTheFixedBound) {
  const std::uint32_t many = kBlockCacheBudgetBytes / kBlockCacheClassBytes;
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (cached(c))
      for (std::uint32_t live : {many, many + 1, 64u, 65535u})
        EXPECT_EQ(block_cache_limit(c, live), kBlockCache.limit[c]) << kClasses.size[c] << " " << live;
}

TEST(BlockCacheLimit, NeverGrowsWithMoreHeaps) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    if (!cached(c)) continue;
    for (std::uint32_t live = 1; live < 100; ++live) {
      std::uint32_t n = block_cache_limit(c, live);
      EXPECT_LE(block_cache_limit(c, live + 1), n) << kClasses.size[c] << " " << live;
      EXPECT_GE(n, kBlockCache.limit[c]);
      EXPECT_LE(n, kBlockCache.limit_max[c]);
    }
  }
}

TEST(BlockCacheLimit, ClassesBoundedInBlocksKeepTheirBound) {
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (cached(c) && !bounded_in_bytes(c)) EXPECT_EQ(kBlockCache.limit_max[c], kBlockCache.limit[c]) << kClasses.size[c];
}

}  // namespace
