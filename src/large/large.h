// Layer 6, large and huge blocks.
//   large (kMaxSmall < n <= kMaxLarge): a run of slices of its own, owned by no
//     heap; freed from any thread straight back to the chunk layer (one atomic
//     fetch_and). Usable size is page-granular; its untouched pages cost nothing.
//   huge (above, or alignment a slice run cannot give): a dedicated mapping
//     with a header page; recently freed ones are kept in a small lock-free
//     cache for reuse (pages stay resident: no page-fault storm), purged after
//     the delay; realloc grows or moves them with mremap instead of copying.
#pragma once
#include <cstddef>

#include "span/span.h"

namespace tenon {

struct stats;
struct heap;

// Returns nullptr (errno ENOMEM) when memory cannot be had. *zeroed tells
// whether the block is known to read as zeros (calloc skips its memset).
void* large_alloc(std::size_t n, std::size_t align, bool* zeroed);
void large_free(span* s, stats* st);
std::size_t large_usable(const span* s, const void* p);
// Resize in place within the span's slices; false if it does not fit.
bool large_resize(span* s, const void* p, std::size_t n);

struct huge_header {
  std::size_t map_size;   // bytes mapped from the header's page on
  std::size_t usable;     // bytes usable from `user` on (what was asked, page-rounded)
  char* user;             // the pointer handed out
  bool far;               // header one unit below the user pointer's unit
  // Bytes mapped from `user` on: may exceed `usable`, so that a reused or
  // shrunk block keeps its resident pages for the next, larger request.
  std::size_t capacity() const { return map_size - static_cast<std::size_t>(user - reinterpret_cast<const char*>(this)); }
};

void* huge_alloc(std::size_t n, std::size_t align, bool* zeroed);
void huge_free(huge_header* h);
// The header of a huge block, or nullptr if p is not the start of one.
huge_header* huge_lookup(const void* p);
// Is p inside the range a huge block maps in the unit where its user pointer
// is (its header page, its start, or after)? A pointer elsewhere in that unit
// lies in someone else's memory. Neither call reads the block's memory unless
// p is its start (see huge.cpp): both are safe on any pointer, while any
// other thread frees any block.
bool huge_contains(const void* p);
// Grow or shrink without copying; nullptr if it cannot (caller copies).
void* huge_resize(huge_header* h, std::size_t n);
// Drop every cached huge block; true if anything was released.
bool huge_cache_flush();

}  // namespace tenon
