// The unit map entry of a huge block carries its usable size (since
// 2026-11-29, branch usize), which malloc_usable_size answers from without
// reading the block: its fields in 4 KiB pages must round-trip, a block too
// big for the field must say so, and every change of a block's size must
// reach its entry (the answer follows realloc and free).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <unistd.h>

#include "tenon/lookup/unit_map.h"
#include "tenon/tenon.h"

namespace {

using tenon::kChunkSize;
using tenon::lookup::unit_entry;
using tenon::lookup::unit_kind;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(HugeEntry, FieldsRoundTripInPages) {
  for (std::size_t user : {std::size_t{0}, kPage, 2 * kPage, 2 * kMiB, kChunkSize - kPage})
    for (std::size_t end : {kPage, 3 * kMiB, kChunkSize})
      for (std::size_t usable : {kPage, 5 * kMiB, 128 * kGiB - kPage})
        for (bool below : {false, true}) {
          unit_entry e = unit_entry::huge(user, end, below, usable);
          EXPECT_EQ(e.kind(), unit_kind::huge);
          EXPECT_EQ(e.user_offset(), user);
          EXPECT_EQ(e.end_offset(), end);
          EXPECT_EQ(e.header_below(), below);
          EXPECT_FALSE(e.held());
          EXPECT_EQ(e.generation(), 0u);
          // The held bit and the generation leave the other fields alone.
          unit_entry held = e.with_held().after(unit_entry(std::uint64_t{16383} << unit_entry::kGenerationShift));
          EXPECT_TRUE(held.held());
          EXPECT_EQ(held.generation(), 0u);  // 16383 + 1 wraps
          EXPECT_EQ(held.user_offset(), user);
          EXPECT_EQ(held.end_offset(), end);
          EXPECT_EQ(held.usable_size(), usable == 128 * kGiB - kPage ? unit_entry::kUsableInHeader : usable);
        }
}

TEST(HugeEntry, SizeTooBigForTheFieldIsInTheHeader) {
  EXPECT_EQ(unit_entry::huge(kPage, kChunkSize, false, 128 * kGiB - 2 * kPage).usable_size(), 128 * kGiB - 2 * kPage);
  for (std::size_t usable : {128 * kGiB - kPage, 128 * kGiB, std::size_t{1} << 47})
    EXPECT_EQ(unit_entry::huge(kPage, kChunkSize, false, usable).usable_size(), unit_entry::kUsableInHeader);
  EXPECT_EQ(unit_entry::huge(kPage, kChunkSize, false, 0).usable_size(), 0u);
}

std::size_t pages_of(std::size_t n) { return (n + kPage - 1) / kPage * kPage; }

// Grown in place or moved, shrunk, freed: the usable size the entry gives
// follows (the page size here is 4 KiB; other page sizes round further).
TEST(HugeEntry, UsableSizeFollowsReallocAndFree) {
  if (getpagesize() != static_cast<int>(kPage)) GTEST_SKIP() << "pages of " << getpagesize() << " bytes";
  auto* p = static_cast<char*>(tenon_malloc(5 * kMiB + 100));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tenon_malloc_usable_size(p), pages_of(5 * kMiB + 100));
  p = static_cast<char*>(tenon_realloc(p, 9 * kMiB + 1));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tenon_malloc_usable_size(p), pages_of(9 * kMiB + 1));
  p = static_cast<char*>(tenon_realloc(p, 3 * kMiB));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tenon_malloc_usable_size(p), 3 * kMiB);
  tenon_free(p);
  // Cached (held by the huge cache) or unmapped: 0 either way.
  EXPECT_EQ(tenon_malloc_usable_size(p), 0u);
}

// A block past the entry's 128 GiB has its size read from its header
// (through the kernel). Its pages are reserved, not touched. Its usable
// size is whole pages of the system's size (64 KiB in the aarch64 stage's
// second run, where 4 KiB pages failed the compare).
TEST(HugeEntry, BlockPastTheFieldAnswersFromItsHeader) {
  const std::size_t n = 129 * kGiB + 100;
  void* p = tenon_malloc(n);
  if (!p) GTEST_SKIP() << "no 129 GiB of address space here";
  const auto page = static_cast<std::size_t>(getpagesize());
  EXPECT_EQ(tenon_malloc_usable_size(p), (n + page - 1) / page * page);
  tenon_free(p);
}

}  // namespace
