// Layer 1: glibc's malloc_chunk layout on 64-bit Linux (malloc/malloc.c,
// dlmalloc's layout, which glibc has kept; checked against glibc 2.36). The
// user pointer is 16 bytes past the chunk start. The word just before it holds the chunk's size, a multiple of 16 of
// at least 32, with three flag bits: PREV_INUSE (1), IS_MMAPPED (2),
// NON_MAIN_ARENA (4). For a chunk in glibc's heap the owner may use the
// size minus 8 (the next chunk's first word is the owner's while the chunk is
// in use). A chunk glibc mapped on its own (IS_MMAPPED) is usable for its
// size minus 16, and the word before the size holds the offset from its
// mapping's start to the chunk (non-zero after memalign); glibc's free gives
// such a chunk back with munmap(start, offset + size), after checking what
// read_glibc_chunk checks.
#include "tenon/platform/glibc_chunk.h"

#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::os {

namespace {
static_assert(sizeof(std::size_t) == 8, "glibc's 64-bit chunk layout");
constexpr std::size_t kSizeWord = 8;    // SIZE_SZ
constexpr std::size_t kHeader = 16;     // CHUNK_HDR_SZ: user pointer - chunk
constexpr std::size_t kAlign = 16;      // MALLOC_ALIGNMENT
constexpr std::size_t kMinChunk = 32;   // MINSIZE
constexpr std::size_t kIsMmapped = 2;   // IS_MMAPPED
constexpr std::size_t kFlagBits = 7;    // PREV_INUSE | IS_MMAPPED | NON_MAIN_ARENA

bool is_power_of_two_or_zero(std::uintptr_t x) { return (x & (x - 1)) == 0; }

bool aligned_as_glibc(std::uintptr_t user) { return user % kAlign == 0 && user >= kHeader; }
}  // namespace

// Both words are in p - 16's 16-byte line, and so in one page.
bool read_glibc_chunk(const void* p, glibc_chunk* out) {
  if (!aligned_as_glibc(reinterpret_cast<std::uintptr_t>(p))) return false;
  const auto* word = static_cast<const std::size_t*>(p);
  const std::size_t words[2] = {word[-2], word[-1]};
  return parse_glibc_chunk(p, words, out);
}

bool parse_glibc_chunk(const void* p, const std::size_t words[2], glibc_chunk* out) {
  const auto user = reinterpret_cast<std::uintptr_t>(p);
  if (!aligned_as_glibc(user)) return false;
  const std::size_t head = words[1];
  const std::size_t size = head & ~kFlagBits;
  const std::uintptr_t chunk = user - kHeader;
  if (size < kMinChunk || size % kAlign != 0 || size > UINTPTR_MAX - chunk) return false;
  if (!(head & kIsMmapped)) {
    *out = {size - kSizeWord, nullptr, 0};
    return true;
  }
  const std::size_t offset = words[0];
  if (offset > chunk || offset > SIZE_MAX - size) return false;
  const std::uintptr_t start = chunk - offset;
  const std::size_t total = offset + size;
  const std::size_t page = page_size();
  // glibc's munmap_chunk test: the mapping begins and ends on page
  // boundaries, and the user pointer's offset in its page is a power of two.
  if (((start | total) & (page - 1)) != 0 || !is_power_of_two_or_zero(user & (page - 1))) return false;
  *out = {size - kHeader, reinterpret_cast<void*>(start), total};
  return true;
}

}  // namespace tenon::os
