// The trace format, the writer and the replay planner: records survive the
// codec; a hand-written trace plans to the right dependencies (hand-offs
// across threads, address reuse, unknown and NULL frees, failed calls); and
// calls made through tenon::trace<tenon::next_allocator> in this process
// come back from the file, thread by thread, with every free tied to its
// allocation.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../api/test_support.h"
#include "replay/plan.h"
#include "tenon/measure/next_allocator.hpp"
#include "tenon/measure/trace.hpp"

namespace tf = tenon::measure::trace_format;
namespace rp = tenon::replay;

namespace {

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/tenon-" + name + "-" + std::to_string(getpid());
}

TEST(TraceFormat, RecordsSurviveTheCodec) {
  std::mt19937_64 rng(7);
  std::vector<tf::record> in;
  std::uint64_t t = 0;
  for (int i = 0; i < 10000; ++i) {
    tf::record r{};
    r.op = std::uint8_t(1 + rng() % 5);
    t += rng() % 1000000;
    r.start = t;
    r.duration = rng() % 100000;
    if (tf::allocates(r.op)) {
      r.size = rng() >> (rng() % 64);
      r.result = rng() % 3 == 0 ? 0 : 0x7f0000000000ull + (rng() % (1ull << 40));
    }
    if (r.op == tf::op_aligned) r.align_log2 = std::uint8_t(rng() % 30);
    if (tf::releases(r.op)) r.old = rng() % 4 == 0 ? 0 : 0x550000000000ull + (rng() % (1ull << 40));
    in.push_back(r);
  }
  std::vector<std::uint8_t> buf(in.size() * tf::kMaxRecordBytes);
  tf::codec enc;
  std::size_t n = 0;
  for (auto& r : in) n += tf::encode(r, enc, buf.data() + n);
  tf::codec dec;
  const std::uint8_t* p = buf.data();
  for (auto& want : in) {
    tf::record got;
    ASSERT_TRUE(tf::decode(p, buf.data() + n, dec, got));
    EXPECT_EQ(got.op, want.op);
    EXPECT_EQ(got.start, want.start);
    EXPECT_EQ(got.duration, want.duration);
    EXPECT_EQ(got.size, want.size);
    EXPECT_EQ(got.align_log2, want.align_log2);
    EXPECT_EQ(got.old, want.old);
    EXPECT_EQ(got.result, want.result);
  }
  EXPECT_EQ(p, buf.data() + n);
  tf::record extra;
  EXPECT_FALSE(tf::decode(p, buf.data() + n, dec, extra));
}

// Writes a trace file chunk by chunk.
struct trace_file {
  std::string path;
  std::vector<std::uint8_t> bytes;
  explicit trace_file(const char* name) : path(temp_path(name)) {
    tf::file_header h{};
    std::memcpy(h.magic, tf::kFileMagic, 8);
    h.version = tf::kVersion;
    h.pid = 4242;
    append(&h, sizeof h);
  }
  void append(const void* p, std::size_t n) {
    auto* c = static_cast<const std::uint8_t*>(p);
    bytes.insert(bytes.end(), c, c + n);
  }
  void chunk(std::uint32_t thread, const std::vector<tf::record>& rs) {
    std::vector<std::uint8_t> body(rs.size() * tf::kMaxRecordBytes);
    tf::codec c;
    std::size_t n = 0;
    for (auto& r : rs) n += tf::encode(r, c, body.data() + n);
    tf::chunk_header h{tf::kRecords, thread, std::uint32_t(n), std::uint32_t(rs.size())};
    append(&h, sizeof h);
    append(body.data(), n);
  }
  void save() {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
    close(fd);
  }
  ~trace_file() { unlink(path.c_str()); }
};

tf::record alloc(std::uint8_t op, std::uint64_t t0, std::uint64_t t1, std::uint64_t size, std::uint64_t result,
                 std::uint64_t old = 0) {
  tf::record r{};
  r.op = op;
  r.start = t0;
  r.duration = t1 - t0;
  r.size = size;
  r.result = result;
  r.old = old;
  return r;
}
tf::record release(std::uint64_t t0, std::uint64_t t1, std::uint64_t p) {
  tf::record r{};
  r.op = tf::op_free;
  r.start = t0;
  r.duration = t1 - t0;
  r.old = p;
  return r;
}

