// The background purger: freed memory goes back to the OS within the purge
// delay while the program makes no allocator call at all (idle, sleeping,
// blocked on I/O). Each case runs in its own process with its own
// environment (see CMakeLists.txt): the purger starts at most once per
// process, lazily by default, at load with TENON_BACKGROUND_PURGE=2.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// Thread ids of this process whose name is `name`.
std::vector<std::string> threads_named(const std::string& name) {
  std::vector<std::string> found;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string line;
      if (std::getline(comm, line) && line == name) found.push_back(e->d_name);
    }
    closedir(d);
  }
  return found;
}

// A line of /proc/self/task/TID/status, e.g. "SigBlk".
std::string task_status(const std::string& tid, const std::string& key) {
  std::ifstream status("/proc/self/task/" + tid + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

// The purger names itself first thing; give a just-started one a moment.
std::vector<std::string> purger_threads() {
  std::vector<std::string> found;
  for (int i = 0; i < 200 && (found = threads_named("tenon-purge")).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return found;
}

bool rss_is_meaningful() { return !tenon_test::kSanitized && !std::getenv("TENON_TEST_EMULATED"); }

// 200 blocks of 1 MiB, written whole, then all freed: 200 MiB of free,
// resident memory kept for reuse.
void churn_200_mib() {
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) {
    void* p = tenon_malloc(MiB);
    ASSERT_NE(p, nullptr);
    std::memset(p, i, MiB);
    blocks.push_back(p);
  }
  for (void* p : blocks) tenon_free(p);
}

TEST(IdlePurge, FreedMemoryGoesBackWhileIdle) {
  const std::size_t start = resident_bytes();
  churn_200_mib();
  const std::size_t after_free = resident_bytes();
  // No allocator call from here on: only the purger can give the pages back
  // (TENON_PURGE_DELAY_MS is 500 ms by default).
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::size_t after_idle = resident_bytes();
  std::printf("resident: start %zu MiB, after the frees %zu MiB, after 2 s idle %zu MiB\n", start / MiB,
              after_free / MiB, after_idle / MiB);
  if (!rss_is_meaningful()) GTEST_SKIP() << "resident size under a sanitizer or an emulator is not the allocator's";
  EXPECT_LE(after_idle, start + 16 * MiB) << "freed memory still resident after 2 s without an allocator call";
}

TEST(IdlePurge, ThreadIsNamedAndBlocksSignals) {
  EXPECT_TRUE(threads_named("tenon-purge").empty()) << "started before any memory was kept";
  churn_200_mib();
  std::vector<std::string> purgers = purger_threads();
  ASSERT_EQ(purgers.size(), 1u) << "one purger thread, named for ps and gdb";
  // Signals sent to the process must reach the program's threads, never it.
  // (Under qemu-user the host thread's mask is qemu's, not the guest's.)
  unsigned long long blocked = std::strtoull(task_status(purgers[0], "SigBlk").c_str(), nullptr, 16);
  if (!std::getenv("TENON_TEST_EMULATED"))
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGPIPE, SIGWINCH, SIGRTMIN + 5})
      EXPECT_TRUE(blocked >> (sig - 1) & 1) << "signal " << sig << " not blocked in the purger (SigBlk " << std::hex
                                            << blocked << ")";
  churn_200_mib();
  EXPECT_EQ(threads_named("tenon-purge").size(), 1u) << "started once";
}

// Found outside the tests (2026-11-27): one-slice blocks freed a few to a
// chunk, never two side by side, in many chunks: each chunk stays under its
// cap of 8 free resident slices and no run reaches 1 MiB, so no release
// started the purger and 35 MiB stayed resident for good in an idle
// single-threaded program. The purger must start once the program keeps
// 1 MiB or more for reuse, however it is spread over the chunks.
TEST(IdlePurge, FreedSlicesSpreadUnderEveryChunksCapGoBackWhileIdle) {
  constexpr std::size_t kBlock = 60000;  // a large block: one 64 KiB slice each
  constexpr int kBlocks = 64 * 40;       // about 40 chunks of them
  const std::size_t start = resident_bytes();
  std::vector<char*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    auto* p = static_cast<char*>(tenon_malloc(kBlock));
    ASSERT_NE(p, nullptr);
    if (i % 9 == 0)
      std::memset(p, i, kBlock);  // the ones freed below: resident whole
    else
      p[0] = 1;  // the others: one page each
    blocks.push_back(p);
  }
  // Every 9th block: 7 free slices a chunk at most, none adjacent.
  std::size_t freed = 0;
  for (int i = 0; i < kBlocks; i += 9) {
    tenon_free(blocks[i]);
    blocks[i] = nullptr;
    freed += kBlock;
  }
  const std::size_t after_free = resident_bytes();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // no allocator call
  const std::size_t after_idle = resident_bytes();
  std::printf("resident: start %zu MiB, after the frees %zu MiB (%zu MiB freed), after 2 s idle %zu MiB\n",
              start / MiB, after_free / MiB, freed / MiB, after_idle / MiB);
  EXPECT_EQ(threads_named("tenon-purge").size(), 1u) << "no purger for " << freed / MiB << " MiB kept for reuse";
  if (rss_is_meaningful())
    EXPECT_LE(after_idle + freed / 2, after_free) << "freed slices still resident after 2 s without an allocator call";
  for (char* p : blocks) tenon_free(p);
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

