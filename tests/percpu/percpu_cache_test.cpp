// tenon::percpu_cache (<tenon/percpu/percpu_cache.hpp>): correctness of the
// per-CPU front end over the default allocator, with rseq where the machine
// has it and the fallback where it does not (the same tests run again with
// GLIBC_TUNABLES=glibc.pthread.rseq=0: tests/percpu/CMakeLists.txt). Checks
// that need the caches working skip with a message when rseq is absent
// (qemu-user, valgrind, ThreadSanitizer builds). Speed is never asserted.
#include <errno.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tenon/layer.hpp>
#include <tenon/percpu/percpu_cache.hpp>
#include <tenon/tenon.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

bool check_pattern(const void* p, std::size_t n, std::uint64_t seed) {
  return tenon_test::first_pattern_mismatch(p, n, seed) == n;
}

using C = tenon::percpu_cache<tenon::default_allocator>;
using ops = tenon::layer_ops<C>;

// The blocks one worker holds, each filled with a pattern of its address and
// checked before it is freed; `bad` counts failed allocations and patterns.
struct live_blocks {
  std::atomic<unsigned>& bad;
  std::vector<std::pair<void*, std::size_t>> held{};

  void add(std::size_t n) {
    void* p = C::alloc(n);
    if (!p) {
      bad.fetch_add(1);
      return;
    }
    tenon_test::fill_pattern(p, n, reinterpret_cast<std::uintptr_t>(p) ^ n);
    held.emplace_back(p, n);
  }
  void free_at(std::size_t k) {
    auto [q, m] = held[k];
    held[k] = held.back();
    held.pop_back();
    if (!check_pattern(q, m, reinterpret_cast<std::uintptr_t>(q) ^ m)) bad.fetch_add(1);
    C::dealloc(q);
  }
  // One random step: a new block of size(r) while fewer than min_live are
  // held (and on odd r), else a random held one freed.
  template <class Size>
  void step(std::uint64_t r, std::size_t min_live, Size size) {
    if (held.size() < min_live || r % 2)
      add(size(r));
    else
      free_at(r % held.size());
  }
  void free_all() {
    while (!held.empty()) free_at(held.size() - 1);
  }
};

// Whether this process runs restartable sequences (built with them, and
// glibc registered them).
bool rseq_here() { return tenon::percpu::sequences_here(); }

// Run with GLIBC_TUNABLES=glibc.pthread.rseq=0 (the second run in CMakeLists.txt).
bool fallback_expected() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t != nullptr && std::strstr(t, "glibc.pthread.rseq=0") != nullptr;
}

using tenon_test::pin_to;

// The mask the process started with (read before any test runs). The tests
// pin threads to CPUs; every test's thread gets this mask back when the test
// ends (the listener below), so that a later test in the same process is not
// left on one CPU. (Before 2026-11-27 unpin() set the CPUs allowed at the
// time, which for a pinned thread is the one it was pinned to.)
cpu_set_t original_mask() {
  static const cpu_set_t mask = [] {
    cpu_set_t m;
    CPU_ZERO(&m);
    if (sched_getaffinity(0, sizeof m, &m) != 0)
      for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &m);
    return m;
  }();
  return mask;
}

// The CPUs of that mask: counted and named from it, not from the calling
// thread's mask, which a pin has narrowed to one CPU (before 2026-11-27 the
// workers of MigrationBetweenCpus asked their own mask after their first
// pin, got -1 for "the second CPU", and never moved; TrimDrainsEveryCpu
// filled one CPU's stacks).
unsigned cpus() {
  cpu_set_t m = original_mask();
  return static_cast<unsigned>(CPU_COUNT(&m));
}
int nth_allowed_cpu(unsigned n) {
  cpu_set_t m = original_mask();
  for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &m) && static_cast<unsigned>(seen++) == n) return c;
  return -1;
}

void unpin() {
  cpu_set_t set = original_mask();
  sched_setaffinity(0, sizeof set, &set);
}

struct restore_affinity : testing::EmptyTestEventListener {
  void OnTestEnd(const testing::TestInfo&) override { unpin(); }
};
const bool g_affinity_restored = [] {
  original_mask();
  testing::UnitTest::GetInstance()->listeners().Append(new restore_affinity);
  return true;
}();

std::size_t size_for(std::uint64_t r) {
  switch (r % 8) {
    case 0: return r % 16;
    case 1: return 16 + r % 48;
    case 2: return 64 + r % 192;
    case 3: case 4: return r % 1025;     // every cached class
    case 5: return 1025 + r % 3000;      // above the cache
    case 6: return 24;
    default: return 128;
  }
}

