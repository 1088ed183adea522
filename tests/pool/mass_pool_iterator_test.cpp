// mass_pool iterators: the standard concepts, std::sort, std::ranges, and the
// rank/index mapping across holes (partly filled lane blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>
#include <ranges>
#include <thread>
#include <vector>

#include "pool_test_scale.hpp"
#include "tenon/mass_pool.hpp"

namespace {

using Pool = tenon::mass_pool<std::uint64_t>;
static_assert(std::random_access_iterator<Pool::iterator>);
static_assert(std::random_access_iterator<Pool::const_iterator>);
static_assert(std::sortable<Pool::iterator>);
static_assert(std::ranges::random_access_range<Pool>);
static_assert(std::ranges::random_access_range<const Pool>);
static_assert(std::convertible_to<Pool::iterator, Pool::const_iterator>);
static_assert(std::is_same_v<std::iter_reference_t<Pool::const_iterator>, const std::uint64_t&>);

TEST(MassPoolIterator, SortThroughIterators) {
  Pool pool(7);
  std::mt19937_64 rng(42);
  const std::size_t n = pool_test::scaled(300000, 5000);
  for (std::size_t i = 0; i < n; ++i) pool.emplace(rng());
  std::sort(pool.begin(), pool.end());
  EXPECT_TRUE(std::is_sorted(pool.begin(), pool.end()));
  EXPECT_EQ(std::size_t(pool.end() - pool.begin()), n);
  // Sorting moved values, not slots: index i still maps to rank i (no holes).
  for (std::uint32_t i = 1; i < n; ++i) ASSERT_LE(pool[i - 1], pool[i]);
}

TEST(MassPoolIterator, RangesAlgorithmsAndForEach) {
  Pool pool(5);
  for (std::uint64_t v = 0; v < 1000; ++v) pool.emplace(999 - v);
  std::ranges::sort(pool);
  EXPECT_TRUE(std::ranges::is_sorted(pool));
  std::uint64_t sum = 0;
  std::for_each(pool.begin(), pool.end(), [&](std::uint64_t v) { sum += v; });
  EXPECT_EQ(sum, 999u * 1000u / 2);
  const Pool& cp = pool;
  EXPECT_EQ(*std::ranges::max_element(cp), 999u);
  auto evens = cp | std::views::filter([](std::uint64_t v) { return v % 2 == 0; });
  EXPECT_EQ(std::ranges::distance(evens), 500);
  auto it = pool.begin();
  EXPECT_EQ(it[10], 10u);
  EXPECT_EQ(*(it + 10), 10u);
  EXPECT_EQ(*(10 + it), 10u);
  EXPECT_EQ((it + 10) - it, 10);
  EXPECT_TRUE(it < it + 1);
  EXPECT_EQ(*(pool.end() - 1), 999u);
}

TEST(MassPoolIterator, SkipsHolesAndMapsRanksToIndices) {
  // Two threads on different lanes each take a 16-element block and fill 3
  // and 5 slots: indices 0-2 and 16-20 (in some order), ranks 0-7.
  Pool pool(4);
  std::thread a([&] { for (int i = 0; i < 3; ++i) pool.emplace(std::uint64_t{100}); });
  a.join();
  std::thread b([&] { for (int i = 0; i < 5; ++i) pool.emplace(std::uint64_t{200}); });
  b.join();
  ASSERT_EQ(pool.size(), 8u);
  ASSERT_EQ(pool.end() - pool.begin(), 8);
  EXPECT_EQ(pool.index_bound(), 32u);
  std::vector<std::uint32_t> seen;
  for (auto it = pool.begin(); it != pool.end(); ++it) seen.push_back(it.index());
  EXPECT_EQ(seen, (std::vector<std::uint32_t>{0, 1, 2, 16, 17, 18, 19, 20}));
  EXPECT_EQ(std::count(pool.begin(), pool.end(), 100u), 3);
  EXPECT_EQ(pool.begin()[3], 200u);
  // Sort across the hole, descending: the 200s move into indices 0-2.
  std::sort(pool.begin(), pool.end(), std::greater<>());
  EXPECT_EQ(pool[0], 200u);
  EXPECT_EQ(pool[2], 200u);
  EXPECT_EQ(pool[16], 200u);
  EXPECT_EQ(pool[17], 200u);
  EXPECT_EQ(pool[18], 100u);
  EXPECT_EQ(pool[20], 100u);
  // The main thread fills its own lane's block from the start.
  auto [i, ref] = pool.emplace(std::uint64_t{300});
  EXPECT_EQ(i % 16, 0u);
  EXPECT_EQ(ref, 300u);
  EXPECT_EQ(pool.size(), 9u);
}

// The iterator keeps the element's address and its piece (the filled part
// of one block): every way of moving, across pieces and holes, must land
// where the rank says. 8-element blocks, partly filled by several threads.
TEST(MassPoolIterator, MovesAcrossPiecesAndHolesLikeRanks) {
  Pool pool(3);
  for (unsigned t = 0; t < 4; ++t)
    std::thread([&, t] {
      for (unsigned i = 0; i < 13 + 7 * t; ++i) pool.emplace(std::uint64_t{t} << 32 | i);
    }).join();
  auto e = pool.end();  // before begin(): made without the view
  auto b = pool.begin();
  std::vector<std::uint32_t> ref;
  for (auto it = b; it != e; ++it) ref.push_back(it.index());
  const std::ptrdiff_t n = std::ptrdiff_t(ref.size());
  ASSERT_EQ(n, e - b);
  ASSERT_EQ(std::size_t(n), pool.size());
  EXPECT_LT(pool.size(), pool.index_bound()) << "the case needs holes";
  for (std::ptrdiff_t r = 0; r < n; ++r) {
    ASSERT_EQ((b + r).index(), ref[r]);
    ASSERT_EQ(&b[r], &pool[ref[r]]);
    ASSERT_EQ((e - (n - r)).index(), ref[r]);
    Pool::const_iterator c = b + r;
    ASSERT_EQ(&*c, &pool[ref[r]]);
  }
  // Backwards from end() with --, and jumps in both directions from anywhere.
  auto it = e;
  for (std::ptrdiff_t r = n - 1; r >= 0; --r) ASSERT_EQ(&*--it, &pool[ref[r]]);
  ASSERT_EQ(it, b);
  std::mt19937 rng(7);
  it = b;
  std::ptrdiff_t at = 0;
  for (int step = 0; step < 2000; ++step) {
    const std::ptrdiff_t to = std::ptrdiff_t(rng() % std::uint32_t(n));
    if (step % 3 == 0) {
      it += to - at;
    } else if (step % 3 == 1) {
      it -= at - to;
    } else {
      while (at < to) ++it, ++at;
      while (at > to) it--, --at;
    }
    at = to;
    ASSERT_EQ(it - b, at);
    ASSERT_EQ(it.index(), ref[at]);
  }
  std::vector<std::uint64_t> backwards(std::make_reverse_iterator(e), std::make_reverse_iterator(b));
  ASSERT_EQ(backwards.size(), ref.size());
  for (std::size_t r = 0; r < ref.size(); ++r) ASSERT_EQ(backwards[r], pool[ref[ref.size() - 1 - r]]);
  // A sort across all the pieces and holes.
  std::sort(b, e, std::greater<>());
  EXPECT_TRUE(std::is_sorted(pool.begin(), pool.end(), std::greater<>()));
}

TEST(MassPoolIterator, EmptyPool) {
  Pool pool;
  EXPECT_EQ(pool.begin(), pool.end());
  EXPECT_TRUE(pool.empty());
  std::sort(pool.begin(), pool.end());
}

}  // namespace
