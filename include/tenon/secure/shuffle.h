// Secure layers, engine policy: shuffled_fresh_blocks, the `fresh_order`
// policy of the secure config. The blocks a span's owner carves from fresh
// memory go on its free list in a random order (heap/spans.ipp, carve), so
// the address of the next block cannot be told from the last one's: an
// overflow or a use after free cannot aim at a chosen neighbour. Carving
// takes at least kMinBatch blocks at a time, so that big classes (one block
// a page) are shuffled too.
//
// A per-thread generator (wyrand: one add and one 64x64 multiply a number),
// seeded from getrandom at the thread's first carve; owner-only, no atomic.
#pragma once
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::secure {

struct shuffled_fresh_blocks {
  static constexpr std::uint32_t kMinBatch = 8;

  // idx[0..n) := a uniformly random permutation of 0..n-1 (Fisher-Yates).
  static void shuffle(std::uint16_t* idx, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t j = below(i + 1);
      idx[i] = idx[j];
      idx[j] = static_cast<std::uint16_t>(i);
    }
  }

 private:
  static std::uint64_t& state() {
    static constinit thread_local std::uint64_t s __attribute__((tls_model("initial-exec"))) = 0;
    return s;
  }
  static std::uint64_t next() {
    std::uint64_t& s = state();
    if (__builtin_expect(s == 0, 0)) s = os::random_u64() | 1;
    s += 0xa0761d6478bd642full;
    unsigned __int128 m = static_cast<unsigned __int128>(s) * (s ^ 0xe7037ed1a0b428dbull);
    return static_cast<std::uint64_t>(m >> 64) ^ static_cast<std::uint64_t>(m);
  }
  // Uniform enough in [0, bound) for bound <= 2^16 (Lemire's multiply-shift).
  static std::uint32_t below(std::uint32_t bound) {
    return static_cast<std::uint32_t>((next() >> 32) * bound >> 32);
  }
};

}  // namespace tenon::secure
