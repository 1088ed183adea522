// The secure quarantine's zeroing and zero check (tenon/secure/zeroed.h):
// every length up to past the memset threshold, at every misalignment of a
// 16-byte boundary, is zeroed exactly (no byte before or after touched), and
// a nonzero byte at any position, first and last included, is seen.
#include <gtest/gtest.h>

#include <cstring>

#include "tenon/secure/zeroed.h"

namespace {

constexpr std::size_t kMaxLen = tenon::secure::kMemsetFrom + 200;

TEST(SecureZeroed, ZeroesExactlyTheRange) {
  alignas(16) static unsigned char buf[kMaxLen + 64];
  for (std::size_t off = 0; off < 16; off += 8)
    for (std::size_t len = 0; len <= kMaxLen; ++len) {
      std::memset(buf, 0xa5, sizeof buf);
      tenon::secure::zero_words(buf + 16 + off, len);
      for (std::size_t i = 0; i < sizeof buf; ++i) {
        bool inside = i >= 16 + off && i < 16 + off + len;
        ASSERT_EQ(buf[i], inside ? 0 : 0xa5) << "len " << len << " off " << off << " byte " << i;
      }
      ASSERT_TRUE(tenon::secure::all_zero(buf + 16 + off, len)) << "len " << len;
    }
}

TEST(SecureZeroed, SeesAnyNonzeroByte) {
  alignas(16) static unsigned char buf[kMaxLen + 64];
  for (std::size_t off = 0; off < 16; off += 8)
    for (std::size_t len = 1; len <= kMaxLen; ++len) {
      unsigned char* p = buf + 16 + off;
      std::memset(buf, 0xff, sizeof buf);  // bytes around the range do not count
      std::memset(p, 0, len);
      for (std::size_t i = 0; i < len; ++i) {
        p[i] = 0x10;
        ASSERT_FALSE(tenon::secure::all_zero(p, len)) << "len " << len << " byte " << i;
        p[i] = 0;
      }
      ASSERT_TRUE(tenon::secure::all_zero(p, len));
    }
}

}  // namespace
