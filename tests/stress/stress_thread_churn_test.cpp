// Tens of thousands of short-lived threads, each allocating and freeing, some
// freeing blocks whose allocating thread has already exited. Memory held by
// dead threads must be reused (abandoned and adopted), so RSS stays bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

constexpr std::size_t kSlots = 512;

struct Shared {
  std::vector<std::atomic<void*>> slots{kSlots};
  Failures failures;
};

// The body of one short thread: a little private churn, then one block left
// behind in a shared slot (freed later by some other, later thread).
void short_life(Shared& shared, unsigned id, std::uint64_t serial) {
  std::mt19937_64 rng(serial * 2654435761u + 1);
  void* mine[16];
  const int n = 8 + static_cast<int>(rng() % 9);
  for (int i = 0; i < n; ++i) mine[i] = make_block(rng, id, serial * 32 + i, shared.failures);
  for (int i = 0; i < n; i += 2)
    if (mine[i]) check_and_free(mine[i], shared.failures);
  // Leave one block behind; take out (and free) one left by an earlier thread.
  void* old = shared.slots[rng() % kSlots].exchange(mine[1], std::memory_order_acq_rel);
  if (old) check_and_free(old, shared.failures);
  for (int i = 3; i < n; i += 2)
    if (mine[i]) check_and_free(mine[i], shared.failures);
}

// Runs `total` threads, `wave` at a time.
void run_waves(Shared& shared, std::size_t total, unsigned wave, std::uint64_t& serial) {
  std::vector<std::thread> live;
  for (std::size_t started = 0; started < total && shared.failures.count() == 0;) {
    for (unsigned k = 0; k < wave && started < total; ++k, ++started) {
      std::uint64_t s = serial++;
      live.emplace_back(short_life, std::ref(shared), static_cast<unsigned>(s % 251), s);
    }
    for (auto& t : live) t.join();
    live.clear();
  }
}

TEST(ThreadChurn, ShortThreadsKeepRssBounded) {
  Shared shared;
  for (auto& s : shared.slots) s.store(nullptr);
  std::uint64_t serial = 0;
  // Warm up so that the baseline includes the allocator's steady state.
  run_waves(shared, tenon_test::scaled(2000), 4, serial);
  const std::size_t before = resident_bytes();
  const std::size_t total = tenon_test::scaled(40000);
  run_waves(shared, total, 4, serial);
  for (auto& s : shared.slots)
    if (void* b = s.exchange(nullptr)) check_and_free(b, shared.failures);
  const std::size_t after = resident_bytes();
  EXPECT_EQ(shared.failures.count(), 0) << shared.failures.first();
  const std::size_t growth = after > before ? after - before : 0;
  std::printf("thread churn: %zu threads, RSS %zu KiB -> %zu KiB\n", total, before >> 10, after >> 10);
  // Sanitizer shadow memory and per-thread state count in RSS: bound it only
  // in plain builds (Release is where this label's bound is defined).
  if (!tenon_test::kSanitized)
    EXPECT_LT(growth, std::size_t{64} << 20)
        << "RSS grew by " << (growth >> 20) << " MiB over " << total
      << " short threads: memory of exited threads is not being reused";
}

// Threads that exit while holding many live blocks; all are freed afterwards
// by the main thread (remote frees into heaps whose owners are gone).
TEST(ThreadChurn, MainFreesBlocksOfExitedThreads) {
  Failures failures;
  const std::size_t rounds = tenon_test::scaled(400);
  const std::size_t before = resident_bytes();
  for (std::size_t r = 0; r < rounds && failures.count() == 0; ++r) {
    std::vector<void*> left(200, nullptr);
    std::thread t([&, r] {
      std::mt19937_64 rng(r);
      for (std::size_t i = 0; i < left.size(); ++i) left[i] = make_block(rng, 1, r * 1000 + i, failures);
    });
    t.join();
    for (void* b : left)
      if (b) check_and_free(b, failures);
  }
  const std::size_t after = resident_bytes();
  EXPECT_EQ(failures.count(), 0) << failures.first();
  const std::size_t growth = after > before ? after - before : 0;
  std::printf("exited threads: %zu rounds, RSS %zu KiB -> %zu KiB\n", rounds, before >> 10, after >> 10);
  if (!tenon_test::kSanitized)
    EXPECT_LT(growth, std::size_t{64} << 20) << "RSS grew by " << (growth >> 20) << " MiB";
}

// Threads that only free: each one frees a batch of blocks the main thread
// allocated, then exits. Their remote frees are batched per thread, so a
// batch still pending at thread exit must be handed over, not dropped (RSS).
TEST(ThreadChurn, FreeOnlyThreads) {
  Failures failures;
  const std::size_t rounds = tenon_test::scaled(1500);
  std::mt19937_64 rng(12);
  std::vector<void*> batch(200);
  // Warm-up round so that the baseline includes the spans in steady use.
  auto round = [&](std::size_t r) {
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = make_block(rng, 0, r * 1000 + i, failures);
    std::thread t([&] {
      for (void* b : batch)
        if (b) check_and_free(b, failures);
    });
    t.join();
  };
  for (std::size_t r = 0; r < 50; ++r) round(r);
  const std::size_t before = resident_bytes();
  for (std::size_t r = 50; r < rounds && failures.count() == 0; ++r) round(r);
  const std::size_t after = resident_bytes();
  EXPECT_EQ(failures.count(), 0) << failures.first();
  const std::size_t growth = after > before ? after - before : 0;
  std::printf("free-only threads: %zu rounds, RSS %zu KiB -> %zu KiB\n", rounds, before >> 10, after >> 10);
  if (!tenon_test::kSanitized)
    EXPECT_LT(growth, std::size_t{64} << 20)
        << "RSS grew by " << (growth >> 20) << " MiB: blocks freed by exiting threads are not reused";
}

}  // namespace
