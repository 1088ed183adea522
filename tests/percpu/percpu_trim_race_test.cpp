// tenon::percpu_cache: a trim that runs while a CPU's region is being made.
// The maker publishes the region in steps (s_regions, the CPU limit, then the
// table entry the sequences read); a trim that claims the CPU in between
// must not drain that region while the maker's publication lets the CPU's
// threads push and pop in it. Held at the injection point percpu.publish
// (between the limit and the table entry), so this runs only in a build
// configured with -DTENON_INJECT=ON, with rseq and two CPUs.
#include <gtest/gtest.h>
#include <sched.h>
#include <tenon/layer.hpp>
#include <tenon/percpu/percpu_cache.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "tenon/common/inject.h"
#include "test_support.h"

namespace {

#ifdef TENON_INJECT

std::atomic<bool> g_drained_once{false};  // the drain reached its first block
std::atomic<int> g_cmd{0};                // to the maker: 1 publish and push, 2 pop, 3 finish
std::atomic<int> g_done{0};               // the maker's last step done
std::atomic<void*> g_pushed{nullptr};     // the block the maker pushed on its CPU
std::atomic<void*> g_popped{nullptr};     // what its pop got
std::atomic<bool> g_overlap{false};       // a block popped while the trim gave it to Inner
std::atomic<bool> g_held{false};          // the maker reached percpu.publish
std::atomic<std::thread::id> g_maker{};
std::atomic<bool> g_trimming{false};

// Waits (yielding) for cond, at most 10 s: false if it never came.
template <class F>
bool wait_for(F cond) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    sched_yield();
  }
  return true;
}

void hold_maker(const char* point) {
  if (std::strcmp(point, "percpu.publish") != 0 || std::this_thread::get_id() != g_maker.load()) return;
  g_held = true;
  wait_for([] { return g_cmd.load() >= 1; });
}

// The trim hands the cached blocks to Inner::dealloc: at the first one the
// maker is let go (it publishes its region and pushes a block there); when
// the trim reaches the maker's block, the maker pops from its CPU.
struct probe_inner : tenon::pass_through<tenon::default_allocator> {
  static void dealloc(void* p) noexcept {
    if (g_trimming.load() && on_drain(p)) return;  // popped meanwhile: live, not Inner's
    tenon::default_allocator::dealloc(p);
  }
  static bool on_drain(void* p) {
    if (!g_drained_once.exchange(true)) {
      g_cmd = 1;
      wait_for([] { return g_done.load() >= 1; });
    }
    if (p != g_pushed.load()) return false;
    g_cmd = 2;
    wait_for([] { return g_done.load() >= 2; });
    if (g_popped.load() != p) return false;
    g_overlap = true;
    return true;
  }
};

using P = tenon::percpu_cache<probe_inner>;

TEST(PercpuTrim, RegionPublishedDuringATrimIsNotDrainedWhileInUse) {
  if (!tenon::percpu::sequences_here()) GTEST_SKIP() << "no rseq here: nothing is cached";
  cpu_set_t every;  // an earlier test in this process may have pinned this thread
  CPU_ZERO(&every);
  for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &every);
  sched_setaffinity(0, sizeof every, &every);
  int cpu_a = tenon_test::nth_allowed_cpu(0), cpu_b = tenon_test::nth_allowed_cpu(1);
  if (cpu_b < 0) GTEST_SKIP() << "one CPU: the maker and the cached blocks need two";

  // CPU a: a region with two blocks in its 64-byte stack.
  std::thread([&] {
    ASSERT_TRUE(tenon_test::pin_to(cpu_a));
    void* x = P::alloc(64);
    void* y = P::alloc(64);
    P::dealloc(x);
    P::dealloc(y);
  }).join();
  ASSERT_GE(P::cached_blocks(), 2u);

  tenon_inject_set_hook(hold_maker);
  std::thread maker([&] {
    ASSERT_TRUE(tenon_test::pin_to(cpu_b));
    g_maker = std::this_thread::get_id();
    void* a = P::alloc(64);  // makes CPU b's region: held before its table entry
    P::dealloc(a);           // pushed on CPU b
    g_pushed = a;
    g_done = 1;
    wait_for([] { return g_cmd.load() >= 2; });
    if (g_cmd.load() == 2) {
      void* q = P::alloc(64);
      g_popped = q;
      g_done = 2;
      wait_for([] { return g_cmd.load() >= 3; });
      P::dealloc(q);
    }
  });
  ASSERT_TRUE(wait_for([] { return g_held.load(); }));

  g_trimming = true;
  P::trim(0);
  g_trimming = false;
  bool reached = g_drained_once.load();
  g_cmd = 3;
  maker.join();
  tenon_inject_set_hook(nullptr);

  if (!reached) GTEST_SKIP() << "the trim drained nothing (no membarrier here): the interleaving was not reached";
  EXPECT_FALSE(g_overlap.load()) << "the trim gave Inner a block that a thread on the CPU it drained popped meanwhile";
  P::trim(0);
  EXPECT_EQ(P::cached_blocks(), 0u);
}

#else

TEST(PercpuTrim, RegionPublishedDuringATrimIsNotDrainedWhileInUse) {
  GTEST_SKIP() << "needs a build with -DTENON_INJECT=ON (the maker is held at percpu.publish)";
}

#endif

}  // namespace
