// The latency layer's shared part: where sampled calls are recorded, and the
// report.
//
// Histograms live in a fixed array of slots (no allocation, ever). A thread
// claims a free slot with one CAS at its first sampled call and records into
// it alone (relaxed load + store, no read-modify-write); at thread exit a
// pthread key destructor hands the slot back. A slot is an accumulator, not a
// thread's identity: the next thread to claim it adds to its counts, so
// nothing recorded is ever lost or counted twice, and a report sums the
// slots. A thread that finds no free slot (more than kSlots threads alive),
// is in the middle of claiming one (pthread_setspecific may call calloc), or
// calls after its exit hook ran, records into one shared slot with relaxed
// fetch_add. Nothing waits for another thread.

#include <atomic>

#include "text.h"
#include "tenon/measure/calibration.hpp"
#include "tenon/measure/latency.hpp"
#include "tenon/platform/options.h"
#include "tenon/platform/os.h"

namespace tenon::measure {

__thread sampler_countdown t_countdown __attribute__((tls_model("initial-exec")));

namespace {

constexpr unsigned kSlots = 256;

struct alignas(64) slot {
  std::atomic<std::uint32_t> owned{0};
  histogram h[kOps];
};

slot g_slots[kSlots];
slot g_shared;
std::atomic<unsigned> g_hint{0};
std::atomic<std::uint32_t> g_interval{8};
bool g_print_at_exit = false;

enum : std::uint8_t { kNoSlot, kClaiming, kOwner, kSharedOnly, kExited };
__thread slot* t_slot __attribute__((tls_model("initial-exec")));
__thread std::uint8_t t_state __attribute__((tls_model("initial-exec")));
__thread std::uint32_t t_rng __attribute__((tls_model("initial-exec")));

// The key whose destructor hands a slot back; created by the first thread
// that needs it, published with a CAS (a racing creator deletes its own).
constexpr long kNoKey = -1;  // os::shared_thread_key's "no key"
std::atomic<long> g_key{kNoKey};

void on_thread_exit(void* v) {
  auto* s = static_cast<slot*>(v);
  t_slot = nullptr;
  t_state = kExited;  // later calls of this thread (other keys' destructors) go to the shared slot
  s->owned.store(0, std::memory_order_release);
}

long thread_key() { return os::shared_thread_key(g_key, on_thread_exit); }

slot* claim() {
  t_state = kClaiming;
  unsigned start = g_hint.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kSlots; ++i) {
    slot& s = g_slots[(start + i) % kSlots];
    std::uint32_t free_mark = 0;
    if (s.owned.load(std::memory_order_relaxed) != 0 ||
        !s.owned.compare_exchange_strong(free_mark, 1, std::memory_order_acquire, std::memory_order_relaxed))
      continue;
    g_hint.store((start + i + 1) % kSlots, std::memory_order_relaxed);
    // Without the key the slot stays claimed after this thread exits (its
    // counts are still reported); nothing else goes wrong.
    long key = thread_key();
    if (key != kNoKey) os::thread_key_set(key, &s);
    t_slot = &s;
    t_state = kOwner;
    return &s;
  }
  t_state = kSharedOnly;
  return nullptr;
}

// Uniform in [1, 2N - 1]: mean N, and no fixed stride to alias with.
std::int32_t next_interval() {
  std::uint32_t n = g_interval.load(std::memory_order_relaxed);
  if (n <= 1) return 1;
  std::uint32_t x = t_rng;
  if (x == 0) x = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&t_rng) >> 4) ^ 0x9E3779B9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  t_rng = x;
  std::uint32_t span = n > 0x3FFFFFFFu ? 0x7FFFFFFFu : 2 * n - 1;
  return static_cast<std::int32_t>(1 + x % span);
}

// A forked child has only the forking thread: every other slot's owner is
// gone, so the slots are free again (their counts stay: the child's report
// includes what the parent recorded before the fork, as its memory does).
void after_fork_child() {
  for (auto& s : g_slots)
    if (&s != t_slot) s.owned.store(0, std::memory_order_relaxed);
}

