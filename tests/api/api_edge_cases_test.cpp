// The failure paths and boundary cases of the tenon_* API: exact return values
// and errno, and that the allocator still works after every failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unistd.h>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

using namespace tenon_test;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// Sizes no allocator can serve on a 64-bit machine; several sit just below
// SIZE_MAX so that rounding up to a class, a page or an alignment would wrap.
const std::vector<std::size_t> kImpossibleSizes = {
    SIZE_MAX,
    SIZE_MAX - 1,
    SIZE_MAX - 7,
    SIZE_MAX - 15,
    SIZE_MAX - 4095,
    SIZE_MAX - (std::size_t{1} << 21) + 1,
    SIZE_MAX - (std::size_t{1} << 30),
    static_cast<std::size_t>(PTRDIFF_MAX) + 1,
    static_cast<std::size_t>(PTRDIFF_MAX),
    std::size_t{1} << 62,
};

// Alignments that are not powers of two (0 included).
const std::vector<std::size_t> kBadAlignments = {
    0, 3, 5, 6, 7, 12, 24, 48, 100, 4095, 4097, 3u << 20, (std::size_t{1} << 22) + 8, SIZE_MAX,
};

// After a failure the allocator must still serve ordinary requests.
void expect_allocator_usable() {
  for (std::size_t size : {std::size_t{1}, std::size_t{100}, std::size_t{5000},
                           std::size_t{300000}, std::size_t{3} << 20}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr) << "tenon_malloc(" << size << ") failed after a failed call";
    fill_pattern(p, size, size);
    EXPECT_EQ(first_pattern_mismatch(p, size, size), size);
    tenon_free(p);
  }
}

TEST(EdgeCases, MallocImpossibleSizeIsNullAndEnomem) {
  for (std::size_t size : kImpossibleSizes) {
    errno = 0;
    void* p = tenon_malloc(size);
    EXPECT_EQ(p, nullptr) << "tenon_malloc(" << size << ")";
    EXPECT_EQ(errno, ENOMEM) << "tenon_malloc(" << size << ")";
    if (p) tenon_free(p);
    expect_allocator_usable();
  }
}

TEST(EdgeCases, MallocZeroIsUniqueNonNullAndFreeable) {
  std::set<void*> seen;
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) {
    void* p = tenon_malloc(0);
    ASSERT_NE(p, nullptr) << "tenon_malloc(0) returned NULL (call " << i << ")";
    EXPECT_TRUE(seen.insert(p).second) << "tenon_malloc(0) returned " << p << " twice while live";
    EXPECT_TRUE(is_aligned(p, 8)) << p;
    blocks.push_back(p);
  }
  for (void* p : blocks) tenon_free(p);
}

TEST(EdgeCases, FreeNullIsNoop) {
  tenon_free(nullptr);
  tenon_free_sized(nullptr, 0);
  tenon_free_sized(nullptr, 100);
  tenon_free_aligned_sized(nullptr, 64, 0);
  tenon_free_aligned_sized(nullptr, 4096, 100);
  expect_allocator_usable();
}

TEST(EdgeCases, UsableSizeOfNullIsZero) { EXPECT_EQ(tenon_malloc_usable_size(nullptr), 0u); }

TEST(EdgeCases, CallocOverflowIsNullAndEnomem) {
  const std::size_t half = SIZE_MAX / 2 + 1;
  const std::pair<std::size_t, std::size_t> cases[] = {
      {SIZE_MAX, 2}, {2, SIZE_MAX}, {half, 2}, {2, half}, {std::size_t{1} << 32, std::size_t{1} << 32},
      {SIZE_MAX, SIZE_MAX}, {(std::size_t{1} << 33) + 1, std::size_t{1} << 31},
      // No overflow, but impossible all the same.
      {1, SIZE_MAX}, {SIZE_MAX, 1}, {std::size_t{1} << 31, std::size_t{1} << 32}, {16, SIZE_MAX / 16},
  };
  for (auto [count, size] : cases) {
    errno = 0;
    void* p = tenon_calloc(count, size);
    EXPECT_EQ(p, nullptr) << "tenon_calloc(" << count << ", " << size << ")";
    EXPECT_EQ(errno, ENOMEM) << "tenon_calloc(" << count << ", " << size << ")";
    if (p) tenon_free(p);
    expect_allocator_usable();
  }
}

