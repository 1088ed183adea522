// tenon_owns, and the sized frees (free_sized / free_aligned_sized) fed the
// exact sizes the C23 contract allows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <sys/mman.h>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

using namespace tenon_test;

namespace {

int g_static_object = 1;

TEST(Ownership, OwnsEverythingItHandsOut) {
  std::vector<void*> blocks;
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{1000},
                           std::size_t{65536}, std::size_t{300000}, std::size_t{5} << 20}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    EXPECT_NE(tenon_owns(p), 0) << "tenon_owns(tenon_malloc(" << size << "))";
    blocks.push_back(p);
    p = tenon_calloc(1, size);
    ASSERT_NE(p, nullptr);
    EXPECT_NE(tenon_owns(p), 0) << "tenon_owns(tenon_calloc(1, " << size << "))";
    blocks.push_back(p);
  }
  for (std::size_t a : {std::size_t{64}, std::size_t{4096}, std::size_t{1} << 20, std::size_t{4} << 20}) {
    void* p = tenon_aligned_alloc(a, a);
    ASSERT_NE(p, nullptr);
    EXPECT_NE(tenon_owns(p), 0) << "tenon_owns(tenon_aligned_alloc(" << a << ", " << a << "))";
    blocks.push_back(p);
  }
  void* v = tenon_valloc(100);
  ASSERT_NE(v, nullptr);
  EXPECT_NE(tenon_owns(v), 0);
  blocks.push_back(v);
  void* r = tenon_realloc(tenon_malloc(10), 3u << 20);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(tenon_owns(r), 0) << "tenon_owns of a block grown by realloc";
  blocks.push_back(r);
  for (void* p : blocks) tenon_free(p);
}

TEST(Ownership, ForeignPointersAreNotOwned) {
  int on_stack = 0;
  EXPECT_EQ(tenon_owns(nullptr), 0);
  EXPECT_EQ(tenon_owns(&on_stack), 0) << "stack address";
  EXPECT_EQ(tenon_owns(&g_static_object), 0) << "static object";
  EXPECT_EQ(tenon_owns("a string literal"), 0) << "read-only data";
  EXPECT_EQ(tenon_owns(reinterpret_cast<void*>(&tenon_owns)), 0) << "code address";
  // In this test binary malloc is the C library's, not tenon's.
  for (std::size_t size : {std::size_t{16}, std::size_t{100000}, std::size_t{4} << 20}) {
    void* foreign = std::malloc(size);
    ASSERT_NE(foreign, nullptr);
    EXPECT_EQ(tenon_owns(foreign), 0) << "std::malloc(" << size << ") pointer";
    std::free(foreign);
  }
  const std::size_t map_size = std::size_t{4} << 20;
  void* m = mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_EQ(tenon_owns(m), 0) << "fresh mmap region";
  EXPECT_EQ(tenon_owns(static_cast<char*>(m) + map_size / 2), 0) << "inside a fresh mmap region";
  munmap(m, map_size);
}

TEST(SizedFree, FreeSizedWithRequestedSize) {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t size = 0; size <= 70000; size += (size < 1024 ? 1 : 997)) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, size, size);
    blocks.push_back({p, size});
  }
  for (std::size_t size : {std::size_t{1} << 20, (std::size_t{3} << 20) + 5}) {
    void* p = tenon_malloc(size);
    ASSERT_NE(p, nullptr);
    blocks.push_back({p, size});
  }
  for (auto [p, size] : blocks) tenon_free_sized(p, size);
  // calloc'd blocks are freed with count * size.
  void* c = tenon_calloc(10, 30);
  ASSERT_NE(c, nullptr);
  tenon_free_sized(c, 300);
  // Reuse after sized frees still gives intact, separate blocks.
  std::vector<void*> again;
  for (int i = 0; i < 1000; ++i) {
    void* p = tenon_malloc(64);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, 64, i);
    again.push_back(p);
  }
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(first_pattern_mismatch(again[i], 64, i), 64u);
    tenon_free_sized(again[i], 64);
  }
}

TEST(SizedFree, FreeAlignedSizedWithRequestedAlignmentAndSize) {
  for (std::size_t a = 8; a <= (std::size_t{4} << 20); a *= 2) {
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (std::size_t size : {a, 2 * a, a + a / 2}) {
      void* p = tenon_aligned_alloc(a, size);
      ASSERT_NE(p, nullptr) << "tenon_aligned_alloc(" << a << ", " << size << ")";
      fill_pattern(p, size, a);
      blocks.push_back({p, size});
    }
    for (auto [p, size] : blocks) {
      ASSERT_EQ(first_pattern_mismatch(p, size, a), size);
      tenon_free_aligned_sized(p, a, size);
    }
  }
}

}  // namespace
