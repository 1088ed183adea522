// tenon_stats_get against a program with known live bytes: N blocks of each
// size range live (small classes, large runs, huge mappings), then freed.
// Single-threaded, so the figures are exact: in use lies between the bytes
// asked for and those bytes rounded to their classes (the usable sizes).
#include <gtest/gtest.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "read_stats.h"
#include "tenon/tenon.h"
#include "test_support.h"

namespace {

using tenon_test::read_stats;

struct live_set {
  std::vector<void*> blocks;
  std::size_t asked = 0, usable = 0;
  void add(std::size_t n, unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
      void* p = tenon_malloc(n);
      ASSERT_NE(p, nullptr);
      static_cast<char*>(p)[0] = 1;
      blocks.push_back(p);
      asked += n;
      usable += tenon_malloc_usable_size(p);
    }
  }
  void free_all() {
    for (void* p : blocks) tenon_free(p);
    blocks.clear();
  }
};

TEST(StatsFigures, BadArgumentsAreRefused) {
  EXPECT_EQ(tenon_stats_get(nullptr), EINVAL);
  tenon_stats s{};
  s.version = TENON_STATS_VERSION + 1;
  EXPECT_EQ(tenon_stats_get(&s), EINVAL);
  EXPECT_EQ(s.in_use, 0u);  // nothing written
  s.version = 0;
  EXPECT_EQ(tenon_stats_get(&s), EINVAL);
  s.version = TENON_STATS_VERSION;
  EXPECT_EQ(tenon_stats_get(&s), 0);  // the next call still works
}

TEST(StatsFigures, KnownLiveBytesPerRange) {
  const tenon_stats before = read_stats();
  live_set small, large, huge;
  for (std::size_t n : {1u, 8u, 24u, 100u, 1000u, 5000u, 30000u}) small.add(n, 300);
  for (std::size_t n : {40000u, 300000u, 1500000u}) large.add(n, 20);
  for (std::size_t n : {3u << 20, 9u << 20}) huge.add(n, 4);
  const tenon_stats live = read_stats();

  EXPECT_GE(live.small_in_use - before.small_in_use, small.asked);
  EXPECT_LE(live.small_in_use - before.small_in_use, small.usable);
  EXPECT_GE(live.large_in_use - before.large_in_use, large.asked);
  EXPECT_LE(live.large_in_use - before.large_in_use, large.usable);
  EXPECT_GE(live.huge_in_use - before.huge_in_use, huge.asked);
  EXPECT_LE(live.huge_in_use - before.huge_in_use, huge.usable);
  EXPECT_EQ(live.in_use, live.small_in_use + live.large_in_use + live.huge_in_use);
  EXPECT_EQ(live.large_blocks - before.large_blocks, 60u);
  EXPECT_EQ(live.huge_blocks - before.huge_blocks, 8u);
  EXPECT_GE(live.peak_in_use, live.in_use);
  EXPECT_GE(live.mapped, live.in_use);
  EXPECT_GE(live.mapped, live.chunks * (std::size_t{4} << 20));
  EXPECT_GE(live.resident, live.huge_in_use);  // huge mappings count whole
  EXPECT_GE(live.large_allocs - before.large_allocs, 60u);
  EXPECT_GE(live.huge_allocs - before.huge_allocs, 8u);

  // Per class: the 300 blocks of each small size are in their class.
  ASSERT_GT(live.classes, 0u);
  ASSERT_LE(live.classes, unsigned{TENON_STATS_CLASSES});
  std::size_t class_bytes = 0;
  for (unsigned c = 0; c < live.classes; ++c) {
    const tenon_class_stats& k = live.class_stats[c];
    EXPECT_EQ(k.bytes_in_use, k.blocks_in_use * k.block_size);
    EXPECT_LE(k.bytes_in_use, k.span_bytes);
    class_bytes += k.bytes_in_use;
  }
  EXPECT_EQ(class_bytes, live.small_in_use);
  for (void* p : small.blocks) {
    std::size_t size = tenon_malloc_usable_size(p);
    bool found = false;
    for (unsigned c = 0; c < live.classes; ++c)
      if (live.class_stats[c].block_size == size) {
        found = true;
        EXPECT_GE(live.class_stats[c].blocks_in_use, 300u) << "class " << size;
      }
    EXPECT_TRUE(found) << "no class of " << size << " bytes";
  }

  const std::size_t max_live = live.in_use;
  small.free_all();
  large.free_all();
  huge.free_all();
  const tenon_stats after = read_stats();
  EXPECT_EQ(after.small_in_use, before.small_in_use);
  EXPECT_EQ(after.large_in_use, before.large_in_use);
  EXPECT_EQ(after.huge_in_use, before.huge_in_use);
  EXPECT_EQ(after.large_blocks, before.large_blocks);
  EXPECT_EQ(after.huge_blocks, before.huge_blocks);
  EXPECT_GE(after.peak_in_use, max_live);
  // What was freed is kept for reuse or given back, never lost.
  EXPECT_GE(after.mapped, after.in_use + after.retained);
}