__attribute__((constructor)) void at_load() {
  options_t o = read_options();
  set_sample_interval(o.latency_sample);
  g_print_at_exit = o.latency;
  os::at_fork_child(after_fork_child);
  thread_key();
}

__attribute__((destructor)) void at_exit() {
  if (g_print_at_exit) print(2);
}

}  // namespace

void record(op o, std::uint64_t ticks) noexcept {
  unsigned k = static_cast<unsigned>(o);
  t_countdown.left[k] = next_interval();
  slot* s = t_slot;
  if (!s && t_state == kNoSlot) s = claim();
  if (s) s->h[k].record(ticks);
  else g_shared.h[k].record_shared(ticks);
}

summary snapshot(op o) noexcept {
  summary sum;
  unsigned k = static_cast<unsigned>(o);
  for (auto& s : g_slots) s.h[k].add_to(sum);
  g_shared.h[k].add_to(sum);
  return sum;
}

void reset() noexcept {
  for (auto& s : g_slots)
    for (auto& h : s.h) h.clear();
  for (auto& h : g_shared.h) h.clear();
}

std::uint32_t sample_interval() noexcept { return g_interval.load(std::memory_order_relaxed); }
// Other threads take the new interval at their next sample; the calling
// thread at once (its next call of each kind is sampled).
void set_sample_interval(std::uint32_t n) noexcept {
  g_interval.store(n ? n : 1, std::memory_order_relaxed);
  for (auto& left : t_countdown.left) left = 0;
}

namespace {
void (*g_report_note)(int fd) = nullptr;
}
void set_report_note(void (*fn)(int fd)) noexcept { g_report_note = fn; }

void print(int fd) noexcept {
  calibration cal = calibrate();
  text::line head;
  head.str("tenon latency: 1 call in ").u64(sample_interval()).str(" timed (random intervals); ")
      .str(tick_name()).str(" at ").fixed(cal.ticks_per_ns, 3).str(" per ns (against CLOCK_MONOTONIC over ")
      .u64(cal.over_ms).str(" ms); timer overhead ").u64(cal.overhead_ticks).str(" ").str(tick_name())
      .str(", included in every figure");
  head.write_to(fd);
  if (g_report_note) g_report_note(fd);
  text::line cols;
  cols.str("op").pad_to(9);
  std::size_t m = cols.len;
  cols.str("samples").right_from(m, 10).str("  unit  ");
  for (const char* name : kReportNames) {
    m = cols.len;
    cols.str(name).right_from(m, 11);
  }
  m = cols.len;
  cols.str("max").right_from(m, 11);
  cols.write_to(fd);
  for (unsigned k = 0; k < kOps; ++k) {
    summary s = snapshot(static_cast<op>(k));
    if (s.n == 0) continue;
    for (int unit = 0; unit < 2; ++unit) {
      bool ns = unit == 0 && cal.ticks_per_ns != 1.0;
      if (unit == 1 && cal.ticks_per_ns == 1.0) break;  // ticks are ns: one line says it all
      text::line l;
      if (unit == 0) {
        l.str(kOpNames[k]).pad_to(9);
        m = l.len;
        l.u64(s.n).right_from(m, 10);
      } else {
        l.pad_to(19);
      }
      l.str("  ");
      std::size_t um = l.len;
      l.str(ns || cal.ticks_per_ns == 1.0 ? "ns" : tick_name()).pad_to(um + 6);
      auto put = [&](std::uint64_t ticks) {
        std::size_t mark = l.len;
        if (ns) l.fixed(double(ticks) / cal.ticks_per_ns, 1);
        else l.u64(ticks);
        l.right_from(mark, 11);
      };
      for (std::uint32_t ppm : kReportPpm) put(s.percentile_ppm(ppm));
      put(s.max);
      l.write_to(fd);
    }
  }
}

}  // namespace tenon::measure

extern "C" __attribute__((visibility("default"))) void tenon_latency_print(void) { tenon::measure::print(2); }
