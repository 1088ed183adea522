// Run-time options, read once from the environment (see docs/options.md for
// every one). Lock-free: the first caller to claim the parse publishes it;
// anyone racing with it parses the environment itself instead of waiting.
#pragma once
#include <cstdint>

namespace tenon {

struct options_t {
  std::uint32_t purge_delay_ms = 500;  // TENON_PURGE_DELAY_MS
  bool stats = false;                  // TENON_STATS=1
};

options_t options();

}  // namespace tenon