// TENON_BACKGROUND_PURGE=0 (set by CMakeLists.txt for this case).
TEST(IdlePurge, OffMeansNoThread) {
  if (!env_is("TENON_BACKGROUND_PURGE", "0")) GTEST_SKIP() << "ctest runs this with TENON_BACKGROUND_PURGE=0";
  churn_200_mib();
  const std::size_t after_free = resident_bytes();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE(threads_named("tenon-purge").empty());
  if (rss_is_meaningful())  // resident size under a sanitizer or an emulator is not the allocator's
    EXPECT_GE(resident_bytes() + 16 * MiB, after_free) << "memory went back with the purger off";
}

// TENON_BACKGROUND_PURGE=2, TENON_PURGE_DELAY_MS=1 (CMakeLists.txt): the
// purger runs from load and purges all the time while threads take, free and
// reuse the same slices and cached huge blocks; every block keeps its data.
// Under ThreadSanitizer this is the purger's race check.
TEST(IdlePurge, RunsBesideBusyThreads) {
  if (!env_is("TENON_BACKGROUND_PURGE", "2")) GTEST_SKIP() << "ctest runs this with TENON_BACKGROUND_PURGE=2";
  ASSERT_EQ(purger_threads().size(), 1u) << "TENON_BACKGROUND_PURGE=2 starts it at load";
  const std::size_t rounds = tenon_test::scaled(3000);
  Failures failures;
  auto worker = [&](unsigned id) {
    std::mt19937_64 rng(77 + id);
    std::vector<std::pair<unsigned char*, std::size_t>> live;
    for (std::size_t i = 0; i < rounds && failures.count() == 0; ++i) {
      std::size_t size = i % 50 == 0 ? (3 * MiB + rng() % (5 * MiB)) : 40000 + rng() % (2 * MiB - 40000);
      auto* p = static_cast<unsigned char*>(tenon_malloc(size));
      if (!p) {
        failures.add("tenon_malloc(" + std::to_string(size) + ") failed");
        break;
      }
      fill_pattern(p, 4096, i);
      fill_pattern(p + size - 64, 64, ~i);
      live.emplace_back(p, size);
      if (live.size() > 6 || rng() % 3 == 0) {
        std::size_t k = rng() % live.size();
        auto [q, n] = live[k];
        std::size_t seq = 0;
        while (seq <= i && first_pattern_mismatch(q, 4096, seq) != 4096) ++seq;
        if (seq > i || first_pattern_mismatch(q + n - 64, 64, ~seq) != 64)
          failures.add("a block of " + std::to_string(n) + " bytes changed while the purger ran");
        tenon_free(q);
        live.erase(live.begin() + static_cast<long>(k));
      }
      if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // let passes fall due
    }
    for (auto [q, n] : live) tenon_free(q);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < 3; ++t) pool.emplace_back(worker, t);
  for (auto& t : pool) t.join();
  EXPECT_EQ(failures.count(), 0) << failures.first();
  // A fork child has no purger (and never restarts one); it allocates,
  // frees and trims normally.
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (int i = 0; i < 50; ++i) {
      void* p = tenon_malloc((i % 2 ? 5 : 1) * MiB);
      if (!p) _exit(2);
      std::memset(p, i, MiB);
      tenon_free(p);
    }
    tenon_malloc_trim(0);
    _exit(threads_named("tenon-purge").empty() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "fork child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "fork child: 2 = an allocation failed, 3 = it has a purger thread";
}

}  // namespace
