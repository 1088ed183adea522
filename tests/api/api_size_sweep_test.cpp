// Sweeps of sizes and alignments: every block must be aligned, have a usable
// size at least as large as asked, and keep a pattern written over its whole
// usable size while many other blocks are live (so overlap is detected).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

using namespace tenon_test;

namespace {

struct Block {
  void* p;
  std::size_t requested;
  std::size_t usable;
  std::uint64_t seed;
};

// Allocates one block with `alloc`, checks it, and fills its usable size.
template <class Alloc>
::testing::AssertionResult take(std::vector<Block>& live, std::size_t size, std::size_t align,
                                std::uint64_t seed, Alloc alloc, const char* what) {
  void* p = alloc(size);
  if (!p) return ::testing::AssertionFailure() << what << "(" << size << ") returned NULL";
  if (!is_aligned(p, align))
    return ::testing::AssertionFailure() << what << "(" << size << ") = " << p
                                         << " is not aligned to " << align;
  std::size_t usable = tenon_malloc_usable_size(p);
  if (usable < size)
    return ::testing::AssertionFailure() << what << "(" << size << "): usable size " << usable
                                         << " is below the request";
  fill_pattern(p, usable, seed);
  live.push_back({p, size, usable, seed});
  return ::testing::AssertionSuccess();
}

// Verifies every live block's pattern and usable size, then frees them all.
::testing::AssertionResult verify_and_free(std::vector<Block>& live) {
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  bool ok = true;
  for (const Block& b : live) {
    std::size_t bad = first_pattern_mismatch(b.p, b.usable, b.seed);
    if (ok && bad != b.usable) {
      ok = false;
      result = ::testing::AssertionFailure()
               << "block " << b.p << " of " << b.requested << " bytes (usable " << b.usable
               << ") changed at offset " << bad << " while other blocks were live";
    }
    std::size_t usable = tenon_malloc_usable_size(b.p);
    if (ok && usable != b.usable) {
      ok = false;
      result = ::testing::AssertionFailure() << "usable size of " << b.p << " changed from "
                                             << b.usable << " to " << usable;
    }
  }
  for (const Block& b : live) tenon_free(b.p);
  live.clear();
  return result;
}

// 0..16 KiB byte by byte, then every 7th size to 64 KiB, in shuffled order so
// that blocks of many size classes are live side by side.
TEST(SizeSweep, DenseUpTo64KiB) {
  std::vector<std::size_t> sizes;
  const std::size_t step = kSanitized ? 13 : 1;
  for (std::size_t s = 0; s <= 16384; s += step) sizes.push_back(s);
  for (std::size_t s = 16385; s <= 65536; s += 7 * step) sizes.push_back(s);
  sizes.push_back(65536);
  std::mt19937_64 rng(42);
  std::shuffle(sizes.begin(), sizes.end(), rng);
  std::vector<Block> live;
  const std::size_t batch = 512;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(take(live, sizes[i], min_alignment(sizes[i]), i, tenon_malloc, "tenon_malloc"));
    if (live.size() == batch || i + 1 == sizes.size()) ASSERT_TRUE(verify_and_free(live));
  }
}

// Powers of two and odd sizes from 64 KiB to 32 MiB, all live at once, with
// small blocks allocated in between.
TEST(SizeSweep, LargeAndHugeSizes) {
  const int top = kSanitized ? 23 : 25;
  std::vector<Block> live;
  std::uint64_t seed = 1;
  for (int k = 16; k <= top; ++k) {
    const std::size_t p2 = std::size_t{1} << k;
    for (std::size_t size : {p2 - 1, p2, p2 + 1, p2 + p2 / 2 + 7, p2 + p2 / 4 - 3, p2 + 4095, p2 + 4097}) {
      ASSERT_TRUE(take(live, size, 16, seed++, tenon_malloc, "tenon_malloc"));
      ASSERT_TRUE(take(live, 24 + k, 16, seed++, tenon_malloc, "tenon_malloc"));
    }
  }
  ASSERT_TRUE(verify_and_free(live));
}

