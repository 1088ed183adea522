// tenon-replay's timed part: one thread per traced thread, each making its
// thread's calls in order through the plain malloc/free names (whatever
// allocator is preloaded), waiting only where a block it gives back was
// allocated by another thread that has not got there yet.
#pragma once
#include <cstdint>

#include "plan.h"
#include "tenon/measure/histogram.hpp"

namespace tenon::replay {

struct result {
  op_counts replayed;              // calls made, by operation (bytes: sizes asked)
  std::uint64_t failed = 0;        // allocations that returned NULL in the replay
  std::uint64_t corrupt = 0;       // blocks whose first byte changed between allocation and free
  std::uint64_t waits = 0;         // calls that had to wait for another replay thread
  std::uint64_t wall_ns = 0;
  measure::summary latency[6];     // ticks per sampled call, by operation
};

struct options {
  std::uint32_t sample = 8;  // time 1 call in N (random intervals)
  bool touch = true;         // write one byte per page of every block allocated
  std::uint32_t stuck_seconds = 30;  // a wait longer than this ends the replay (trace inconsistent)
};

// Replays `p`; false when a thread could not be started or got stuck.
bool run(const plan& p, const options& o, result& out);

}  // namespace tenon::replay
