// Bit arithmetic on a chunk's 64-slice occupancy words.
#pragma once
#include <bit>
#include <cstdint>

namespace tenon::slice_bits {

constexpr std::uint64_t run_mask(unsigned first, unsigned n) {
  return (n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << first;
}

// The set bits of a chunk word, in line: std::popcount is a call into
// libgcc (__popcountdi2) in the baseline x86-64 build, which has no popcnt
// instruction, on every release and take (architecture.md, layer 6).
constexpr unsigned count(std::uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<unsigned>((x * 0x0101010101010101ull) >> 56);
}
static_assert(count(0) == 0 && count(~std::uint64_t{0}) == 64 && count(0x8000000000000001ull) == 2);

// Start positions of the runs of n set bits in `bits`.
inline std::uint64_t run_starts(std::uint64_t bits, unsigned n) {
  std::uint64_t starts = bits;
  for (unsigned i = 1; i < n && starts; ++i) starts &= bits >> i;
  return starts;
}

// Where to take a run of n free slices, or -1. Runs whose slices are all
// dirty ("warm") come first: their pages are resident already, so reusing
// them keeps the set of touched pages (the RSS) from growing. With
// warm_only, only such a run will do. Of the warm runs, one with no slice
// of `spare` comes first (the slices a span left carved, kept for spans).
inline int find_run(std::uint64_t used, std::uint64_t dirty, unsigned n, bool warm_only, std::uint64_t spare = 0) {
  std::uint64_t starts = run_starts(~used, n);
  std::uint64_t warm = starts & run_starts(dirty & ~used, n);
  if (std::uint64_t apart = spare ? warm & run_starts(dirty & ~used & ~spare, n) : 0) return std::countr_zero(apart);
  if (warm) return std::countr_zero(warm);
  if (warm_only || !starts) return -1;
  return std::countr_zero(starts);
}

}  // namespace tenon::slice_bits
