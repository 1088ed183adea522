// The standard allocation functions over any layer, and TENON_EXPORT_MALLOC.
//
// `standard_api<L>` gives the C and C++ functions their exact standard
// answers (overflow, alignment and errno checks, realloc's edge cases, the
// operator new handler loop) on top of a layer, which then only ever sees
// valid requests. TENON_EXPORT_MALLOC(T), written once in one translation
// unit of a shared library, defines every standard name from it; preload the
// library (or link it first) and it replaces the system allocator.
// Included by <tenon/layer.hpp>.
#pragma once
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <bit>
#include <cstddef>
#include <new>

#include "tenon/platform/os.h"
#include "tenon/tenon.h"

namespace tenon {

template <layer L>
struct layer_ops;

namespace detail {

inline bool is_power_of_two(std::size_t a) { return a != 0 && (a & (a - 1)) == 0; }

// operator new's failure paths (out of line: src/frontend/new_handler.cpp).
// The handler of the running program, or nullptr (also when libstdc++ is not
// loaded: a C program).
std::new_handler current_new_handler() noexcept;
// Throws std::bad_alloc through libstdc++, or aborts with a message when no
// libstdc++ is loaded to throw it.
[[noreturn]] void throw_bad_alloc();
// A nothrow form failed while a new_handler is installed (which may throw):
// the next definition of `symbol` in line (libstdc++'s) runs the handler
// loop around the throwing form inside its own try/catch. nullptr if none.
enum class nothrow_form { scalar, array };
void* next_nothrow_new(nothrow_form form, std::size_t n) noexcept;
void* next_nothrow_new_aligned(nothrow_form form, std::size_t n, std::align_val_t al) noexcept;

// glibc's reporting calls from a layer's statistics (src/frontend/glibc_stats.cpp).
// None of them allocates.
struct mallinfo2 to_mallinfo2(const tenon_stats& s) noexcept;
struct mallinfo to_mallinfo(const tenon_stats& s) noexcept;
void print_malloc_stats(const tenon_stats& s) noexcept;
int write_malloc_info(const tenon_stats& s, int options, FILE* fp) noexcept;
// A layer without statistics (a wrapper over another library's allocator):
// the same calls of the next library in line (glibc's, or the allocator
// behind the wrapper), found with dlsym(RTLD_NEXT); zeros, or nothing
// printed, if there is none.
struct mallinfo2 next_mallinfo2() noexcept;
struct mallinfo next_mallinfo() noexcept;
void next_malloc_stats() noexcept;
int next_malloc_info(int options, FILE* fp) noexcept;

}  // namespace detail

template <layer L>
struct standard_api {
  using ops = layer_ops<L>;

  static void* malloc(std::size_t n) noexcept { return L::alloc(n); }
  static void free(void* p) noexcept { L::dealloc(p); }
  static void free_sized(void* p, std::size_t n) noexcept { ops::dealloc_sized(p, n); }
  static void free_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    ops::dealloc_aligned_sized(p, align, n);
  }

  static void* calloc(std::size_t count, std::size_t size) noexcept {
    std::size_t n;
    if (__builtin_mul_overflow(count, size, &n)) return enomem();
    return ops::alloc_zeroed(n);
  }

  static void* realloc(void* p, std::size_t n) noexcept {
    if (!p) return L::alloc(n);
    if (n > PTRDIFF_MAX) return enomem();  // no block can be that big; p stays as it is
    if (n == 0) {  // free p, return a unique minimal block as malloc(0) does
      L::dealloc(p);
      return L::alloc(0);
    }
    return ops::realloc(p, n);
  }

  static void* reallocarray(void* p, std::size_t count, std::size_t size) noexcept {
    std::size_t n;
    if (__builtin_mul_overflow(count, size, &n)) return enomem();
    return realloc(p, n);
  }

  static void* aligned_alloc(std::size_t align, std::size_t n) noexcept {
    if (!detail::is_power_of_two(align)) {
      errno = EINVAL;
      return nullptr;
    }
    return aligned(align, n);
  }

