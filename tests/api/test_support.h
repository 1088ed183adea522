// Helpers shared by the api and stress tests: sanitizer-aware scaling and a
// pattern that identifies the block that wrote it, so overlap between two live
// blocks (or a block overwritten after free) shows up as a wrong byte.
#pragma once
#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tenon_test {

// Sanitizers slow every access 2-20x; tests divide their counts by this.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr unsigned kSanitizerDivisor = 8;
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr unsigned kSanitizerDivisor = 8;
inline constexpr bool kSanitized = true;
#else
inline constexpr unsigned kSanitizerDivisor = 1;
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr unsigned kSanitizerDivisor = 1;
inline constexpr bool kSanitized = false;
#endif

// n scaled down under sanitizers, never below 1.
constexpr std::size_t scaled(std::size_t n) {
  std::size_t s = n / kSanitizerDivisor;
  return s ? s : 1;
}

// splitmix64: cheap, good enough to make neighbouring seeds look unrelated.
constexpr std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The pattern word at byte offset i (i a multiple of 8) for a block tagged seed.
// Mixing the offset in means a block shifted by 8 bytes does not verify.
inline std::uint64_t pattern_word(std::uint64_t seed, std::size_t i) {
  return mix(seed) ^ (i * 0x100000001b3ull);
}

// Writes the pattern of seed over bytes [0, n) of p.
inline void fill_pattern(void* p, std::size_t n, std::uint64_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = pattern_word(seed, i);
    std::memcpy(b + i, &w, 8);
  }
  if (i < n) {
    std::uint64_t w = pattern_word(seed, i);
    std::memcpy(b + i, &w, n - i);
  }
}

// Returns the first offset in [0, n) where p differs from seed's pattern, or n.
inline std::size_t first_pattern_mismatch(const void* p, std::size_t n, std::uint64_t seed) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = pattern_word(seed, i), got;
    std::memcpy(&got, b + i, 8);
    if (got != w) {
      for (std::size_t k = 0; k < 8; ++k)
        if (b[i + k] != reinterpret_cast<const unsigned char*>(&w)[k]) return i + k;
    }
  }
  if (i < n) {
    std::uint64_t w = pattern_word(seed, i);
    for (std::size_t k = 0; i + k < n; ++k)
      if (b[i + k] != reinterpret_cast<const unsigned char*>(&w)[k]) return i + k;
  }
  return n;
}

inline bool is_aligned(const void* p, std::size_t a) {
  return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}

// The alignment every block of this size must have: 16 from 16 bytes up, 8 below.
constexpr std::size_t min_alignment(std::size_t size) { return size >= 16 ? 16 : 8; }

// The n-th CPU this process may run on, or -1.
inline int nth_allowed_cpu(unsigned n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set) && static_cast<unsigned>(seen++) == n) return c;
  return -1;
}

// Pins the calling thread to one CPU.
inline bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace tenon_test
