// The latency histograms against known values: every bucket's edges, and the
// percentiles of synthetic samples whose true percentiles are known.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tenon/measure/histogram.hpp"

namespace m = tenon::measure;

TEST(Histogram, SmallValuesAreExact) {
  for (std::uint64_t v = 0; v < 2 * m::kSub; ++v) {
    unsigned b = m::bucket_of(v);
    EXPECT_EQ(m::bucket_low(b), v) << v;
    EXPECT_EQ(m::bucket_high(b), v) << v;
  }
}

TEST(Histogram, EveryValueLiesInItsBucketAndBucketsAreNarrow) {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> values;
  for (unsigned e = 0; e < 64; ++e) {
    std::uint64_t base = std::uint64_t(1) << e;
    values.push_back(base);
    values.push_back(base - 1);
    values.push_back(base + 1);
    values.push_back(base | (rng() & (base - 1)));
  }
  values.push_back(~std::uint64_t(0));
  for (std::uint64_t v : values) {
    unsigned b = m::bucket_of(v);
    ASSERT_LT(b, m::kBuckets) << v;
    EXPECT_LE(m::bucket_low(b), v) << v;
    EXPECT_GE(m::bucket_high(b), v) << v;
    // At most 1/16 of the bucket's low edge wide: the reported upper edge
    // is within 6.25% of any value in it.
    EXPECT_LE(m::bucket_high(b) - m::bucket_low(b), m::bucket_low(b) / m::kSub) << v;
  }
  EXPECT_EQ(m::bucket_of(~std::uint64_t(0)), m::kBuckets - 1);
  for (unsigned b = 1; b < m::kBuckets; ++b) EXPECT_EQ(m::bucket_low(b), m::bucket_high(b - 1) + 1) << b;
}

// A percentile is the upper edge of the bucket the true value falls in.
std::uint64_t edge(std::uint64_t v) { return m::bucket_high(m::bucket_of(v)); }

TEST(Histogram, PercentilesOfKnownDelays) {
  // One million samples: 50% at 100 cycles, 40% at 150, 9% at 1,000,
  // 0.9% at 10,000, 0.09% at 100,000, 0.009% at 1,000,000, 0.0009% at
  // 10^7 and one at 123,456,789. Each reported percentile has a known value.
  struct { std::uint64_t value, count; } mix[] = {{100, 500000}, {150, 400000}, {1000, 90000}, {10000, 9000},
                                                {100000, 900},  {1000000, 90},  {10000000, 9},  {123456789, 1}};
  m::histogram h;
  m::summary direct;
  for (auto& c : mix)
    for (std::uint64_t i = 0; i < c.count; ++i) {
      h.record(c.value);
      direct.record(c.value);
    }
  m::summary s;
  h.add_to(s);
  ASSERT_EQ(s.n, 1000000u);
  EXPECT_EQ(s.max, 123456789u);
  EXPECT_EQ(s.percentile_ppm(500000), edge(100));       // rank 500,000 is the last 100
  EXPECT_EQ(s.percentile_ppm(500001), edge(150));
  EXPECT_EQ(s.percentile_ppm(900000), edge(150));       // p90
  EXPECT_EQ(s.percentile_ppm(990000), edge(1000));      // p99
  EXPECT_EQ(s.percentile_ppm(999000), edge(10000));     // p99.9
  EXPECT_EQ(s.percentile_ppm(999900), edge(100000));    // p99.99
  EXPECT_EQ(s.percentile_ppm(999990), edge(1000000));   // p99.999
  EXPECT_EQ(s.percentile_ppm(999999), edge(10000000));  // p99.9999
  EXPECT_EQ(s.percentile_ppm(1000000), 123456789u);     // the top one: the exact max
  for (std::uint32_t ppm : m::kReportPpm) EXPECT_EQ(s.percentile_ppm(ppm), direct.percentile_ppm(ppm)) << ppm;
  // And each within 6.25% above the true value.
  std::uint64_t truth[] = {100, 150, 1000, 10000, 100000, 1000000, 10000000};
  for (std::size_t k = 0; k < m::kReportCount; ++k) {
    std::uint64_t got = s.percentile_ppm(m::kReportPpm[k]);
    EXPECT_GE(got, truth[k]) << m::kReportNames[k];
    EXPECT_LE(got, truth[k] + truth[k] / 16) << m::kReportNames[k];
  }
}

TEST(Histogram, UniformDelaysGiveTheirQuantiles) {
  m::summary s;
  for (std::uint64_t v = 1; v <= 1000000; ++v) s.record(v);
  for (std::size_t k = 0; k < m::kReportCount; ++k) {
    std::uint64_t truth = m::kReportPpm[k];  // the ppm-th of 1..10^6 is ppm itself
    std::uint64_t got = s.percentile_ppm(m::kReportPpm[k]);
    EXPECT_GE(got, truth) << m::kReportNames[k];
    EXPECT_LE(got, truth + truth / 16) << m::kReportNames[k];
  }
  EXPECT_EQ(s.max, 1000000u);
}

TEST(Histogram, FewSamplesAndEmpty) {
  m::summary empty;
  EXPECT_EQ(empty.percentile_ppm(500000), 0u);
  m::summary s;
  for (std::uint64_t v : {7, 3, 9, 1, 5}) s.record(v);
  EXPECT_EQ(s.percentile_ppm(500000), 5u);  // nearest rank: the 3rd of 5
  EXPECT_EQ(s.percentile_ppm(900000), 9u);
  EXPECT_EQ(s.percentile_ppm(999999), 9u);
  EXPECT_EQ(s.percentile_ppm(1), 1u);
  // Never above the exact max, even when the bucket's edge is.
  m::summary one;
  one.record(1000);
  EXPECT_EQ(one.percentile_ppm(500000), 1000u);
}

TEST(Histogram, SharedRecordingAddsUp) {
  m::histogram h;
  for (int i = 0; i < 1000; ++i) h.record_shared(std::uint64_t(i));
  m::summary s;
  h.add_to(s);
  EXPECT_EQ(s.n, 1000u);
  EXPECT_EQ(s.max, 999u);
  m::summary twice = s;
  twice.add(s);
  EXPECT_EQ(twice.n, 2000u);
  EXPECT_EQ(twice.percentile_ppm(500000), s.percentile_ppm(500000));
  h.clear();
  m::summary none;
  h.add_to(none);
  EXPECT_EQ(none.n, 0u);
}