TEST(EdgeCases, CallocZeroIsUniqueNonNull) {
  void* a = tenon_calloc(0, 16);
  void* b = tenon_calloc(16, 0);
  void* c = tenon_calloc(0, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_NE(c, nullptr);
  if (a && b) EXPECT_NE(a, b);
  if (b && c) EXPECT_NE(b, c);
  if (a && c) EXPECT_NE(a, c);
  tenon_free(a);
  tenon_free(b);
  tenon_free(c);
}

TEST(EdgeCases, ReallocNullIsMalloc) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{24}, std::size_t{5000},
                           std::size_t{1} << 20, (std::size_t{5} << 20) + 3}) {
    void* p = tenon_realloc(nullptr, size);
    ASSERT_NE(p, nullptr) << "tenon_realloc(NULL, " << size << ")";
    EXPECT_TRUE(is_aligned(p, min_alignment(size))) << p << " size " << size;
    EXPECT_GE(tenon_malloc_usable_size(p), size);
    fill_pattern(p, size, 7);
    EXPECT_EQ(first_pattern_mismatch(p, size, 7), size);
    tenon_free(p);
  }
  errno = 0;
  EXPECT_EQ(tenon_realloc(nullptr, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(EdgeCases, ReallocImpossibleSizeKeepsOldBlock) {
  for (std::size_t old_size : {std::size_t{1}, std::size_t{100}, std::size_t{70000},
                               std::size_t{3} << 20}) {
    void* p = tenon_malloc(old_size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, old_size, old_size);
    for (std::size_t size : kImpossibleSizes) {
      errno = 0;
      void* q = tenon_realloc(p, size);
      EXPECT_EQ(q, nullptr) << "tenon_realloc(p[" << old_size << "], " << size << ")";
      EXPECT_EQ(errno, ENOMEM) << "tenon_realloc(p[" << old_size << "], " << size << ")";
      if (q) {
        // Wrong: q's real size is unknown, so it is not touched (nor freed);
        // p was given up by the realloc. Go on with a fresh block.
        p = tenon_malloc(old_size);
        ASSERT_NE(p, nullptr);
        fill_pattern(p, old_size, old_size);
        continue;
      }
      ASSERT_EQ(first_pattern_mismatch(p, old_size, old_size), old_size)
          << "failed tenon_realloc to " << size << " changed the old block of " << old_size;
      EXPECT_GE(tenon_malloc_usable_size(p), old_size);
    }
    // The old block is still a valid block: it can grow and be freed.
    void* q = tenon_realloc(p, old_size * 2);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(first_pattern_mismatch(q, old_size, old_size), old_size);
    tenon_free(q);
    expect_allocator_usable();
  }
}

// realloc(p, 0): C17 leaves it implementation-defined (glibc frees and returns
// NULL). Either answer is accepted; what is checked is that p is released
// (not leaked), no neighbour is damaged, and a non-NULL answer is freeable.
TEST(EdgeCases, ReallocToZeroFreesOrShrinks) {
  std::vector<void*> neighbours;
  for (int i = 0; i < 64; ++i) {
    void* n = tenon_malloc(1000);
    ASSERT_NE(n, nullptr);
    fill_pattern(n, 1000, 1000 + i);
    neighbours.push_back(n);
  }
  std::set<void*> live_results;
  for (int i = 0; i < 256; ++i) {
    void* p = tenon_malloc(1000);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 1000, 1);
    void* q = tenon_realloc(p, 0);
    if (q) {
      EXPECT_TRUE(live_results.insert(q).second) << "tenon_realloc(p, 0) answer " << q << " not unique";
    }
  }
  for (void* q : live_results) tenon_free(q);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(first_pattern_mismatch(neighbours[i], 1000, 1000 + i), 1000u);
    tenon_free(neighbours[i]);
  }
}

// If realloc(p, 0) leaked p, this loop would pin about 200 MiB of touched memory.
TEST(EdgeCases, ReallocToZeroDoesNotLeak) {
  if (kSanitized) GTEST_SKIP() << "RSS is not meaningful under sanitizers";
  auto resident = [] {
    long pages = 0, rss = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f) {
      if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
      std::fclose(f);
    }
    return static_cast<std::size_t>(rss) * kPage;
  };
  const std::size_t before = resident();
  const int rounds = 200000;
  for (int i = 0; i < rounds; ++i) {
    void* p = tenon_malloc(1000);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, 1000);
    void* q = tenon_realloc(p, 0);
    if (q) tenon_free(q);
  }
  const std::size_t after = resident();
  EXPECT_LT(after - std::min(after, before), std::size_t{64} << 20)
      << "RSS grew from " << before << " to " << after << " bytes over " << rounds
      << " malloc(1000)+realloc(p, 0) rounds: realloc(p, 0) leaks p";
}

