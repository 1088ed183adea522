// The owner's free of a pointer that starts no block it handed out
// (include/tenon/common/block_index.h, issue 11): an aligned pointer inside
// a live block, a slot of the span not carved yet, and the tail past a
// span's last block end the program at the bad call, naming the pointer;
// every real block start of every class is still freed without a word. In
// process, through the tenon_* API of libtenon.a and a first-class heap
// (whose fresh span makes "not carved yet" certain).
#include <gtest/gtest.h>
#include <signal.h>
#include <tenon/tenon.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tenon/common/config.h"
#include "tenon/common/size_classes.h"

namespace {

const char kInterior[] = "tenon: free\\(0x[0-9a-f]+\\): invalid pointer \\(not the start of a block\\)";
const char kNeverAllocated[] = "tenon: free\\(0x[0-9a-f]+\\): invalid pointer \\(never allocated\\)";

// free(p + offset) of a live block of n bytes, then a free that would be
// fine: the report must come at the first.
void free_inside(std::size_t n, std::size_t offset) {
  char* p = static_cast<char*>(tenon_malloc(n));
  tenon_free(p + offset);
  std::fputs("no report\n", stderr);
  tenon_free(p);
}

// Each offset is a multiple of 8 (free(p + 1) is the alignment test's, in
// tenon_detections_test.cpp): the halves of the misuse programs, and 8 into
// the smallest block, the nearest a pointer can come.
TEST(BlockStartDeathTest, InsideA16ByteBlock) { EXPECT_EXIT(free_inside(16, 8), testing::KilledBySignal(SIGABRT), kInterior); }
TEST(BlockStartDeathTest, InsideA48ByteBlock) { EXPECT_EXIT(free_inside(48, 16), testing::KilledBySignal(SIGABRT), kInterior); }
TEST(BlockStartDeathTest, InsideA64ByteBlock) { EXPECT_EXIT(free_inside(64, 32), testing::KilledBySignal(SIGABRT), kInterior); }
TEST(BlockStartDeathTest, InsideA4KBlock) { EXPECT_EXIT(free_inside(4096, 2048), testing::KilledBySignal(SIGABRT), kInterior); }
TEST(BlockStartDeathTest, InsideA7KBlock) { EXPECT_EXIT(free_inside(7168, 4096), testing::KilledBySignal(SIGABRT), kInterior); }
// A cached class (8-32 KiB, heap/block_cache.h): the check comes before the cache.
TEST(BlockStartDeathTest, InsideA32KBlock) { EXPECT_EXIT(free_inside(32768, 16384), testing::KilledBySignal(SIGABRT), kInterior); }

// A new heap's first block of n bytes, then a free of the pointer `ahead`
// bytes past it: a slot of the span the heap formed for that block, carved
// a page at a time, that no call handed out.
void free_uncarved_slot(std::size_t n, std::size_t ahead) {
  tenon_heap_t* h = tenon_heap_new(nullptr);
  char* p = static_cast<char*>(tenon_heap_malloc(h, n));
  tenon_heap_free(h, p + ahead);
}

// 16 KiB on from a 16-byte block.
TEST(BlockStartDeathTest, SlotNotCarvedYet) {
  EXPECT_EXIT(free_uncarved_slot(16, 16384), testing::KilledBySignal(SIGABRT), kNeverAllocated);
}

// The same in a class with a block cache (1 KiB: 64 blocks a span, carved a
// page at a time), whose owner's frees skip the span's list for the cache
// (span::push_to) after the same test.
TEST(BlockStartDeathTest, SlotNotCarvedYetInACachedClass) {
  EXPECT_EXIT(free_uncarved_slot(1024, 32768), testing::KilledBySignal(SIGABRT), kNeverAllocated);
}

// The same slot freed by another thread: reported at that free, which
// bounds a block by the blocks the owner carved (the span's carved bound,
// read relaxed, as the per-CPU free does), not by the span's capacity.
// Until 2026-11-29 (branch `remote`) the slot went through to the owner's
// inbox and was reported where the owner sorted it, at its next allocation
// slow path (here never: the child returned, and the test failed).
void free_uncarved_slot_from_another_thread(std::size_t n, std::size_t ahead) {
  tenon_heap_t* h = tenon_heap_new(nullptr);
  char* p = static_cast<char*>(tenon_heap_malloc(h, n));
  std::thread([=] { tenon_heap_free(h, p + ahead); }).join();
}

TEST(BlockStartDeathTest, SlotNotCarvedYetFreedByAnotherThread) {
  EXPECT_EXIT(free_uncarved_slot_from_another_thread(16, 16384), testing::KilledBySignal(SIGABRT), kNeverAllocated);
}

// In a class with a block cache (the owner's sort sends such a block to the
// cache without its span's list: thread_heaps::sort_to_cache).
TEST(BlockStartDeathTest, SlotNotCarvedYetInACachedClassFreedByAnotherThread) {
  EXPECT_EXIT(free_uncarved_slot_from_another_thread(1024, 32768), testing::KilledBySignal(SIGABRT), kNeverAllocated);
}

// A cached class's block freed twice by its owner, with blocks of the class
// freed in between (the second free finds the key, not the cache's head).
TEST(BlockStartDeathTest, CachedClassDoubleFreeBehindOthers) {
  EXPECT_EXIT(
      {
        char* p = static_cast<char*>(tenon_malloc(2048));
        char* q = static_cast<char*>(tenon_malloc(2048));
        char* r = static_cast<char*>(tenon_malloc(2048));
        tenon_free(p);
        tenon_free(q);
        tenon_free(r);
        tenon_free(p);
      },
      testing::KilledBySignal(SIGABRT), "tenon: free\\(0x[0-9a-f]+\\): double free");
}

// Past the last block: 48-byte blocks fill a 64 KiB span with 16 bytes to
// spare, at offset 65520 (a multiple of 48: the bound, not the division,
// rejects it). Every block of the span is carved first.
TEST(BlockStartDeathTest, TailPastTheLastBlock) {
  EXPECT_EXIT(
      {
        tenon_heap_t* h = tenon_heap_new(nullptr);
        char* first = static_cast<char*>(tenon_heap_malloc(h, 48));
        std::uint32_t capacity = tenon::kSliceSize / 48;
        for (std::uint32_t i = 1; i < capacity; ++i)
          if (!tenon_heap_malloc(h, 48)) std::abort();
        tenon_heap_free(h, first + std::size_t{capacity} * 48);
      },
      testing::KilledBySignal(SIGABRT), kNeverAllocated);
}

// Another thread's free of a pointer inside a block (the remote path's own
// check of the span's geometry, through the same test).
TEST(BlockStartDeathTest, InsideABlockFreedByAnotherThread) {
  EXPECT_EXIT(
      {
        char* p = static_cast<char*>(tenon_malloc(64));
        std::thread([p] { tenon_free(p + 32); }).join();
      },
      testing::KilledBySignal(SIGABRT), kInterior);
}

// No false report: every block of every class, freed in an order unlike the
// one they came in (every other, then the rest), by the owner and by another
// thread, a whole span's worth and more, so that carving goes on between
// frees.
TEST(BlockStart, EveryBlockOfEveryClassFreesQuietly) {
  for (unsigned c = 0; c < tenon::kNumClasses; ++c) {
    std::size_t n = tenon::kClasses.size[c];
    std::size_t count = std::size_t{2} * (std::size_t{tenon::kClasses.slices[c]} << tenon::kSliceShift) / n + 3;
    std::vector<void*> v(count);
    for (auto& p : v) p = tenon_malloc(n);
    for (std::size_t i = 0; i < count; i += 2) tenon_free(v[i]);
    std::thread([&] {
      for (std::size_t i = 1; i < count; i += 4) tenon_free(v[i]);
    }).join();
    for (std::size_t i = 3; i < count; i += 4) tenon_free(v[i]);
    for (auto& p : v) p = tenon_malloc(n);  // the remote frees come back through the inbox
    for (void* p : v) tenon_free(p);
  }
}

}  // namespace
