// Secure layers: the process's secret, from which every key of the secure
// build is derived (free-list links, block canaries and headers): two words,
// 128 bits, drawn from the kernel at the first use. Lock-free: racing first
// users agree through one CAS a word, so neither word changes once read.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::secure {

struct secret_words {
  std::uint64_t lo, hi;  // xored into the address before the mix, added after (mix_key)
};

// lo: 0 means "not drawn yet". hi is installed before lo (draw_secret), so a
// thread that reads lo nonzero with acquire reads hi's final value.
inline constinit std::atomic<std::uint64_t> g_secret{0};
inline constinit std::atomic<std::uint64_t> g_secret_hi{0};

// Both words of a secret, one draw of 16 bytes (os::random_words), neither
// 0 (0 is the mark of a word not drawn).
inline secret_words fresh_words() {
  std::uint64_t w[2];
  os::random_words(w, 2);
  return {w[0] ? w[0] : 1, w[1] ? w[1] : 1};
}

// hi first, then lo: lo is published with release after this thread read hi
// final (its own CAS, or the failed CAS that read a racer's, with acquire),
// so whoever reads lo nonzero (acquire) reads hi final, never 0 nor a value
// that a losing racer drew. No thread waits: a failed CAS takes the winner's
// (racers may then hold one word of one draw and one of another: both random).
// `between` runs between the two words (nothing, but in the test that holds
// a drawer there: SecureKeys.ADrawerHeldBetweenTheWordsHidesNothing).
template <class Between>
[[gnu::always_inline]] inline secret_words draw_secret_with(Between between) {
  secret_words fresh = fresh_words();
  std::uint64_t hi = 0;
  if (g_secret_hi.compare_exchange_strong(hi, fresh.hi, std::memory_order_acq_rel, std::memory_order_acquire))
    hi = fresh.hi;
  between();
  std::uint64_t lo = 0;
  if (g_secret.compare_exchange_strong(lo, fresh.lo, std::memory_order_release, std::memory_order_acquire))
    lo = fresh.lo;
  return {lo, hi};
}
[[gnu::cold, gnu::noinline]] inline secret_words draw_secret() {
  return draw_secret_with([] {});
}

// Always in line (as the free path's other pieces: canary.hpp's check_block
// and give_back, zeroed.h's zero_words): the secure build's unit sits at
// GCC's inline-unit-growth limit, where code added anywhere else took them
// out of the malloc+free path (273 -> 300 instructions a pair).
[[gnu::always_inline]] inline secret_words secret() {
  std::uint64_t lo = g_secret.load(std::memory_order_acquire);  // a plain load on x86-64
  if (__builtin_expect(lo != 0, 1)) return {lo, g_secret_hi.load(std::memory_order_relaxed)};
  return draw_secret();
}

// The secret, by a caller that knows it drawn: by this thread, or by one
// whose work this thread has seen (the program handed it the block, or the
// span, that the secret was drawn for: its relaxed loads then read the
// secret's words, not 0). No test, and no call that the caller's registers
// must survive: the fast paths' reads (a free's check of a block the canary
// sealed, a free-list link that carve or a free wrote) take this one; the
// paths that make a key first (carve: encoded_links::before_carve; the
// canary's seal) draw it with secret().
[[gnu::always_inline]] inline secret_words drawn_secret() {
  return {g_secret.load(std::memory_order_relaxed), g_secret_hi.load(std::memory_order_relaxed)};
}

// murmur3's 64-bit finalizer: a bijection in which every output bit depends
// on every input bit (two odd multiplies, three xorshifts).
[[gnu::always_inline]] inline std::uint64_t finalize(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// A key for one address (a span's descriptor, a block): the secret mixed
// with it, so that every address has its own: finalize(address ^ lo) + hi,
// the public finalize keyed before and after (an Even-Mansour shape). It
// cannot be undone without both words (the old one-word mix could: one key
// and its address gave the secret). One (address, key) pair is one equation
// in 128 unknown bits; with a few, the attack known is a search of lo's 2^64
// values. No proof: finalize is no cipher, and a second keyed round was
// measured and not kept (docs/security.md, "The keys": what an attacker
// needs, what each costs).
// Always in line, as secret().
[[gnu::always_inline]] inline std::uint64_t mix_key(secret_words s, const void* where) {
  return finalize(reinterpret_cast<std::uintptr_t>(where) ^ s.lo) + s.hi;
}
[[gnu::always_inline]] inline std::uint64_t key_for(const void* where) { return mix_key(secret(), where); }
// The same key where the secret is known drawn (drawn_secret).
[[gnu::always_inline]] inline std::uint64_t drawn_key_for(const void* where) {
  return mix_key(drawn_secret(), where);
}

}  // namespace tenon::secure
