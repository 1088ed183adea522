// Shared (the size classes hold the multipliers, the spans use them):
// whether an offset into a small span is the start of a block that was
// carved, in one multiply and one compare (the owner's free fast path asks
// it of every pointer: issue 11's interior and never-allocated frees).
//
// Lemire, Kaser and Kurz's divisibility test ("Faster remainder by direct
// computation", 2019), with the bound folded in. For a block size d, let
// M = floor(2^64 / d) + 1 and e = M * d - 2^64 (1 <= e <= d). An offset
// n = i * d + r (0 <= r < d, n < 2^32) multiplied by M, modulo 2^64, reads
//   i * e                   when r == 0 (a block start: block i),
//   at least M > 2^64 / d   otherwise.
// Offsets here stay below 2^17 (two slices), so i * e <= n < 2^17, far below
// M (over 2^48 for blocks up to 32 KiB): `n * M < k * e` holds exactly when n is the
// start of one of the first k blocks. The owner keeps k * e for the blocks
// it has carved (span::carved_limit), which any freer reads (a remote one
// with a relaxed load), another thread's realloc too (since 2026-11-29).
// tests/unit checks every offset of every class against `%`.
#pragma once
#include <cstdint>

namespace tenon::block_index {

// M for blocks of `size` bytes (size >= 2).
constexpr std::uint64_t multiplier(std::uint32_t size) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(1) << 64) / size) + 1;
}

// The bound for the first `blocks` blocks: blocks * e, e = M * size mod 2^64.
constexpr std::uint64_t limit(std::uint64_t mult, std::uint32_t size, std::uint32_t blocks) {
  return mult * size * blocks;
}

// Whether `offset` (bytes from the span's start, below 2^32) starts one of
// the blocks that `lim` admits.
__attribute__((always_inline)) constexpr bool starts_block(std::uint64_t offset, std::uint64_t mult,
                                                           std::uint64_t lim) {
  return offset * mult < lim;
}

}  // namespace tenon::block_index
