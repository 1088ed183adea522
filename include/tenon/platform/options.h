// Layer 1, platform: run-time options, read once from the process
// environment (see docs/options.md for every one). Lock-free: the first caller to claim the parse publishes it;
// anyone racing with it parses the environment itself instead of waiting.
#pragma once
#include <cstdint>

namespace tenon {

// TENON_BACKGROUND_PURGE: when the background purger thread starts.
enum class purge_thread : std::uint8_t {
  off = 0,      // never: purging happens on allocator activity only
  lazy = 1,     // when memory is first kept for reuse while single-threaded
  at_load = 2,  // when the library is loaded (also for multithreaded programs)
};

struct options_t {
  std::uint32_t purge_delay_ms = 500;                 // TENON_PURGE_DELAY_MS
  purge_thread background_purge = purge_thread::lazy;  // TENON_BACKGROUND_PURGE=0|1|2
  bool stats = false;                                 // TENON_STATS=1
};

options_t options();

}  // namespace tenon