// Many small blocks live at once, freed in random order, then the same again
// so that freed blocks are reused while others are still live.
TEST(SizeSweep, ManyLiveSmallBlocks) {
  std::mt19937_64 rng(7);
  const std::size_t count = scaled(100000);
  std::vector<Block> live;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t size = (rng() % 8 == 0) ? rng() % 4096 : rng() % 256;
      ASSERT_TRUE(take(live, size, min_alignment(size), round * count + i, tenon_malloc, "tenon_malloc"));
    }
    std::shuffle(live.begin(), live.end(), rng);
    // Free half, allocate into the holes, then check everything.
    std::vector<Block> keep(live.begin() + live.size() / 2, live.end());
    live.resize(live.size() / 2);
    ASSERT_TRUE(verify_and_free(live));
    live = std::move(keep);
  }
  ASSERT_TRUE(verify_and_free(live));
}

// Every power-of-two alignment from 8 B to 4 MiB through the three aligned
// entry points, with sizes around the alignment, all live per alignment.
TEST(AlignmentSweep, AllEntryPoints) {
  std::uint64_t seed = 1;
  for (std::size_t a = 8; a <= (std::size_t{4} << 20); a *= 2) {
    std::vector<Block> live;
    std::vector<std::size_t> sizes = {1, 8, 16, 100, 5000, a / 2 + 1, a - 1, a, a + 1, 2 * a + 8};
    std::vector<Block> freed_sized;  // aligned_alloc blocks, freed with free_aligned_sized
    for (std::size_t size : sizes) {
      if (size == 0) continue;
      ASSERT_TRUE(take(live, size, a, seed++, [a](std::size_t n) { return tenon_memalign(a, n); },
                       "tenon_memalign"))
          << "alignment " << a;
      ASSERT_TRUE(take(live, size, a, seed++,
                       [a](std::size_t n) {
                         void* out = nullptr;
                         return tenon_posix_memalign(&out, a, n) == 0 ? out : nullptr;
                       },
                       "tenon_posix_memalign"))
          << "alignment " << a;
      ASSERT_TRUE(take(freed_sized, size, a, seed++,
                       [a](std::size_t n) { return tenon_aligned_alloc(a, n); }, "tenon_aligned_alloc"))
          << "alignment " << a;
    }
    ASSERT_TRUE(verify_and_free(live)) << "alignment " << a;
    for (const Block& b : freed_sized) {
      ASSERT_EQ(first_pattern_mismatch(b.p, b.usable, b.seed), b.usable) << "alignment " << a;
      tenon_free_aligned_sized(b.p, a, b.requested);
    }
  }
}

// Many aligned blocks of one alignment live at once (span packing of aligned blocks).
TEST(AlignmentSweep, ManyLiveAlignedBlocks) {
  std::uint64_t seed = 1;
  for (std::size_t a : {std::size_t{32}, std::size_t{64}, std::size_t{256}, std::size_t{4096},
                        std::size_t{65536}}) {
    std::vector<Block> live;
    const std::size_t count = scaled(a >= 4096 ? 200 : 2000);
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t size = 1 + (i * 131) % (3 * a);
      ASSERT_TRUE(take(live, size, a, seed++, [a](std::size_t n) { return tenon_aligned_alloc(a, n); },
                       "tenon_aligned_alloc"))
          << "alignment " << a;
    }
    ASSERT_TRUE(verify_and_free(live)) << "alignment " << a;
  }
}

}  // namespace

namespace {

// Alignments above the 4 MiB chunk size: the block cannot sit at a chunk
// offset, so it takes its own mapping. Small and large sizes alike.
TEST(AlignmentSweep, BeyondChunkSize) {
  std::uint64_t seed = 77;
  std::vector<Block> live;
  for (std::size_t a : {std::size_t{8} << 20, std::size_t{16} << 20, std::size_t{64} << 20}) {
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, std::size_t{70000}, std::size_t{3} << 20, a + 1}) {
      ASSERT_TRUE(take(live, size, a, seed++, [a](std::size_t n) { return tenon_aligned_alloc(a, n); },
                       "tenon_aligned_alloc"))
          << "alignment " << a;
      EXPECT_NE(tenon_owns(live.back().p), 0) << "alignment " << a << " size " << size;
      ASSERT_TRUE(take(live, size, a, seed++,
                       [a](std::size_t n) {
                         void* out = nullptr;
                         return tenon_posix_memalign(&out, a, n) == 0 ? out : nullptr;
                       },
                       "tenon_posix_memalign"))
          << "alignment " << a;
    }
    ASSERT_TRUE(verify_and_free(live)) << "alignment " << a;
  }
}

}  // namespace
