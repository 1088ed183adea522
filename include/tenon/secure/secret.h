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

// The secret, by a caller that knows it drawn: by this thread, or by one
// whose work this thread has seen (the program handed it the block, or the
// span, that the secret was drawn for: its relaxed load then reads the
// secret, not 0). No test, and no call that the caller's registers must
// survive: the fast paths' reads (a free's check of a block the canary
// sealed, a free-list link that carve or a free wrote) take this one; the
// paths that make a key first (carve: encoded_links::before_carve; the
// canary's seal) draw it with secret().
[[gnu::always_inline]] inline std::uint64_t drawn_secret() { return g_secret.load(std::memory_order_relaxed); }

// A key for one address (a span's descriptor, a block): the secret mixed
// with it, so that every address has its own. The mix can be undone: one
// key and its address give the secret (docs/security.md, "What it costs"),
// so the keys stop blind overwrites, not a program that read one first.
// Always in line, as secret().
[[gnu::always_inline]] inline std::uint64_t mix_key(std::uint64_t secret, const void* where) {
  std::uint64_t x = (secret ^ reinterpret_cast<std::uintptr_t>(where)) * 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}
[[gnu::always_inline]] inline std::uint64_t key_for(const void* where) { return mix_key(secret(), where); }
// The same key where the secret is known drawn (drawn_secret).
[[gnu::always_inline]] inline std::uint64_t drawn_key_for(const void* where) {
  return mix_key(drawn_secret(), where);
}

}  // namespace tenon::secure
