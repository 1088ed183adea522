// Owned lanes: a thread that owns its lane claims with a plain store inside a
// restartable sequence (rseq); a lane that a second thread needs is taken
// from its owner and shared from then on. These cases check that taking a
// lane away, signal handlers that emplace in the middle of their thread's
// claim or refill, an exited owner and a fork child never lose, duplicate or
// mix up an element. Where the process cannot own lanes (no rseq: qemu,
// valgrind, ThreadSanitizer builds) every lane is shared and the same checks
// still hold.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

struct Item {
  std::uint32_t who;
  std::uint32_t seq;
  std::uint64_t check;
};
std::uint64_t check_of(std::uint32_t who, std::uint32_t seq) {
  return (std::uint64_t{who} << 40) ^ (std::uint64_t{seq} * 0x9E3779B97F4A7C15ull);
}

bool can_own() { return tenon_pool_thread_can_own() != 0; }

void on_lane(unsigned lane) { tenon::detail::tl_pool_lane_plus1 = lane + 1; }

// Every recorded index unique, every element what its emplacer wrote, and
// size() and a full iteration count exactly them.
void expect_exact(tenon::mass_pool<Item>& pool, const std::vector<std::vector<std::uint32_t>>& idx) {
  std::vector<std::uint32_t> all;
  for (std::uint32_t w = 0; w < idx.size(); ++w)
    for (std::uint32_t s = 0; s < idx[w].size(); ++s) {
      const Item& it = pool[idx[w][s]];
      ASSERT_EQ(it.who, w);
      ASSERT_EQ(it.seq, s);
      ASSERT_EQ(it.check, check_of(w, s));
      all.push_back(idx[w][s]);
    }
  std::sort(all.begin(), all.end());
  ASSERT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "duplicate index";
  EXPECT_EQ(pool.size(), all.size());
  std::size_t n = 0;
  for (auto it = pool.begin(); it != pool.end(); ++it, ++n) ASSERT_EQ(it.index(), all[n]);
  EXPECT_EQ(n, all.size());
}

TEST(MassPoolOwnedLanes, OneThreadOwnsItsLaneUntilClear) {
  tenon::mass_pool<Item> pool(4);
  for (std::uint32_t s = 0; s < 100; ++s) ASSERT_EQ(pool.emplace(Item{0, s, check_of(0, s)}).index, s);
  EXPECT_EQ(pool.owned_lanes(), can_own() ? 1u : 0u);
  EXPECT_EQ(pool.lane_takeovers(), 0u);
  pool.clear();
  EXPECT_EQ(pool.owned_lanes(), 0u);
  EXPECT_EQ(pool.emplace(Item{0, 0, 0}).index, 0u);
}

// A lane whose owner exited: the next thread on it continues the block (no
// hole), as owner (the C library may give it the exited thread's thread
// pointer) or after taking the lane over.
TEST(MassPoolOwnedLanes, ExitedOwnersBlockIsContinued) {
  tenon::mass_pool<Item> pool(6);
  std::vector<std::vector<std::uint32_t>> idx(2);
  for (std::uint32_t w = 0; w < 2; ++w)
    std::thread([&, w] {
      on_lane(0);
      for (std::uint32_t s = 0; s < 10; ++s) idx[w].push_back(pool.emplace(Item{w, s, check_of(w, s)}).index);
    }).join();
  for (std::uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(idx[0][i], i);
    EXPECT_EQ(idx[1][i], 10 + i);
  }
  expect_exact(pool, idx);
}

