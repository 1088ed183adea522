// realloc growing and shrinking across the small, large and huge (> 1 MiB)
// ranges must keep the common prefix, whatever the block moves to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

using namespace tenon_test;

namespace {

// Representative sizes: tiny, small classes, class edges, page edges, large
// spans, and huge blocks on both sides of 1 MiB and 4 MiB.
const std::vector<std::size_t> kRangeSizes = {
    1,      8,      15,     16,     17,      24,      100,       128,       1000,
    4095,   4096,   4097,   10000,  32768,   65535,   65536,     65537,     100000,
    262145, 524288, 1048575, 1048576, 1048577, 3145731, 4194304, (8u << 20) + 3, 20u << 20,
};

TEST(Realloc, EveryPairOfRangesKeepsPrefix) {
  std::uint64_t seed = 0;
  for (std::size_t from : kRangeSizes) {
    for (std::size_t to : kRangeSizes) {
      if (kSanitized && (from > (4u << 20) || to > (4u << 20))) continue;
      ++seed;
      // A live neighbour of the same size: a realloc that overruns hits it.
      void* neighbour = tenon_malloc(from);
      ASSERT_NE(neighbour, nullptr);
      fill_pattern(neighbour, from, ~seed);
      void* p = tenon_malloc(from);
      ASSERT_NE(p, nullptr);
      fill_pattern(p, from, seed);
      void* q = tenon_realloc(p, to);
      ASSERT_NE(q, nullptr) << "tenon_realloc(p[" << from << "], " << to << ")";
      EXPECT_TRUE(is_aligned(q, min_alignment(to))) << q;
      const std::size_t usable = tenon_malloc_usable_size(q);
      EXPECT_GE(usable, to) << "realloc " << from << " -> " << to;
      const std::size_t keep = std::min(from, to);
      EXPECT_EQ(first_pattern_mismatch(q, keep, seed), keep)
          << "realloc " << from << " -> " << to << " lost contents";
      // The whole new usable size is writable.
      fill_pattern(q, usable, seed + 1);
      EXPECT_EQ(first_pattern_mismatch(neighbour, from, ~seed), from)
          << "realloc " << from << " -> " << to << " damaged a neighbour";
      EXPECT_EQ(first_pattern_mismatch(q, usable, seed + 1), usable);
      tenon_free(q);
      tenon_free(neighbour);
    }
  }
}

// One block grown step by step from 1 byte to 64 MiB then shrunk back, with
// the contents checked at every step (covers in-place growth and mremap).
TEST(Realloc, GrowThenShrinkChain) {
  const std::size_t top = kSanitized ? (std::size_t{8} << 20) : (std::size_t{64} << 20);
  std::size_t size = 1;
  void* p = tenon_malloc(size);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, size, 99);
  // Other live blocks so that the grown block has neighbours.
  std::vector<void*> others;
  int steps = 0;
  while (size < top) {
    std::size_t next = size + size / 4 + 1 + (steps % 7) * 3;
    void* q = tenon_realloc(p, next);
    ASSERT_NE(q, nullptr) << "grow " << size << " -> " << next;
    ASSERT_EQ(first_pattern_mismatch(q, size, 99), size) << "grow " << size << " -> " << next;
    ASSERT_GE(tenon_malloc_usable_size(q), next);
    fill_pattern(q, next, 99);
    p = q;
    size = next;
    if (steps++ % 5 == 0) {
      void* o = tenon_malloc(size / 3 + 1);
      ASSERT_NE(o, nullptr);
      others.push_back(o);
    }
  }
  while (size > 1) {
    std::size_t next = size - size / 3 - 1;
    if (next == 0) next = 1;
    void* q = tenon_realloc(p, next);
    ASSERT_NE(q, nullptr) << "shrink " << size << " -> " << next;
    ASSERT_EQ(first_pattern_mismatch(q, next, 99), next) << "shrink " << size << " -> " << next;
    ASSERT_GE(tenon_malloc_usable_size(q), next);
    p = q;
    size = next;
  }
  tenon_free(p);
  for (void* o : others) tenon_free(o);
}

