// Secure layers: zeroing a freed block and checking that it still reads as
// zeros (quarantine.hpp), with 16-byte vector stores and loads (GCC vector
// extensions: SSE2 on x86-64, NEON on AArch64, no target flag needed).
// The compiler would otherwise emit `rep stos` for the zeroing (slow to start
// for the short lengths most blocks have) and a loop with a scalar tail for
// the check. Long lengths are zeroed by the C library's memset, which picks
// the widest stores the CPU has.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tenon::secure {

using v16 = std::uint64_t __attribute__((vector_size(16)));

// Lengths from this up are zeroed by memset: its wide stores (AVX2, or
// `rep stosb` from 2 KiB) are worth its call there.
inline constexpr std::size_t kMemsetFrom = 512;

inline v16 load16(const unsigned char* p) {
  v16 w;
  std::memcpy(&w, p, 16);
  return w;
}

// p[0, len) = 0. p needs no alignment. Short lengths take straight-line
// stores, the last ones overlapping the first (no loop, no byte tail).
// Always in line: on the quarantine's free path (secret.h says why).
[[gnu::always_inline]] inline void zero_words(unsigned char* p, std::size_t len) {
  const v16 z{};
  const std::uint64_t z8 = 0;
  if (len >= 64) {
    if (len >= kMemsetFrom) {
      std::memset(p, 0, len);
      return;
    }
    for (std::size_t i = 0; i + 64 <= len; i += 64) {
      std::memcpy(p + i, &z, 16);
      std::memcpy(p + i + 16, &z, 16);
      std::memcpy(p + i + 32, &z, 16);
      std::memcpy(p + i + 48, &z, 16);
    }
    p += len - 64;  // the last 64 bytes, overlapping what the loop did
    std::memcpy(p, &z, 16);
    std::memcpy(p + 16, &z, 16);
    std::memcpy(p + 32, &z, 16);
    std::memcpy(p + 48, &z, 16);
  } else if (len >= 32) {
    std::memcpy(p, &z, 16);
    std::memcpy(p + 16, &z, 16);
    std::memcpy(p + len - 32, &z, 16);
    std::memcpy(p + len - 16, &z, 16);
  } else if (len >= 16) {
    std::memcpy(p, &z, 16);
    std::memcpy(p + len - 16, &z, 16);
  } else if (len >= 8) {
    std::memcpy(p, &z8, 8);
    std::memcpy(p + len - 8, &z8, 8);
  } else {
    for (std::size_t i = 0; i < len; ++i) p[i] = 0;
  }
}

// Whether p[0, len) is all zeros: one OR over 64 bytes a step (four
// independent accumulators), the last step overlapping; short lengths in
// straight-line loads like zero_words.
inline bool all_zero(const unsigned char* p, std::size_t len) {
  v16 a{}, b{}, c{}, d{};
  if (len >= 64) {
    for (std::size_t i = 0; i + 64 <= len; i += 64) {
      a |= load16(p + i);
      b |= load16(p + i + 16);
      c |= load16(p + i + 32);
      d |= load16(p + i + 48);
    }
    const unsigned char* e = p + len - 64;
    a |= load16(e);
    b |= load16(e + 16);
    c |= load16(e + 32);
    d |= load16(e + 48);
  } else if (len >= 32) {
    a = load16(p);
    b = load16(p + 16);
    c = load16(p + len - 32);
    d = load16(p + len - 16);
  } else if (len >= 16) {
    a = load16(p);
    b = load16(p + len - 16);
  } else {
    std::uint64_t any = 0;
    if (len >= 8) {
      std::uint64_t x, y;
      std::memcpy(&x, p, 8);
      std::memcpy(&y, p + len - 8, 8);
      any = x | y;
    } else {
      for (std::size_t i = 0; i < len; ++i) any |= p[i];
    }
    return any == 0;
  }
  a |= b | c | d;
  return (a[0] | a[1]) == 0;
}

}  // namespace tenon::secure
