// Lock-freedom of mass_pool, step by step: for every named step in the
// pool's slow paths (pool_step("...") in mass_pool.hpp), a child process parks
// one thread there forever and requires other threads, including ones on the
// parked thread's own lane, to finish their emplaces before a deadline.
//   exit 0: the others finished; exit 1: deadline passed (a parked thread
//   blocks others); exit 2: the scenario never reached the step;
//   exit 3: the others' elements are wrong.
// The same scenarios then check that the parked emplace leaves no phantom
// elements: size(), a full iteration and clear() see exactly the constructed
// elements, in this process (the thread still parked) and in a fork child
// (where the parked emplace is cut off: fork copies only the calling thread).
//   exit 4: size() or iteration wrong; exit 5: the fork child failed;
//   exit 6: clear() or the refill after it wrong.
// The test machinery may wait (joins, sleeps); only the pool may not.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

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
                                         "pool.dense.prefault", "pool.lane.revoke",
                                         "pool.copy.refresh"};

// Lanes are owned only where the kernel restarts sequences (rseq); elsewhere
// (qemu, valgrind, ThreadSanitizer builds) no lane is ever taken from an
// owner, so that step cannot be reached.
bool step_needs_owned_lanes(const std::string& step) {
  return step == "pool.lane.revoke" || step == "pool.copy.refresh";
}

// An element that knows whether it was constructed: a slot no emplace filled
// holds zero bytes (fresh memory), so its magic is wrong. Counts constructions
// and destructions, and destructions of unconstructed slots.
constexpr std::uint64_t kMagic = 0x600DF00D5EED5EEDull;
std::atomic<long> g_constructed{0};
std::atomic<long> g_destroyed{0};
std::atomic<long> g_destroyed_unconstructed{0};
struct Elem {
  Elem(std::uint64_t v) noexcept : value(v), magic(kMagic) { g_constructed.fetch_add(1); }  // NOLINT: implicit
  ~Elem() {
    (magic == kMagic ? g_destroyed : g_destroyed_unconstructed).fetch_add(1);
    magic = 0;
  }
  std::uint64_t value;
  std::uint64_t magic;
};
using Pool = tenon::mass_pool<Elem>;

enum role { other, victim, racer_a };
thread_local role t_role = other;
std::string g_step;
bool g_victim_is_a = false;
std::atomic<bool> g_parked{false};
std::atomic<bool> g_a_waiting{false};
std::atomic<bool> g_b_refilled{false};
bool g_check_phantoms = false;

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

void on_lane(unsigned lane) { tenon::detail::tl_pool_lane_plus1 = lane + 1; }
void on_lane0() { on_lane(0); }

void phase_one_and_two(Pool* pool);
[[noreturn]] void run_others_or_exit(Pool* pool);