TEST(Percpu, FallbackIsWhatTheEnvironmentSays) {
  if (fallback_expected()) {
    EXPECT_FALSE(rseq_here()) << "GLIBC_TUNABLES=glibc.pthread.rseq=0 should leave no rseq";
  } else if (!rseq_here()) {
    GTEST_SKIP() << "no rseq here (qemu-user, valgrind, ThreadSanitizer, or not x86-64): the layer is its fallback";
  }
}

TEST(Percpu, EverySizeGivesAUsableBlock) {
  std::vector<void*> live;
  for (std::size_t n = 0; n <= 2100; ++n) {
    void* p = C::alloc(n);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(C::usable_size(p), n);
    if (n >= 16) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << n;
    }
    tenon_test::fill_pattern(p, n, n);
    live.push_back(p);
  }
  for (std::size_t n = 0; n < live.size(); ++n) {
    EXPECT_TRUE(check_pattern(live[n], n, n)) << n;
    C::dealloc(live[n]);
  }
  C::dealloc(nullptr);
  // calloc of a block that was cached (and written) is zero.
  for (int i = 0; i < 64; ++i) {
    auto* z = static_cast<unsigned char*>(ops::alloc_zeroed(100));
    ASSERT_NE(z, nullptr);
    for (int k = 0; k < 100; ++k) ASSERT_EQ(z[k], 0) << k;
    std::memset(z, 0xAB, 100);
    C::dealloc(z);
  }
  // realloc keeps the contents across classes and beyond the cache.
  void* p = C::alloc(10);
  std::memcpy(p, "0123456789", 10);
  for (std::size_t n : {20, 200, 1000, 5000, 100000, 40, 8}) {
    p = ops::realloc(p, n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(std::memcmp(p, "01234567", 8), 0) << n;
  }
  C::dealloc(p);
}

TEST(Percpu, FreedBlockComesBackOnTheSameCpu) {
  if (!rseq_here()) GTEST_SKIP() << "no rseq here: nothing is cached";
  ASSERT_TRUE(pin_to(nth_allowed_cpu(0)));
  void* warm = C::alloc(48);  // makes this CPU's region
  C::dealloc(warm);
  EXPECT_TRUE(C::cpu_cached());
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    void* a = C::alloc(48);
    C::dealloc(a);
    void* b = C::alloc(48);
    same += a == b;
    C::dealloc(b);
  }
  unpin();
  // A migration between the two calls could move us; nearly all must hit.
  EXPECT_GE(same, 90);
}

TEST(Percpu, HeapBlocksAreNotCached) {
  if (!rseq_here()) GTEST_SKIP() << "no rseq here: nothing is cached";
  ASSERT_TRUE(pin_to(nth_allowed_cpu(0)));
  void* warm = C::alloc(64);
  C::dealloc(warm);
  C::trim(0);
  tenon_heap_t* h = tenon_heap_new(nullptr);
  ASSERT_NE(h, nullptr);
  std::vector<void*> blocks;
  for (int i = 0; i < 50; ++i) blocks.push_back(tenon_heap_malloc(h, 64));
  std::size_t before = C::cached_blocks();
  for (void* b : blocks) C::dealloc(b);  // free() of a heap's block
  EXPECT_EQ(C::cached_blocks(), before);
  tenon_heap_destroy(h);
  unpin();
}

