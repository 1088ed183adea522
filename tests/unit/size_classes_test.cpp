// The size classes: every size maps to the smallest class that holds it, all
// classes from 16 bytes are multiples of 16, spans hold at least 8 blocks.
#include <gtest/gtest.h>

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