TEST(EdgeCases, ReallocarrayOverflowKeepsOldBlock) {
  void* p = tenon_malloc(256);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 256, 3);
  const std::pair<std::size_t, std::size_t> cases[] = {
      {SIZE_MAX, 2}, {2, SIZE_MAX}, {std::size_t{1} << 32, std::size_t{1} << 32},
      {SIZE_MAX / 2 + 1, 2}, {1, SIZE_MAX}, {SIZE_MAX, 1}};
  for (auto [count, size] : cases) {
    errno = 0;
    void* q = tenon_reallocarray(p, count, size);
    EXPECT_EQ(q, nullptr) << "tenon_reallocarray(p, " << count << ", " << size << ")";
    EXPECT_EQ(errno, ENOMEM) << "tenon_reallocarray(p, " << count << ", " << size << ")";
    if (q) {
      p = q;
      continue;
    }
    ASSERT_EQ(first_pattern_mismatch(p, 256, 3), 256u) << "failed reallocarray damaged the block";
  }
  // NULL ptr: reallocarray(NULL, ...) acts like malloc, overflow still detected.
  errno = 0;
  EXPECT_EQ(tenon_reallocarray(nullptr, SIZE_MAX, 16), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* q = tenon_reallocarray(p, 100, 30);
  ASSERT_NE(q, nullptr);
  EXPECT_GE(tenon_malloc_usable_size(q), 3000u);
  EXPECT_EQ(first_pattern_mismatch(q, 256, 3), 256u);
  tenon_free(q);
  q = tenon_reallocarray(nullptr, 7, 9);
  ASSERT_NE(q, nullptr);
  EXPECT_GE(tenon_malloc_usable_size(q), 63u);
  tenon_free(q);
  expect_allocator_usable();
}

TEST(EdgeCases, PosixMemalignBadAlignmentIsEinvalAndOutUntouched) {
  std::vector<std::size_t> bad = kBadAlignments;
  for (std::size_t a : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) bad.push_back(a);  // < sizeof(void*)
  for (std::size_t a : bad) {
    void* const sentinel = reinterpret_cast<void*>(0x1234);
    void* out = sentinel;
    int rc = tenon_posix_memalign(&out, a, 64);
    EXPECT_EQ(rc, EINVAL) << "tenon_posix_memalign(&out, " << a << ", 64)";
    EXPECT_EQ(out, sentinel) << "tenon_posix_memalign(&out, " << a << ", 64) wrote *out on failure";
    if (rc == 0 && out != sentinel) tenon_free(out);
  }
  expect_allocator_usable();
}

TEST(EdgeCases, PosixMemalignImpossibleIsEnomemAndOutUntouched) {
  for (std::size_t a : {std::size_t{8}, std::size_t{64}, std::size_t{4096}, std::size_t{1} << 22}) {
    for (std::size_t size : kImpossibleSizes) {
      void* const sentinel = reinterpret_cast<void*>(0x1234);
      void* out = sentinel;
      int rc = tenon_posix_memalign(&out, a, size);
      EXPECT_EQ(rc, ENOMEM) << "tenon_posix_memalign(&out, " << a << ", " << size << ")";
      EXPECT_EQ(out, sentinel) << "tenon_posix_memalign(&out, " << a << ", " << size << ") wrote *out";
      if (rc == 0 && out != sentinel) tenon_free(out);
    }
  }
  // A valid (power of two, multiple of sizeof(void*)) alignment nobody can serve.
  void* out = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(tenon_posix_memalign(&out, std::size_t{1} << 63, 1), ENOMEM);
  EXPECT_EQ(out, reinterpret_cast<void*>(0x1234));
  expect_allocator_usable();
}

TEST(EdgeCases, PosixMemalignZeroSize) {
  void* out = reinterpret_cast<void*>(0x1234);
  ASSERT_EQ(tenon_posix_memalign(&out, 64, 0), 0);
  EXPECT_NE(out, reinterpret_cast<void*>(0x1234));
  if (out) EXPECT_TRUE(is_aligned(out, 64));
  tenon_free(out);
}

TEST(EdgeCases, AlignedAllocBadAlignmentIsNullAndEinval) {
  for (std::size_t a : kBadAlignments) {
    errno = 0;
    void* p = tenon_aligned_alloc(a, 64);
    EXPECT_EQ(p, nullptr) << "tenon_aligned_alloc(" << a << ", 64)";
    EXPECT_EQ(errno, EINVAL) << "tenon_aligned_alloc(" << a << ", 64)";
    if (p) tenon_free(p);
  }
  expect_allocator_usable();
}