  // memalign follows glibc rather than aligned_alloc's C17 rule (programs
  // written against glibc pass such alignments): one that is not a power of
  // two is rounded up to the next (0 asks for no alignment: malloc's); only
  // one above SIZE_MAX / 2 + 1, with no power of two to round to, is EINVAL.
  static void* memalign(std::size_t align, std::size_t n) noexcept {
    if (align > SIZE_MAX / 2 + 1) {
      errno = EINVAL;
      return nullptr;
    }
    return aligned(align == 0 ? 1 : std::bit_ceil(align), n);
  }

  static int posix_memalign(void** out, std::size_t align, std::size_t n) noexcept {
    if (!detail::is_power_of_two(align) || align < sizeof(void*)) return EINVAL;
    int saved = errno;
    void* p = aligned(align, n);
    if (!p) {
      errno = saved;  // posix_memalign reports through its result, not errno
      return ENOMEM;
    }
    *out = p;
    return 0;
  }

  static void* valloc(std::size_t n) noexcept { return aligned(os::page_size(), n); }

  static void* pvalloc(std::size_t n) noexcept {
    std::size_t page = os::page_size();
    if (n > SIZE_MAX - page) return enomem();
    std::size_t rounded = n == 0 ? page : (n + page - 1) & ~(page - 1);
    return aligned(page, rounded);
  }

  static std::size_t malloc_usable_size(const void* p) noexcept { return L::usable_size(p); }
  static int malloc_trim(std::size_t pad) noexcept { return ops::trim(pad); }

  // glibc's reporting calls, answered from the layer's stats hook, or by
  // the next library's when the layer has none.
  static struct mallinfo2 mallinfo2() noexcept {
    tenon_stats s;
    return read_stats(s) ? detail::to_mallinfo2(s) : detail::next_mallinfo2();
  }
  static struct mallinfo mallinfo() noexcept {
    tenon_stats s;
    return read_stats(s) ? detail::to_mallinfo(s) : detail::next_mallinfo();
  }
  static void malloc_stats() noexcept {
    tenon_stats s;
    if (read_stats(s)) detail::print_malloc_stats(s);
    else detail::next_malloc_stats();
  }
  static int malloc_info(int options, FILE* fp) noexcept {
    tenon_stats s;
    return read_stats(s) ? detail::write_malloc_info(s, options, fp) : detail::next_malloc_info(options, fp);
  }

  // operator new: on failure call the new_handler and retry while one is
  // installed; with none, throw std::bad_alloc.
  static void* op_new(std::size_t n) {
    if (void* p = L::alloc(n)) return p;
    return handler_loop([n] { return L::alloc(n); });
  }
  static void* op_new_aligned(std::size_t n, std::align_val_t al) {
    return handler_loop([=] { return new_aligned(n, al); });
  }
  static void* op_new_nothrow(std::size_t n, detail::nothrow_form form) noexcept {
    if (void* p = L::alloc(n)) return p;
    return detail::current_new_handler() ? detail::next_nothrow_new(form, n) : nullptr;
  }
  static void* op_new_aligned_nothrow(std::size_t n, std::align_val_t al, detail::nothrow_form form) noexcept {
    if (void* p = new_aligned(n, al)) return p;
    return detail::current_new_handler() ? detail::next_nothrow_new_aligned(form, n, al) : nullptr;
  }

 private:
  static void* enomem() noexcept {
    errno = ENOMEM;
    return nullptr;
  }
  // s filled by the layer; false when it keeps no statistics.
  static bool read_stats(tenon_stats& s) noexcept {
    s.version = TENON_STATS_VERSION;
    return ops::stats(&s) == 0;
  }
  // align is a power of two. Sizes past PTRDIFF_MAX are refused here, so
  // that no layer has to round one up to its alignment and wrap.
  static void* aligned(std::size_t align, std::size_t n) noexcept {
    if (n > PTRDIFF_MAX || align > PTRDIFF_MAX) return enomem();
    return L::alloc_aligned(align, n);
  }
  static void* new_aligned(std::size_t n, std::align_val_t al) noexcept {
    auto a = static_cast<std::size_t>(al);
    return detail::is_power_of_two(a) ? aligned(a, n) : nullptr;
  }
  template <class Alloc>
  static void* handler_loop(Alloc alloc) {
    for (;;) {
      if (void* p = alloc()) return p;
      std::new_handler handler = detail::current_new_handler();
      if (!handler) detail::throw_bad_alloc();
      handler();
    }
  }
};

}  // namespace tenon

