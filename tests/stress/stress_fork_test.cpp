// fork() while other threads are inside the allocator: every child must be
// able to allocate, reallocate and free at once. A child that hangs means the
// allocator left something locked (or a half-done state it waits on) in the
// child; the parent kills it after a deadline and fails.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

// What each child does before _exit: a bit of every operation, all sizes.
[[noreturn]] void child_body() {
  int status = 0;
  for (std::size_t size : {std::size_t{16}, std::size_t{100}, std::size_t{5000}, std::size_t{70000},
                           std::size_t{1} << 20, std::size_t{3} << 20}) {
    auto* p = static_cast<unsigned char*>(tenon_malloc(size));
    if (!p) _exit(10);
    fill_pattern(p, size, size);
    auto* q = static_cast<unsigned char*>(tenon_realloc(p, size * 2 + 1));
    if (!q) _exit(11);
    if (first_pattern_mismatch(q, size, size) != size) status = 12;
    void* c = tenon_calloc(size, 1);
    if (!c) _exit(13);
    void* a = tenon_aligned_alloc(4096, size);
    if (!a) _exit(14);
    tenon_free(a);
    tenon_free(c);
    tenon_free(q);
  }
  _exit(status);
}

// Waits for pid for at most `deadline`; kills it when it is late.
// Returns a description of what went wrong, or "" when it exited 0.
std::string reap(pid_t pid, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return "waitpid failed: " + std::to_string(errno);
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "child " + std::to_string(pid) + " still running after " + std::to_string(deadline.count()) +
             " s (allocator deadlocked after fork?)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (WIFSIGNALED(status)) return "child killed by signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "child exited with " + std::to_string(WEXITSTATUS(status));
  return "";
}

void hammer(unsigned id, std::atomic<bool>& stop, std::vector<std::atomic<void*>>& slots, Failures& failures) {
  std::mt19937_64 rng(300 + id);
  std::vector<void*> local;
  for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
    void* b = make_block(rng, id, i, failures);
    if (!b) break;
    switch (rng() % 3) {
      case 0: {
        void* old = slots[rng() % slots.size()].exchange(b, std::memory_order_acq_rel);
        if (old) check_and_free(old, failures);
        break;
      }
      case 1:
        local.push_back(b);
        if (local.size() > 100) {
          for (void* l : local) check_and_free(l, failures);
          local.clear();
        }
        break;
      default: {
        void* q = tenon_realloc(b, 16 + rng() % 100000);
        tenon_free(q);
      }
    }
  }
  for (void* l : local) check_and_free(l, failures);
}

TEST(Fork, ChildrenOfABusyProcessCanAllocate) {
  const unsigned threads = 4;
  const std::size_t forks = tenon_test::kSanitized ? 30 : 150;
  std::atomic<bool> stop{false};
  std::vector<std::atomic<void*>> slots(1024);
  for (auto& s : slots) s.store(nullptr);
  Failures failures;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(hammer, t, std::ref(stop), std::ref(slots), std::ref(failures));

  std::vector<std::string> problems;
  for (std::size_t i = 0; i < forks; ++i) {
    // Let the hammer threads get well inside the allocator between forks.
    std::this_thread::sleep_for(std::chrono::microseconds(500 + (i % 7) * 300));
    pid_t pid = fork();
    if (pid == 0) child_body();
    if (pid < 0) {
      problems.push_back("fork failed: " + std::to_string(errno));
      break;
    }
    std::string why = reap(pid, std::chrono::seconds(10));
    if (!why.empty()) problems.push_back("fork " + std::to_string(i) + ": " + why);
    if (problems.size() >= 3) break;  // enough to diagnose; do not wait 10 s per fork
  }
  stop = true;
  for (auto& t : pool) t.join();
  for (auto& s : slots)
    if (void* b = s.exchange(nullptr)) check_and_free(b, failures);
  for (const auto& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// The fork comes from one of the busy threads rather than from main.
TEST(Fork, ForkFromAnAllocatingThread) {
  const std::size_t forks = tenon_test::kSanitized ? 10 : 50;
  std::atomic<bool> stop{false};
  std::vector<std::atomic<void*>> slots(1024);
  for (auto& s : slots) s.store(nullptr);
  Failures failures;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < 3; ++t)
    pool.emplace_back(hammer, t, std::ref(stop), std::ref(slots), std::ref(failures));
  std::vector<std::string> problems;
  std::thread forker([&] {
    std::mt19937_64 rng(9);
    for (std::size_t i = 0; i < forks && problems.size() < 3; ++i) {
      // Allocate right up to the fork so this thread's own heap is mid-use.
      std::vector<void*> mine;
      for (int k = 0; k < 50; ++k) mine.push_back(make_block(rng, 9, i * 100 + k, failures));
      pid_t pid = fork();
      if (pid == 0) child_body();
      for (void* b : mine)
        if (b) check_and_free(b, failures);
      if (pid < 0) {
        problems.push_back("fork failed");
        break;
      }
      std::string why = reap(pid, std::chrono::seconds(10));
      if (!why.empty()) problems.push_back("fork " + std::to_string(i) + ": " + why);
    }
  });
  forker.join();
  stop = true;
  for (auto& t : pool) t.join();
  for (auto& s : slots)
    if (void* b = s.exchange(nullptr)) check_and_free(b, failures);
  for (const auto& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

}  // namespace
