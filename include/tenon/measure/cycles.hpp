// <tenon/measure/cycles.hpp>: the CPU's cycle counter, read cheaply.
//
// x86-64: the time-stamp counter (rdtsc), constant-rate on every CPU since
// about 2008 and synchronised across cores. aarch64: the virtual counter
// (cntvct_el0). Elsewhere: CLOCK_MONOTONIC in nanoseconds. Ticks become
// nanoseconds through a calibration against CLOCK_MONOTONIC
// (tenon::measure::ticks_per_ns in src/measure/calibration.cpp).
#pragma once
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::measure {

// For timing one call: the fences keep the call's own instructions from
// moving out of the measured window (Intel's recommended sequence; on AMD
// lfence is dispatch-serialising under Linux).
inline std::uint64_t ticks_begin() noexcept {
#if defined(__x86_64__)
  std::uint32_t lo, hi;
  asm volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return (std::uint64_t(hi) << 32) | lo;
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v)::"memory");
  return v;
#else
  return ::tenon::os::monotonic_ns();
#endif
}

inline std::uint64_t ticks_end() noexcept {
#if defined(__x86_64__)
  std::uint32_t lo, hi, aux;
  asm volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  return (std::uint64_t(hi) << 32) | lo;
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v)::"memory");
  return v;
#else
  return ticks_begin();
#endif
}

// A timestamp without fences (trace records: ordering across threads, not
// the cost of one call).
inline std::uint64_t ticks_now() noexcept {
#if defined(__x86_64__)
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (std::uint64_t(hi) << 32) | lo;
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return ticks_begin();
#endif
}

// What a tick is, for reports.
inline const char* tick_name() noexcept {
#if defined(__x86_64__)
  return "cycles";
#elif defined(__aarch64__)
  return "ticks";  // cntvct_el0 runs at the system counter's rate, not the core clock
#else
  return "ns";
#endif
}

}  // namespace tenon::measure