// memalign follows glibc (2.36 and later): an alignment that is not a power of
// two is rounded up to the next one (0 asks for nothing: malloc's own
// alignment), and only one above SIZE_MAX / 2 + 1, which has no power of two
// to round to, fails with EINVAL. aligned_alloc keeps C17's EINVAL (above).
std::size_t next_power_of_two(std::size_t a) {
  std::size_t p = 1;
  while (p < a) p <<= 1;
  return p;
}

TEST(EdgeCases, MemalignRoundsAlignmentUpLikeGlibc) {
  std::vector<void*> blocks;
  for (std::size_t a : kBadAlignments) {
    if (a > SIZE_MAX / 2 + 1) continue;
    const std::size_t want = std::max(next_power_of_two(a), min_alignment(64));
    errno = 0;
    void* p = tenon_memalign(a, 64);
    ASSERT_NE(p, nullptr) << "tenon_memalign(" << a << ", 64): errno " << errno;
    EXPECT_TRUE(is_aligned(p, want)) << "tenon_memalign(" << a << ", 64) = " << p << ", not aligned to " << want;
    EXPECT_GE(tenon_malloc_usable_size(p), 64u);
    fill_pattern(p, 64, a);
    blocks.push_back(p);
  }
  std::size_t i = 0;
  for (std::size_t a : kBadAlignments) {
    if (a > SIZE_MAX / 2 + 1) continue;
    EXPECT_EQ(first_pattern_mismatch(blocks[i], 64, a), 64u) << "memalign block for alignment " << a;
    tenon_free(blocks[i++]);
  }
  // Nothing to round up to: EINVAL, as glibc answers.
  for (std::size_t a : {SIZE_MAX, SIZE_MAX / 2 + 2, (std::size_t{3} << 62)}) {
    errno = 0;
    void* p = tenon_memalign(a, 64);
    EXPECT_EQ(p, nullptr) << "tenon_memalign(" << a << ", 64)";
    EXPECT_EQ(errno, EINVAL) << "tenon_memalign(" << a << ", 64)";
    if (p) tenon_free(p);
  }
  // Rounded up to 2^63, which no block can have.
  errno = 0;
  void* p = tenon_memalign((std::size_t{1} << 62) + 1, 1);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  expect_allocator_usable();
}

TEST(EdgeCases, AlignedAllocImpossibleIsNullAndEnomem) {
  for (std::size_t a : {std::size_t{16}, std::size_t{64}, std::size_t{4096}, std::size_t{1} << 22}) {
    for (std::size_t size : kImpossibleSizes) {
      errno = 0;
      void* p = tenon_aligned_alloc(a, size);
      EXPECT_EQ(p, nullptr) << "tenon_aligned_alloc(" << a << ", " << size << ")";
      EXPECT_EQ(errno, ENOMEM) << "tenon_aligned_alloc(" << a << ", " << size << ")";
      if (p) tenon_free(p);
      errno = 0;
      p = tenon_memalign(a, size);
      EXPECT_EQ(p, nullptr) << "tenon_memalign(" << a << ", " << size << ")";
      EXPECT_EQ(errno, ENOMEM) << "tenon_memalign(" << a << ", " << size << ")";
      if (p) tenon_free(p);
    }
  }
  for (std::size_t a : {std::size_t{1} << 62, std::size_t{1} << 63}) {
    errno = 0;
    void* p = tenon_aligned_alloc(a, 1);
    EXPECT_EQ(p, nullptr) << "tenon_aligned_alloc(" << a << ", 1)";
    EXPECT_EQ(errno, ENOMEM) << "tenon_aligned_alloc(" << a << ", 1)";
    if (p) tenon_free(p);
  }
  expect_allocator_usable();
}

// Alignments 1, 2 and 4 are powers of two and therefore valid for aligned_alloc.
TEST(EdgeCases, AlignedAllocSmallPowerOfTwoAlignments) {
  for (std::size_t a : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    for (std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{10}, std::size_t{100}}) {
      void* p = tenon_aligned_alloc(a, size);
      ASSERT_NE(p, nullptr) << "tenon_aligned_alloc(" << a << ", " << size << ")";
      EXPECT_GE(tenon_malloc_usable_size(p), size);
      fill_pattern(p, size, a);
      EXPECT_EQ(first_pattern_mismatch(p, size, a), size);
      tenon_free(p);
      p = tenon_memalign(a, size);
      ASSERT_NE(p, nullptr) << "tenon_memalign(" << a << ", " << size << ")";
      tenon_free(p);
    }
  }
}