// Bursts three times a stack's capacity and more, of a small class and of
// the largest cached one, allocated, checked and freed in order and in
// reverse: every block past the stack takes the miss paths (an empty stack
// and a full one, to Inner). Contents are checked before each free (a
// block handed out twice would carry the later pattern); with rseq, the
// counts show that a miss on an empty stack caches nothing, a full stack
// stays full with the extra block going to Inner, and trim gives
// everything back.
TEST(Percpu, BurstsLargerThanTheStack) {
  const bool cached = rseq_here();
  if (cached) ASSERT_TRUE(pin_to(nth_allowed_cpu(0)));
  for (std::size_t size : {std::size_t{64}, std::size_t{1000}}) {
    const unsigned c = tenon::size_to_class(size);
    const std::size_t cap = tenon::percpu::slots_of(c);
    C::dealloc(C::alloc(size));  // this CPU's region made (the first miss makes it)
    C::trim(0);
    EXPECT_EQ(C::cached_blocks(), 0u);
    // An empty stack: the allocation comes from Inner, nothing is cached.
    void* first = C::alloc(size);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(C::cached_blocks(), 0u) << size;
    C::dealloc(first);
    const std::size_t n = 3 * cap + 7;
    std::vector<void*> v(n);
    for (int round = 0; round < 4; ++round) {
      for (std::size_t i = 0; i < n; ++i) {
        v[i] = C::alloc(size);
        ASSERT_NE(v[i], nullptr);
        tenon_test::fill_pattern(v[i], size, reinterpret_cast<std::uintptr_t>(v[i]) + round);
      }
      for (std::size_t k = 0; k < n; ++k) {
        void* q = v[round % 2 ? n - 1 - k : k];
        ASSERT_TRUE(check_pattern(q, size, reinterpret_cast<std::uintptr_t>(q) + round)) << size << " " << k;
        C::dealloc(q);
      }
      EXPECT_LE(C::cached_blocks(), cached ? cap : 0) << size;
    }
    if (cached) {
      // A full stack: the next free goes to Inner.
      C::trim(0);
      for (std::size_t i = 0; i < cap + 1; ++i) v[i] = C::alloc(size);
      C::trim(0);  // what the allocations left cached
      for (std::size_t i = 0; i < cap; ++i) C::dealloc(v[i]);
      EXPECT_EQ(C::cached_blocks(), cap) << size;
      C::dealloc(v[cap]);
      EXPECT_EQ(C::cached_blocks(), cap) << size;
    }
    C::trim(0);
    EXPECT_EQ(C::cached_blocks(), 0u) << size;
  }
  if (cached) unpin();
}

// Many threads, every cached class and some above, each freeing the blocks
// of another thread; every block checked for its own pattern before it goes.
TEST(Percpu, CrossThreadFreesKeepContents) {
  const unsigned threads = 8;
  const std::size_t per_round = tenon_test::scaled(2000), rounds = 20;
  std::vector<std::vector<std::pair<void*, std::size_t>>> lists(threads);
  std::barrier sync(threads);
  std::atomic<unsigned> bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t r = tenon_test::mix(t + 1);
      for (std::size_t round = 0; round < rounds; ++round) {
        auto& mine = lists[t];
        for (std::size_t i = 0; i < per_round; ++i) {
          r = tenon_test::mix(r);
          std::size_t n = size_for(r);
          void* p = C::alloc(n);
          if (!p) { bad.fetch_add(1); continue; }
          tenon_test::fill_pattern(p, n, reinterpret_cast<std::uintptr_t>(p) ^ n);
          mine.emplace_back(p, n);
          // A few freed at once by their own thread: local frees too.
          if (r % 5 == 0) {
            auto [q, m] = mine.back();
            mine.pop_back();
            if (!check_pattern(q, m, reinterpret_cast<std::uintptr_t>(q) ^ m)) bad.fetch_add(1);
            C::dealloc(q);
          }
        }
        sync.arrive_and_wait();
        auto& theirs = lists[(t + round + 1) % threads];
        sync.arrive_and_wait();
        // Each thread frees the list of another (all lists are taken once).
        for (auto [q, m] : theirs) {
          if (!check_pattern(q, m, reinterpret_cast<std::uintptr_t>(q) ^ m)) bad.fetch_add(1);
          C::dealloc(q);
        }
        theirs.clear();
        sync.arrive_and_wait();
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0u);
}

// Threads moved between CPUs while they allocate and free: a sequence cut by
// the migration restarts on the new CPU; nothing is lost or handed out twice.
TEST(Percpu, MigrationBetweenCpus) {
  if (cpus() < 2) GTEST_SKIP() << "one CPU: nothing to migrate between";
  const unsigned threads = 4;
  const std::size_t iters = tenon_test::scaled(400000);
  std::atomic<unsigned> bad{0}, failed_pins{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t r = tenon_test::mix(100 + t);
      live_blocks live{bad};
      for (std::size_t i = 0; i < iters; ++i) {
        if (i % 97 == 0 && !pin_to(nth_allowed_cpu(static_cast<unsigned>((i / 97 + t) % 2))))
          failed_pins.fetch_add(1);
        r = tenon_test::mix(r);
        live.step(r, 64, size_for);
      }
      live.free_all();
    });
  for (auto& th : ts) th.join();
  unpin();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(failed_pins.load(), 0u) << "a thread was not moved: the test did not migrate it";
}

// Signals aimed at a thread while it allocates and frees: a signal that
// lands inside a sequence aborts it before the handler runs, and the thread
// starts the sequence again when the handler returns; its blocks keep their
// contents and nothing is handed out twice. (The handler does not allocate:
// malloc is not async-signal-safe, and a handler interrupting the thread
// heaps underneath, on a miss, would break them, as it would with
// libtenon.so alone.)
std::atomic<unsigned> g_handler_runs{0};
void counting_handler(int) { g_handler_runs.fetch_add(1, std::memory_order_relaxed); }

