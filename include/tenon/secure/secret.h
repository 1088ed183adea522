// Secure layers: the process's secret, from which every key of the secure
// build is derived (free-list links, block canaries). Drawn from the kernel
// at the first use; racing first users agree through one CAS, so it never
// changes once read. Lock-free.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::secure {

inline constinit std::atomic<std::uint64_t> g_secret{0};

[[gnu::cold, gnu::noinline]] inline std::uint64_t draw_secret() {
  std::uint64_t fresh = os::random_u64() | 1;  // never 0: 0 means "not drawn yet"
  std::uint64_t seen = 0;
  return g_secret.compare_exchange_strong(seen, fresh, std::memory_order_relaxed) ? fresh : seen;
}

// Always in line (as the free path's other pieces: canary.hpp's check_block
// and give_back, zeroed.h's zero_words): the secure build's unit sits at
// GCC's inline-unit-growth limit, where code added anywhere else took them
// out of the malloc+free path (273 -> 300 instructions a pair).
[[gnu::always_inline]] inline std::uint64_t secret() {
  std::uint64_t s = g_secret.load(std::memory_order_relaxed);
  return __builtin_expect(s != 0, 1) ? s : draw_secret();
}

// A key for one address (a span's descriptor, a block): the secret mixed
// with it, so that learning one key tells nothing of another. Always in
// line, as secret().
[[gnu::always_inline]] inline std::uint64_t key_for(const void* where) {
  std::uint64_t x = (secret() ^ reinterpret_cast<std::uintptr_t>(where)) * 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

}  // namespace tenon::secure
