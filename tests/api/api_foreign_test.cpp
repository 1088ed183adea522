// Blocks of glibc's own allocator (__libc_malloc: glibc's whatever the
// process's malloc is, sanitizer runtimes included) handed to tenon_free,
// tenon_realloc and tenon_malloc_usable_size: tenon reads glibc's header
// (docs/api.md, "Pointers tenon did not hand out"). The same through the
// standard names under LD_PRELOAD is tests/api/preload_c_api.c.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_memalign(std::size_t, std::size_t);

using namespace tenon_test;

namespace {

// glibc maps every request above 32 MiB on its own whatever its (dynamic)
// mmap threshold has become: DEFAULT_MMAP_THRESHOLD_MAX on 64-bit.
constexpr std::size_t kAlwaysMapped = (std::size_t{32} << 20) + 4096 * 3 + 100;

std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// Is any page of [p, p + n) mapped? msync fails with ENOMEM on an unmapped
// page and, unlike mincore, writes no buffer sized by the page size.
bool any_page_mapped(const void* p, std::size_t n) {
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(p) & ~(page() - 1);
  for (std::uintptr_t a = start; a < reinterpret_cast<std::uintptr_t>(p) + n; a += page())
    if (msync(reinterpret_cast<void*>(a), page(), MS_ASYNC) == 0) return true;
  return false;
}

void* glibc_block(std::size_t n, unsigned seed) {
  void* p = __libc_malloc(n);
  if (p) fill_pattern(p, n, seed);
  return p;
}

TEST(Foreign, FreeKeepsErrno) {
  for (std::size_t n : {std::size_t{16}, std::size_t{5000}, kAlwaysMapped}) {
    void* p = glibc_block(n, 1);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(tenon_owns(p), 0);
    errno = 12345;
    tenon_free(p);
    EXPECT_EQ(errno, 12345) << "tenon_free of a glibc block of " << n;
  }
}

TEST(Foreign, UsableSizeComesFromGlibcsHeader) {
  for (std::size_t n : {std::size_t{1}, std::size_t{24}, std::size_t{100}, std::size_t{5000}, kAlwaysMapped}) {
    void* p = glibc_block(n, 2);
    ASSERT_NE(p, nullptr);
    std::size_t usable = tenon_malloc_usable_size(p);
    EXPECT_GE(usable, n) << "glibc block of " << n;
    EXPECT_LT(usable, n + (n >= kAlwaysMapped ? page() : 64)) << "glibc block of " << n;
    tenon_free(p);
  }
}

TEST(Foreign, FreeUnmapsABlockGlibcMappedOnItsOwn) {
  auto* p = static_cast<char*>(glibc_block(kAlwaysMapped, 3));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(any_page_mapped(p, kAlwaysMapped));
  tenon_free(p);
  EXPECT_FALSE(any_page_mapped(p, kAlwaysMapped)) << "the mapping is still there after tenon_free";
}

TEST(Foreign, AlignedMappedBlockRecordsItsOffset) {
  if (kSanitized) GTEST_SKIP() << "sanitizer runtimes replace __libc_memalign";
  for (std::size_t align : {page(), std::size_t{1} << 16, std::size_t{1} << 20}) {
    auto* p = static_cast<char*>(__libc_memalign(align, kAlwaysMapped));
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
    fill_pattern(p, kAlwaysMapped, 4);
    EXPECT_GE(tenon_malloc_usable_size(p), kAlwaysMapped) << "__libc_memalign(" << align << ")";
    tenon_free(p);
    EXPECT_FALSE(any_page_mapped(p, kAlwaysMapped)) << "__libc_memalign(" << align << ") still mapped";
  }
}

TEST(Foreign, ReallocMovesIntoATenonBlockWithTheContents) {
  for (std::size_t n : {std::size_t{40}, std::size_t{5000}, kAlwaysMapped}) {
    for (std::size_t to : {n / 4 + 1, n * 2, std::size_t{1} << 20}) {
      void* p = glibc_block(n, 5);
      ASSERT_NE(p, nullptr);
      errno = 777;
      void* q = tenon_realloc(p, to);
      ASSERT_NE(q, nullptr) << "tenon_realloc(glibc block of " << n << ", " << to << ")";
      EXPECT_EQ(errno, 777);
      std::size_t kept = n < to ? n : to;
      EXPECT_EQ(first_pattern_mismatch(q, kept, 5), kept) << n << " -> " << to;
      if (q != p) EXPECT_NE(tenon_owns(q), 0) << "a moved block is tenon's";
      EXPECT_GE(tenon_malloc_usable_size(q), to);
      tenon_free(q);
    }
  }
}

TEST(Foreign, ShrinkingAHeapBlockStaysInPlace) {
  // Moving it out would copy it and still keep its place in glibc's heap.
  void* p = glibc_block(5000, 6);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tenon_realloc(p, 3000), p);
  EXPECT_EQ(first_pattern_mismatch(p, 3000, 6), 3000u);
  tenon_free(p);
}

