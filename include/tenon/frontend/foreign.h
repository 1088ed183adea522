// Layer 9, front end: pointers tenon did not hand out ("foreign": in no
// chunk and no huge block), in practice blocks of glibc's own allocator.
// free, realloc and malloc_usable_size handle them here without calling
// glibc's allocator or the dynamic linker, whose calls take locks that a
// thread stopped inside them would hold forever (docs/architecture.md,
// "Foreign pointers"; the user-visible rules are in docs/api.md).
#pragma once
#include <cstddef>

namespace tenon::foreign {

// A block glibc mapped on its own goes back to the kernel (munmap, as glibc's
// free does); a block inside glibc's heap is kept: giving it back needs
// glibc's arena lock. A pointer with no glibc header before it (nothing
// mapped there, or bytes that are no chunk header) ends the program
// (report_misuse), as glibc's free does. errno is unchanged.
void free(void* p);

// What realloc(p, n) of a foreign p does (n is at least 1):
//   stay     p itself: n fits in the block (and, for a mapped block, does
//            not leave more than half of it unused);
//   move     into a new block, copying *usable bytes, then free(p);
//   invalid  p is not a glibc block (EINVAL);
//   nothing_mapped  nor anything else: no page before p (the default
//            builds: EINVAL; libtenon-secure.so reports it as its free
//            does, kNothingMapped: most often a huge block freed and
//            unmapped since, the lead's decision of 2026-11-29, branch usw).
enum class resize { stay, move, invalid, nothing_mapped };
// What free (and the secure realloc) say of a pointer with nothing mapped
// before it.
inline constexpr const char* kNothingMapped = "invalid pointer (nothing mapped there: not a block, or one already freed)";
resize plan_resize(const void* p, std::size_t n, std::size_t* usable);

// The block's usable size from its header; 0 if p is not a glibc block
// (also when nothing is mapped before p: checked first, then read).
std::size_t usable_size(const void* p);

}  // namespace tenon::foreign