TEST(ReplayPlan, FreesAreTiedToTheirAllocationsAcrossThreadsAndReuse) {
  const std::uint64_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000;
  trace_file f("plan");
  // Thread 1 (events 0..5), in its own order.
  f.chunk(1, {alloc(tf::op_malloc, 10, 20, 64, A),         // 0: A, freed by thread 2 at 30
              release(25, 26, B),                           // 1: B never allocated: skipped
              alloc(tf::op_malloc, 27, 28, 1 << 30, 0)});   // 2: failed: skipped
  f.chunk(1, {alloc(tf::op_realloc, 60, 70, 128, C, A),    // 3: A again (thread 2's, at 40..50) -> C
              release(80, 81, 0),                           // 4: free(NULL)
              alloc(tf::op_calloc, 90, 95, 8, D)});         // 5: D, after a D nobody freed
  // Thread 2 (events 6..9).
  f.chunk(2, {release(30, 35, A),                           // 6: gives back event 0's A
              alloc(tf::op_malloc, 40, 50, 32, A),          // 7: A reused
              alloc(tf::op_aligned, 52, 53, 100, D),        // 8: D, never freed...
              release(100, 101, C)});                       // 9: gives back event 3's C
  f.save();
  rp::plan p;
  ASSERT_TRUE(rp::load(f.path.c_str(), p));
  ASSERT_EQ(p.n_threads, 2u);
  ASSERT_EQ(p.n_events, 10u);
  EXPECT_EQ(p.pid, 4242u);
  EXPECT_EQ(p.threads[0].number, 1u);
  EXPECT_EQ(p.threads[0].count, 6u);
  EXPECT_EQ(p.threads[1].first, 6u);
  auto& e = p.events;
  EXPECT_EQ(e[6].dep, 0u);
  EXPECT_TRUE(e[6].flags & rp::kRemoteDep);
  EXPECT_TRUE(e[1].flags & rp::kSkip);
  EXPECT_TRUE(e[2].flags & rp::kSkip);
  EXPECT_EQ(e[3].dep, 7u);  // the realloc gives back thread 2's reuse of A
  EXPECT_TRUE(e[3].flags & rp::kRemoteDep);
  EXPECT_TRUE(e[4].flags & rp::kNullFree);
  EXPECT_EQ(e[4].dep, rp::kNone);
  EXPECT_EQ(e[9].dep, 3u);
  EXPECT_EQ(e[5].dep, rp::kNone);
  EXPECT_EQ(p.lost_frees, 1u);       // D handed out twice with no free between
  EXPECT_EQ(p.unknown_frees, 1u);    // B
  EXPECT_EQ(p.failed_in_trace, 1u);
  EXPECT_EQ(p.skipped, 2u);
  EXPECT_EQ(p.traced.total(), 10u);
  EXPECT_EQ(p.traced.calls[tf::op_free], 4u);
  EXPECT_EQ(p.traced.bytes, 64u + (1u << 30) + 128 + 8 + 32 + 100);
  rp::release(p);
}

TEST(ReplayPlan, CallsInTheSameTickPairUpInOrder) {
  // A coarse counter (aarch64's runs at tens of MHz) gives many calls the
  // same time: their order must come from each thread's own sequence.
  const std::uint64_t A = 0x1000, B = 0x2000;
  trace_file f("tick");
  f.chunk(1, {alloc(tf::op_malloc, 5, 5, 16, A),        // 0
              release(5, 5, A),                          // 1: gives back 0
              alloc(tf::op_malloc, 5, 5, 16, A),        // 2: A again
              alloc(tf::op_realloc, 5, 5, 32, A, A),    // 3: in place: gives back 2, hands A out
              release(5, 5, A),                          // 4: gives back 3
              release(5, 5, B)});                        // 5: gives back thread 2's B, same tick
  f.chunk(2, {alloc(tf::op_malloc, 5, 5, 16, B)});       // 6
  f.save();
  rp::plan p;
  ASSERT_TRUE(rp::load(f.path.c_str(), p));
  EXPECT_EQ(p.events[1].dep, 0u);
  EXPECT_EQ(p.events[3].dep, 2u);
  EXPECT_EQ(p.events[4].dep, 3u);
  EXPECT_EQ(p.events[5].dep, 6u);
  EXPECT_TRUE(p.events[5].flags & rp::kRemoteDep);
  EXPECT_EQ(p.unknown_frees, 0u);
  EXPECT_EQ(p.lost_frees, 0u);
  EXPECT_EQ(p.skipped, 0u);
  rp::release(p);
}

TEST(ReplayPlan, RejectsWhatIsNotATrace) {
  std::string path = temp_path("garbage");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const char junk[64] = "not a trace at all, but long enough to have a header";
  ASSERT_EQ(write(fd, junk, sizeof junk), ssize_t(sizeof junk));
  close(fd);
  rp::plan p;
  EXPECT_FALSE(rp::load(path.c_str(), p));
  EXPECT_FALSE(rp::load("/nonexistent/trace", p));
  unlink(path.c_str());
}

using traced = tenon::trace<tenon::next_allocator>;
using ops = tenon::layer_ops<traced>;