[[noreturn]] void scenario(const std::string& step, bool check_phantoms) {
  g_step = step;
  g_check_phantoms = check_phantoms;
  g_victim_is_a = step == "pool.spare.push";
  const bool dense = step.rfind("pool.dense.", 0) == 0;
  // 4 per block; leaked on purpose
  auto* pool = dense ? new Pool(tenon::dense_indices, 2)
                     : new Pool(2);
  tenon::detail::pool_step_hook.store(&hook);

  if (dense) {
    // Dense mode has one shared lane: the victim parks either before its CAS
    // that installs the next block (its first emplace installs block 0) or
    // while it maps and faults in the block after the one it installed (its
    // fifth emplace installs block 1). Everybody else then shares that lane.
    std::thread([pool] {
      t_role = victim;
      for (int i = 0; i < 100 && !g_parked.load(); ++i) pool->emplace(std::uint64_t{3});
    }).detach();
  } else if (step == "pool.lane.revoke") {
    // A live thread owns lane 0; the victim, on lane 0 too, takes the lane
    // from it and parks between marking it and restarting the owner's
    // sequences. The owner must stay alive: a new thread may reuse an exited
    // one's thread pointer, and would then simply continue as the owner.
    static std::atomic<bool> owns{false};
    std::thread([pool] {
      on_lane0();
      pool->emplace(std::uint64_t{1});
      owns.store(true);
      for (;;) pause();
    }).detach();
    wait_for(owns);
    std::thread([pool] {
      on_lane0();
      t_role = victim;
      pool->emplace(std::uint64_t{3});
    }).detach();
  } else if (step == "pool.segment.reserved" || step == "pool.copy.refresh") {
    // The first emplace of a fresh pool reserves its first segment: park the
    // victim between that reservation and the CAS that publishes it; or,
    // owning lane 0, between installing its first block and refreshing its
    // copy of it (the others on lane 0 then take the lane from it).
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

void phase_one_and_two(Pool* pool) {
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

long live() { return g_constructed.load() - g_destroyed.load(); }

[[noreturn]] void fail(int code, const char* where, const char* what, long got, long expected) {
  std::fprintf(stderr, "%s: %s %ld, expected %ld\n", where, what, got, expected);
  _exit(code);
}

// size() and a full iteration agree with the `expected` constructed elements:
// every visited slot holds a constructed element, each once, in index order.
void check_contents(Pool& pool, long expected, int code, const char* where) {
  if (long(pool.size()) != expected) fail(code, where, "size()", long(pool.size()), expected);
  long visited = 0, unconstructed = 0;
  std::int64_t prev = -1;
  for (auto it = pool.begin(), end = pool.end(); it != end; ++it, ++visited) {
    if (it->magic != kMagic) ++unconstructed;
    if (std::int64_t(it.index()) <= prev) fail(code, where, "index out of order at rank", visited, -1);
    prev = it.index();
  }
  if (visited != expected) fail(code, where, "iteration visited", visited, expected);
  if (unconstructed) fail(code, where, "unconstructed slots visited:", unconstructed, 0);
}

// clear() (or clear(keep_memory)) destroys exactly the live elements and
// empties the pool, which then fills and counts correctly again.
void check_clear_and_refill(Pool& pool, bool keep_memory, int code, const char* where) {
  const long expected = live();
  const long destroyed_before = g_destroyed.load();
  if (keep_memory)
    pool.clear(tenon::keep_memory);
  else
    pool.clear();
  if (g_destroyed.load() - destroyed_before != expected)
    fail(code, where, "clear() destroyed", g_destroyed.load() - destroyed_before, expected);
  if (g_destroyed_unconstructed.load() != 0)
    fail(code, where, "clear() destroyed unconstructed slots:", g_destroyed_unconstructed.load(), 0);
  check_contents(pool, 0, code, where);
  for (std::uint64_t i = 0; i < 1000; ++i) pool.emplace(i);
  check_contents(pool, 1000, code, where);
}

// With the victim still parked: size() and iteration here; then a fork child,
// in which the parked emplace no longer exists, iterates and clears both ways;
// then this process clears both ways.
void check_no_phantoms(Pool& pool) {
  check_contents(pool, live(), 4, "parked");
  const pid_t pid = fork();
  if (pid == 0) {
    check_contents(pool, live(), 5, "fork child");
    check_clear_and_refill(pool, true, 5, "fork child, clear(keep_memory)");
    check_clear_and_refill(pool, false, 5, "fork child, clear()");
    _exit(0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) _exit(2);
  if (WIFSIGNALED(st)) fail(5, "fork child", "killed by signal", WTERMSIG(st), 0);
  if (WEXITSTATUS(st) != 0) _exit(5);
  check_clear_and_refill(pool, false, 6, "parked, clear()");
  check_clear_and_refill(pool, true, 6, "parked, clear(keep_memory)");
}

[[noreturn]] void run_others_or_exit(Pool* pool) {
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
      if ((*pool)[idx[w][i]].value != (std::uint64_t{w} << 32 | i)) _exit(3);
    }
  if (g_check_phantoms) check_no_phantoms(*pool);
  _exit(0);
}

class MassPoolProgress : public ::testing::TestWithParam<std::string> {};

TEST_P(MassPoolProgress, ParkedThreadDoesNotStopOthers) {
#ifdef TENON_POOL_TEST_TSAN
  GTEST_SKIP() << "fork with parked threads: not under ThreadSanitizer";
#endif
  if (step_needs_owned_lanes(GetParam()) && !tenon_pool_thread_can_own())
    GTEST_SKIP() << "no owned lanes here (no rseq)";
  // "fast": fork without re-executing the binary (re-exec fails under
  // qemu-user without binfmt). Safe here: the parent runs no threads; every
  // thread of the scenario lives in the child.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(scenario(GetParam(), false), ::testing::ExitedWithCode(0), "");
}

// The parked emplace may keep what it claimed (a block, a slot), but size(),
// iteration and clear() must count and visit only constructed elements, with
// the thread parked and in a fork child where that emplace is cut off.
TEST_P(MassPoolProgress, ParkedThreadLeavesNoPhantomElements) {
#ifdef TENON_POOL_TEST_TSAN
  GTEST_SKIP() << "fork with parked threads: not under ThreadSanitizer";
#endif
  // Parked there, the emplace has claimed its slot (the install takes slot
  // 0), like one frozen in T's constructor: size(), iteration and clear()
  // see that slot, as the guarantee says. Progress is checked above.
  if (GetParam() == "pool.copy.refresh") GTEST_SKIP() << "the parked emplace holds its slot at this step";
  if (step_needs_owned_lanes(GetParam()) && !tenon_pool_thread_can_own())
    GTEST_SKIP() << "no owned lanes here (no rseq)";
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(scenario(GetParam(), true), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Steps, MassPoolProgress, ::testing::ValuesIn(kSteps),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

// The case as reported, at the default block size (2^18 eight-byte elements):
// 10 elements on lane 0, then an emplace on lane 1 parked right after claiming
// its block. A fork child, in which that emplace is cut off, counts, iterates
// and clears.
[[noreturn]] void frozen_claim_then_fork() {
  auto* pool = new tenon::mass_pool<std::uint64_t>();  // leaked on purpose
  g_step = "pool.refill.claimed";
  tenon::detail::pool_step_hook.store(&hook);
  std::thread([pool] {
    on_lane(0);
    for (std::uint64_t i = 1; i <= 10; ++i) pool->emplace(i);
  }).join();
  std::thread([pool] {
    on_lane(1);
    t_role = victim;
    pool->emplace(std::uint64_t{99});
  }).detach();
  wait_for(g_parked);
  if (!g_parked.load()) _exit(2);
  const pid_t pid = fork();
  if (pid == 0) {
    std::uint64_t visited = 0, sum = 0;
    for (std::uint64_t v : *pool) ++visited, sum += v;
    if (visited != 10 || sum != 55) fail(4, "fork child", "iteration visited", long(visited), 10);
    const std::uint64_t n = pool->size();
    if (n != 10) fail(4, "fork child", "size()", long(n), 10);
    pool->clear(tenon::keep_memory);
    if (pool->size() != 0 || pool->begin() != pool->end())
      fail(6, "fork child", "size() after clear", long(pool->size()), 0);
    for (std::uint64_t i = 1; i <= 10; ++i) pool->emplace(i);
    if (pool->size() != 10 || std::uint64_t(pool->end() - pool->begin()) != 10)
      fail(6, "fork child", "size() after refill", long(pool->size()), 10);
    pool->clear();
    if (pool->size() != 0 || pool->begin() != pool->end())
      fail(6, "fork child", "size() after clear", long(pool->size()), 0);
    _exit(0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) _exit(2);
  if (WIFSIGNALED(st)) fail(5, "fork child", "killed by signal", WTERMSIG(st), 0);
  _exit(WEXITSTATUS(st));
}

TEST(MassPoolFrozenClaim, ForkChildCountsIteratesAndClears) {
#ifdef TENON_POOL_TEST_TSAN
  GTEST_SKIP() << "fork with parked threads: not under ThreadSanitizer";
#endif
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(frozen_claim_then_fork(), ::testing::ExitedWithCode(0), "");
}

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
