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

// The stale freeing thread is held at up to two points in turn: holds[i]
// until go >= i + 1 (held counts the holds reached).
std::atomic<int> g_held{0};
std::atomic<int> g_go{0};
thread_local const char* t_holds[2] = {nullptr, nullptr};
thread_local int t_next = 0;

void hold_hook(const char* point) {
  if (t_next >= 2 || !t_holds[t_next] || std::strcmp(point, t_holds[t_next]) != 0) return;
  int i = t_next++;
  g_held.store(i + 1, std::memory_order_release);
  while (g_go.load(std::memory_order_acquire) <= i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void wait_held(int n) {
  while (g_held.load(std::memory_order_acquire) < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

constexpr std::uintptr_t kSlice = 64 * 1024;
constexpr std::size_t kOld = 256;  // one slice: 256 blocks, no block cache
constexpr std::size_t kNew = 80;   // one slice: 819 blocks, no block cache
constexpr std::size_t kNewCached = 1024;  // one slice: 64 blocks, a block cache
constexpr std::uintptr_t kOffset = 51200;  // block 200 of 256 B, 640 of 80 B, 50 of 1 KiB: not carved by a first carve

std::uintptr_t slice_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) / kSlice; }

// Which way the stale block reaches the span formed again: through the
// owner's inbox (the freer read the new owner), onto the span's remote
// list (the freer read no owner, the span released, and pushed after the
// span was formed again: held at remote.push too), or into the freeing
// thread's own block cache (the span formed again of a cached class, 1 KiB,
// which that thread allocates too: thread_heaps::free_cached_remote), from
// which its next malloc of the class hands it out.
enum class route { inbox, remote_list, own_cache };

// Allocates blocks of n bytes until one lies in `slice` (a span formed
// there), or exits 3.
void form_on(std::uintptr_t slice, std::size_t n, std::vector<char*>& fresh) {
  for (int i = 0; i < 4000 && (fresh.empty() || slice_of(fresh.back()) != slice); ++i)
    fresh.push_back(static_cast<char*>(tenon_malloc(n)));
  if (slice_of(fresh.back()) != slice) {
    std::fprintf(stderr, "setup: no span of %zu-byte blocks formed on p's slice\n", n);
    _exit(3);
  }
}

// The interleaving, in the child. Exit 3: the setup missed (the new span
// is not on p's slice); exit 0 after "twice" on stderr: p handed out twice.
[[noreturn]] void run_interleaving(route way) {
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
  std::size_t n_new = way == route::own_cache ? kNewCached : kNew;
  std::atomic<char*> kept{nullptr};  // own_cache: the freeing thread's next block of n_new
  std::thread stale([p, way, n_new, &kept] {
    // own_cache: this thread allocates the class (its cache's front is its
    // current), so it keeps a block of another heap's span that it frees.
    void* mine = way == route::own_cache ? tenon_malloc(n_new) : nullptr;
    t_holds[0] = "remote.tested";
    if (way == route::remote_list) t_holds[1] = "remote.push";
    tenon_free(p);  // freed again: held after the block-start test
    if (mine) kept.store(static_cast<char*>(tenon_malloc(n_new)));
  });
  wait_held(1);
  // The span empties (its slices go back to the arena), and is purged.
  for (void* b : old_blocks)
    if (slice_of(b) == slice && b != p) tenon_free(b);
  tenon_malloc_trim(0);
  std::vector<char*> fresh;
  if (way == route::remote_list) {
    g_go.store(1, std::memory_order_release);  // reads no owner: to the span's list
    wait_held(2);
  }
  // The owner forms a span of 80-byte (1 KiB) blocks on the same slice.
  form_on(slice, n_new, fresh);
  g_go.store(2, std::memory_order_release);
  stale.join();  // its batch for our heap delivered at its exit
  // Allocate the new span out: its inbox sort or its collect takes p, then
  // its carve.
  for (int i = 0; i < 1000; ++i) fresh.push_back(static_cast<char*>(tenon_malloc(n_new)));
  if (char* k = kept.load()) fresh.push_back(k);
  std::vector<char*> sorted(fresh);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1] || sorted[i] < sorted[i - 1] + n_new) {
      std::fprintf(stderr, "%p handed out twice (p %p)\n", static_cast<void*>(sorted[i]), static_cast<void*>(p));
      _exit(0);
    }
  std::fprintf(stderr, "no block handed out twice, nothing reported\n");
  _exit(0);
}

// Runs the interleaving in a child; expects tenon's report (SIGABRT).
void expect_reported(route way) {
  int pipe_fd[2];
  ASSERT_EQ(pipe(pipe_fd), 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(pipe_fd[1], 2);
    close(pipe_fd[0]);
    run_interleaving(way);
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
  std::printf("NOTE %s", err.c_str());
}

}  // namespace

TEST(StaleFree, RemoteFreeHeldWhileItsSpanIsFormedAgainIsReported) { expect_reported(route::inbox); }

// The same stale free, held again before its push onto the span's remote
// list (it read no owner: the span was released) while the span is formed
// again: the owner's collect takes it (merge_free).
TEST(StaleFree, RemoteFreeOntoTheListOfTheSpanFormedAgainIsReported) { expect_reported(route::remote_list); }

// The span formed again of a cached class that the freeing thread also
// allocates: kept in that thread's cache, p was its next malloc's answer,
// and its owner's carve handed it out again.
TEST(StaleFree, RemoteFreeKeptInTheFreeingThreadsCacheIsReported) { expect_reported(route::own_cache); }
