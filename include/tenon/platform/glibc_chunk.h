// Layer 1, platform: the header glibc's malloc keeps in front of every block
// it hands out, read without calling glibc's allocator (whose calls take its
// arena locks). tenon meets such blocks when a program passes them to free,
// realloc or malloc_usable_size (see frontend/foreign.h).
#pragma once
#include <cstddef>

namespace tenon::os {

// A block of glibc's allocator, as its header describes it.
struct glibc_chunk {
  std::size_t usable;        // bytes the owner may use from the block's start
  void* mapping;             // a block glibc mapped on its own: that mapping
  std::size_t mapping_size;  // (nullptr, 0 for a block inside glibc's heap)
};

// Reads the header in the 16 bytes before p. False when they cannot describe
// a block glibc handed out (p misaligned, a size glibc never makes, a mapping
// that does not start and end on page boundaries); *out is then untouched.
// Like glibc's own free, it reads those bytes: p must be readable 16 bytes
// back, which every pointer that some allocator handed out is.
bool read_glibc_chunk(const void* p, glibc_chunk* out);
// The same from a copy of those 16 bytes (`words`: the two words before p,
// the lower first), for a caller that read them through the kernel
// (frontend/foreign.cpp: another thread may unmap them meanwhile).
bool parse_glibc_chunk(const void* p, const std::size_t words[2], glibc_chunk* out);

}  // namespace tenon::os
