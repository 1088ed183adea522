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

// Two slices of one chunk, written whole and given back, the lower one as a
// carved small span's if `low_carved` and the higher one as the other kind;
// then (after a forced purge pass if `purge_first`) the slice a run of one
// is taken from.
struct choice {
  unsigned low, high, taken;
};
choice take_after(bool low_carved, bool dense_first, bool purge_first = false) {
  tenon::span* low = take(false);
  tenon::span* high = take(false);
  EXPECT_NE(low, nullptr);
  EXPECT_NE(high, nullptr);
  if (!low || !high) return {0, 0, 0};
  EXPECT_EQ(tenon::chunk_of(low), tenon::chunk_of(high));
  choice c{low->first_slice, high->first_slice, 0};
  EXPECT_LT(c.low, c.high);
  give_back(low, low_carved);
  give_back(high, !low_carved);
  if (purge_first) g_default_engine.chunks.purge(true, nullptr);  // malloc_trim's pass
  tenon::span* next = take(dense_first);
  EXPECT_NE(next, nullptr);
  if (next) c.taken = next->first_slice;
  return c;
}

// Both free and resident; the lower one was a large block's.
TEST(SliceChoice, ASpanTakesTheSliceASpanLeftCarvedBeforeALowerOne) {
  choice c = take_after(/*low_carved=*/false, /*dense_first=*/true);
  EXPECT_EQ(c.taken, c.high);
}

TEST(SliceChoice, ALargeBlockLeavesTheSliceASpanLeftCarved) {
  choice c = take_after(/*low_carved=*/true, /*dense_first=*/false);
  EXPECT_EQ(c.taken, c.high);
}

// The carved slice taken, written by its new span and given back carved
// again: found first again. The dense pass runs only while the arena counts
// a chunk with a dense bit, a count that went to 0 at the take and must
// come back at the second release (arena::dense_chunks_).
TEST(SliceChoice, ASliceCarvedAgainAfterItsTakeIsTakenFirstAgain) {
  choice c = take_after(/*low_carved=*/false, /*dense_first=*/true);
  ASSERT_EQ(c.taken, c.high);
  give_back(&g_hint->spans[c.taken], /*carved=*/true);
  tenon::span* next = take(/*dense_first=*/true);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->first_slice, c.high);
}

// Purged, neither is resident: the span takes the lowest free slice, as
// before any was carved.
TEST(SliceChoice, APurgedSliceIsNoLongerCarved) {
  choice c = take_after(/*low_carved=*/false, /*dense_first=*/true, /*purge_first=*/true);
  EXPECT_EQ(c.taken, c.low);
}

}  // namespace
