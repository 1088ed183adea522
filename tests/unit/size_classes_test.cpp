// The size classes: every size maps to the smallest class that holds it, all
// classes from 16 bytes are multiples of 16, spans hold at least 8 blocks.
#include <gtest/gtest.h>

#include "tenon/common/block_index.h"
#include "tenon/common/size_classes.h"

using namespace tenon;

TEST(SizeClasses, SmallestFittingClassForEverySize) {
  for (std::size_t n = 1; n <= kMaxSmall; ++n) {
    unsigned c = size_to_class(n);
    ASSERT_LT(c, kNumClasses);
    ASSERT_GE(kClasses.size[c], n) << n;
    if (c > 0) ASSERT_LT(kClasses.size[c - 1], n) << n;
  }
}

TEST(SizeClasses, SixteenByteAlignedFromSixteen) {
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (kClasses.size[c] >= 16) EXPECT_EQ(kClasses.size[c] % 16, 0u) << kClasses.size[c];
}

TEST(SizeClasses, FourPerPowerOfTwoAbove128) {
  for (unsigned c = 0; c + 4 < kNumClasses; ++c)
    if (kClasses.size[c] >= 128) EXPECT_EQ(kClasses.size[c + 4], 2 * kClasses.size[c]);
}

TEST(SizeClasses, SpansHoldTwoBlocksAndWasteAtMostAnEighth) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    std::size_t bytes = std::size_t{kClasses.slices[c]} << kSliceShift;
    EXPECT_GE(bytes / kClasses.size[c], 2u) << kClasses.size[c];
    EXPECT_LE((bytes % kClasses.size[c]) * 8, bytes) << kClasses.size[c];
  }
}

// The owner's free test of a block start (common/block_index.h): for every
// class and every 8-byte-aligned offset of its span and a slice beyond, the
// multiply-and-compare agrees with `%` and the bound, at every carved count
// the free path can meet (none, one, a page's worth, all).
TEST(SizeClasses, BlockStartTestAgreesWithDivision) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    std::uint32_t size = kClasses.size[c];
    std::uint64_t mult = kClasses.block_mult[c];
    ASSERT_EQ(mult, block_index::multiplier(size));
    std::uint32_t capacity = static_cast<std::uint32_t>((std::size_t{kClasses.slices[c]} << kSliceShift) / size);
    for (std::uint32_t carved : {0u, 1u, 4096 / size + 1, capacity / 2, capacity}) {
      std::uint64_t lim = block_index::limit(mult, size, carved);
      for (std::uint64_t off = 0; off < (std::uint64_t{kClasses.slices[c]} + 1) << kSliceShift; off += 8) {
        bool want = off % size == 0 && off / size < carved;
        ASSERT_EQ(block_index::starts_block(off, mult, lim), want)
            << "size " << size << " carved " << carved << " offset " << off;
      }
    }
  }
}
