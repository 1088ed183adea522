// The element the pool tests fill with: which thread made it, its number in
// that thread, and a check word derived from both, so that a torn or
// overwritten element shows.
#pragma once
#include <cstdint>

namespace pool_test {
struct Item {
  std::uint32_t thread;
  std::uint32_t seq;
  std::uint64_t check;  // derived from (thread, seq): detects torn or overwritten elements
};
inline std::uint64_t check_of(std::uint32_t t, std::uint32_t s) {
  return (std::uint64_t{t} << 40) ^ (std::uint64_t{s} * 0x9E3779B97F4A7C15ull);
}
}  // namespace pool_test