// Shrinking in place must not lose the tail's neighbours, and growing back
// into the tail must not expose stale bytes as the prefix.
TEST(Realloc, ShrinkThenGrowBack) {
  for (std::size_t size : {std::size_t{4096}, std::size_t{200000}, std::size_t{6} << 20}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, size);
    void* q = tenon_realloc(p, size / 8);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(first_pattern_mismatch(q, size / 8, size), size / 8);
    // Something allocated now may land in the released tail.
    void* filler = tenon_malloc(size / 2);
    ASSERT_NE(filler, nullptr);
    fill_pattern(filler, size / 2, 5);
    void* r = tenon_realloc(q, size * 2);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(first_pattern_mismatch(r, size / 8, size), size / 8) << "size " << size;
    fill_pattern(r, size * 2, 6);
    ASSERT_EQ(first_pattern_mismatch(filler, size / 2, 5), size / 2) << "size " << size;
    tenon_free(r);
    tenon_free(filler);
  }
}

// Several huge blocks growing in turn (the mremap path moves them around).
TEST(Realloc, InterleavedHugeGrowth) {
  const int n = 4;
  const std::size_t top = kSanitized ? (std::size_t{8} << 20) : (std::size_t{48} << 20);
  void* p[n];
  std::size_t size[n];
  for (int i = 0; i < n; ++i) {
    size[i] = (std::size_t{2} << 20) + i * 4096 + 1;
    p[i] = tenon_malloc(size[i]);
    ASSERT_NE(p[i], nullptr);
    fill_pattern(p[i], size[i], i);
  }
  bool grew = true;
  while (grew) {
    grew = false;
    for (int i = 0; i < n; ++i) {
      if (size[i] >= top) continue;
      std::size_t next = size[i] * 2 - 5;
      void* q = tenon_realloc(p[i], next);
      ASSERT_NE(q, nullptr) << "grow " << size[i] << " -> " << next;
      ASSERT_EQ(first_pattern_mismatch(q, size[i], i), size[i]) << "grow " << size[i] << " -> " << next;
      fill_pattern(q, next, i);
      p[i] = q;
      size[i] = next;
      grew = true;
    }
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(first_pattern_mismatch(p[i], size[i], i), size[i]);
    tenon_free(p[i]);
  }
}

// realloc to the same size, or within the usable size, keeps everything.
TEST(Realloc, SameAndWithinUsableSize) {
  for (std::size_t size : {std::size_t{1}, std::size_t{40}, std::size_t{3000}, std::size_t{70000},
                           std::size_t{2} << 20}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    std::size_t usable = tenon_malloc_usable_size(p);
    fill_pattern(p, usable, size);
    void* q = tenon_realloc(p, size);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(first_pattern_mismatch(q, size, size), size);
    void* r = tenon_realloc(q, usable);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(first_pattern_mismatch(r, size, size), size);
    ASSERT_GE(tenon_malloc_usable_size(r), usable);
    tenon_free(r);
  }
}

}  // namespace

namespace {

// Blocks from the aligned entry points (including alignments beyond the 4 MiB
// chunk size, which take a different path) resized up and down.
TEST(Realloc, AlignedBlocksGrowAndShrink) {
  std::uint64_t seed = 500;
  for (std::size_t a : {std::size_t{64}, std::size_t{4096}, std::size_t{1} << 16, std::size_t{1} << 20,
                        std::size_t{4} << 20, std::size_t{8} << 20, std::size_t{32} << 20}) {
    for (std::size_t size : {std::size_t{24}, std::size_t{5000}, std::size_t{100000}, std::size_t{3} << 20}) {
      for (std::size_t to : {std::size_t{8}, size / 2 + 1, size * 2 + 3, std::size_t{9} << 20}) {
        ++seed;
        void* p = tenon_aligned_alloc(a, size);
        ASSERT_NE(p, nullptr) << "tenon_aligned_alloc(" << a << ", " << size << ")";
        ASSERT_TRUE(is_aligned(p, a));
        fill_pattern(p, size, seed);
        void* q = tenon_realloc(p, to);
        ASSERT_NE(q, nullptr) << "tenon_realloc(aligned_alloc(" << a << ", " << size << "), " << to << ")";
        const std::size_t keep = std::min(size, to);
        EXPECT_EQ(first_pattern_mismatch(q, keep, seed), keep)
            << "realloc of an aligned block (" << a << ", " << size << ") to " << to << " lost contents";
        EXPECT_GE(tenon_malloc_usable_size(q), to);
        fill_pattern(q, to, seed);
        tenon_free(q);
      }
    }
  }
}

}  // namespace