TEST(Foreign, BlockFromAThreadArena) {
  void* p = nullptr;
  std::thread([&] { p = glibc_block(3000, 7); }).join();
  ASSERT_NE(p, nullptr);
  EXPECT_GE(tenon_malloc_usable_size(p), 3000u);
  void* q = tenon_realloc(p, 9000);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(first_pattern_mismatch(q, 3000, 7), 3000u);
  tenon_free(q);
}

// A pointer with no glibc header in front: usable size is 0, realloc fails
// with EINVAL and leaves it alone, free ends the program (as glibc's does).
struct NotAGlibcHeader {
  std::size_t prev, size;
  const char* what;
};
const NotAGlibcHeader kNotGlibcHeaders[] = {
    {0, 0, "nothing"},
    {0, 8, "smaller than any chunk"},
    {0, 40, "not a multiple of 16"},
    {0, 4096 + 2, "\"mapped\", but the mapping would start 16 bytes before a page"},
    {4096 - 16, 4128 + 2, "\"mapped\", mapping start on a page, length not a multiple of pages"},
};

// p + 4096 of a static area, the 64 bytes from there 0x5a, the header given
// in the 16 bytes before.
unsigned char* fake_block(const NotAGlibcHeader& h) {
  alignas(4096) static unsigned char area[3 * 4096];
  std::memset(area, 0, sizeof area);
  unsigned char* p = area + 4096;
  std::memset(p, 0x5a, 64);
  std::memcpy(p - 16, &h, 2 * sizeof(std::size_t));
  return p;
}

TEST(Foreign, NotAGlibcBlock) {
  for (const NotAGlibcHeader& h : kNotGlibcHeaders) {
    unsigned char* p = fake_block(h);
    EXPECT_EQ(tenon_malloc_usable_size(p), 0u) << h.what;
    errno = 0;
    EXPECT_EQ(tenon_realloc(p, 100), nullptr) << h.what;
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(p[0], 0x5a);
    EXPECT_EQ(tenon_malloc_usable_size(p + 8), 0u) << "misaligned";
  }
}

// Nothing mapped in the 16 bytes before p (a huge block's old address once
// unmapped, a made-up pointer): malloc_usable_size and realloc answer as for
// any pointer that is no glibc block, without reading there (they crashed,
// like glibc's, until 2026-11-27; the secure build's quarantine asks the
// size of every freed pointer, so its free crashed on such a pointer too:
// security.SecureGuards.DoubleFreeOfUnmappedHugeBlockIsReported).
TEST(Foreign, NothingMappedBeforeIt) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* area = static_cast<unsigned char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  ASSERT_EQ(munmap(area, page), 0);  // the page before p: nothing mapped
  unsigned char* p = area + page;
  p[0] = 0x5a;
  EXPECT_EQ(tenon_malloc_usable_size(p), 0u);
  errno = 0;
  EXPECT_EQ(tenon_realloc(p, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(p[0], 0x5a);
  munmap(p, page);
}

TEST(ForeignDeathTest, FreeOfNotAGlibcBlockEndsTheProgram) {
  for (const NotAGlibcHeader& h : kNotGlibcHeaders) {
    unsigned char* p = fake_block(h);
    EXPECT_EXIT(tenon_free(p), testing::KilledBySignal(SIGABRT), "tenon: free\\(0x[0-9a-f]+\\): invalid pointer")
        << h.what;
    EXPECT_EXIT(tenon_free(p + 8), testing::KilledBySignal(SIGABRT), "tenon: free\\(0x[0-9a-f]+\\): invalid pointer")
        << "misaligned, " << h.what;
  }
}

// Threads free and reallocate each other's glibc blocks (and their own)
// through tenon while others allocate from glibc.
TEST(Foreign, ConcurrentFreesAndReallocs) {
  constexpr int kThreads = 4;
  constexpr int kSlots = 32;
  const std::size_t rounds = scaled(20000);
  std::atomic<void*> slots[kSlots] = {};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t x = mix(t + 1);
      for (std::size_t i = 0; i < rounds; ++i) {
        x = mix(x);
        // Small heap blocks are kept, not returned to glibc: keep them small.
        std::size_t n = x % 64 == 0 ? (std::size_t{256} << 10) : 16 + x % 200;
        void* p = __libc_malloc(n);
        if (!p) { bad.fetch_add(1); continue; }
        std::memset(p, static_cast<int>(n & 0xff), n < 64 ? n : 64);
        void* old = slots[(x >> 20) % kSlots].exchange(p, std::memory_order_acq_rel);
        if (!old) continue;
        if (tenon_malloc_usable_size(old) < 16) bad.fetch_add(1);
        if (x & (1u << 10)) {
          void* q = tenon_realloc(old, 1 + (x >> 32) % 3000);
          if (!q) bad.fetch_add(1);
          tenon_free(q);
        } else {
          tenon_free(old);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : slots) tenon_free(s.load());
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
