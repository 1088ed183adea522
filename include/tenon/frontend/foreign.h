// Layer 7, front end: pointers tenon did not hand out ("foreign": in no unit
// the chunk map marks), in practice blocks of glibc's own allocator. free,
// realloc and malloc_usable_size handle them here without calling glibc's
// allocator or the dynamic linker, whose calls take locks that a thread
// stopped inside them would hold forever (docs/architecture.md, "Foreign
// pointers"; the user-visible rules are in docs/api.md).
#pragma once
#include <cstddef>

namespace tenon::api {

// A block glibc mapped on its own goes back to the kernel (munmap, as glibc's
// free does); a block inside glibc's heap is kept: giving it back needs
// glibc's arena lock. Anything else is ignored. errno is unchanged.
void foreign_free(void* p);

// p unchanged when n fits in the block (and, for a mapped block, does not
// leave more than half of it unused); else a tenon block with p's contents,
// p released as by foreign_free. NULL with ENOMEM if that allocation fails
// (p untouched), NULL with EINVAL if p is not a glibc block. n is at least 1.
void* foreign_realloc(void* p, std::size_t n);

// The block's usable size from its header; 0 if p is not a glibc block.
std::size_t foreign_usable_size(const void* p);

}  // namespace tenon::api
