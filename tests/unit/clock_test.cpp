// os::now_ms reads the vDSO's clock_gettime itself, found in the vDSO's symbol
// table (os_linux.cpp; libc's wrapper lies alone in a 64 KiB window of libc's
// text: architecture.md, "tenon's resident memory at start"). It must read the
// very clock libc's CLOCK_MONOTONIC_COARSE reads, with the same conversion.
#include "tenon/platform/os.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>

namespace {

std::uint32_t libc_coarse_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

TEST(Clock, NowMsReadsLibcsCoarseMonotonicClock) {
  for (int i = 0; i < 10000; ++i) {
    std::uint32_t before = libc_coarse_ms();
    std::uint32_t now = tenon::os::now_ms();
    std::uint32_t after = libc_coarse_ms();
    // before <= now <= after, in unsigned differences so that a wrap of the
    // 32-bit count between the reads passes too.
    ASSERT_LE(now - before, after - before) << "before " << before << " now " << now << " after " << after;
  }
}

}  // namespace
