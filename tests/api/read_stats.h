// The allocator's statistics now, for tests that count (docs/api.md,
// "Statistics"): a failed read fails the test that asked.
#pragma once
#include <gtest/gtest.h>

#include "tenon/tenon.h"

namespace tenon_test {

inline tenon_stats read_stats() {
  tenon_stats s{};
  s.version = TENON_STATS_VERSION;
  EXPECT_EQ(tenon_stats_get(&s), 0);
  return s;
}

}  // namespace tenon_test
