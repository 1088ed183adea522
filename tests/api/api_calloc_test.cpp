// calloc must hand out zeroed memory even when it reuses blocks (or retained
// large spans) that were dirtied and freed just before.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

using namespace tenon_test;

namespace {

// Offset of the first non-zero byte in [0, n), or n.
std::size_t first_nonzero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    if (w) break;
  }
  for (; i < n; ++i)
    if (b[i]) return i;
  return n;
}

std::vector<std::size_t> calloc_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1; s <= 1024; ++s) sizes.push_back(s);
  for (std::size_t s = 1031; s <= 65536; s += kSanitized ? 4093 : 509) sizes.push_back(s);
  for (std::size_t s : {std::size_t{100000}, std::size_t{262144}, std::size_t{1} << 20,
                        (std::size_t{1} << 20) + 1, std::size_t{4} << 20, (std::size_t{8} << 20) + 3})
    sizes.push_back(s);
  return sizes;
}

// Per size: a batch of blocks is dirtied over its usable size and freed, then
// the same number is calloc'd (the allocator will reuse the dirty blocks).
TEST(Calloc, ZeroedAfterReuseOfDirtyBlocks) {
  for (std::size_t size : calloc_sizes()) {
    const std::size_t batch = size > 65536 ? 3 : 32;
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < batch; ++i) {
      void* p = tenon_malloc(size);
      ASSERT_NE(p, nullptr);
      std::memset(p, 0xa5, tenon_malloc_usable_size(p));
      blocks.push_back(p);
    }
    for (void* p : blocks) tenon_free(p);
    blocks.clear();
    for (std::size_t i = 0; i < batch; ++i) {
      // Alternate the factorisation of the size.
      void* p = (i % 3 == 0)   ? tenon_calloc(1, size)
                : (i % 3 == 1) ? tenon_calloc(size, 1)
                               : (size % 8 == 0 ? tenon_calloc(size / 8, 8) : tenon_calloc(1, size));
      ASSERT_NE(p, nullptr) << "tenon_calloc of " << size;
      std::size_t bad = first_nonzero(p, size);
      ASSERT_EQ(bad, size) << "tenon_calloc of " << size << " bytes (block " << i
                           << ") has a non-zero byte at offset " << bad;
      blocks.push_back(p);
    }
    for (void* p : blocks) tenon_free(p);
  }
}

// Interleaved: the block freed last is typically the one reused first.
TEST(Calloc, ZeroedImmediatelyAfterFreeOfSameSize) {
  for (std::size_t size : calloc_sizes()) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0xff, tenon_malloc_usable_size(p));
    tenon_free(p);
    void* q = tenon_calloc(1, size);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(first_nonzero(q, size), size) << "tenon_calloc(1, " << size << ") after free of a dirty block";
    tenon_free(q);
  }
}

// The tail released by an in-place shrink, dirty, comes back through calloc.
TEST(Calloc, ZeroedAfterReallocShrinkReleasesDirtyTail) {
  for (std::size_t size : {std::size_t{1} << 16, std::size_t{1} << 20, std::size_t{6} << 20}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x77, size);
    void* q = tenon_realloc(p, size / 4);
    ASSERT_NE(q, nullptr);
    std::vector<void*> zeros;
    for (int i = 0; i < 4; ++i) {
      void* z = tenon_calloc(1, size / 4);
      ASSERT_NE(z, nullptr);
      ASSERT_EQ(first_nonzero(z, size / 4), size / 4) << "calloc after shrink of " << size;
      zeros.push_back(z);
    }
    for (void* z : zeros) tenon_free(z);
    tenon_free(q);
  }
}

TEST(Calloc, HugeIsZeroed) {
  for (std::size_t size : {std::size_t{32} << 20, std::size_t{96} << 20}) {
    if (kSanitized && size > (std::size_t{32} << 20)) continue;
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x3c, size);
    tenon_free(p);
    void* q = tenon_calloc(size / 16, 16);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(first_nonzero(q, size), size) << "tenon_calloc of " << size << " after a dirty free";
    tenon_free(q);
  }
}

// A freed huge mapping may be reused for a somewhat smaller or larger request
// (shrunk, or grown in place / moved): all of the calloc'd bytes must be zero.
TEST(Calloc, ZeroedWhenReusingADifferentSizedHugeMapping) {
  const std::pair<std::size_t, std::size_t> cases[] = {
      {std::size_t{8} << 20, std::size_t{5} << 20},  {std::size_t{5} << 20, std::size_t{8} << 20},
      {std::size_t{3} << 20, (std::size_t{5} << 20) + 7}, {(std::size_t{12} << 20) + 5, std::size_t{7} << 20},
      // From 32 MiB calloc drops a reused block's pages instead of clearing them.
      {std::size_t{48} << 20, (std::size_t{40} << 20) + 9}, {std::size_t{33} << 20, std::size_t{50} << 20},
      {std::size_t{40} << 20, std::size_t{32} << 20},
  };
  for (auto [dirty, wanted] : cases) {
    void* p = tenon_malloc(dirty);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0xc3, dirty);
    tenon_free(p);
    void* q = tenon_calloc(1, wanted);
    ASSERT_NE(q, nullptr);
    std::size_t bad = first_nonzero(q, wanted);
    ASSERT_EQ(bad, wanted) << "tenon_calloc(1, " << wanted << ") after freeing a dirty block of " << dirty
                           << ": non-zero byte at " << bad;
    tenon_free(q);
  }
}

}  // namespace
