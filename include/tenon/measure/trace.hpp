// <tenon/measure/trace.hpp>: tenon::trace<Inner>, a layer that writes every
// call of the layer below to a binary trace (<tenon/measure/trace_format.hpp>)
// when the environment has TENON_TRACE=FILE; otherwise it costs one load and
// a branch per call. tenon-replay replays such a trace against any allocator.
//
// Records go to a per-thread buffer (a fixed slot claimed with a CAS, as in
// the latency layer) and reach the file with one write(2) per buffer (32 KiB)
// on an O_APPEND descriptor: no stdio, no allocation, no lock of ours. FILE
// may contain %p, replaced by the process id: every process of a program
// (forked or started with exec) then writes its own file. Without %p only the
// process that loaded the library traces: it removes TENON_TRACE from its
// environment so that the programs it starts do not write over FILE, and a
// forked child stops tracing (its copy of the parent's unwritten buffers is
// dropped, never written). Out of line: src/measure/trace_writer.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/layer.hpp"
#include "tenon/measure/cycles.hpp"
#include "tenon/measure/trace_format.hpp"

namespace tenon::measure {

extern std::atomic<bool> g_tracing;
inline bool tracing() noexcept { return g_tracing.load(std::memory_order_relaxed); }

// Appends one record: `start` from ticks_now() before the call; the end is
// read here.
void trace_call(trace_format::op o, std::uint64_t start, std::size_t size, std::size_t align, const void* old,
                const void* result) noexcept;

// Writes this thread's buffer out now (tests; the writer does it when a
// buffer fills, at thread exit and at process exit).
void trace_flush() noexcept;

// Starts tracing to `path_template` (as TENON_TRACE does at load time).
// False when the file cannot be opened or a trace is open already.
bool trace_open(const char* path_template) noexcept;
// Writes this thread's buffer and the clock chunk, stops tracing and closes
// the file. Other threads' unwritten buffers are dropped: call it when they
// have exited (their buffers are written at thread exit).
void trace_close() noexcept;
// What the library does at exit: as trace_close, but calls made after it
// (by later destructors) are still written, one chunk each.
void trace_finish_at_exit() noexcept;

}  // namespace tenon::measure

namespace tenon {

template <layer Inner>
struct trace : pass_through<Inner> {
  using ops = layer_ops<Inner>;
  using op = measure::trace_format::op;

  static void* alloc(std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return Inner::alloc(n);
    std::uint64_t t = measure::ticks_now();
    void* p = Inner::alloc(n);
    measure::trace_call(op::op_malloc, t, n, 0, nullptr, p);
    return p;
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return Inner::alloc_aligned(align, n);
    std::uint64_t t = measure::ticks_now();
    void* p = Inner::alloc_aligned(align, n);
    measure::trace_call(op::op_aligned, t, n, align, nullptr, p);
    return p;
  }
  static void dealloc(void* p) noexcept {
    if (!measure::tracing()) [[likely]] return Inner::dealloc(p);
    std::uint64_t t = measure::ticks_now();
    Inner::dealloc(p);
    measure::trace_call(op::op_free, t, 0, 0, p, nullptr);
  }
  // Written out so that the inner layer's realloc and calloc are used (and
  // traced as what they are), not rebuilt from alloc + copy + dealloc.
  static void* realloc(void* p, std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return ops::realloc(p, n);
    std::uint64_t t = measure::ticks_now();
    void* q = ops::realloc(p, n);
    measure::trace_call(op::op_realloc, t, n, 0, p, q);
    return q;
  }
  static void* alloc_zeroed(std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return ops::alloc_zeroed(n);
    std::uint64_t t = measure::ticks_now();
    void* p = ops::alloc_zeroed(n);
    measure::trace_call(op::op_calloc, t, n, 0, nullptr, p);
    return p;
  }
  static void dealloc_sized(void* p, std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return ops::dealloc_sized(p, n);
    std::uint64_t t = measure::ticks_now();
    ops::dealloc_sized(p, n);
    measure::trace_call(op::op_free, t, 0, 0, p, nullptr);
  }
  static void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    if (!measure::tracing()) [[likely]] return ops::dealloc_aligned_sized(p, align, n);
    std::uint64_t t = measure::ticks_now();
    ops::dealloc_aligned_sized(p, align, n);
    measure::trace_call(op::op_free, t, 0, 0, p, nullptr);
  }
  static int trim(std::size_t pad) noexcept { return ops::trim(pad); }
};

}  // namespace tenon
