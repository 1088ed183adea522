// Layer 4, address space: guard pages, for configs that ask for them
// (`static constexpr bool guard_pages = true;`, the secure build). Every
// step is `if constexpr` on the trait: a config without it compiles to the
// code it had.
//
// Around the metadata, one chunk at a time (guards at chunk granularity, so
// their number of VMAs is bounded by the chunks, never by the blocks):
//   - slice 0 past the header's pages is inaccessible: an underflow out of
//     the first block of slice 1 faults before it reaches the descriptors;
//   - slice 63 is never handed out and inaccessible: a linear overflow out of
//     the chunk's last block faults there, before whatever is mapped above
//     (the next chunk's header: the kernel maps chunks top-down, one right
//     below the other; a thread's quarantine ring; a heap's storage).
// Reserved and PROT_NONE, neither is ever committed memory.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tenon/arena/chunk.h"
#include "tenon/common/config.h"

namespace tenon {

template <class C>
constexpr bool has_guard_pages() {
  if constexpr (requires { C::guard_pages; }) return C::guard_pages;
  else return false;
}

// The slice a guarded config never hands out (its `used` bit set from the
// chunk's creation on).
constexpr unsigned kGuardSlice = kSlicesPerChunk - 1;

template <class C>
constexpr std::uint64_t guard_slices() {
  return has_guard_pages<C>() ? std::uint64_t{1} << kGuardSlice : 0;
}

// Makes a new chunk's guards inaccessible (before anyone sees the chunk).
// Best effort: a refused mprotect (no VMA left, vm.max_map_count) leaves the
// chunk working, without that guard.
template <class C>
void guard_chunk(chunk* c) {
  if constexpr (has_guard_pages<C>()) {
    std::size_t page = C::platform::page_size();
    std::size_t header = (sizeof(chunk) + page - 1) & ~(page - 1);
    auto* base = reinterpret_cast<char*>(c);
    if (header < kSliceSize) C::platform::protect(base + header, kSliceSize - header, false);
    C::platform::protect(base + (std::size_t{kGuardSlice} << kSliceShift), kSliceSize, false);
  }
}

// A large block's run of a guarded config held closed whole (PROT_NONE from
// its first byte to its last; large.ipp, free_closed), made accessible again
// before the arena has it back: one call. Its closed bytes were owed their
// reopening (os::owe_reopening) and are no longer, opened or given up. False
// if the kernel refused (RLIMIT_DATA): the run must then stay taken for good,
// a leak of its size, since a block carved over a closed page would fault.
template <class C>
bool open_closed_run(span* s) {
  std::size_t bytes = std::size_t{s->nslices} << kSliceShift;
  bool opened = C::platform::protect(s->start, bytes, true);
  C::platform::owe_reopening(-static_cast<std::ptrdiff_t>(bytes));
  return opened;
}

}  // namespace tenon
