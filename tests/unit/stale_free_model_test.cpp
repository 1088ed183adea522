// Exhaustive check of a stale pointer's remote free against its span's
// release and formation again (docs/architecture.md, layer 5, "A stale
// pointer's remote free and the span formed again";
// tests/progress/stale_free_test.cpp drives one schedule of it on the real
// allocator). p was block 200 of a span of 256-byte blocks, carved, and
// freed once (its second word holds the free key). The freeing thread of a
// second free reads the block's second word, the span's block_mult and its
// carved bound, one load each, in the code's order; the span's life goes
// on beside it: released (the bound to 0: span::forget_carved), purged (the
// key gone), formed again of 80-byte blocks (block_mult, set_carved(0)) and
// carved a page (51 blocks: p, 80-byte block 640, is not carved). The
// model is sequentially consistent, as x86-64's loads and stores are among
// themselves (and the acquire load of the second word makes them on
// aarch64); the purge's zeroing is a store after the release's. The
// freer's test is the real one (block_index.h), mixed reads of two spans'
// words included. In every interleaving the free must be reported (the
// key, or the test); before branch `stale` (the bound read first, no
// forget) one interleaving lets p through, which the model finds.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "interleavings.h"
#include "tenon/common/block_index.h"

namespace {

using tenon::block_index::limit;
using tenon::block_index::multiplier;
using tenon::block_index::starts_block;

constexpr std::uint64_t kOffset = 51200;  // p's offset in the span (the same descriptor, start fixed)
const std::uint64_t kMultOld = multiplier(256), kMultNew = multiplier(80);
const std::uint64_t kLimitOld = limit(kMultOld, 256, 256), kLimitNew = limit(kMultNew, 80, 51);

template <bool kFixed>
struct stale_free_model {
  static constexpr int kThreads = 2;  // 0: the stale free, 1: the span's life
  // Shared words.
  bool key = true;  // p's second word holds the free key
  std::uint64_t mult = 0, bound = 0;
  // The freer's reads.
  bool seen_key = false;
  std::uint64_t seen_mult = 0, seen_bound = 0;
  int pc[kThreads] = {};
  bool finished[kThreads] = {};

  stale_free_model() {
    mult = kMultOld;
    bound = kLimitOld;
  }
  bool done(int t) const { return finished[t]; }

  void step(int t) {
    if (t == 0) {
      // Fixed: second word, then the test's two loads (imul's block_mult,
      // cmp's bound). Before: the test's loads, then the second word.
      int read = kFixed ? pc[0] : (pc[0] + 1) % 3;  // 0: key, 1: mult, 2: bound
      if (read == 0) seen_key = key;
      else if (read == 1) seen_mult = mult;
      else seen_bound = bound;
      if (++pc[0] == 3) finished[0] = true;
      return;
    }
    switch (pc[1]++) {
      case 0: if (kFixed) bound = 0; break;  // release_empty: forget_carved
      case 1: key = false; break;            // the purge zeroes the slice
      case 2: mult = kMultNew; break;        // form_small_span
      case 3: bound = 0; break;              // set_carved(0)
      case 4: bound = kLimitNew; finished[1] = true; break;  // the first carve
    }
  }

  const char* violation() const {
    if (!finished[0]) return nullptr;
    bool reported = seen_key || !starts_block(kOffset, seen_mult, seen_bound);
    return reported ? nullptr : "a stale pointer passed the key and the block-start test";
  }
};

TEST(StaleFreeModel, EveryInterleavingReportsTheStaleFree) {
  ASSERT_TRUE(starts_block(kOffset, kMultOld, kLimitOld)) << "p is a carved block of the old span";
  ASSERT_FALSE(starts_block(kOffset, kMultNew, kLimitNew)) << "p is not carved in the new span";
  auto r = tenon::model::explore(stale_free_model<true>{});
  EXPECT_EQ(r.violation, nullptr) << r.violation;
  EXPECT_GT(r.states, 20u);
  std::printf("%zu states\n", r.states);
}

// The order before branch `stale`: the model finds the schedule the
// progress test drives (the old bound and multiplier read, then the key
// after the purge).
TEST(StaleFreeModel, TheBoundReadFirstLetsTheStalePointerThrough) {
  auto r = tenon::model::explore(stale_free_model<false>{});
  EXPECT_NE(r.violation, nullptr);
}

}  // namespace
