// The one object of libtenon-override.a that is not the core: tenon's
// malloc, free, ..., operator new/delete for a fully static program, and
// every other global name of glibc's own static malloc.
//
// Why every name: `gcc -static` links libc.a, whose malloc.o defines malloc,
// free, calloc, realloc and also glibc-internal names (__libc_malloc,
// __libc_memalign, mallopt, mallinfo, the fork and thread-exit hooks). If
// anything in the link needs a name that only malloc.o defines, the linker
// takes malloc.o, and its malloc, free, calloc and realloc collide with ours
// ("multiple definition of `malloc'"). Defined here, in one object, any of
// them brings all of them, and malloc.o is never taken. The list is glibc
// 2.36's (nm libc.a, malloc.o); a glibc whose malloc.o grows a name that
// other libc objects call would fail the link loudly, never silently.
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>

#include "tenon/layer.hpp"
#include "tenon/tenon.h"

TENON_EXPORT_MALLOC(tenon::default_allocator)

// glibc's malloc.o defines each standard name under internal aliases too.
// copy(): the alias gets its target's attributes (malloc, alloc_size, ...).
#if defined(__has_attribute) && __has_attribute(copy)
#define TENON_ALIAS_OF(target) __attribute__((alias(#target), copy(target), visibility("default")))
#else
#define TENON_ALIAS_OF(target) __attribute__((alias(#target), visibility("default")))
#endif

extern "C" {

void* __libc_malloc(size_t) noexcept TENON_ALIAS_OF(malloc);
void* __malloc(size_t) noexcept TENON_ALIAS_OF(malloc);
void __libc_free(void*) noexcept TENON_ALIAS_OF(free);
void __free(void*) noexcept TENON_ALIAS_OF(free);
void* __libc_calloc(size_t, size_t) noexcept TENON_ALIAS_OF(calloc);
void* __calloc(size_t, size_t) noexcept TENON_ALIAS_OF(calloc);
void* __libc_realloc(void*, size_t) noexcept TENON_ALIAS_OF(realloc);
void* __realloc(void*, size_t) noexcept TENON_ALIAS_OF(realloc);
void* __libc_memalign(size_t, size_t) noexcept TENON_ALIAS_OF(memalign);
void* __memalign(size_t, size_t) noexcept TENON_ALIAS_OF(memalign);
int __posix_memalign(void**, size_t, size_t) noexcept TENON_ALIAS_OF(posix_memalign);
void* __libc_valloc(size_t) noexcept TENON_ALIAS_OF(valloc);
void* __valloc(size_t) noexcept TENON_ALIAS_OF(valloc);
void* __libc_pvalloc(size_t) noexcept TENON_ALIAS_OF(pvalloc);
void* __pvalloc(size_t) noexcept TENON_ALIAS_OF(pvalloc);
size_t __malloc_usable_size(void*) noexcept TENON_ALIAS_OF(malloc_usable_size);
int __malloc_trim(size_t) noexcept TENON_ALIAS_OF(malloc_trim);

// glibc's tuning and reporting calls, which have no meaning for tenon.
// mallopt accepts and ignores every parameter (1, "done", as a preloaded
// libtenon.so, where glibc answers it for its unused heap); mallinfo and
// mallinfo2 report zeros (tenon_stats_print has tenon's figures).
TENON_EXPORTED int mallopt(int, int) noexcept { return 1; }
TENON_EXPORTED struct mallinfo mallinfo(void) noexcept { return {}; }
TENON_EXPORTED struct mallinfo2 mallinfo2(void) noexcept { return {}; }
TENON_EXPORTED void malloc_stats(void) noexcept { tenon_stats_print(); }
TENON_EXPORTED int malloc_info(int options, FILE* fp) noexcept {
  if (options != 0) {  // glibc's answer: no option is defined
    errno = EINVAL;
    return -1;
  }
  fprintf(fp, "<malloc version=\"tenon-%s\"></malloc>\n", tenon_version());
  return 0;
}
int __libc_mallopt(int, int) noexcept TENON_ALIAS_OF(mallopt);
int __mallopt(int, int) noexcept TENON_ALIAS_OF(mallopt);
struct mallinfo __libc_mallinfo(void) noexcept TENON_ALIAS_OF(mallinfo);
struct mallinfo __mallinfo(void) noexcept TENON_ALIAS_OF(mallinfo);
struct mallinfo2 __libc_mallinfo2(void) noexcept TENON_ALIAS_OF(mallinfo2);
struct mallinfo2 __mallinfo2(void) noexcept TENON_ALIAS_OF(mallinfo2);
void __malloc_stats(void) noexcept TENON_ALIAS_OF(malloc_stats);
int __malloc_info(int, FILE*) noexcept TENON_ALIAS_OF(malloc_info);

// Called by glibc's fork (around it) and at thread exit, to lock and reset
// glibc's arenas. tenon holds no lock to take around fork and keeps no
// per-thread state for glibc to free: nothing to do.
TENON_EXPORTED void __malloc_fork_lock_parent(void) noexcept {}
TENON_EXPORTED void __malloc_fork_unlock_parent(void) noexcept {}
TENON_EXPORTED void __malloc_fork_unlock_child(void) noexcept {}
TENON_EXPORTED void __malloc_arena_thread_freeres(void) noexcept {}

// glibc's sbrk-based heap growth; tenon never uses the program break.
TENON_EXPORTED void* __glibc_morecore(ptrdiff_t) noexcept {
  errno = ENOMEM;
  return nullptr;
}

}  // extern "C"
