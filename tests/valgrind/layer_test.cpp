// tenon::valgrind_annotations outside valgrind: the client requests do
// nothing, and the layer must still be a correct allocator (libtenon-
// valgrind.so runs programs whether or not valgrind is there).
#include <gtest/gtest.h>

#include <errno.h>
#include <stdint.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "tenon/layer.hpp"
#include "tenon/valgrind.hpp"

namespace {

using annotated = tenon::valgrind_annotations<tenon::default_allocator>;
using api = tenon::standard_api<annotated>;

TEST(ValgrindLayer, UsableSizeIsTheSizeAsked) {
  for (std::size_t n : {0, 1, 15, 16, 17, 100, 4096, 40000, 3 << 20}) {
    void* p = api::malloc(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(api::malloc_usable_size(p), n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << n;
    std::memset(p, 0x5A, n);
    api::free(p);
  }
}

TEST(ValgrindLayer, AlignedBlocksAreAligned) {
  for (std::size_t align : {std::size_t{32}, std::size_t{256}, std::size_t{4096}, std::size_t{1} << 21}) {
    void* p = api::aligned_alloc(align, 3 * align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << align;
    EXPECT_EQ(api::malloc_usable_size(p), 3 * align);
    std::memset(p, 1, 3 * align);
    api::free(p);
  }
}

TEST(ValgrindLayer, CallocIsZeroAfterDirtyReuse) {
  std::vector<void*> dirty;
  for (int i = 0; i < 64; ++i) {
    dirty.push_back(api::malloc(200));
    std::memset(dirty.back(), 0xFF, 200);
  }
  for (void* p : dirty) api::free(p);
  for (int i = 0; i < 64; ++i) {
    auto* p = static_cast<unsigned char*>(api::calloc(1, 200));
    ASSERT_NE(p, nullptr);
    for (int k = 0; k < 200; ++k) ASSERT_EQ(p[k], 0) << k;
    api::free(p);
  }
}

TEST(ValgrindLayer, ReallocKeepsContentsInPlaceAndMoved) {
  auto* p = static_cast<unsigned char*>(api::malloc(100));
  for (int k = 0; k < 100; ++k) p[k] = static_cast<unsigned char>(k);
  p = static_cast<unsigned char*>(api::realloc(p, 90));  // fits: in place
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(api::malloc_usable_size(p), 90u);
  p = static_cast<unsigned char*>(api::realloc(p, 100000));  // moved
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(api::malloc_usable_size(p), 100000u);
  for (int k = 0; k < 90; ++k) ASSERT_EQ(p[k], k);
  p = static_cast<unsigned char*>(api::realloc(p, 10));  // mostly empty: moved to a small block
  ASSERT_NE(p, nullptr);
  for (int k = 0; k < 10; ++k) ASSERT_EQ(p[k], k);
  api::free(p);
}

// malloc, calloc and operator new pass their size on unchecked (layer.hpp),
// and the layer adds its head and tail to it: a size within 32 bytes of
// SIZE_MAX wrapped to a tiny inner block, which came back as a block of
// "SIZE_MAX bytes" (until 2026-11-27). Each must be refused as the default
// build refuses it: NULL with ENOMEM, bad_alloc, nullptr.
TEST(ValgrindLayer, ImpossibleSizesAreRefusedNotWrapped) {
  for (std::size_t n : {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 16, SIZE_MAX - 31, std::size_t{PTRDIFF_MAX} + 1}) {
    errno = 0;
    void* p = api::malloc(n);
    EXPECT_EQ(p, nullptr) << "malloc " << n << " usable " << api::malloc_usable_size(p);
    EXPECT_EQ(errno, ENOMEM) << n;
    api::free(p);
    errno = 0;
    p = api::calloc(1, n);
    EXPECT_EQ(p, nullptr) << "calloc " << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    api::free(p);
    p = api::op_new_nothrow(n, tenon::detail::nothrow_form::scalar);
    EXPECT_EQ(p, nullptr) << "new(nothrow) " << n;
    api::free(p);
    p = nullptr;
    EXPECT_THROW(p = api::op_new(n), std::bad_alloc) << n;
    api::free(p);
  }
  // The allocator is still usable afterwards.
  void* q = api::malloc(32);
  ASSERT_NE(q, nullptr);
  api::free(q);
}

}  // namespace