// A crash here names its step on stderr (ctest --output-on-failure shows it).
TEST(EdgeCases, AlignedAllocZeroSizeIsFreeable) {
  for (std::size_t a : {std::size_t{8}, std::size_t{64}, std::size_t{4096}, std::size_t{1} << 16,
                        std::size_t{1} << 22}) {
    std::fprintf(stderr, "step: tenon_aligned_alloc(%zu, 0), usable size, free\n", a);
    void* p = tenon_aligned_alloc(a, 0);
    if (p) EXPECT_TRUE(is_aligned(p, a)) << p << " alignment " << a;
    (void)tenon_malloc_usable_size(p);
    tenon_free(p);
    std::fprintf(stderr, "step: tenon_memalign(%zu, 0), usable size, free\n", a);
    p = tenon_memalign(a, 0);
    if (p) EXPECT_TRUE(is_aligned(p, a)) << p << " alignment " << a;
    (void)tenon_malloc_usable_size(p);
    tenon_free(p);
    std::fprintf(stderr, "step: tenon_posix_memalign(&out, %zu, 0), usable size, free\n", a);
    void* out = nullptr;
    EXPECT_EQ(tenon_posix_memalign(&out, a, 0), 0);
    (void)tenon_malloc_usable_size(out);
    tenon_free(out);
  }
}

TEST(EdgeCases, MemalignWithSizeEqualToAlignment) {
  std::vector<void*> blocks;
  for (std::size_t a = 8; a <= (std::size_t{4} << 20); a *= 2) {
    void* p = tenon_memalign(a, a);
    ASSERT_NE(p, nullptr) << "tenon_memalign(" << a << ", " << a << ")";
    EXPECT_TRUE(is_aligned(p, a)) << "tenon_memalign(" << a << ", " << a << ") = " << p;
    EXPECT_GE(tenon_malloc_usable_size(p), a);
    fill_pattern(p, a, a);
    blocks.push_back(p);
    void* q = tenon_aligned_alloc(a, a);
    ASSERT_NE(q, nullptr) << "tenon_aligned_alloc(" << a << ", " << a << ")";
    EXPECT_TRUE(is_aligned(q, a)) << q;
    fill_pattern(q, a, a + 1);
    blocks.push_back(q);
  }
  std::size_t i = 0;
  for (std::size_t a = 8; a <= (std::size_t{4} << 20); a *= 2) {
    EXPECT_EQ(first_pattern_mismatch(blocks[i], a, a), a) << "memalign block of " << a;
    EXPECT_EQ(first_pattern_mismatch(blocks[i + 1], a, a + 1), a) << "aligned_alloc block of " << a;
    i += 2;
  }
  for (void* p : blocks) tenon_free(p);
}

TEST(EdgeCases, VallocIsPageAligned) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, kPage - 1, kPage, kPage + 1,
                           std::size_t{100000}, (std::size_t{1} << 20) + 1, std::size_t{5} << 20}) {
    void* p = tenon_valloc(size);
    ASSERT_NE(p, nullptr) << "tenon_valloc(" << size << ")";
    EXPECT_TRUE(is_aligned(p, kPage)) << "tenon_valloc(" << size << ") = " << p;
    EXPECT_GE(tenon_malloc_usable_size(p), size);
    fill_pattern(p, size, size);
    EXPECT_EQ(first_pattern_mismatch(p, size, size), size);
    tenon_free(p);
  }
  for (std::size_t size : kImpossibleSizes) {
    errno = 0;
    void* p = tenon_valloc(size);
    EXPECT_EQ(p, nullptr) << "tenon_valloc(" << size << ")";
    EXPECT_EQ(errno, ENOMEM) << "tenon_valloc(" << size << ")";
    if (p) tenon_free(p);
  }
  expect_allocator_usable();
}

