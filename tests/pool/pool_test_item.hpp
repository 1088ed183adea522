// The element the pool tests fill with: which thread made it, its number in
// that thread, and a check word derived from both, so that a torn or
// overwritten element shows.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tenon/mass_pool.hpp"

namespace pool_test {
struct Item {
  std::uint32_t thread;
  std::uint32_t seq;
  std::uint64_t check;  // derived from (thread, seq): detects torn or overwritten elements
};
inline std::uint64_t check_of(std::uint32_t t, std::uint32_t s) {
  return (std::uint64_t{t} << 40) ^ (std::uint64_t{s} * 0x9E3779B97F4A7C15ull);
}

// idx[t][s] is the index of thread t's item s: each is there, intact.
inline void expect_intact(const tenon::mass_pool<Item>& pool, const std::vector<std::vector<std::uint32_t>>& idx) {
  for (std::uint32_t t = 0; t < idx.size(); ++t)
    for (std::uint32_t s = 0; s < idx[t].size(); ++s) {
      const Item& it = pool[idx[t][s]];
      ASSERT_EQ(it.thread, t);
      ASSERT_EQ(it.seq, s);
      ASSERT_EQ(it.check, check_of(t, s));
    }
}
}  // namespace pool_test
