// The per-chunk cap on free resident slices (kMaxDirtyPerChunk, layer 4)
// without a system call in most of the frees that go over it: a release
// marks the slices past the cap and the purge pass purges the marks once
// kMaxMarkedSlices are waiting. Counted (purge calls seen by each free, and
// the bytes kept resident), never timed. Its own process, without the
// background purger, so that every purge comes from the frees measured.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "read_stats.h"
#include "stress_support.h"
#include "tenon/common/config.h"

namespace {

using tenon_test::read_stats;

// Past the grace, in ticks of the coarse clock.
void age_past_grace() { std::this_thread::sleep_for(std::chrono::milliseconds(3 * tenon::kDirtyGraceMs)); }

TEST(DirtyCap, FewFreesOverTheCapCallMadvise) {
  if (tenon_test::kSanitized || std::getenv("TENON_TEST_EMULATED"))
    GTEST_SKIP() << "the grace is a few ms of wall time; sanitizers and qemu stretch it";
  // Large blocks of one slice each (over the largest small class), written,
  // so that every free gives a resident slice back to its chunk.
  constexpr std::size_t kBlock = 48 << 10;
  constexpr int kBlocks = 48, kOverCap = 32;
  std::vector<char*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(tenon_malloc(kBlock)));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 1, kBlock);
  }
  const tenon_stats start = read_stats();
  // Up to the cap, and older than the grace: the next frees go over it.
  for (int i = 0; i < kBlocks - kOverCap; ++i) tenon_free(blocks[static_cast<std::size_t>(i)]);
  age_past_grace();
  int frees_that_purged = 0;
  for (int i = kBlocks - kOverCap; i < kBlocks; ++i) {
    unsigned long long before = read_stats().os_purges;
    tenon_free(blocks[static_cast<std::size_t>(i)]);
    if (read_stats().os_purges != before) ++frees_that_purged;
    age_past_grace();  // the slice just freed is the next one over the cap
  }
  const tenon_stats end = read_stats();
  std::printf("%d of %d frees over the cap made purge calls (%llu calls), retained %zu KiB -> %zu KiB\n",
              frees_that_purged, kOverCap, end.os_purges - start.os_purges, start.retained >> 10,
              end.retained >> 10);
  // The cap still works: slices were purged, and what stays resident of
  // these frees is the cap plus the marks waiting for the next pass.
  EXPECT_GT(end.os_purges, start.os_purges);
  EXPECT_LE(end.retained, start.retained + (tenon::kMaxDirtyPerChunk + tenon::kMaxMarkedSlices) * tenon::kSliceSize);
  // Purged at each release over the cap, every one of these frees called
  // madvise; now one in kMaxMarkedSlices does (they may span two chunks).
  EXPECT_LE(frees_that_purged, kOverCap / static_cast<int>(tenon::kMaxMarkedSlices) + 2);
}

}  // namespace
