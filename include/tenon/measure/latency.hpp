// <tenon/measure/latency.hpp>: tenon::latency<Inner>, a layer that times one
// call in N (default 8, TENON_LATENCY_SAMPLE=N) of every entry point of the
// layer below with the cycle counter, into log-scale histograms per operation
// and per thread, and prints p50 ... p99.9999 and max in ns and cycles at
// exit (TENON_LATENCY=1) or on request (tenon_latency_print(), <tenon/latency.h>).
//
//   TENON_EXPORT_MALLOC(tenon::latency<tenon::default_allocator>)   // libtenon-latency.so
//
// Cost when a call is not sampled: one thread-local countdown decremented and
// tested (docs/measure.md has the callgrind figures). A sampled call adds two
// fenced counter reads and a histogram update in the thread's own slot.
// Intervals between samples are random with mean N, so that a program's own
// periodic pattern (malloc, free, malloc, free) cannot alias with a fixed
// stride. Nothing here locks or allocates (src/measure/latency.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tenon/layer.hpp"
#include "tenon/measure/cycles.hpp"
#include "tenon/measure/histogram.hpp"

namespace tenon::measure {

// The operations timed separately (free includes the sized frees).
enum class op : unsigned { malloc, free, realloc, calloc, aligned };
inline constexpr unsigned kOps = 5;
inline constexpr const char* kOpNames[kOps] = {"malloc", "free", "realloc", "calloc", "aligned"};

// Per thread: calls left until the next sample of each operation. Zero at
// thread start, so a thread's first call of each kind is sampled and draws
// its first interval.
struct sampler_countdown {
  std::int32_t left[kOps];
};
extern __thread sampler_countdown t_countdown __attribute__((tls_model("initial-exec")));

// True when this call is to be timed (the countdown ran out). On x86-64 one
// read-modify-write of the thread-local word whose flags feed the branch
// (GCC otherwise loads, subtracts, stores and tests: 3 instructions more a
// call, measured with callgrind).
inline bool sample_now(op o) noexcept {
  std::int32_t& left = t_countdown.left[static_cast<unsigned>(o)];
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool ran_out;
  asm("subl $1, %0" : "+m"(left), "=@ccle"(ran_out));
  return ran_out;
#else
  return --left <= 0;
#endif
}

// Records one sampled call and draws the next interval (out of line).
void record(op o, std::uint64_t ticks) noexcept;

// The sum over every thread of one operation's histogram.
summary snapshot(op o) noexcept;
// Zeroes every histogram: only while no thread is inside the layer.
void reset() noexcept;
// Writes the report (text, see docs/measure.md) to fd with write(2).
void print(int fd) noexcept;
// 1 in how many calls is timed (TENON_LATENCY_SAMPLE, default 8). A new
// interval applies to other threads from their next sample on, and to the
// calling thread at once.
std::uint32_t sample_interval() noexcept;
void set_sample_interval(std::uint32_t n) noexcept;
// For wrappers (libtenon-trace.so): a function that writes lines of its own
// under the report's first line (which allocator the calls went to).
void set_report_note(void (*fn)(int fd)) noexcept;

}  // namespace tenon::measure

namespace tenon {

template <layer Inner>
struct latency : pass_through<Inner> {
  using ops = layer_ops<Inner>;

  static void* alloc(std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::malloc)) [[likely]] return Inner::alloc(n);
    return alloc_timed(n);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::aligned)) [[likely]] return Inner::alloc_aligned(align, n);
    return alloc_aligned_timed(align, n);
  }
  static void dealloc(void* p) noexcept {
    if (!measure::sample_now(measure::op::free)) [[likely]] return Inner::dealloc(p);
    dealloc_timed(p);
  }
  // The hooks are written out: this layer changes alloc and dealloc, so it
  // would otherwise get the generic forms (layer.hpp), and realloc would
  // lose the inner layer's in-place and mremap paths.
  static void* realloc(void* p, std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::realloc)) [[likely]] return ops::realloc(p, n);
    return realloc_timed(p, n);
  }
  static void* alloc_zeroed(std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::calloc)) [[likely]] return ops::alloc_zeroed(n);
    return alloc_zeroed_timed(n);
  }
  static void dealloc_sized(void* p, std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::free)) [[likely]] return ops::dealloc_sized(p, n);
    dealloc_sized_timed(p, n);
  }
  static void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    if (!measure::sample_now(measure::op::free)) [[likely]] return ops::dealloc_aligned_sized(p, align, n);
    dealloc_aligned_sized_timed(p, align, n);
  }
  static int trim(std::size_t pad) noexcept { return ops::trim(pad); }

 private:
  // The sampled paths, out of the way of the unsampled ones.
  [[gnu::noinline, gnu::cold]] static void* alloc_timed(std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    void* p = Inner::alloc(n);
    measure::record(measure::op::malloc, measure::ticks_end() - t0);
    return p;
  }
  [[gnu::noinline, gnu::cold]] static void* alloc_aligned_timed(std::size_t align, std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    void* p = Inner::alloc_aligned(align, n);
    measure::record(measure::op::aligned, measure::ticks_end() - t0);
    return p;
  }
  [[gnu::noinline, gnu::cold]] static void dealloc_timed(void* p) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    Inner::dealloc(p);
    measure::record(measure::op::free, measure::ticks_end() - t0);
  }
  [[gnu::noinline, gnu::cold]] static void* realloc_timed(void* p, std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    void* q = ops::realloc(p, n);
    measure::record(measure::op::realloc, measure::ticks_end() - t0);
    return q;
  }
  [[gnu::noinline, gnu::cold]] static void* alloc_zeroed_timed(std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    void* p = ops::alloc_zeroed(n);
    measure::record(measure::op::calloc, measure::ticks_end() - t0);
    return p;
  }
  [[gnu::noinline, gnu::cold]] static void dealloc_sized_timed(void* p, std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    ops::dealloc_sized(p, n);
    measure::record(measure::op::free, measure::ticks_end() - t0);
  }
  [[gnu::noinline, gnu::cold]] static void dealloc_aligned_sized_timed(void* p, std::size_t align,
                                                                      std::size_t n) noexcept {
    std::uint64_t t0 = measure::ticks_begin();
    ops::dealloc_aligned_sized(p, align, n);
    measure::record(measure::op::free, measure::ticks_end() - t0);
  }
};

}  // namespace tenon
