// tenon::latency over a fake layer whose calls take a known number of ticks:
// sampling rate, one histogram per operation, threads (more than there are
// slots, and slots handed back at thread exit), and the printed report.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../api/test_support.h"
#include "tenon/measure/latency.hpp"

namespace m = tenon::measure;

namespace {

// Every call spins until the counter has moved on by g_delay ticks, then
// hands the request to glibc (this test program's own malloc).
std::atomic<std::uint64_t> g_delay{0};
void spin() {
  std::uint64_t d = g_delay.load(std::memory_order_relaxed);
  if (!d) return;
  std::uint64_t t0 = m::ticks_now();
  while (m::ticks_now() - t0 < d) {
  }
}

struct slow_layer {
  static void* alloc(std::size_t n) noexcept { spin(); return std::malloc(n); }
  static void* alloc_aligned(std::size_t a, std::size_t n) noexcept { spin(); return std::aligned_alloc(a, (n + a - 1) / a * a); }
  static void dealloc(void* p) noexcept { spin(); std::free(p); }
  static std::size_t usable_size(const void*) noexcept { return 0; }
  static void* realloc(void* p, std::size_t n) noexcept { spin(); return std::realloc(p, n); }
  static void* alloc_zeroed(std::size_t n) noexcept { spin(); return std::calloc(1, n); }
};

using timed = tenon::latency<slow_layer>;
using ops = tenon::layer_ops<timed>;

class LatencyLayer : public ::testing::Test {
 protected:
  void SetUp() override {
    m::reset();
    m::set_sample_interval(1);
    g_delay = 0;
  }
  void TearDown() override {
    m::set_sample_interval(8);
    g_delay = 0;
  }
  static std::uint64_t samples(m::op o) { return m::snapshot(o).n; }
};

TEST_F(LatencyLayer, KnownDelaysAreMeasuredAtLeastThatLong) {
  const std::uint64_t delay = 20000;  // ticks: about 8 us at 2.5 GHz
  g_delay = delay;
  const int calls = int(tenon_test::scaled(400));
  for (int i = 0; i < calls; ++i) ops::dealloc(ops::alloc(64));
  m::summary s = m::snapshot(m::op::malloc);
  ASSERT_EQ(s.n, std::uint64_t(calls));
  // Each call spun for `delay` ticks inside the timed window, so nothing can
  // read less; the median allows for the timer's own cost and the odd
  // interruption (a bound on measurement, not on speed).
  EXPECT_GE(s.percentile_ppm(1), delay);
  EXPECT_GE(s.percentile_ppm(500000), delay);
  EXPECT_LE(s.percentile_ppm(500000), 4 * delay);
  EXPECT_GE(s.max, s.percentile_ppm(999999));
  EXPECT_EQ(m::snapshot(m::op::free).n, std::uint64_t(calls));
}

TEST_F(LatencyLayer, EachOperationHasItsOwnHistogram) {
  void* a = ops::alloc(10);
  void* b = ops::alloc(20);
  void* c = ops::alloc_aligned(64, 64);
  void* d = ops::alloc_zeroed(100);
  d = ops::realloc(d, 1000);
  ops::dealloc(a);
  ops::dealloc_sized(b, 20);
  ops::dealloc_aligned_sized(c, 64, 64);
  ops::dealloc(d);
  EXPECT_EQ(samples(m::op::malloc), 2u);
  EXPECT_EQ(samples(m::op::aligned), 1u);
  EXPECT_EQ(samples(m::op::calloc), 1u);
  EXPECT_EQ(samples(m::op::realloc), 1u);
  EXPECT_EQ(samples(m::op::free), 4u);
}

TEST_F(LatencyLayer, SamplesOneCallInNOnAverage) {
  m::set_sample_interval(8);
  const int calls = 80000;
  for (int i = 0; i < calls; ++i) ops::dealloc(ops::alloc(16));
  // Random intervals with mean 8: 10,000 expected for each operation; the
  // count of renewals over 80,000 calls has a standard deviation near 55.
  for (m::op o : {m::op::malloc, m::op::free}) {
    std::uint64_t n = samples(o);
    EXPECT_GT(n, 9500u) << m::kOpNames[unsigned(o)];
    EXPECT_LT(n, 10500u) << m::kOpNames[unsigned(o)];
  }
}

TEST_F(LatencyLayer, AlternatingCallsDoNotAlias) {
  // With a fixed stride of 8 shared by all calls, a malloc/free loop would
  // only ever time one of the two; per-operation random intervals time both.
  m::set_sample_interval(8);
  for (int i = 0; i < 8000; ++i) ops::dealloc(ops::alloc(16));
  EXPECT_GT(samples(m::op::malloc), 500u);
  EXPECT_GT(samples(m::op::free), 500u);
}

TEST_F(LatencyLayer, ThreadsAreSummedExactly) {
  const int threads = 8, calls = int(tenon_test::scaled(2000));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([] {
      for (int i = 0; i < calls; ++i) ops::dealloc(ops::alloc(32));
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(samples(m::op::malloc), std::uint64_t(threads) * calls);
  EXPECT_EQ(samples(m::op::free), std::uint64_t(threads) * calls);
}

TEST_F(LatencyLayer, MoreThreadsThanSlotsLoseNothing) {
  // 300 threads alive at once (the registry has 256 slots): the rest record
  // into the shared slot. Then 600 more, one after the other: slots handed
  // back at thread exit are claimed again and keep adding up.
  const int alive = 300, calls = 10;
  std::atomic<int> arrived{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < alive; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < calls; ++i) ops::dealloc(ops::alloc(48));
      arrived.fetch_add(1);
      while (arrived.load() < alive) std::this_thread::yield();
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < 600; ++t) std::thread([] { ops::dealloc(ops::alloc(8)); }).join();
  EXPECT_EQ(samples(m::op::malloc), std::uint64_t(alive) * calls + 600);
  EXPECT_EQ(samples(m::op::free), std::uint64_t(alive) * calls + 600);
}

std::string report() {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  m::print(fds[1]);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, std::size_t(n));
  close(fds[0]);
  return out;
}

TEST_F(LatencyLayer, ReportNamesEveryPercentileAndOperation) {
  for (int i = 0; i < 100; ++i) ops::dealloc(ops::alloc(16));
  ops::dealloc(ops::alloc_zeroed(16));
  std::string r = report();
  EXPECT_NE(r.find("tenon latency: 1 call in 1 timed"), std::string::npos) << r;
  for (const char* col : {"samples", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max"})
    EXPECT_NE(r.find(col), std::string::npos) << col << "\n" << r;
  EXPECT_NE(r.find("\nmalloc          100  ns"), std::string::npos) << r;
  EXPECT_NE(r.find("\nfree            101  ns"), std::string::npos) << r;
  EXPECT_NE(r.find("\ncalloc            1  ns"), std::string::npos) << r;
  EXPECT_EQ(r.find("realloc"), std::string::npos) << "an operation with no samples has no line\n" << r;
}

}  // namespace
