// The dirty cap's adaptive grace (arena/adaptive_grace.h) in the real
// allocator: a chunk whose slices the cap purged and that takes them back at
// once gets a longer grace, and the free memory of such a chunk still goes
// back to the OS: at once on malloc_trim, within the purge delay while idle.
// Read through tenon_stats (retained bytes) and the chunk header; the only
// waits are for the coarse clock to pass the base grace and for the purger.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "stress_support.h"
#include "tenon/arena/adaptive_grace.h"
#include "tenon/arena/chunk.h"

using namespace tenon_stress;

namespace {

constexpr std::size_t kBlock = 60 * 1024;  // a large block: a run of one slice
constexpr std::size_t kBlocks = 48;        // well past the cap of free resident slices

bool raised_in_a_chunk_of(const std::vector<void*>& blocks) {
  for (void* p : blocks)
    if (tenon::adaptive_grace::grace_ms(*tenon::chunk_of(p)) > tenon::kDirtyGraceMs) return true;
  return false;
}

// Rounds of: write kBlocks blocks, free all but one (too young for the cap),
// wait past the base grace, free the last (its release lets the cap purge
// the others down to the cap), and take as many again at once: the purged
// slices come back right after their purge. True once a chunk's grace is
// raised; the blocks are then all freed.
bool refault_purged_slices() {
  std::vector<void*> blocks(kBlocks);
  for (auto& p : blocks) {
    p = tenon_malloc(kBlock);
    std::memset(p, 1, kBlock);
  }
  bool raised = false;
  for (int round = 0; round < 10 && !raised; ++round) {
    for (std::size_t i = 1; i < kBlocks; ++i) tenon_free(blocks[i]);
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * tenon::kDirtyGraceMs));
    tenon_free(blocks[0]);
    for (auto& p : blocks) {
      p = tenon_malloc(kBlock);
      std::memset(p, 1, kBlock);
    }
    raised = raised_in_a_chunk_of(blocks);
  }
  for (void* p : blocks) tenon_free(p);
  return raised;
}

std::size_t retained_bytes() {
  tenon_stats s{};
  s.version = TENON_STATS_VERSION;
  EXPECT_EQ(tenon_stats_get(&s), 0);
  return s.retained;
}

bool timing_is_meaningful() { return !tenon_test::kSanitized && !std::getenv("TENON_TEST_EMULATED"); }

TEST(AdaptiveGrace, RaisedForAChunkThatRefaultsAndTrimStillReturnsItsMemory) {
  if (!timing_is_meaningful()) GTEST_SKIP() << "the cap's grace is in ms; sanitizers and qemu are too slow";
  EXPECT_TRUE(refault_purged_slices()) << "no chunk's grace was raised after taking back slices just purged";
  EXPECT_GE(retained_bytes(), 8 * kBlock) << "the blocks just freed should be resident for reuse";
  EXPECT_EQ(tenon_malloc_trim(0), 1);
  EXPECT_LT(retained_bytes(), kBlock) << "malloc_trim left free memory resident";
}

TEST(AdaptiveGrace, RaisedGraceStillGivesIdleMemoryBack) {
  if (!timing_is_meaningful()) GTEST_SKIP() << "the cap's grace is in ms; sanitizers and qemu are too slow";
  EXPECT_TRUE(refault_purged_slices());
  // No allocator call from here on: the background purger (started lazily by
  // the chunks over their cap) gives it all back within 1.5 x the 500 ms
  // purge delay, whatever the grace; 5 s is the bound allowed a loaded host.
  std::size_t left = retained_bytes();
  for (int i = 0; i < 50 && left >= kBlock; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = retained_bytes();
  }
  EXPECT_LT(left, kBlock) << "free memory of a chunk with a raised grace still resident while idle";
}

}  // namespace