TEST(EdgeCases, PvallocRoundsUpToPages) {
  for (std::size_t size : {std::size_t{1}, kPage - 1, kPage, kPage + 1, std::size_t{100000},
                           (std::size_t{1} << 20) + 1}) {
    void* p = tenon_pvalloc(size);
    ASSERT_NE(p, nullptr) << "tenon_pvalloc(" << size << ")";
    EXPECT_TRUE(is_aligned(p, kPage)) << "tenon_pvalloc(" << size << ") = " << p;
    const std::size_t rounded = (size + kPage - 1) / kPage * kPage;
    const std::size_t usable = tenon_malloc_usable_size(p);
    EXPECT_GE(usable, rounded) << "tenon_pvalloc(" << size << ") must serve whole pages";
    fill_pattern(p, usable, size);
    EXPECT_EQ(first_pattern_mismatch(p, usable, size), usable);
    tenon_free(p);
  }
  void* p = tenon_pvalloc(0);
  ASSERT_NE(p, nullptr) << "tenon_pvalloc(0)";
  EXPECT_TRUE(is_aligned(p, kPage));
  tenon_free(p);
}

TEST(EdgeCases, PvallocOverflowIsNullAndEnomem) {
  std::vector<std::size_t> sizes = kImpossibleSizes;
  // Rounding these up to a page wraps to 0 or to one page.
  sizes.push_back(SIZE_MAX - kPage + 2);
  sizes.push_back(SIZE_MAX - kPage + 1);
  sizes.push_back(SIZE_MAX - kPage);
  for (std::size_t size : sizes) {
    errno = 0;
    void* p = tenon_pvalloc(size);
    EXPECT_EQ(p, nullptr) << "tenon_pvalloc(" << size << ")";
    EXPECT_EQ(errno, ENOMEM) << "tenon_pvalloc(" << size << ")";
    if (p) tenon_free(p);
  }
  expect_allocator_usable();
}

TEST(EdgeCases, MallocTrimKeepsLiveBlocks) {
  std::vector<void*> live, dead;
  for (int i = 0; i < 2000; ++i) {
    std::size_t size = 16 + (i * 37) % 3000;
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, i);
    (i % 3 ? dead : live).push_back(p);
  }
  void* big = tenon_malloc(std::size_t{8} << 20);
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, std::size_t{8} << 20);
  tenon_free(big);
  for (void* p : dead) tenon_free(p);
  int r0 = tenon_malloc_trim(0);
  EXPECT_TRUE(r0 == 0 || r0 == 1) << r0;
  int r1 = tenon_malloc_trim(std::size_t{1} << 20);
  EXPECT_TRUE(r1 == 0 || r1 == 1) << r1;
  int j = 0;
  for (int i = 0; i < 2000; ++i) {
    if (i % 3) continue;
    std::size_t size = 16 + (i * 37) % 3000;
    EXPECT_EQ(first_pattern_mismatch(live[j], size, i), size) << "block " << i << " damaged by trim";
    tenon_free(live[j++]);
  }
  expect_allocator_usable();
}

TEST(EdgeCases, StatsPrintDoesNotDisturb) {
  void* p = tenon_malloc(100);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 9);
  testing::internal::CaptureStderr();
  tenon_stats_print();
  (void)testing::internal::GetCapturedStderr();
  EXPECT_EQ(first_pattern_mismatch(p, 100, 9), 100u);
  tenon_free(p);
  expect_allocator_usable();
}

}  // namespace

namespace {

// POSIX.1-2024: free() shall not modify errno. Checked for every kind of
// block, including huge ones (unmapped or cached) and a burst that makes the
// allocator purge.
TEST(EdgeCases, FreePreservesErrno) {
  std::vector<std::size_t> sizes = {0, 1, 100, 5000, 40000, 300000, std::size_t{3} << 20, std::size_t{70} << 20};
  for (std::size_t size : sizes) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, size);
    errno = 12345;
    tenon_free(p);
    EXPECT_EQ(errno, 12345) << "tenon_free of a block of " << size << " changed errno";
    p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    errno = 12345;
    tenon_free_sized(p, size);
    EXPECT_EQ(errno, 12345) << "tenon_free_sized of a block of " << size << " changed errno";
  }
  std::vector<void*> many;
  for (int i = 0; i < 20000; ++i) many.push_back(tenon_malloc(16 + i % 2000));
  errno = 12345;
  for (void* p : many) tenon_free(p);
  EXPECT_EQ(errno, 12345) << "freeing 20000 blocks changed errno";
  void* a = tenon_aligned_alloc(std::size_t{8} << 20, 100);
  ASSERT_NE(a, nullptr);
  errno = 12345;
  tenon_free_aligned_sized(a, std::size_t{8} << 20, 100);
  EXPECT_EQ(errno, 12345) << "tenon_free_aligned_sized of an 8 MiB-aligned block changed errno";
}

}  // namespace
