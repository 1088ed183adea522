// Calls made by a thread after tenon's thread-exit hook has released its heap
// (glibc's __libc_thread_freeres, destructors of keys made after tenon's) must
// be served without attaching a heap that nothing would release, and must not
// corrupt anything while other threads allocate, free and exit around them.
// The C-library side of this (dlerror buffers under LD_PRELOAD) is the preload
// test late_free_threads; this one runs the same paths under the sanitizers.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

long heaps_in_use() { return stat_value("thread heaps attached") - stat_value("thread heaps released"); }

Failures g_failures;
// Blocks passed between threads: allocated by live threads and freed after
// an exit hook, or allocated after an exit hook and freed by main.
constexpr std::size_t kSlots = 256;
std::atomic<void*> g_slots[kSlots];

// A key made after tenon's (the test makes it after its first tenon call).
// tenon's key takes the last free slot when made single-threaded, so this
// one's destructor runs before tenon's hook in each round; else after it.
// It sets its value again, so glibc runs it in every destructor round (4),
// after the hook from the second on: a heap attached in the last round
// would never be released. The sanitizers tear
// their own thread state down in that last round (their key destructor
// re-arms itself the same way), so under them the hook stops one round
// earlier: it still runs every heapless path, only the leak check is the
// Release build's.
pthread_key_t g_late_key;
thread_local int t_late_rounds = 0;
constexpr int kLateRounds = tenon_test::kSanitized ? 3 : 4;

void after_exit_hook(void* arg) {
  if (++t_late_rounds < kLateRounds) pthread_setspecific(g_late_key, arg);
  auto serial = reinterpret_cast<std::uintptr_t>(arg);
  std::mt19937_64 rng(serial);
  for (int i = 0; i < 40; ++i) {
    void* p = make_block(rng, 7, serial * 64 + i, g_failures);  // small, large and rarely bigger
    if (!p) return;
    if (i % 4 == 0) {
      // Swap with a block some other (live or exited) thread made.
      if (void* old = g_slots[rng() % kSlots].exchange(p, std::memory_order_acq_rel)) check_and_free(old, g_failures);
    } else {
      check_and_free(p, g_failures);
    }
  }
}

void short_thread(std::uintptr_t serial) {
  std::mt19937_64 rng(serial + 1000);
  for (int i = 0; i < 20; ++i) {
    void* p = make_block(rng, 3, serial * 64 + i, g_failures);
    if (!p) return;
    if (void* old = g_slots[rng() % kSlots].exchange(p, std::memory_order_acq_rel)) check_and_free(old, g_failures);
  }
  pthread_setspecific(g_late_key, reinterpret_cast<void*>(serial + 1));
}

TEST(LateCalls, AfterTheExitHookNoHeapIsLeftBehind) {
  tenon_free(tenon_malloc(1));  // tenon's key exists before ours
  ASSERT_EQ(pthread_key_create(&g_late_key, after_exit_hook), 0);
  for (auto& s : g_slots) s.store(nullptr);
  // Counted while no other thread runs (statistics are read racily otherwise).
  const long before = heaps_in_use();
  ASSERT_GE(before, 1) << "heap counters missing from tenon_stats_print";
  // A live thread allocating and freeing beside the exiting ones throughout.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    std::mt19937_64 rng(99);
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      void* p = make_block(rng, 5, i, g_failures);
      if (!p) break;
      if (void* old = g_slots[rng() % kSlots].exchange(p, std::memory_order_acq_rel)) check_and_free(old, g_failures);
    }
  });
  const std::size_t rounds = tenon_test::scaled(300);
  std::uintptr_t serial = 0;
  for (std::size_t r = 0; r < rounds && g_failures.count() == 0; ++r) {
    std::thread wave[4];
    for (auto& t : wave) t = std::thread(short_thread, serial++);
    for (auto& t : wave) t.join();
  }
  stop = true;
  busy.join();
  const long after = heaps_in_use();
  for (auto& s : g_slots)
    if (void* b = s.exchange(nullptr)) check_and_free(b, g_failures);
  pthread_key_delete(g_late_key);
  EXPECT_EQ(g_failures.count(), 0) << g_failures.first();
  std::printf("late calls: %zu threads, heaps in use %ld -> %ld\n", rounds * 4, before, after);
  EXPECT_EQ(after, before) << (after - before) << " heaps left behind by threads that called after the exit hook";
}

}  // namespace
