// Lock-freedom of mass_pool, step by step: for every named step in the
// pool's slow paths (pool_step("...") in mass_pool.hpp), a child process parks
// one thread there forever and requires other threads, including ones on the
// parked thread's own lane, to finish their emplaces before a deadline.
//   exit 0: the others finished; exit 1: deadline passed (a parked thread
//   blocks others); exit 2: the scenario never reached the step;
//   exit 3: the others' elements are wrong.
// The test machinery may wait (joins, sleeps); only the pool may not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

const std::vector<std::string> kSteps = {"pool.refill.claimed", "pool.refill.install",
                                         "pool.segment.reserved", "pool.spare.pop",
                                         "pool.spare.push", "pool.dense.install",
                                         "pool.dense.prefault"};

enum role { other, victim, racer_a };
thread_local role t_role = other;
std::string g_step;
bool g_victim_is_a = false;
std::atomic<bool> g_parked{false};
std::atomic<bool> g_a_waiting{false};
std::atomic<bool> g_b_refilled{false};

void wait_for(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void hook(const char* step) {
  const bool is_victim = t_role == victim || (t_role == racer_a && g_victim_is_a);
  if (is_victim && step == g_step && !g_parked.load()) {
    g_parked.store(true);
    for (;;) pause();  // forever; the child process exits around this thread
  }
  // Racer A waits (test-side) inside its refill until B has refilled the same
  // lane, so A's install CAS fails and A's block goes to the spare stack.
  if (t_role == racer_a && std::string(step) == "pool.refill.install" && !g_b_refilled.load()) {
    g_a_waiting.store(true);
    wait_for(g_b_refilled);
  }
}

void on_lane0() { tenon::detail::tl_pool_lane_plus1 = 1; }

void phase_one_and_two(tenon::mass_pool<std::uint64_t>* pool);
[[noreturn]] void run_others_or_exit(tenon::mass_pool<std::uint64_t>* pool);

[[noreturn]] void scenario(const std::string& step) {
  g_step = step;
  g_victim_is_a = step == "pool.spare.push";
  const bool dense = step.rfind("pool.dense.", 0) == 0;
  // 4 per block; leaked on purpose
  auto* pool = dense ? new tenon::mass_pool<std::uint64_t>(tenon::dense_indices, 2)
                     : new tenon::mass_pool<std::uint64_t>(2);
  tenon::detail::pool_step_hook.store(&hook);

  if (dense) {
    // Dense mode has one shared lane: the victim parks either before its CAS
    // that installs the next block (its first emplace installs block 0) or
    // while it maps and faults in the next block (its third emplace takes the
    // middle slot of block 0). Everybody else then shares that lane.
    std::thread([pool] {
      t_role = victim;
      for (int i = 0; i < 100 && !g_parked.load(); ++i) pool->emplace(std::uint64_t{3});
    }).detach();
  } else if (step == "pool.segment.reserved") {
    // The first emplace of a fresh pool reserves its first segment: park the
    // victim between that reservation and the CAS that publishes it.
    std::thread([pool] {
      on_lane0();
      t_role = victim;
      pool->emplace(std::uint64_t{3});
    }).detach();
  } else {
    phase_one_and_two(pool);
  }
  run_others_or_exit(pool);
}

void phase_one_and_two(tenon::mass_pool<std::uint64_t>* pool) {
  // Phase 1: A and B race to refill lane 0; A loses and pushes its block on
  // the spare stack (for spare.push, A is the victim and parks right there).
  std::thread a([pool] {
    on_lane0();
    t_role = racer_a;
    pool->emplace(std::uint64_t{1});
  });
  std::thread b([pool] {
    on_lane0();
    wait_for(g_a_waiting);
    pool->emplace(std::uint64_t{2});
    g_b_refilled.store(true);
  });
  b.join();
  if (!g_victim_is_a) {
    a.join();
    if (pool->refill_races() != 1) _exit(2);
    // Phase 2: the victim fills lane 0's block and refills, which pops the
    // spare (spare.pop), claims it and installs it (refill.*), until it parks.
    std::thread([pool] {
      on_lane0();
      t_role = victim;
      for (int i = 0; i < 100 && !g_parked.load(); ++i) pool->emplace(std::uint64_t{3});
    }).detach();
  } else {
    a.detach();
  }
}

[[noreturn]] void run_others_or_exit(tenon::mass_pool<std::uint64_t>* pool) {
  const auto reach_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_parked.load() && std::chrono::steady_clock::now() < reach_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!g_parked.load()) _exit(2);

  // Phase 3: six threads, three on the parked thread's lane, must finish.
  const unsigned workers = 6;
  const std::uint32_t per = std::uint32_t(pool_test::scaled(4000, 500));
  std::vector<std::vector<std::uint32_t>> idx(workers);
  std::atomic<unsigned> done{0};
  for (unsigned w = 0; w < workers; ++w)
    std::thread([&, w] {
      if (w < 3) on_lane0();
      for (std::uint32_t i = 0; i < per; ++i)
        idx[w].push_back(pool->emplace(std::uint64_t{w} << 32 | i).index);
      done.fetch_add(1);
    }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (done.load() < workers && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (done.load() < workers) _exit(1);
  std::set<std::uint32_t> seen;
  for (unsigned w = 0; w < workers; ++w)
    for (std::uint32_t i = 0; i < per; ++i) {
      if (!seen.insert(idx[w][i]).second) _exit(3);
      if ((*pool)[idx[w][i]] != (std::uint64_t{w} << 32 | i)) _exit(3);
    }
  _exit(0);
}

class MassPoolProgress : public ::testing::TestWithParam<std::string> {};

TEST_P(MassPoolProgress, ParkedThreadDoesNotStopOthers) {
#ifdef TENON_POOL_TEST_TSAN
  GTEST_SKIP() << "fork with parked threads: not under ThreadSanitizer";
#endif
  // "fast": fork without re-executing the binary (re-exec fails under
  // qemu-user without binfmt). Safe here: the parent runs no threads; every
  // thread of the scenario lives in the child.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(scenario(GetParam()), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Steps, MassPoolProgress, ::testing::ValuesIn(kSteps),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

// Every step named in the header is in kSteps, so a new step is tested the
// moment it is added.
TEST(MassPoolProgressSteps, EveryStepInTheHeaderIsTested) {
  std::ifstream in(TENON_POOL_HEADER);
  ASSERT_TRUE(in) << TENON_POOL_HEADER;
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::set<std::string> named;
  const std::regex re("pool_step\\(\"([a-z.]+)\"\\)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    named.insert((*it)[1]);
  EXPECT_EQ(named, std::set<std::string>(kSteps.begin(), kSteps.end()));
}

}  // namespace