// A huge block grown (in place or moved with mremap) and shrunk: the bytes in
// use follow its usable size, and come back to the baseline when it is freed.
TEST(StatsFigures, HugeReallocMovesTheBytesInUse) {
  const tenon_stats before = read_stats();
  void* keep_neighbour = tenon_malloc(5u << 20);  // often forces the growth to move
  void* p = tenon_malloc(3u << 20);
  ASSERT_NE(p, nullptr);
  for (std::size_t n : {std::size_t{40} << 20, std::size_t{9} << 20, std::size_t{64} << 20, std::size_t{3} << 20}) {
    p = tenon_realloc(p, n);
    ASSERT_NE(p, nullptr);
    const tenon_stats now = read_stats();
    EXPECT_EQ(now.huge_in_use - before.huge_in_use,
              tenon_malloc_usable_size(p) + tenon_malloc_usable_size(keep_neighbour))
        << "after realloc to " << n;
    EXPECT_EQ(now.huge_blocks - before.huge_blocks, 2u);
    EXPECT_GE(now.mapped, now.in_use);
  }
  tenon_free(p);
  tenon_free(keep_neighbour);
  const tenon_stats after = read_stats();
  EXPECT_EQ(after.huge_in_use, before.huge_in_use);
  EXPECT_EQ(after.huge_blocks, before.huge_blocks);
  EXPECT_GE(after.peak_in_use, (std::size_t{64} << 20) + (std::size_t{5} << 20));
}

// The program: 200 x 1 MiB and 20 x 8 MiB, once on a thread that has
// no heap (it never makes a small allocation) and once on this one. Every
// one is counted, whichever thread made it.
void big_blocks() {
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) blocks.push_back(tenon_malloc(1u << 20));
  for (int i = 0; i < 20; ++i) blocks.push_back(tenon_malloc(8u << 20));
  for (void* p : blocks) {
    ASSERT_NE(p, nullptr);
    tenon_free(p);
  }
}

TEST(StatsFigures, BigBlocksAreCountedWithOrWithoutAHeap) {
  const tenon_stats before = read_stats();
  std::thread(big_blocks).join();
  const tenon_stats mid = read_stats();
  EXPECT_EQ(mid.large_allocs - before.large_allocs, 200u);
  EXPECT_EQ(mid.huge_allocs - before.huge_allocs, 20u);
  EXPECT_GE(mid.chunks, 1u);
  EXPECT_GE(mid.os_maps - before.os_maps, mid.chunks - before.chunks);
  EXPECT_EQ(mid.heaps_attached, before.heaps_attached);  // that thread never had a heap
  void* p = tenon_malloc(16);  // this thread has one
  big_blocks();
  tenon_free(p);
  const tenon_stats after = read_stats();
  EXPECT_EQ(after.large_allocs - mid.large_allocs, 200u);
  EXPECT_EQ(after.huge_allocs - mid.huge_allocs, 20u);
  EXPECT_EQ(after.large_in_use, before.large_in_use);
  EXPECT_EQ(after.huge_in_use, before.huge_in_use);
  EXPECT_GE(after.peak_in_use, std::size_t{200} << 20);
}

}  // namespace
