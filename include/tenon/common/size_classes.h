// Size classes: multiples of 16 up to 128 (every block is 16-byte aligned,
// which 24/40/56 classes could not give, and has a second word, where a
// free block keeps the free key: heap/free_key.h; an 8-byte class had none,
// docs/security.md), then
// four classes per power of two up to kMaxSmall. Generated at compile time;
// size -> class is one table load up to 1 KiB (small_class) and a few ALU ops
// above.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "tenon/common/block_index.h"
#include "tenon/common/config.h"

namespace tenon {

namespace detail {
constexpr unsigned count_classes() {
  unsigned n = 8;  // 16..128
  for (std::size_t b = 128; b < kMaxSmall; b *= 2) n += 4;
  return n;
}
}  // namespace detail

constexpr unsigned kNumClasses = detail::count_classes();

struct class_table {
  std::array<std::uint32_t, kNumClasses> size{};
  std::array<std::uint8_t, kNumClasses> slices{};   // span length in slices
  std::array<std::uint64_t, kNumClasses> block_mult{};  // block_index::multiplier(size)
  // n -> class for n <= 1 KiB, one byte a size: indexed by n itself, the
  // malloc fast path needs no arithmetic on it ((n + 7) / 8 cost an add and
  // a shift a malloc).
  std::array<std::uint8_t, 1024 + 1> small{};
  unsigned first_above_1k = 0;                      // class of 1280
};

constexpr class_table make_class_table() {
  class_table t{};
  unsigned c = 0;
  for (std::uint32_t s = 16; s <= 128; s += 16) t.size[c++] = s;
  for (std::uint32_t b = 128; b < kMaxSmall; b *= 2)
    for (std::uint32_t k = 5; k <= 8; ++k) t.size[c++] = b / 4 * k;
  for (unsigned i = 0; i < kNumClasses; ++i) {
    // The fewest slices that waste at most 1/8 of the span on the tail: big
    // spans of big blocks fragment (each class keeps several partly used
    // ones), which cost glibc-thread 1.8x glibc's peak RSS with 8-block spans.
    std::size_t sl = 1;
    while (((sl * kSliceSize) % t.size[i]) * 8 > sl * kSliceSize) ++sl;
    t.slices[i] = static_cast<std::uint8_t>(sl);
    t.block_mult[i] = block_index::multiplier(t.size[i]);
  }
  for (unsigned i = 0, cls = 0; i < t.small.size(); ++i) {
    while (t.size[cls] < i) ++cls;
    t.small[i] = static_cast<std::uint8_t>(cls);
  }
  for (unsigned i = 0; i < kNumClasses; ++i)
    if (t.size[i] == 1280) { t.first_above_1k = i; break; }
  return t;
}

inline constexpr class_table kClasses = make_class_table();
static_assert(kClasses.size[kNumClasses - 1] == kMaxSmall);

// Class of a request of n <= 1 KiB bytes (n == 0 maps to class 0).
__attribute__((always_inline)) constexpr unsigned small_class(std::size_t n) { return kClasses.small[n]; }

// Class of a request of n bytes, 0 < n <= kMaxSmall (n == 0 maps to class 0).
constexpr unsigned size_to_class(std::size_t n) {
  if (n <= 1024) return small_class(n);
  unsigned b = 63u - static_cast<unsigned>(std::countl_zero(n - 1));  // n in (2^b, 2^(b+1)]
  unsigned sub = static_cast<unsigned>((n - 1) >> (b - 2)) & 3u;
  return kClasses.first_above_1k + (b - 10) * 4 + sub;
}

constexpr bool check_classes() {
  for (std::size_t n = 1; n <= kMaxSmall; ++n) {
    unsigned c = size_to_class(n);
    if (kClasses.size[c] < n) return false;
    if (c > 0 && kClasses.size[c - 1] >= n) return false;
    if (kClasses.size[c] % 16 != 0) return false;
  }
  return true;
}

}  // namespace tenon
