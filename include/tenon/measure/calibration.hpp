// <tenon/measure/calibration.hpp>: ticks of <tenon/measure/cycles.hpp> in
// nanoseconds, measured against CLOCK_MONOTONIC (src/measure/calibration.cpp).
#pragma once
#include <cstdint>

namespace tenon::measure {

struct calibration {
  double ticks_per_ns;          // 1.0 where ticks are nanoseconds already
  std::uint64_t over_ms;        // length of the interval it was measured over
  std::uint64_t overhead_ticks; // median of an empty ticks_begin()/ticks_end() pair
};

// From the pair of readings taken when the library was loaded to now; when
// that is shorter than 20 ms, it first spins until 20 ms have passed (report
// time only, never inside an allocation). Allocates nothing.
calibration calibrate() noexcept;

}  // namespace tenon::measure