#define TENON_EXPORTED __attribute__((visibility("default")))
// malloc and free start on a 64-byte line: where the linker put them moved
// threadtest T16's CPU time by 5% at the same instruction count (malloc 16
// or 48 bytes into its line; docs/architecture.md, layer 4, "Where the rest
// of mstress's gap is"), whatever a change did elsewhere in the library.
#define TENON_EXPORTED_HOT __attribute__((visibility("default"), aligned(64)))

// Every standard allocation name from the composition T (C names, glibc's
// mallinfo2/mallinfo/malloc_stats/malloc_info from its stats hook, then all
// twenty replaceable operator new/delete forms). Use once per shared library,
// at namespace scope.
#define TENON_EXPORT_MALLOC(T)                                                                                  \
  extern "C" {                                                                                                  \
  TENON_EXPORTED_HOT void* malloc(size_t n) noexcept { return ::tenon::standard_api<T>::malloc(n); }            \
  TENON_EXPORTED_HOT void free(void* p) noexcept { ::tenon::standard_api<T>::free(p); }                         \
  TENON_EXPORTED void* calloc(size_t c, size_t n) noexcept { return ::tenon::standard_api<T>::calloc(c, n); }   \
  TENON_EXPORTED void* realloc(void* p, size_t n) noexcept { return ::tenon::standard_api<T>::realloc(p, n); }  \
  TENON_EXPORTED void* reallocarray(void* p, size_t c, size_t n) noexcept {                                     \
    return ::tenon::standard_api<T>::reallocarray(p, c, n);                                                     \
  }                                                                                                             \
  TENON_EXPORTED void free_sized(void* p, size_t n) noexcept { ::tenon::standard_api<T>::free_sized(p, n); }    \
  TENON_EXPORTED void free_aligned_sized(void* p, size_t a, size_t n) noexcept {                                \
    ::tenon::standard_api<T>::free_aligned_sized(p, a, n);                                                      \
  }                                                                                                             \
  TENON_EXPORTED void* aligned_alloc(size_t a, size_t n) noexcept {                                             \
    return ::tenon::standard_api<T>::aligned_alloc(a, n);                                                       \
  }                                                                                                             \
  TENON_EXPORTED int posix_memalign(void** out, size_t a, size_t n) noexcept {                                  \
    return ::tenon::standard_api<T>::posix_memalign(out, a, n);                                                 \
  }                                                                                                             \
  TENON_EXPORTED void* memalign(size_t a, size_t n) noexcept { return ::tenon::standard_api<T>::memalign(a, n); } \
  TENON_EXPORTED void* valloc(size_t n) noexcept { return ::tenon::standard_api<T>::valloc(n); }                \
  TENON_EXPORTED void* pvalloc(size_t n) noexcept { return ::tenon::standard_api<T>::pvalloc(n); }              \
  TENON_EXPORTED size_t malloc_usable_size(void* p) noexcept {                                                  \
    return ::tenon::standard_api<T>::malloc_usable_size(p);                                                     \
  }                                                                                                             \
  TENON_EXPORTED int malloc_trim(size_t pad) noexcept { return ::tenon::standard_api<T>::malloc_trim(pad); }    \
  TENON_EXPORTED struct mallinfo2 mallinfo2(void) noexcept { return ::tenon::standard_api<T>::mallinfo2(); }    \
  TENON_EXPORTED struct mallinfo mallinfo(void) noexcept { return ::tenon::standard_api<T>::mallinfo(); }       \
  TENON_EXPORTED void malloc_stats(void) noexcept { ::tenon::standard_api<T>::malloc_stats(); }                 \
  TENON_EXPORTED int malloc_info(int options, FILE* fp) noexcept {                                              \
    return ::tenon::standard_api<T>::malloc_info(options, fp);                                                  \
  }                                                                                                             \
  }                                                                                                             \
  TENON_EXPORTED void* operator new(std::size_t n) { return ::tenon::standard_api<T>::op_new(n); }              \
  TENON_EXPORTED void* operator new[](std::size_t n) { return ::tenon::standard_api<T>::op_new(n); }            \
  TENON_EXPORTED void* operator new(std::size_t n, const std::nothrow_t&) noexcept {                            \
    return ::tenon::standard_api<T>::op_new_nothrow(n, ::tenon::detail::nothrow_form::scalar);                  \
  }                                                                                                             \
  TENON_EXPORTED void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {                          \
    return ::tenon::standard_api<T>::op_new_nothrow(n, ::tenon::detail::nothrow_form::array);                   \
  }                                                                                                             \
  TENON_EXPORTED void* operator new(std::size_t n, std::align_val_t al) {                                       \
    return ::tenon::standard_api<T>::op_new_aligned(n, al);                                                     \
  }                                                                                                             \
  TENON_EXPORTED void* operator new[](std::size_t n, std::align_val_t al) {                                     \
    return ::tenon::standard_api<T>::op_new_aligned(n, al);                                                     \
  }                                                                                                             \
  TENON_EXPORTED void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {       \
    return ::tenon::standard_api<T>::op_new_aligned_nothrow(n, al, ::tenon::detail::nothrow_form::scalar);      \
  }                                                                                                             \
  TENON_EXPORTED void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {     \
    return ::tenon::standard_api<T>::op_new_aligned_nothrow(n, al, ::tenon::detail::nothrow_form::array);       \
  }                                                                                                             \
  TENON_EXPORTED void operator delete(void* p) noexcept { ::tenon::standard_api<T>::free(p); }                  \
  TENON_EXPORTED void operator delete[](void* p) noexcept { ::tenon::standard_api<T>::free(p); }                \
  TENON_EXPORTED void operator delete(void* p, const std::nothrow_t&) noexcept {                                \
    ::tenon::standard_api<T>::free(p);                                                                          \
  }                                                                                                             \
  TENON_EXPORTED void operator delete[](void* p, const std::nothrow_t&) noexcept {                              \
    ::tenon::standard_api<T>::free(p);                                                                          \
  }                                                                                                             \
  TENON_EXPORTED void operator delete(void* p, std::size_t n) noexcept {                                        \
    ::tenon::standard_api<T>::free_sized(p, n);                                                                 \
  }                                                                                                             \
  TENON_EXPORTED void operator delete[](void* p, std::size_t n) noexcept {                                      \
    ::tenon::standard_api<T>::free_sized(p, n);                                                                 \
  }                                                                                                             \
  TENON_EXPORTED void operator delete(void* p, std::align_val_t) noexcept { ::tenon::standard_api<T>::free(p); } \
  TENON_EXPORTED void operator delete[](void* p, std::align_val_t) noexcept {                                   \
    ::tenon::standard_api<T>::free(p);                                                                          \
  }                                                                                                             \
  TENON_EXPORTED void operator delete(void* p, std::size_t n, std::align_val_t al) noexcept {                   \
    ::tenon::standard_api<T>::free_aligned_sized(p, static_cast<std::size_t>(al), n);                           \
  }                                                                                                             \
  TENON_EXPORTED void operator delete[](void* p, std::size_t n, std::align_val_t al) noexcept {                 \
    ::tenon::standard_api<T>::free_aligned_sized(p, static_cast<std::size_t>(al), n);                           \
  }                                                                                                             \
  TENON_EXPORTED void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {              \
    ::tenon::standard_api<T>::free(p);                                                                          \
  }                                                                                                             \
  TENON_EXPORTED void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {            \
    ::tenon::standard_api<T>::free(p);                                                                          \
  }
