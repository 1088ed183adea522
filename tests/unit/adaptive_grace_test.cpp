// The dirty cap's adaptive grace (arena/adaptive_grace.h): a chunk that
// takes back a slice soon after the cap purged it waits longer before the
// next purge; fresh slices, slices the purge pass or malloc_trim gave back,
// and refaults long after the purge leave it alone; it comes back down to
// kDirtyGraceMs and never past either bound; the cap applies a raised grace
// only while the program holds at most 3/4 of its peak. Times are given,
// not measured.
#include "tenon/arena/adaptive_grace.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

namespace {

using tenon::chunk;
using tenon::kDirtyGraceMs;
namespace grace = tenon::adaptive_grace;

constexpr std::uint64_t bit(unsigned i) { return std::uint64_t{1} << i; }

std::unique_ptr<chunk> zeroed_chunk() { return std::make_unique<chunk>(); }  // as a fresh mapping

TEST(AdaptiveGrace, StartsAtTheBaseGrace) {
  auto c = zeroed_chunk();
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs);
}

TEST(AdaptiveGrace, FreshSlicesTakenDoNotRaiseIt) {
  auto c = zeroed_chunk();
  grace::note_taken_clean(*c, bit(3) | bit(4), 123456);
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs);
}

TEST(AdaptiveGrace, SliceTakenSoonAfterTheCapPurgedItRaisesIt) {
  auto c = zeroed_chunk();
  grace::note_cap_purge(*c, 5, 1000);
  grace::note_taken_clean(*c, bit(4) | bit(5) | bit(6), 1008);
  EXPECT_EQ(grace::grace_ms(*c), 2 * kDirtyGraceMs);
}

TEST(AdaptiveGrace, RaisedAtMostToTheLongestGrace) {
  auto c = zeroed_chunk();
  for (std::uint32_t t = 1000; t < 1100; t += 4) {
    grace::note_cap_purge(*c, 7, t);
    grace::note_taken_clean(*c, bit(7), t + 1);
  }
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs << grace::kMaxGraceShift);
}

TEST(AdaptiveGrace, RefaultPastTheWindowDoesNotRaiseIt) {
  auto c = zeroed_chunk();
  grace::note_cap_purge(*c, 9, 1000);
  grace::note_taken_clean(*c, bit(9), 1000 + grace::kRefaultWindowMs);
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs);
}

TEST(AdaptiveGrace, PassAndTrimPurgesDoNotRaiseIt) {
  auto c = zeroed_chunk();
  grace::note_cap_purge(*c, 9, 1000);
  grace::note_pass_purge(*c, 9);  // the same slice, purged again by the pass later
  grace::note_taken_clean(*c, bit(9), 1001);
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs);
}

TEST(AdaptiveGrace, SeesRefaultsAcrossTheClocksWrap) {
  auto c = zeroed_chunk();
  grace::note_cap_purge(*c, 2, 0xFFFFFFFAu);
  grace::note_taken_clean(*c, bit(2), 0x4);
  EXPECT_EQ(grace::grace_ms(*c), 2 * kDirtyGraceMs);
}

TEST(AdaptiveGrace, ComesBackDownAndNeverBelowTheBase) {
  auto c = zeroed_chunk();
  grace::raise(*c);
  grace::raise(*c);
  EXPECT_EQ(grace::grace_ms(*c), 4 * kDirtyGraceMs);
  grace::lower(*c);
  EXPECT_EQ(grace::grace_ms(*c), 2 * kDirtyGraceMs);
  grace::lower(*c);
  grace::lower(*c);
  EXPECT_EQ(grace::grace_ms(*c), kDirtyGraceMs);
}

TEST(AdaptiveGrace, RaisedGraceAppliesOnlyWellBelowThePeak) {
  auto c = zeroed_chunk();
  grace::raise(*c);
  EXPECT_EQ(grace::grace_now_ms(*c, 75, 100), 2 * kDirtyGraceMs);
  EXPECT_EQ(grace::grace_now_ms(*c, 76, 100), kDirtyGraceMs) << "near the peak, a longer grace would raise it";
  EXPECT_EQ(grace::grace_now_ms(*c, 0, 0), kDirtyGraceMs) << "no statistics: no gauge, the base grace";
}

}  // namespace