TEST(TraceWriter, CallsComeBackFromTheFileWithTheirFrees) {
  std::string path = temp_path("writer");
  ASSERT_TRUE(tenon::measure::trace_open(path.c_str()));
  const int threads = 4;
  const int per = int(tenon_test::scaled(20000));
  // Each thread allocates `per` blocks, frees half of them itself and
  // leaves the other half to the next thread (cross-thread frees).
  std::vector<std::vector<void*>> handed(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::vector<void*> mine;
      for (int i = 0; i < per; ++i) {
        void* p = (i % 3 == 0) ? ops::alloc_zeroed(std::size_t(i % 200)) : ops::alloc(std::size_t(i % 500));
        if (i % 7 == 0) p = ops::realloc(p, std::size_t(i % 700) + 1);
        (i % 2 ? handed[std::size_t(t)] : mine).push_back(p);
      }
      for (void* p : mine) ops::dealloc(p);
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < threads; ++t) {
    std::thread([&, t] {
      for (void* p : handed[std::size_t(t)]) ops::dealloc(p);
      void* a = ops::alloc_aligned(256, 100);
      ops::dealloc(a);
    }).join();
  }
  tenon::measure::trace_close();
  rp::plan p;
  ASSERT_TRUE(rp::load(path.c_str(), p));
  unlink(path.c_str());
  ASSERT_EQ(p.n_threads, std::size_t(2 * threads));
  std::uint64_t reallocs = 0;
  for (int i = 0; i < per; ++i) reallocs += i % 7 == 0;
  EXPECT_EQ(p.traced.calls[tf::op_malloc] + p.traced.calls[tf::op_calloc], std::uint64_t(threads) * per);
  EXPECT_EQ(p.traced.calls[tf::op_realloc], threads * reallocs);
  EXPECT_EQ(p.traced.calls[tf::op_aligned], std::uint64_t(threads));
  EXPECT_EQ(p.traced.calls[tf::op_free], std::uint64_t(threads) * per + threads);
  EXPECT_EQ(p.unknown_frees, 0u);
  EXPECT_EQ(p.lost_frees, 0u);
  EXPECT_EQ(p.skipped, 0u);
  EXPECT_GT(p.ticks_per_second, 0u);
  // Every free ties to an allocation; half of the plain frees cross threads.
  std::uint64_t tied = 0, remote = 0;
  for (std::size_t i = 0; i < p.n_events; ++i) {
    if (p.events[i].op == tf::op_free) {
      tied += p.events[i].dep != rp::kNone;
      remote += (p.events[i].flags & rp::kRemoteDep) != 0;
    }
  }
  EXPECT_EQ(tied, p.traced.calls[tf::op_free]);
  EXPECT_EQ(remote, std::uint64_t(threads) * (per / 2));
  rp::release(p);
}

TEST(NextAllocator, ForwardsAndKnowsItsBootstrapBlocks) {
  using next = tenon::next_allocator;
  void* p = next::alloc(100);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(tenon::measure::next::in_bootstrap(p));
  EXPECT_GE(next::usable_size(p), 100u);
  p = next::realloc(p, 5000);
  ASSERT_NE(p, nullptr);
  next::dealloc(p);
  void* a = next::alloc_aligned(4096, 10);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 4096, 0u);
  next::dealloc(a);
  auto* z = static_cast<unsigned char*>(next::alloc_zeroed(64));
  ASSERT_NE(z, nullptr);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(z[i], 0);
  next::dealloc(z);

  // What a thread inside dlsym gets: bootstrap blocks, aligned, zeroed,
  // recognised by address, never handed to the next allocator's free, and
  // moved to it by realloc with their contents.
  std::size_t before = tenon::measure::next::bootstrap_used();
  auto* b = static_cast<char*>(tenon::measure::next::bootstrap_alloc(40, 16));
  auto* c = static_cast<char*>(tenon::measure::next::bootstrap_alloc(10, 256));
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(tenon::measure::next::in_bootstrap(b));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c) % 256, 0u);
  EXPECT_GT(tenon::measure::next::bootstrap_used(), before);
  EXPECT_EQ(next::usable_size(b), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(b[i], 0);
  std::memcpy(b, "bootstrap block", 16);
  next::dealloc(b);  // nothing happens
  EXPECT_STREQ(b, "bootstrap block");
  char* moved = static_cast<char*>(next::realloc(b, 1000));
  ASSERT_NE(moved, nullptr);
  EXPECT_FALSE(tenon::measure::next::in_bootstrap(moved));
  EXPECT_STREQ(moved, "bootstrap block");
  next::dealloc(moved);
  errno = 0;
  EXPECT_EQ(tenon::measure::next::bootstrap_alloc(tenon::measure::next::kBootstrapBytes, 16), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

}  // namespace
