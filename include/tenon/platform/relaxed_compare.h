// Layer 1, platform: a relaxed atomic load compared with a value, for the
// free fast path's chunk-table test. GCC folds no atomic load into a
// compare: it loads the word into a register and compares that (one
// instruction more a free). On x86-64 a compare with the word in memory is
// the same relaxed load (an aligned 8-byte read is atomic, and a relaxed
// load orders nothing), written here in assembly; elsewhere the plain load.
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace tenon::os {

// For any 8-byte atomic word: the chunk-table slot (a std::uintptr_t), and a
// span's owner (a pointer) compared with the sorting heap in the owner's
// inbox sort (src/heap/remote.ipp).
template <class T>
__attribute__((always_inline)) inline bool equals_relaxed(const std::atomic<T>& word, std::type_identity_t<T> v) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  static_assert(sizeof(word) == 8 && alignof(std::atomic<T>) == 8);
  bool equal;
  asm("cmpq %2, %1" : "=@ccz"(equal) : "r"(v), "m"(word));
  return equal;
#else
  return word.load(std::memory_order_relaxed) == v;
#endif
}

// v < word, the word read with a relaxed load, in one compare with the word
// in memory on x86-64 (a span's carved bound, read by a thread that does not
// own the span: span::starts_carved_block_any_thread).
__attribute__((always_inline)) inline bool below_relaxed(std::uint64_t v, const std::uint64_t& word) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool below;
  asm("cmpq %2, %1" : "=@ccb"(below) : "r"(v), "m"(word));
  return below;
#else
  return v < __atomic_load_n(&word, __ATOMIC_RELAXED);
#endif
}

}  // namespace tenon::os
