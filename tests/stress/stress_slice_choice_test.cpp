// Which free slices a run is taken from (arena::find_run): a small span
// takes first the slices another span left carved (their pages are
// resident), and a large block leaves those to spans when the chunk has
// other resident ones. White-box on the default engine's arena, which
// nothing else in this process uses (the test's own allocations are
// glibc's): each case its own process.
#include <gtest/gtest.h>

#include <cstring>

#include "tenon/engine/engine.h"

namespace {

using tenon::g_default_engine;

tenon::chunk* g_hint = nullptr;

tenon::span* take(bool dense_first) { return g_default_engine.chunks.take_span(1, &g_hint, nullptr, dense_first); }

// One slice, written whole, given back as a small span whose blocks were
// all carved (`carved`) or as a large block.
void give_back(tenon::span* s, bool carved) {
  std::memset(s->start, 1, tenon::kSliceSize);
  s->kind = carved ? tenon::span_kind::small : tenon::span_kind::large;
  s->block_size = 1024;
  s->carved = carved ? static_cast<std::uint32_t>(tenon::kSliceSize / 1024) : 0;
  g_default_engine.chunks.release_span(s, nullptr);
}

TEST(SliceChoice, ASpanTakesTheSliceASpanLeftCarvedBeforeALowerOne) {
  tenon::span* large = take(false);
  tenon::span* small = take(false);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(small, nullptr);
  ASSERT_EQ(tenon::chunk_of(large), tenon::chunk_of(small));
  ASSERT_LT(large->first_slice, small->first_slice);
  unsigned carved_at = small->first_slice;
  give_back(large, false);
  give_back(small, true);
  // Both free and resident; the lower one was a large block's.
  tenon::span* next = take(true);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(unsigned{next->first_slice}, carved_at);
}

TEST(SliceChoice, ALargeBlockLeavesTheSliceASpanLeftCarved) {
  tenon::span* small = take(false);
  tenon::span* large = take(false);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(large, nullptr);
  ASSERT_EQ(tenon::chunk_of(large), tenon::chunk_of(small));
  ASSERT_LT(small->first_slice, large->first_slice);
  unsigned sparse_at = large->first_slice;
  give_back(small, true);
  give_back(large, false);
  tenon::span* next = take(false);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(unsigned{next->first_slice}, sparse_at);
}

TEST(SliceChoice, APurgedSliceIsNoLongerCarved) {
  tenon::span* low = take(false);
  tenon::span* high = take(false);
  ASSERT_NE(low, nullptr);
  ASSERT_NE(high, nullptr);
  unsigned low_at = low->first_slice;
  give_back(low, false);
  give_back(high, true);
  // malloc_trim's pass purges both: neither is resident, and the span takes
  // the lowest free slice, as before any was carved.
  g_default_engine.chunks.purge(true, nullptr);
  tenon::span* next = take(true);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(unsigned{next->first_slice}, low_at);
}

}  // namespace
