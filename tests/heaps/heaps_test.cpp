// First-class heaps through the C API (tenon_heap_*, libtenon.a): every
// function and its bad input, frees from other threads (tenon_heap_free and
// the plain tenon_free), destroy with blocks still live in other threads'
// hands, reset, and the byte limit.
#include <errno.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "../api/test_support.h"
#include "tenon/tenon.h"

namespace {

using tenon_test::fill_pattern;

// Resident set size in bytes, from /proc/self/statm.
std::size_t resident_bytes() {
  long pages = 0, rss = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(rss) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}
using tenon_test::scaled;

bool holds_pattern(const void* p, std::size_t n, std::uint64_t seed) {
  if (n == 0) return true;
  std::vector<unsigned char> want(n);
  fill_pattern(want.data(), n, seed);
  return std::memcmp(p, want.data(), n) == 0;
}

struct heap_guard {
  tenon_heap_t* h;
  explicit heap_guard(std::size_t limit = 0) {
    tenon_heap_options o{limit};
    h = tenon_heap_new(&o);
  }
  ~heap_guard() { tenon_heap_destroy(h); }
};

// Sizes across the small classes and the large range (up to 2 MiB).
std::vector<std::size_t> sizes() {
  std::vector<std::size_t> v = {0, 1, 7, 8, 15, 16, 24, 100, 1000, 1024, 1025, 4000, 8192, 20000, 32768};
  for (std::size_t n : {32769ul, 65536ul, 100000ul, 500000ul, 1ul << 20, 2ul << 20, (2ul << 20) + 1, 9ul << 20})
    v.push_back(n);
  return v;
}

TEST(Heaps, MallocFreeEverySize) {
  heap_guard g;
  ASSERT_NE(g.h, nullptr);
  std::vector<void*> live;
  std::uint64_t seed = 1;
  for (std::size_t n : sizes()) {
    void* p = tenon_heap_malloc(g.h, n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (n < 16 ? 8 : 16), 0u) << n;
    EXPECT_GE(tenon_malloc_usable_size(p), n);
    EXPECT_TRUE(tenon_owns(p));
    fill_pattern(p, n, seed++);
    live.push_back(p);
  }
  seed = 1;
  for (std::size_t i = 0; i < live.size(); ++i) EXPECT_TRUE(holds_pattern(live[i], sizes()[i], seed++)) << sizes()[i];
  for (void* p : live) tenon_heap_free(g.h, p);
  tenon_heap_free(g.h, nullptr);  // no-op
}

TEST(Heaps, CallocZeroesReusedMemory) {
  heap_guard g;
  for (std::size_t n : sizes()) {
    void* dirty = tenon_heap_malloc(g.h, n);
    ASSERT_NE(dirty, nullptr);
    std::memset(dirty, 0xa5, n);
    tenon_heap_free(g.h, dirty);
    auto* p = static_cast<unsigned char*>(tenon_heap_calloc(g.h, 1, n));
    ASSERT_NE(p, nullptr) << n;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0) << n << " at " << i;
    tenon_heap_free(g.h, p);
  }
  errno = 0;
  EXPECT_EQ(tenon_heap_calloc(g.h, SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Heaps, ReallocKeepsContentsAndMovesIntoTheHeap) {
  heap_guard g;
  void* p = tenon_heap_realloc(g.h, nullptr, 8);  // NULL: malloc
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 8, 7);
  std::size_t n = 8;
  for (std::size_t next : {24ul, 200ul, 5000ul, 40000ul, 300000ul, 2ul << 20, 100000ul, 3000ul, 16ul}) {
    void* q = tenon_heap_realloc(g.h, p, next);
    ASSERT_NE(q, nullptr) << next;
    std::size_t kept = n < next ? n : next;
    EXPECT_TRUE(holds_pattern(q, kept, 7)) << n << " -> " << next;
    fill_pattern(q, next, 7);
    p = q;
    n = next;
  }
  // Too big: NULL, ENOMEM, the block untouched.
  errno = 0;
  EXPECT_EQ(tenon_heap_realloc(g.h, p, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(holds_pattern(p, n, 7));
  // Size 0: a minimal block, as realloc(p, 0) does.
  void* z = tenon_heap_realloc(g.h, p, 0);
  ASSERT_NE(z, nullptr);
  tenon_heap_free(g.h, z);
  // A block of the default allocator moves into the heap; destroy then takes it.
  void* d = tenon_malloc(100);
  fill_pattern(d, 100, 9);
  void* moved = tenon_heap_realloc(g.h, d, 300);
  ASSERT_NE(moved, nullptr);
  EXPECT_TRUE(holds_pattern(moved, 100, 9));
}

// A small block in a span that no heap owns (made by a thread after its own
// heap was released at its exit: a later thread-key destructor's malloc),
// reallocated into h by a thread that has a heap-thread id but no sub-heap
// of h yet: the result must be a block of h. (The in-place test compared the
// span's owner with the caller's sub-heap of h, both null: p was kept, a
// block of no heap, which reset and destroy of h do not release.)
pthread_key_t g_late_key;
std::atomic<void*> g_late_block{nullptr};

void late_destructor(void* round) {
  if (round == reinterpret_cast<void*>(1)) {  // once more, after tenon's own exit hook
    pthread_setspecific(g_late_key, reinterpret_cast<void*>(2));
    return;
  }
  g_late_block = tenon_malloc(100);
}

TEST(Heaps, ReallocOfABlockNoHeapOwnsMovesIntoTheHeap) {
  tenon_free(tenon_malloc(1));
  ASSERT_EQ(pthread_key_create(&g_late_key, late_destructor), 0);
  std::thread([] {
    tenon_free(tenon_malloc(100));
    pthread_setspecific(g_late_key, reinterpret_cast<void*>(1));
  }).join();
  void* p = g_late_block.load();
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 3);
  heap_guard other, g;
  void* o = tenon_heap_malloc(other.h, 8);  // this thread holds a heap-thread id
  void* q = tenon_heap_realloc(g.h, p, 100);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p) << "a block of no heap was kept in place: it is not a block of h";
  EXPECT_TRUE(holds_pattern(q, 100, 3));
  tenon_heap_free(other.h, o);
  pthread_key_delete(g_late_key);
}

TEST(Heaps, AlignedAlloc) {
  heap_guard g;
  for (std::size_t align = 1; align <= (8u << 20); align <<= 1) {
    for (std::size_t n : {1ul, 24ul, 100ul, 5000ul, 70000ul, 3ul << 20}) {
      void* p = tenon_heap_aligned_alloc(g.h, align, n);
      ASSERT_NE(p, nullptr) << align << " " << n;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << align << " " << n;
      std::memset(p, 1, n);
      tenon_heap_free(g.h, p);
    }
  }
  errno = 0;
  EXPECT_EQ(tenon_heap_aligned_alloc(g.h, 24, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_heap_aligned_alloc(g.h, 0, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(tenon_heap_malloc(g.h, 10), nullptr);  // the next call still works
}

// tenon_heap_realloc of a pointer no allocator handed out (a stack buffer
// with no glibc header before it, a pointer inside a huge block) answers as
// realloc does: NULL, EINVAL, the bytes left alone. Found 2026-11-27: it
// allocated the new block, copied nothing and then freed the pointer, which
// ended the program ("tenon: free(0x...): invalid pointer").
TEST(Heaps, ReallocOfAPointerNoAllocatorMadeIsEinval) {
  heap_guard g;
  alignas(16) unsigned char stack_buffer[64];
  memset(stack_buffer, 0, sizeof stack_buffer);
  unsigned char* p = stack_buffer + 32;  // 16 zero bytes before it: no glibc header
  p[0] = 0x5a;
  errno = 0;
  EXPECT_EQ(tenon_heap_realloc(g.h, p, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(p[0], 0x5a);
  auto* huge = static_cast<unsigned char*>(tenon_heap_malloc(g.h, 8u << 20));
  ASSERT_NE(huge, nullptr);
  errno = 0;
  EXPECT_EQ(tenon_heap_realloc(g.h, huge + 4096, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  tenon_heap_free(g.h, huge);
  void* q = tenon_heap_malloc(g.h, 64);  // the heap still serves
  EXPECT_NE(q, nullptr);
  tenon_heap_free(g.h, q);
}

TEST(Heaps, BadInputHasDefinedAnswers) {
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(nullptr, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_heap_calloc(nullptr, 1, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_heap_realloc(nullptr, nullptr, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(tenon_heap_aligned_alloc(nullptr, 16, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  tenon_heap_destroy(nullptr);
  tenon_heap_reset(nullptr);
  tenon_heap_free(nullptr, nullptr);
  void* d = tenon_malloc(40);
  tenon_heap_free(nullptr, d);  // NULL heap: a plain free

  heap_guard g;
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(g.h, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(g.h, PTRDIFF_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* p = tenon_heap_malloc(g.h, 64);
  EXPECT_NE(p, nullptr);
  tenon_heap_free(g.h, p);
}

// free(p + 1) of a block of the thread's own sub-heap: no block starts there
// (the owner's local free path must not push it on the free list, whose next
// two allocations would then overlap), reported as tenon_free reports it.
TEST(HeapsDeathTest, UnalignedFreeOfAnOwnBlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "fast");  // as composed_heap_test: no re-exec under qemu-user
  EXPECT_DEATH(
      {
        tenon_heap_t* h = tenon_heap_new(nullptr);
        auto* p = static_cast<char*>(tenon_heap_malloc(h, 32));
        tenon_heap_free(h, p + 1);
      },
      "tenon: free.*invalid pointer");
}

// tenon_heap_realloc of a block the calling thread freed already, or of a
// pointer inside one of its blocks, ends the program as realloc does
// (docs/api.md, "Heap misuse"). Until 2026-11-27 either was kept in place
// when the size fitted: the freed block was returned while still on its
// span's free list, and the next malloc handed it out again.
TEST(HeapsDeathTest, ReallocOfAFreedBlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        tenon_heap_t* h = tenon_heap_new(nullptr);
        void* p = tenon_heap_malloc(h, 100);
        void* keep = tenon_heap_malloc(h, 100);
        tenon_heap_free(h, p);
        void* q = tenon_heap_realloc(h, p, 100);
        void* r = tenon_heap_malloc(h, 100);
        std::fprintf(stderr, "kept %d, handed out again %d\n", q == p, r == p);
        tenon_heap_free(h, keep);
      },
      "tenon: realloc.*double free");
}

TEST(HeapsDeathTest, ReallocOfAnInteriorPointerIsReported) {
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        tenon_heap_t* h = tenon_heap_new(nullptr);
        auto* p = static_cast<char*>(tenon_heap_malloc(h, 100));
        void* q = tenon_heap_realloc(h, p + 16, 90);
        std::fprintf(stderr, "returned %p for %p\n", q, static_cast<void*>(p + 16));
      },
      "tenon: realloc.*invalid pointer");
}

// The limit counts span memory (64 KiB spans, large blocks' slice runs).
TEST(Heaps, LimitFailsWithEnomemAndResetRestoresIt) {
  constexpr std::size_t kLimit = 1u << 20;
  heap_guard g(kLimit);
  std::vector<void*> blocks;
  for (;;) {
    errno = 0;
    void* p = tenon_heap_malloc(g.h, 1000);
    if (!p) {
      EXPECT_EQ(errno, ENOMEM);
      break;
    }
    blocks.push_back(p);
    ASSERT_LE(blocks.size() * 1000, kLimit);
  }
  std::size_t first_round = blocks.size();
  EXPECT_GE(first_round * 1024, kLimit / 2);
  // Large blocks count too.
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(g.h, 100000), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // Freeing gives room again.
  tenon_heap_free(g.h, blocks.back());
  blocks.pop_back();
  EXPECT_NE(tenon_heap_malloc(g.h, 1000), nullptr);
  // Reset: everything back, the same amount fits again.
  tenon_heap_reset(g.h);
  std::size_t second_round = 0;
  while (tenon_heap_malloc(g.h, 1000)) ++second_round;
  EXPECT_EQ(second_round, first_round);
  tenon_heap_reset(g.h);
  void* big = tenon_heap_malloc(g.h, 900000);
  EXPECT_NE(big, nullptr);
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(g.h, 200000), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  tenon_free(big);  // the plain free gives its bytes back to the heap
  EXPECT_NE(tenon_heap_malloc(g.h, 200000), nullptr);
  // Huge blocks count too.
  tenon_heap_reset(g.h);
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(g.h, 3u << 20), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  tenon_heap_t* wide = tenon_heap_new(nullptr);
  tenon_heap_options o{8u << 20};
  tenon_heap_t* h8 = tenon_heap_new(&o);
  void* a = tenon_heap_malloc(h8, 5u << 20);
  ASSERT_NE(a, nullptr);
  errno = 0;
  EXPECT_EQ(tenon_heap_malloc(h8, 5u << 20), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  tenon_free(a);
  EXPECT_NE(tenon_heap_malloc(h8, 5u << 20), nullptr);
  tenon_heap_destroy(h8);
  tenon_heap_destroy(wide);
}

// Spans a thread's sub-heap keeps with no live block (the current span of
// each class it used, a spare of a class with few blocks a span) make room
// when the heap reaches its limit: with a limit of one 64 KiB span, one
// block at a time of every small size, each freed before the next, fits
// (before 2026-11-27, every size after the first failed with ENOMEM), and
// so does a large block once the small ones are gone.
TEST(Heaps, EmptySpansKeptByTheThreadMakeRoomAtTheLimit) {
  heap_guard g(64u << 10);
  for (std::size_t n = 16; n <= 1024; n += 16) {
    errno = 0;
    void* p = tenon_heap_malloc(g.h, n);
    ASSERT_NE(p, nullptr) << "tenon_heap_malloc(h, " << n << ") under a 64 KiB limit, errno " << errno
                          << ", every block before it freed";
    std::memset(p, 0x5a, n);
    tenon_heap_free(g.h, p);
  }
  heap_guard big(256u << 10);
  for (std::size_t n : {16u, 100u, 1000u, 4000u}) tenon_heap_free(big.h, tenon_heap_malloc(big.h, n));
  errno = 0;
  void* large = tenon_heap_malloc(big.h, 200000);
  EXPECT_NE(large, nullptr) << "a 200000-byte block under a 256 KiB limit, the small blocks freed: errno " << errno;
  tenon_heap_free(big.h, large);
}

// Huge blocks (above 2 MiB) of a heap: freed by another thread, moved by
// the plain realloc, or left live for destroy.
TEST(Heaps, HugeBlocks) {
  tenon_heap_t* h = tenon_heap_new(nullptr);
  void* a = tenon_heap_malloc(h, 3u << 20);
  void* b = tenon_heap_calloc(h, 1, 5u << 20);
  void* c = tenon_heap_malloc(h, 4u << 20);
  ASSERT_TRUE(a && b && c);
  fill_pattern(a, 3u << 20, 1);
  fill_pattern(c, 4096, 3);
  EXPECT_EQ(static_cast<unsigned char*>(b)[(5u << 20) - 1], 0);
  std::thread([&] { tenon_free(b); }).join();
  // The plain realloc moves it out of the heap (the heap forgets it).
  void* moved = tenon_realloc(c, 8u << 20);
  ASSERT_NE(moved, nullptr);
  EXPECT_TRUE(holds_pattern(moved, 4096, 3));
  // Grown within the heap.
  void* grown = tenon_heap_realloc(h, a, 6u << 20);
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(holds_pattern(grown, 3u << 20, 1));
  void* live = tenon_heap_malloc(h, 7u << 20);
  std::memset(live, 1, 7u << 20);
  tenon_heap_destroy(h);  // grown and live go with it
  tenon_free(moved);
  for (int i = 0; i < 50; ++i) {
    tenon_heap_t* x = tenon_heap_new(nullptr);
    ASSERT_NE(tenon_heap_malloc(x, 12u << 20), nullptr);
    tenon_heap_destroy(x);
  }
}

// Blocks freed by other threads (plain tenon_free and tenon_heap_free) come
// back to the allocating thread's sub-heap: with a limit that one round
// fills, a second round after those frees still fits.
TEST(Heaps, FreesFromAnotherThreadReturnToTheHeap) {
  constexpr std::size_t kLimit = 8u << 20;
  constexpr std::size_t kSizes[] = {24, 100, 500, 1500};
  heap_guard g(kLimit);
  for (int round = 0; round < 6; ++round) {
    std::vector<void*> blocks;
    for (std::size_t i = 0;; ++i) {
      std::size_t n = i % 20 == 19 ? 40000 : kSizes[i % 4];
      void* p = tenon_heap_malloc(g.h, n);
      if (!p) break;
      fill_pattern(p, n < 64 ? n : 64, i);
      blocks.push_back(p);
    }
    ASSERT_GT(blocks.size(), 1000u) << "round " << round;
    std::thread freer([&] {
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (i % 2) tenon_free(blocks[i]);
        else tenon_heap_free(g.h, blocks[i]);
      }
    });
    freer.join();
  }
}

// Destroy releases what other threads allocated and still hold (those
// pointers are invalid afterwards and are not touched again); memory is
// reused cycle after cycle rather than growing.
TEST(Heaps, DestroyReleasesBlocksLiveInOtherThreads) {
  constexpr int kThreads = 4;
  const std::size_t per_thread = scaled(4000);
  // The highest RSS of the middle third of the cycles against the highest of
  // the last third: a single sample can fall in a purge pass's dip (43 MiB
  // in one cycle where its neighbours were at 51) and make the settled set
  // look like growth.
  std::size_t rss_settled = 0, rss_late = 0;
  const int cycles = tenon_test::kSanitized ? 3 : 30;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    tenon_heap_t* h = tenon_heap_new(nullptr);
    ASSERT_NE(h, nullptr);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (std::size_t i = 0; i < per_thread; ++i) {
          std::size_t n = i % 50 == 0 ? 70000 : 16 + (i * 13 + t) % 1500;
          void* p = tenon_heap_malloc(h, n);
          if (!p) {
            failures.fetch_add(1);
            return;
          }
          std::memset(p, t, n < 256 ? n : 256);
        }
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(failures.load(), 0);
    tenon_heap_destroy(h);
    // The arena places a cycle's spans where slices are free; the set it
    // uses settles after a few cycles (about 60 MiB here) and then stays.
    if (cycle >= cycles / 3) {
      std::size_t& high = cycle < 2 * cycles / 3 ? rss_settled : rss_late;
      high = std::max(high, resident_bytes());
    }
    if (std::getenv("HEAPS_TRACE")) std::fprintf(stderr, "cycle %d rss %zu\n", cycle, resident_bytes());
  }
  if (!tenon_test::kSanitized && !std::getenv("TENON_TEST_EMULATED")) {
    std::size_t growth = rss_late > rss_settled ? rss_late - rss_settled : 0;
    // One cycle touches about 22 MiB: not reusing it would add that much a cycle.
    EXPECT_LT(growth, std::size_t{12} << 20) << "destroyed heaps' memory is not reused";
  }
  // Other heaps and the default allocator are unaffected.
  void* p = tenon_malloc(100);
  EXPECT_NE(p, nullptr);
  tenon_free(p);
}

TEST(Heaps, DestroyLeavesOtherHeapsIntact) {
  tenon_heap_t* a = tenon_heap_new(nullptr);
  tenon_heap_t* b = tenon_heap_new(nullptr);
  std::vector<void*> kept;
  for (std::size_t i = 0; i < 2000; ++i) {
    std::size_t n = 16 + i * 31 % 3000;
    void* p = tenon_heap_malloc(b, n);
    fill_pattern(p, n, i);
    kept.push_back(p);
    EXPECT_NE(tenon_heap_malloc(a, n), nullptr);
  }
  void* d = tenon_malloc(500);
  fill_pattern(d, 500, 99);
  tenon_heap_destroy(a);
  // The recycled record serves a new heap.
  tenon_heap_t* c = tenon_heap_new(nullptr);
  for (std::size_t i = 0; i < 2000; ++i) std::memset(tenon_heap_malloc(c, 100), 0xee, 100);
  for (std::size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(holds_pattern(kept[i], 16 + i * 31 % 3000, i)) << i;
  EXPECT_TRUE(holds_pattern(d, 500, 99));
  tenon_free(d);
  tenon_heap_destroy(b);
  tenon_heap_destroy(c);
}

// Many threads allocate from one heap at once and free each other's blocks
// (handed over through per-thread queues); contents checked, then the heap
// is destroyed with part of the blocks still live.
TEST(Heaps, ConcurrentAllocationAndCrossThreadFrees) {
  constexpr int kThreads = 4;
  const std::size_t per_thread = scaled(20000);
  for (int round = 0; round < 3; ++round) {
    tenon_heap_t* h = tenon_heap_new(nullptr);
    struct queue {
      std::vector<void*> items;
      std::atomic<std::size_t> published{0};
    };
    std::vector<queue> queues(kThreads);
    for (auto& q : queues) q.items.assign(per_thread, nullptr);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        queue& mine = queues[t];
        queue& next = queues[(t + 1) % kThreads];
        std::size_t taken = 0;
        for (std::size_t i = 0; i < per_thread; ++i) {
          std::size_t n = i % 97 == 0 ? 50000 : 8 + (i * 29 + t) % 900;
          auto* p = static_cast<std::uint64_t*>(tenon_heap_malloc(h, n));
          if (!p) {
            failures.fetch_add(1);
            break;
          }
          p[0] = (std::uint64_t{static_cast<unsigned>(t)} << 32) | i;
          mine.items[i] = p;
          mine.published.store(i + 1, std::memory_order_release);
          // Free what the neighbour published, up to three quarters of it.
          std::size_t avail = next.published.load(std::memory_order_acquire);
          for (; taken < avail * 3 / 4; ++taken) {
            auto* q = static_cast<std::uint64_t*>(next.items[taken]);
            if (q[0] != ((std::uint64_t{static_cast<unsigned>((t + 1) % kThreads)} << 32) | taken)) failures.fetch_add(1);
            if (taken % 2) tenon_free(q);
            else tenon_heap_free(h, q);
          }
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    tenon_heap_destroy(h);  // about a quarter of the blocks are still live
  }
}

// Threads come and go (their heap-thread ids and sub-heaps are passed on to
// new threads); heaps are created and destroyed many times.
TEST(Heaps, ThreadsAndHeapsComeAndGo) {
  tenon_heap_t* h = tenon_heap_new(nullptr);
  std::vector<void*> from_dead;
  for (int i = 0; i < 64; ++i) {
    std::thread([&] {
      for (int k = 0; k < 100; ++k) from_dead.push_back(tenon_heap_malloc(h, 48));
      void* big = tenon_heap_malloc(h, 100000);
      tenon_heap_free(h, big);
    }).join();
  }
  for (void* p : from_dead) ASSERT_NE(p, nullptr);
  for (void* p : from_dead) tenon_heap_free(h, p);  // blocks of exited threads
  tenon_heap_destroy(h);
  for (int i = 0; i < 2000; ++i) {
    tenon_heap_t* x = tenon_heap_new(nullptr);
    ASSERT_NE(x, nullptr);
    ASSERT_NE(tenon_heap_malloc(x, 64), nullptr);
    ASSERT_NE(tenon_heap_malloc(x, 40000), nullptr);
    tenon_heap_destroy(x);
  }
}

}  // namespace
