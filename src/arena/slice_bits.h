// Bit arithmetic on a chunk's 64-slice occupancy words.
#pragma once
#include <bit>
#include <cstdint>

namespace tenon::slice_bits {

constexpr std::uint64_t run_mask(unsigned first, unsigned n) {
  return (n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << first;
}

// Start positions of the runs of n set bits in `bits`.
inline std::uint64_t run_starts(std::uint64_t bits, unsigned n) {
  std::uint64_t starts = bits;
  for (unsigned i = 1; i < n && starts; ++i) starts &= bits >> i;
  return starts;
}

// Where to take a run of n free slices, or -1. Runs whose slices are all
// dirty ("warm") come first: their pages are resident already, so reusing
// them keeps the set of touched pages (the RSS) from growing. With
// warm_only, only such a run will do.
inline int find_run(std::uint64_t used, std::uint64_t dirty, unsigned n, bool warm_only) {
  std::uint64_t starts = run_starts(~used, n);
  std::uint64_t warm = starts & run_starts(dirty & ~used, n);
  if (warm) return std::countr_zero(warm);
  if (warm_only || !starts) return -1;
  return std::countr_zero(starts);
}

}  // namespace tenon::slice_bits