// An owner keeps emplacing on lane 0 while other threads arrive on lane 0
// and take the lane from it, at whatever point of the owner's claim they
// happen to: no slot may be claimed twice, none lost.
TEST(MassPoolOwnedLanes, LaneTakenFromAnOwnerInMidFill) {
  const int rounds = int(pool_test::scaled(40, 4));
  const std::uint32_t owner_n = std::uint32_t(pool_test::scaled(100000, 5000));
  const std::uint32_t other_n = std::uint32_t(pool_test::scaled(20000, 1000));
  std::uint64_t takeovers = 0;
  for (int r = 0; r < rounds; ++r) {
    tenon::mass_pool<Item> pool(4);  // 16-element blocks: refills all the time too
    const unsigned others = 3;
    std::vector<std::vector<std::uint32_t>> idx(1 + others);
    std::atomic<bool> started{false};
    std::vector<std::thread> ts;
    ts.emplace_back([&] {
      on_lane(0);
      for (std::uint32_t s = 0; s < owner_n; ++s) {
        idx[0].push_back(pool.emplace(Item{0, s, check_of(0, s)}).index);
        if (s == 1000) started.store(true);
      }
    });
    for (unsigned w = 1; w <= others; ++w)
      ts.emplace_back([&, w] {
        on_lane(0);
        while (!started.load()) std::this_thread::yield();
        for (std::uint32_t s = 0; s < other_n; ++s) idx[w].push_back(pool.emplace(Item{w, s, check_of(w, s)}).index);
      });
    for (auto& t : ts) t.join();
    expect_exact(pool, idx);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
    takeovers += pool.lane_takeovers();
    EXPECT_EQ(pool.owned_lanes(), 0u) << "lane 0 is shared once taken";
  }
  if (can_own()) EXPECT_EQ(takeovers, std::uint64_t(rounds)) << "one takeover per round";
}

// Signal handlers that emplace into the pool their thread is filling: the
// handler runs between any two instructions of the thread's claim, refill,
// or refresh of its copy of the block (the kernel restarts an interrupted
// restartable sequence), and uses the same lane.
std::atomic<tenon::mass_pool<Item>*> g_pool{nullptr};
constexpr std::uint32_t kHandlerMax = 1 << 20;
std::uint32_t g_handler_idx[kHandlerMax];
std::atomic<std::uint32_t> g_handler_n{0};

std::atomic<int> g_per_handler{2};

void emplace_from_handler(int) {
  auto* pool = g_pool.load();
  for (int i = 0, n = g_per_handler.load(); i < n; ++i) {
    const std::uint32_t s = g_handler_n.load(std::memory_order_relaxed);
    if (s >= kHandlerMax) return;
    g_handler_idx[s] = pool->emplace(Item{1, s, check_of(1, s)}).index;
    g_handler_n.store(s + 1, std::memory_order_relaxed);
  }
}

