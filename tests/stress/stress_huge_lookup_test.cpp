// Asking about a pointer that lies in the 4 MiB unit of a huge block must be
// safe while another thread frees (and unmaps) that block: tenon_owns and
// tenon_malloc_usable_size of a foreign pointer, or of a pointer inside the
// block, may not read the block's header, which can be gone by then.
// A mapper allocates 4 MiB-aligned huge blocks of 1 MiB (never cached: every
// free unmaps) and frees them again; it puts a foreign mapping (laid out as a
// glibc mmapped chunk, so that glibc's malloc_usable_size can read it) in the
// free tail of each block's unit. Askers, more of them than there are cores so
// that some are preempted in the middle of a lookup, ask about the foreign
// pointer and about a pointer 64 KiB into the block, over and over. A lookup
// is a few instructions, so a thread rarely stops inside one on its own: an
// interrupter sends the askers signals whose handler sleeps 200 us, a
// preemption at a random instruction long enough for a block to be unmapped.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "stress_support.h"
#include "tenon/huge/huge.h"

using namespace tenon_stress;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kUnit = 4 * kMiB;
constexpr std::size_t kForeignBytes = 64 * 1024;
constexpr unsigned kAskers = 4;

// A foreign mapping at `at` (which must be free), laid out like a chunk glibc
// mmapped for a big malloc: prev_size 0, size | IS_MMAPPED, user data after
// 16 bytes. Returns the user pointer, or nullptr if the range was taken.
char* map_foreign_chunk(char* at) {
  void* m = mmap(at, kForeignBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  if (m != at) {  // the hint is taken only when the range is free
    munmap(m, kForeignBytes);
    return nullptr;
  }
  auto* words = static_cast<std::size_t*>(m);
  words[0] = 0;
  words[1] = kForeignBytes | 2;
  return static_cast<char*>(m) + 16;
}

void nap(int) {
  timespec ts{0, 200 * 1000};
  nanosleep(&ts, nullptr);
}

// While it lives, SIGUSR1 makes a thread nap (nap); the old action after.
struct napping_on_signal {
  struct sigaction old {};
  bool installed;
  napping_on_signal() {
    struct sigaction sa {};
    sa.sa_handler = nap;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    installed = sigaction(SIGUSR1, &sa, &old) == 0;
  }
  ~napping_on_signal() { sigaction(SIGUSR1, &old, nullptr); }
};

// A 4 MiB-aligned huge block of 1 MiB (never cached: its free unmaps it),
// or nullptr with the failure noted.
char* unit_block(Failures& failures) {
  auto* p = static_cast<char*>(tenon_aligned_alloc(kUnit, kMiB));
  if (!p) failures.add("tenon_aligned_alloc(4 MiB, 1 MiB) failed");
  return p;
}

std::chrono::milliseconds run_time() { return std::chrono::milliseconds(std::getenv("TENON_TEST_EMULATED") ? 500 : 3000); }

// The threads started by `body`, interrupted (SIGUSR1, every 100 us) until
// the mapper, started after them, sets `stop`; all joined.
template <class Body, class Mapper>
void interrupted(const std::atomic<bool>& stop, Body body, Mapper mapper) {
  std::vector<std::thread> threads;
  for (unsigned a = 0; a < kAskers; ++a) threads.emplace_back(body);
  std::thread interrupting([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (auto& t : threads) pthread_kill(t.native_handle(), SIGUSR1);
      timespec ts{0, 100 * 1000};
      nanosleep(&ts, nullptr);
    }
  });
  std::thread mapping(mapper);
  mapping.join();
  interrupting.join();
  for (auto& t : threads) t.join();
}

