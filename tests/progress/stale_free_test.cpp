// A stale pointer freed by a thread that does not own its span, held at the
// injection point remote.tested (after free_not_owned's block-start test,
// before its reads of the span's owner and the block's free key) while the
// span is emptied, released, purged and formed again, of another class, by
// the same owner (-DTENON_INJECT=ON builds only, label `progress`).
//
// The freeing thread tested p against the old span's geometry and carved
// bound, which admit it; it then reads the owner (the same heap again) and
// a second word the purge zeroed (no free key), and batches p for that
// owner. Since 2026-11-29 (branch `remote`) the owner's inbox sort made no
// test of its own, trusting the freer's: p, a slot the new span had not
// carved yet, went on its free list, was handed out, and was handed out
// again when the carve reached it. A second free of a pointer whose span
// was formed again is otherwise reported wherever it lands (not carved:
// the block-start test; carved and free: the key), but when the address
// was handed out again (docs/security.md).
//
// This program calls tenon only through the tenon_* API (libtenon.a); gtest
// and std::thread use the system allocator. The interleaving runs in a
// child process (a fresh tenon: the spans land where the test expects).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tenon/common/inject.h"
#include "tenon/tenon.h"

namespace {

std::atomic<bool> g_held{false};
std::atomic<bool> g_go{false};
thread_local bool t_hold = false;

// Holds the thread that set t_hold at its first remote.tested until g_go.
void hold_hook(const char* point) {
  if (!t_hold || std::strcmp(point, "remote.tested") != 0) return;
  t_hold = false;
  g_held.store(true, std::memory_order_release);
  while (!g_go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

constexpr std::uintptr_t kSlice = 64 * 1024;
constexpr std::size_t kOld = 256;  // one slice: 256 blocks, no block cache
constexpr std::size_t kNew = 80;   // one slice: 819 blocks, no block cache
constexpr std::uintptr_t kOffset = 51200;  // block 200 of 256 B, 640 of 80 B: not carved by the first page's carve

std::uintptr_t slice_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) / kSlice; }

// The interleaving, in the child. Exit 3: the setup missed (the new span
// is not on p's slice); exit 0 after "twice" on stderr: p handed out twice.
[[noreturn]] void run_interleaving() {
  alarm(30);
  tenon_inject_set_hook(hold_hook);
  // A full span of 256-byte blocks (on the full list once the next starts).
  std::vector<void*> old_blocks;
  for (int i = 0; i < 600; ++i) old_blocks.push_back(tenon_malloc(kOld));
  std::map<std::uintptr_t, int> per_slice;
  for (void* b : old_blocks) ++per_slice[slice_of(b)];
  std::uintptr_t slice = 0;
  for (auto [s, n] : per_slice)
    if (n == 256) {
      slice = s;
      break;
    }
  if (!slice) {
    std::fprintf(stderr, "setup: no full span of 256-byte blocks\n");
    _exit(3);
  }
  auto* p = reinterpret_cast<char*>(slice * kSlice + kOffset);
  if (std::find(old_blocks.begin(), old_blocks.end(), p) == old_blocks.end()) {
    std::fprintf(stderr, "setup: %p is no block of ours\n", static_cast<void*>(p));
    _exit(3);
  }
  tenon_free(p);  // the program's free of p, by its owner
  std::thread stale([p] {
    t_hold = true;
    tenon_free(p);  // freed again: held after the block-start test
  });
  while (!g_held.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The span empties (its slices go back to the arena), and is purged.
  for (void* b : old_blocks)
    if (slice_of(b) == slice && b != p) tenon_free(b);
  tenon_malloc_trim(0);
  // The owner forms a span of 80-byte blocks on the same slice.
  std::vector<char*> fresh;
  for (int i = 0; i < 4000 && (fresh.empty() || slice_of(fresh.back()) != slice); ++i)
    fresh.push_back(static_cast<char*>(tenon_malloc(kNew)));
  if (slice_of(fresh.back()) != slice) {
    std::fprintf(stderr, "setup: no span of 80-byte blocks formed on p's slice\n");
    _exit(3);
  }
  g_go.store(true, std::memory_order_release);
  stale.join();  // its batch for our heap delivered at its exit
  // Allocate the new span out: its inbox sort takes p, then its carve.
  for (int i = 0; i < 1000; ++i) fresh.push_back(static_cast<char*>(tenon_malloc(kNew)));
  std::vector<char*> sorted(fresh);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1] || sorted[i] < sorted[i - 1] + kNew) {
      std::fprintf(stderr, "%p handed out twice (p %p)\n", static_cast<void*>(sorted[i]), static_cast<void*>(p));
      _exit(0);
    }
  std::fprintf(stderr, "no block handed out twice, nothing reported\n");
  _exit(0);
}

}  // namespace

TEST(StaleFree, RemoteFreeHeldWhileItsSpanIsFormedAgainIsReported) {
  int pipe_fd[2];
  ASSERT_EQ(pipe(pipe_fd), 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(pipe_fd[1], 2);
    close(pipe_fd[0]);
    run_interleaving();
  }
  close(pipe_fd[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  close(pipe_fd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) GTEST_SKIP() << err;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << "stderr: " << err;
  EXPECT_NE(err.find("tenon: free("), std::string::npos) << "stderr: " << err;
}
