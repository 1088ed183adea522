// A hook for the injection points of a -DTENON_INJECT=ON build
// (tenon_inject_set_hook): every slow-path step between two operations on
// shared state may stall here a while (1 in 64: up to 200 us asleep; 3 in
// 64: a yield), so that the windows between them, a few instructions wide
// otherwise, stay open for the other threads. Allocates nothing (it runs
// inside the allocator). Used by the heap hand-over soak and by the
// preloaded churn.
#pragma once
#include <sched.h>
#include <time.h>

#include <cstdint>

#include "test_support.h"

namespace tenon_test {

inline void stall_sometimes(const char*) {
  thread_local std::uint64_t state = 0;
  if (state == 0) state = mix(reinterpret_cast<std::uintptr_t>(&state) ^ static_cast<std::uint64_t>(clock()));
  state = mix(state);
  unsigned r = static_cast<unsigned>(state % 64);
  if (r == 0) {
    timespec pause{0, static_cast<long>((state >> 8) % 200000)};  // up to 200 us
    nanosleep(&pause, nullptr);
  } else if (r < 4) {
    sched_yield();
  }
}

}  // namespace tenon_test