TEST(Percpu, SignalsInsideSequences) {
  struct sigaction sa {}, old {};
  sa.sa_handler = counting_handler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  std::atomic<bool> stop{false};
  std::atomic<unsigned> bad{0};
  std::thread worker([&] {
    std::uint64_t r = tenon_test::mix(77);
    live_blocks live{bad};
    while (!stop.load(std::memory_order_relaxed)) {
      r = tenon_test::mix(r);
      live.step(r, 200, [](std::uint64_t x) -> std::size_t { return 32 + x % 64; });  // the handler's class among them
    }
    live.free_all();
  });
  // Until the handler ran this often (pending signals merge), or 5 s.
  const unsigned runs = tenon_test::kSanitized ? 2000 : 20000;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (g_handler_runs.load(std::memory_order_relaxed) < runs && std::chrono::steady_clock::now() < deadline) {
    pthread_kill(worker.native_handle(), SIGUSR1);
    std::this_thread::yield();
  }
  stop = true;
  worker.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(g_handler_runs.load(), 0u);
}

// fork() while other threads allocate and free through the caches: the child
// allocates and frees at once (the caches and the heaps under them are
// usable, nothing waits for a thread that is not there).
TEST(Percpu, ForkFromBusyProcess) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t r = tenon_test::mix(200 + t);
      while (!stop.load(std::memory_order_relaxed)) {
        void* ps[16];
        for (auto& p : ps) {
          r = tenon_test::mix(r);
          p = C::alloc(size_for(r));
        }
        for (void* p : ps) C::dealloc(p);
      }
    });
  const int forks = tenon_test::kSanitized ? 10 : 40;
  int failed = 0;
  for (int i = 0; i < forks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::vector<void*> v;
      v.reserve(4096);
      for (int k = 0; k < 4000; ++k) {
        void* p = C::alloc(static_cast<std::size_t>(k % 1100));
        if (!p) _exit(2);
        std::memset(p, k & 0xFF, static_cast<std::size_t>(k % 1100));
        v.push_back(p);
      }
      for (int k = 0; k < 4000; ++k) {
        auto* c = static_cast<unsigned char*>(v[static_cast<std::size_t>(k)]);
        if (k % 1100 && c[k % 1100 - 1] != (k & 0xFF)) _exit(3);
        C::dealloc(c);
      }
      C::trim(0);
      _exit(0);
    }
    // Poll with a deadline: a child that hangs must fail the test, not stall it.
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  for (auto& th : ts) th.join();
  EXPECT_EQ(failed, 0);
}

// malloc_trim gives every cached block back (from every CPU), also while
// other threads keep allocating and freeing through the caches.
TEST(Percpu, TrimDrainsEveryCpu) {
  // Fill the stacks of each CPU we may run on.
  for (unsigned i = 0; i < cpus() && i < 4; ++i) {
    if (!pin_to(nth_allowed_cpu(i))) continue;
    std::vector<void*> v;
    for (int k = 0; k < 200; ++k) v.push_back(C::alloc(static_cast<std::size_t>(8 + k % 500)));
    for (void* p : v) C::dealloc(p);
  }
  unpin();
  if (!rseq_here()) {
    EXPECT_EQ(C::cached_blocks(), 0u) << "without rseq nothing may be cached";
    GTEST_SKIP() << "no rseq here: nothing to drain";
  }
  EXPECT_GT(C::cached_blocks(), 0u);
  C::trim(0);
  EXPECT_EQ(C::cached_blocks(), 0u);

  // Concurrent: workers hammer while the main thread trims again and again.
  std::atomic<bool> stop{false};
  std::atomic<unsigned> bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t r = tenon_test::mix(300 + t);
      live_blocks live{bad};
      while (!stop.load(std::memory_order_relaxed)) {
        r = tenon_test::mix(r);
        live.step(r, 100, size_for);
      }
      live.free_all();
    });
  for (int i = 0; i < (tenon_test::kSanitized ? 20 : 100); ++i) {
    C::trim(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0u);
  C::trim(0);
  EXPECT_EQ(C::cached_blocks(), 0u);
}

// Runs last in this file: the tests before it pinned the main thread to one
// CPU, and the listener gave it back the process's mask after each.
TEST(Percpu, AffinityIsRestoredAfterEachTest) {
  cpu_set_t now, orig = original_mask();
  ASSERT_EQ(sched_getaffinity(0, sizeof now, &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &orig)) << CPU_COUNT(&now) << " CPUs allowed, " << CPU_COUNT(&orig) << " at the start";
}

}  // namespace