// One filler thread, signals sent to it from another thread a few
// microseconds apart. With blocks of `per_handler` elements, a burst of
// handlers that runs while the filler is between taking a block and
// installing it can leave the lane's block used up with the handler's copy
// of it still set; the filler's install then puts a lower block number on
// the lane, and a handler that runs before the filler refreshes its copy
// must not claim through the old copy (it did: a slot claimed twice, about 3
// runs in 25 under AddressSanitizer, before the fast path checked that the
// word is in the copy's block).
void signal_handlers_emplace(unsigned shift, int per_handler, std::uint32_t n) {
  tenon::mass_pool<Item> pool(shift);
  g_pool = &pool;
  g_handler_n = 0;
  g_per_handler = per_handler;
  struct sigaction sa = {};
  sa.sa_handler = emplace_from_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old = {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);

  std::vector<std::vector<std::uint32_t>> idx(2);
  idx[0].reserve(n);
  std::atomic<bool> done{false}, ready{false};
  pthread_t filler_id{};
  std::thread filler([&] {
    filler_id = pthread_self();
    ready.store(true);
    for (std::uint32_t s = 0; s < n; ++s) idx[0].push_back(pool.emplace(Item{0, s, check_of(0, s)}).index);
    done.store(true);
  });
  while (!ready.load()) std::this_thread::yield();
  unsigned long sent = 0;
  while (!done.load()) {
    pthread_kill(filler_id, SIGUSR1);
    ++sent;
    // A few microseconds apart (a sleep would be 50+): the test may spin,
    // the pool may not.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(3);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  filler.join();
  sigaction(SIGUSR1, &old, nullptr);
  idx[1].assign(g_handler_idx, g_handler_idx + g_handler_n.load());
  std::printf("blocks of %u, signals sent: %lu, emplaces in handlers: %zu\n", 1u << shift, sent, idx[1].size());
  EXPECT_GT(idx[1].size(), 0u);
  expect_exact(pool, idx);
  g_pool = nullptr;
}

TEST(MassPoolOwnedLanes, SignalHandlersEmplaceInTheMiddleOfClaims) {
  signal_handlers_emplace(3, 2, std::uint32_t(pool_test::scaled(1000000, 20000)));
}

TEST(MassPoolOwnedLanes, SignalHandlersUseUpBlocksInTheMiddleOfRefills) {
  signal_handlers_emplace(2, 4, std::uint32_t(pool_test::scaled(1000000, 20000)));
}

// The same, made deterministic with the pool's step hook: at every step of
// the filler's refills the hook raises a signal whose handler emplaces more
// than a block, so the handler refills the lane first (the filler's install
// then fails and its block goes to the spare stack, to be popped later: a
// lower block number installed on an owned lane) or pops the spare the
// filler is about to pop.
thread_local bool t_filler = false;
thread_local bool t_in_handler = false;
std::atomic<std::uint32_t> g_hook_raises{0};

void raise_on_refill_steps(const char* step) {
  if (!t_filler || t_in_handler) return;
  const std::string s = step;
  if (s == "pool.refill.install" || s == "pool.spare.pop" || s == "pool.refill.claimed") {
    g_hook_raises.fetch_add(1);
    raise(SIGUSR2);
  }
}

void refill_from_handler(int) {
  t_in_handler = true;
  auto* pool = g_pool.load();
  for (int i = 0; i < 9; ++i) {
    const std::uint32_t s = g_handler_n.load(std::memory_order_relaxed);
    if (s >= kHandlerMax) break;
    g_handler_idx[s] = pool->emplace(Item{1, s, check_of(1, s)}).index;
    g_handler_n.store(s + 1, std::memory_order_relaxed);
  }
  t_in_handler = false;
}

TEST(MassPoolOwnedLanes, HandlerRefillsInsideItsThreadsRefill) {
  tenon::mass_pool<Item> pool(3);  // 8-element blocks; the handler emplaces 9
  g_pool = &pool;
  g_handler_n = 0;
  g_hook_raises = 0;
  struct sigaction sa = {};
  sa.sa_handler = refill_from_handler;
  sigemptyset(&sa.sa_mask);
  struct sigaction old = {};
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  tenon::detail::pool_step_hook.store(&raise_on_refill_steps);
  std::vector<std::vector<std::uint32_t>> idx(2);
  std::thread([&] {
    t_filler = true;
    for (std::uint32_t s = 0; s < 2000; ++s) idx[0].push_back(pool.emplace(Item{0, s, check_of(0, s)}).index);
  }).join();
  tenon::detail::pool_step_hook.store(nullptr);
  sigaction(SIGUSR2, &old, nullptr);
  idx[1].assign(g_handler_idx, g_handler_idx + g_handler_n.load());
  std::printf("handler runs: %u, refill races: %llu\n", g_hook_raises.load(),
              (unsigned long long)pool.refill_races());
  EXPECT_GT(pool.refill_races(), 0u);
  expect_exact(pool, idx);
  g_pool = nullptr;
}

// The same, in the window where an owner's copy of its block can be stale:
// at the install step of each of the filler's refills, a handler uses up a
// whole block of its own (it refills the lane first; the filler's block
// then replaces the handler's used-up one, and may have a lower number);
// at the step after that install, before the filler refreshes its copy, a
// handler emplaces once more. The copy the first handler left describes
// the used-up block, so the second handler must not claim through it.
std::atomic<int> g_handler_emplaces{0};

void emplace_n_from_handler(int) {
  t_in_handler = true;
  auto* pool = g_pool.load();
  for (int i = 0, n = g_handler_emplaces.load(); i < n; ++i) {
    const std::uint32_t s = g_handler_n.load(std::memory_order_relaxed);
    if (s >= kHandlerMax) break;
    g_handler_idx[s] = pool->emplace(Item{1, s, check_of(1, s)}).index;
    g_handler_n.store(s + 1, std::memory_order_relaxed);
  }
  t_in_handler = false;
}

std::atomic<std::uint32_t> g_stale_window_raises{0};

void use_up_a_block_then_emplace(const char* step) {
  if (!t_filler || t_in_handler) return;
  const std::string s = step;
  if (s == "pool.refill.install") {
    g_handler_emplaces.store(8);  // one whole block
  } else if (s == "pool.copy.refresh") {
    g_handler_emplaces.store(1);
    g_stale_window_raises.fetch_add(1);
  } else {
    return;
  }
  raise(SIGUSR2);
}

TEST(MassPoolOwnedLanes, HandlerDoesNotClaimThroughACopyOfAUsedUpBlock) {
  tenon::mass_pool<Item> pool(3);  // 8-element blocks
  g_pool = &pool;
  g_handler_n = 0;
  g_stale_window_raises = 0;
  struct sigaction sa = {};
  sa.sa_handler = emplace_n_from_handler;
  sigemptyset(&sa.sa_mask);
  struct sigaction old = {};
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  tenon::detail::pool_step_hook.store(&use_up_a_block_then_emplace);
  std::vector<std::vector<std::uint32_t>> idx(2);
  std::thread([&] {
    t_filler = true;
    for (std::uint32_t s = 0; s < 200; ++s) idx[0].push_back(pool.emplace(Item{0, s, check_of(0, s)}).index);
  }).join();
  tenon::detail::pool_step_hook.store(nullptr);
  sigaction(SIGUSR2, &old, nullptr);
  idx[1].assign(g_handler_idx, g_handler_idx + g_handler_n.load());
  std::printf("handler emplaces: %zu, handlers before a copy refresh: %u\n", idx[1].size(),
              g_stale_window_raises.load());
  if (can_own()) EXPECT_GT(g_stale_window_raises.load(), 0u);
  expect_exact(pool, idx);
  g_pool = nullptr;
}

// A fork child has only the thread that forked: lanes owned by the parent's
// other threads belong to nobody there. Child threads on those lanes take
// them over (or continue them, with a reused thread pointer) and fill them
// correctly; the parent's threads still own theirs in the parent.
TEST(MassPoolOwnedLanes, ForkChildUsesLanesOfThreadsItDoesNotHave) {
#ifdef TENON_POOL_TEST_TSAN
  GTEST_SKIP() << "fork beside running threads: not under ThreadSanitizer";
#endif
  // "fast": fork without re-executing the binary; the threads live in the child.
  GTEST_FLAG_SET(death_test_style, "fast");
  auto child = [] {
    tenon::mass_pool<Item> pool(4);
    const unsigned lanes = 4;
    std::vector<std::vector<std::uint32_t>> idx(2 * lanes);
    std::atomic<unsigned> owning{0};
    std::atomic<bool> release{false};
    std::vector<std::thread> parents;
    for (unsigned w = 0; w < lanes; ++w)
      parents.emplace_back([&, w] {
        on_lane(w);
        for (std::uint32_t s = 0; s < 100; ++s) idx[w].push_back(pool.emplace(Item{w, s, check_of(w, s)}).index);
        owning.fetch_add(1);
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
    while (owning.load() < lanes) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const unsigned owned_before = pool.owned_lanes();
    const pid_t pid = fork();
    if (pid == 0) {
      auto fill = [&](unsigned w) {
        on_lane(w - lanes);
        for (std::uint32_t s = 0; s < 1000; ++s) idx[w].push_back(pool.emplace(Item{w, s, check_of(w, s)}).index);
      };
      // qemu-user (Debian 12's 7.2) aborts when a child forked from a
      // multithreaded guest starts a thread ("qemu_plugin_vcpu_init_hook:
      // assertion failed", 20 of 20 runs): there the forking thread takes the
      // orphaned lanes in turn, which still has it take over each of them.
      if (std::getenv("TENON_TEST_EMULATED")) {
        for (unsigned w = lanes; w < 2 * lanes; ++w) fill(w);
      } else {
        std::vector<std::thread> ts;
        for (unsigned w = lanes; w < 2 * lanes; ++w) ts.emplace_back(fill, w);
        for (auto& t : ts) t.join();
      }
      expect_exact(pool, idx);
      _exit(::testing::Test::HasFailure() ? 3 : 0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) _exit(2);
    release.store(true);
    for (auto& t : parents) t.join();
    if (owned_before != (can_own() ? lanes : 0u)) _exit(4);
    _exit(WEXITSTATUS(st));
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