TEST(HugeBlocks, LookupsInAUnitSurviveTheBlocksUnmap) {
  napping_on_signal napping;
  ASSERT_TRUE(napping.installed);
  const auto run_for = run_time();
  std::atomic<char*> block{nullptr};    // user pointer of the block last published
  std::atomic<char*> foreign{nullptr};  // foreign chunk in that block's unit
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> rounds{0}, questions{0};
  Failures failures;
  std::vector<char*> foreign_maps;

  auto mapper = [&] {
    auto until = std::chrono::steady_clock::now() + run_for;
    while (std::chrono::steady_clock::now() < until && failures.count() == 0) {
      char* p = unit_block(failures);
      if (!p) break;
      if (reinterpret_cast<std::uintptr_t>(p) % kUnit != 0) {
        failures.add("a 4 MiB-aligned block is not 4 MiB aligned");
        tenon_free(p);
        break;
      }
      // The unit's tail after the 1 MiB block is free: a foreign chunk goes
      // there (or is there already, from an earlier block in the same unit).
      char* f = map_foreign_chunk(p + 2 * kMiB);
      if (f) foreign_maps.push_back(f - 16);
      else if (!foreign_maps.empty() && std::find(foreign_maps.begin(), foreign_maps.end(), p + 2 * kMiB) != foreign_maps.end())
        f = p + 2 * kMiB + 16;
      if (f) foreign.store(f, std::memory_order_release);
      block.store(p, std::memory_order_release);
      // Live for 50 us, so that most questions are asked while it is mapped.
      auto live_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (std::chrono::steady_clock::now() < live_until) {
      }
      tenon_free(p);  // unmaps: a 4 MiB-aligned block is never cached
      rounds.fetch_add(1, std::memory_order_relaxed);
    }
    stop.store(true, std::memory_order_relaxed);
  };
  auto asker = [&] {
    while (!stop.load(std::memory_order_relaxed) && failures.count() == 0) {
      char* p = block.load(std::memory_order_acquire);
      char* f = foreign.load(std::memory_order_acquire);
      if (!p) continue;
      if (tenon_owns(p + 64 * 1024))
        failures.add("tenon_owns of a pointer 64 KiB into a huge block is not 0");
      if (f) {
        if (tenon_owns(f)) failures.add("tenon_owns of a foreign chunk in a huge block's unit is not 0");
        // ASan and TSan intercept malloc_usable_size and reject a pointer
        // their own allocator did not hand out.
        if (!tenon_test::kSanitized && tenon_malloc_usable_size(f) == 0)
          failures.add("tenon_malloc_usable_size of a foreign chunk in a huge block's unit is 0");
      }
      questions.fetch_add(1, std::memory_order_relaxed);
    }
  };
  interrupted(stop, asker, mapper);
  for (char* m : foreign_maps) munmap(m, kForeignBytes);
  EXPECT_EQ(failures.count(), 0) << failures.first();
  EXPECT_GT(foreign_maps.size(), 0u) << "no foreign chunk could be placed in a huge block's unit";
  std::printf("%zu blocks mapped and unmapped, %zu foreign chunks placed, %zu rounds of questions\n",
              rounds.load(), foreign_maps.size(), questions.load());
}

// A read of a huge block in place with nothing held (huge_reading: the
// secure build's malloc_usable_size reads a block's end so) keeps the block
// mapped through a free that takes it meanwhile: the free defers the unmap
// to the next huge call that finds no reader (since 2026-11-29, branch
// usw). Readers read a word 64 KiB into the block the mapper publishes,
// interrupted as above; the mapper frees each block (unmapped at once, a
// 4 MiB-aligned block is never cached) after 50 us. A read of an unmapped
// block would be SIGSEGV; a read that the free overtook answers false.
TEST(HugeBlocks, InPlaceReadersKeepTheBlockMappedThroughItsFree) {
  napping_on_signal napping;
  ASSERT_TRUE(napping.installed);
  const auto run_for = run_time();
  std::atomic<char*> block{nullptr};
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> rounds{0}, reads{0}, overtaken{0};
  Failures failures;
  auto mapper = [&] {
    auto until = std::chrono::steady_clock::now() + run_for;
    while (std::chrono::steady_clock::now() < until && failures.count() == 0) {
      char* p = unit_block(failures);
      if (!p) break;
      block.store(p, std::memory_order_release);
      auto live_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (std::chrono::steady_clock::now() < live_until) {
      }
      tenon_free(p);
      rounds.fetch_add(1, std::memory_order_relaxed);
    }
    stop.store(true, std::memory_order_relaxed);
  };
  auto reader = [&] {
    while (!stop.load(std::memory_order_relaxed) && failures.count() == 0) {
      char* p = block.load(std::memory_order_acquire);
      tenon::huge_view v;
      if (!p || !tenon::huge_view_of(p, &v) || v.usable == 0) continue;
      std::uint64_t word = 1;
      if (!tenon::huge_copy_out(v, p + 64 * 1024, &word, sizeof word)) overtaken.fetch_add(1, std::memory_order_relaxed);
      else if (word != 0) failures.add("a fresh huge block's word read in place is not 0");
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  };
  interrupted(stop, reader, mapper);
  tenon_free(tenon_malloc(3 * kMiB));  // a huge call: the blocks deferred last are put away
  EXPECT_EQ(failures.count(), 0) << failures.first();
  std::printf("%zu blocks mapped and freed, %zu reads in place, %zu overtaken by the free\n", rounds.load(),
              reads.load(), overtaken.load());
}

}  // namespace
