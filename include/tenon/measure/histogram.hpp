// <tenon/measure/histogram.hpp>: log-scale latency histograms.
//
// Buckets: values below 32 exactly, then 16 buckets per power of two, so a
// bucket is at most 1/16 of its values wide. A percentile is reported as the
// upper edge of the bucket it falls in (never below the true value, at most
// 6.25% above it), and never above the exact maximum, which is kept apart.
// 976 buckets cover every 64-bit value.
//
// `histogram` is what a thread records into: one writer at a time (relaxed
// load + store, no read-modify-write), read by anyone at report time.
// `shared_histogram` takes writers from any thread (relaxed fetch_add).
// `summary` is a plain copy to add up and query.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tenon::measure {

inline constexpr unsigned kSubBits = 4;
inline constexpr unsigned kSub = 1u << kSubBits;
inline constexpr unsigned kBuckets = kSub + (64 - kSubBits) * kSub;

constexpr unsigned bucket_of(std::uint64_t v) noexcept {
  if (v < kSub) return static_cast<unsigned>(v);
  unsigned e = 63u - static_cast<unsigned>(__builtin_clzll(v));  // >= kSubBits
  unsigned sub = static_cast<unsigned>(v >> (e - kSubBits)) & (kSub - 1);
  return kSub + (e - kSubBits) * kSub + sub;
}

constexpr std::uint64_t bucket_low(unsigned b) noexcept {
  if (b < kSub) return b;
  unsigned e = (b - kSub) / kSub + kSubBits;
  std::uint64_t sub = (b - kSub) % kSub;
  return (kSub + sub) << (e - kSubBits);
}

constexpr std::uint64_t bucket_high(unsigned b) noexcept {
  if (b < kSub) return b;
  unsigned e = (b - kSub) / kSub + kSubBits;
  return bucket_low(b) + ((std::uint64_t(1) << (e - kSubBits)) - 1);
}

// The percentiles every report prints, in parts per million (max apart).
inline constexpr std::uint32_t kReportPpm[] = {500000, 900000, 990000, 999000, 999900, 999990, 999999};
inline constexpr const char* kReportNames[] = {"p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"};
inline constexpr std::size_t kReportCount = sizeof kReportPpm / sizeof kReportPpm[0];

struct summary {
  std::uint64_t count[kBuckets] = {};
  std::uint64_t n = 0;
  std::uint64_t max = 0;

  void record(std::uint64_t v) noexcept {
    ++count[bucket_of(v)];
    ++n;
    if (v > max) max = v;
  }
  void add(const summary& o) noexcept {
    for (unsigned b = 0; b < kBuckets; ++b) count[b] += o.count[b];
    n += o.n;
    if (o.max > max) max = o.max;
  }
  // The smallest bucket edge at or below which at least ppm/10^6 of the
  // samples lie (the nearest-rank percentile, rounded up to its bucket's
  // upper edge), capped at the exact maximum. 0 when empty.
  std::uint64_t percentile_ppm(std::uint32_t ppm) const noexcept {
    if (n == 0) return 0;
    unsigned __int128 want = (static_cast<unsigned __int128>(n) * ppm + 999999) / 1000000;
    std::uint64_t rank = want == 0 ? 1 : static_cast<std::uint64_t>(want);
    std::uint64_t seen = 0;
    for (unsigned b = 0; b < kBuckets; ++b) {
      seen += count[b];
      if (seen >= rank) return bucket_high(b) < max ? bucket_high(b) : max;
    }
    return max;
  }
};

struct histogram {
  std::atomic<std::uint64_t> count[kBuckets] = {};
  std::atomic<std::uint64_t> max{0};

  // The owning thread only.
  void record(std::uint64_t v) noexcept {
    auto& c = count[bucket_of(v)];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (v > max.load(std::memory_order_relaxed)) max.store(v, std::memory_order_relaxed);
  }
  // Any thread, concurrently.
  void record_shared(std::uint64_t v) noexcept {
    count[bucket_of(v)].fetch_add(1, std::memory_order_relaxed);
    std::uint64_t m = max.load(std::memory_order_relaxed);
    while (v > m && !max.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
    }
  }
  void add_to(summary& s) const noexcept {
    for (unsigned b = 0; b < kBuckets; ++b) {
      std::uint64_t c = count[b].load(std::memory_order_relaxed);
      s.count[b] += c;
      s.n += c;
    }
    std::uint64_t m = max.load(std::memory_order_relaxed);
    if (m > s.max) s.max = m;
  }
  // Only while nobody records (tests, a benchmark between phases).
  void clear() noexcept {
    for (auto& c : count) c.store(0, std::memory_order_relaxed);
    max.store(0, std::memory_order_relaxed);
  }
};

}  // namespace tenon::measure
