// <tenon/measure/next_allocator.hpp>: tenon::next_allocator, the allocator
// that comes after this library in the dynamic linker's search order (glibc,
// or whatever else is preloaded or linked: jemalloc, mimalloc, tenon...), as
// the innermost layer of a composition. libtenon-trace.so is
//
//   TENON_EXPORT_MALLOC(tenon::trace<tenon::latency<tenon::next_allocator>>)
//
// The next allocator's functions are found with dlsym(RTLD_NEXT) when the
// library is loaded (or at the first call, if another library's constructor
// allocates before ours runs). dlsym may itself allocate: calls made by a
// thread while it resolves are served from a static bootstrap buffer, whose
// blocks are recognised by address when freed (and never reused). Out of
// line: src/measure/next_allocator.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tenon::measure::next {

using malloc_fn = void* (*)(std::size_t);
using free_fn = void (*)(void*);
using calloc_fn = void* (*)(std::size_t, std::size_t);
using realloc_fn = void* (*)(void*, std::size_t);
using memalign_fn = int (*)(void**, std::size_t, std::size_t);
using usable_fn = std::size_t (*)(void*);
using trim_fn = int (*)(std::size_t);

// Each entry starts as a resolver that looks everything up, then calls on.
struct function_table {
  std::atomic<malloc_fn> malloc;
  std::atomic<free_fn> free;
  std::atomic<calloc_fn> calloc;
  std::atomic<realloc_fn> realloc;
  std::atomic<memalign_fn> posix_memalign;
  std::atomic<usable_fn> usable_size;
  std::atomic<trim_fn> trim;  // nullptr when the next allocator has no malloc_trim
};
extern function_table g_table;

inline constexpr std::size_t kBootstrapBytes = 64 * 1024;
extern char g_bootstrap[kBootstrapBytes];

inline bool in_bootstrap(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(g_bootstrap) < kBootstrapBytes;
}
// A block of the bootstrap buffer (what a thread gets while it resolves;
// tests call it directly): n bytes at a multiple of align (16 at least),
// zeroed; nullptr with ENOMEM once the buffer is used up.
void* bootstrap_alloc(std::size_t n, std::size_t align) noexcept;
std::size_t bootstrap_usable_size(const void* p) noexcept;
void* bootstrap_realloc(void* p, std::size_t n) noexcept;  // moves the block to the next allocator
void* fail_enomem() noexcept;  // errno = ENOMEM, nullptr (posix_memalign leaves errno alone)

// The file the next malloc was found in, or "?" (for reports).
const char* next_library() noexcept;
// The bytes handed out from the bootstrap buffer so far (tests).
std::size_t bootstrap_used() noexcept;

}  // namespace tenon::measure::next

namespace tenon {

struct next_allocator {
  static void* alloc(std::size_t n) noexcept {
    return measure::next::g_table.malloc.load(std::memory_order_relaxed)(n);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    // malloc's own alignment covers anything up to a pointer's size.
    if (align <= sizeof(void*)) return alloc(n);
    void* p = nullptr;
    if (measure::next::g_table.posix_memalign.load(std::memory_order_relaxed)(&p, align, n) != 0)
      return measure::next::fail_enomem();
    return p;
  }
  static void dealloc(void* p) noexcept {
    if (measure::next::in_bootstrap(p)) [[unlikely]] return;
    measure::next::g_table.free.load(std::memory_order_relaxed)(p);
  }
  static std::size_t usable_size(const void* p) noexcept {
    if (!p) return 0;
    if (measure::next::in_bootstrap(p)) [[unlikely]] return measure::next::bootstrap_usable_size(p);
    return measure::next::g_table.usable_size.load(std::memory_order_relaxed)(const_cast<void*>(p));
  }
  static void* realloc(void* p, std::size_t n) noexcept {
    if (measure::next::in_bootstrap(p)) [[unlikely]] return measure::next::bootstrap_realloc(p, n);
    return measure::next::g_table.realloc.load(std::memory_order_relaxed)(p, n);
  }
  static void* alloc_zeroed(std::size_t n) noexcept {
    return measure::next::g_table.calloc.load(std::memory_order_relaxed)(1, n);
  }
  static int trim(std::size_t pad) noexcept {
    measure::next::trim_fn f = measure::next::g_table.trim.load(std::memory_order_relaxed);
    return f ? f(pad) : 0;
  }
};

}  // namespace tenon
