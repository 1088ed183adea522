// tenon::next_allocator's lookup and bootstrap buffer (see its header).
//
// Lookup is idempotent: a thread that finds the table unresolved looks the
// names up itself and stores what it found (every thread finds the same), so
// no thread ever waits for another to finish resolving. While a thread is
// inside dlsym, its own allocations (dlsym may allocate, for instance the
// dlerror state) come from the bootstrap buffer by one CAS; those
// blocks carry their size in a 16-byte header, are never reused, and free()
// of one does nothing.
#include "tenon/measure/next_allocator.hpp"

#include <errno.h>
#include <string.h>

#include "tenon/platform/os.h"

namespace tenon::measure::next {

alignas(64) char g_bootstrap[kBootstrapBytes];

namespace {

std::atomic<std::size_t> g_bootstrap_top{0};
__thread bool t_resolving __attribute__((tls_model("initial-exec")));

constexpr std::size_t kHeader = 16;

}  // namespace

void* bootstrap_alloc(std::size_t n, std::size_t align) noexcept {
  if (align < kHeader) align = kHeader;
  if (n > kBootstrapBytes || align > kBootstrapBytes / 4) {
    errno = ENOMEM;
    return nullptr;
  }
  std::size_t top = g_bootstrap_top.load(std::memory_order_relaxed);
  std::size_t start, end;
  do {
    // The block's address is aligned (the buffer's own is only 64); its
    // header sits just below it.
    std::uintptr_t base = reinterpret_cast<std::uintptr_t>(g_bootstrap);
    start = ((base + top + kHeader + align - 1) & ~(align - 1)) - base;
    end = start + ((n + kHeader - 1) & ~(kHeader - 1));
    if (end > kBootstrapBytes) {
      errno = ENOMEM;
      return nullptr;
    }
  } while (!g_bootstrap_top.compare_exchange_weak(top, end, std::memory_order_relaxed));
  std::size_t size = n;
  memcpy(g_bootstrap + start - kHeader, &size, sizeof size);
  return g_bootstrap + start;  // zero: the buffer is static and never reused
}

namespace {

void resolve_all();

void* first_malloc(std::size_t n) {
  if (t_resolving) return bootstrap_alloc(n, 16);
  resolve_all();
  return g_table.malloc.load(std::memory_order_relaxed)(n);
}
void first_free(void* p) {
  if (in_bootstrap(p) || !p) return;
  resolve_all();
  g_table.free.load(std::memory_order_relaxed)(p);
}
void* first_calloc(std::size_t c, std::size_t n) {
  if (t_resolving) {
    std::size_t total;
    if (__builtin_mul_overflow(c, n, &total)) {
      errno = ENOMEM;
      return nullptr;
    }
    return bootstrap_alloc(total, 16);
  }
  resolve_all();
  return g_table.calloc.load(std::memory_order_relaxed)(c, n);
}
void* first_realloc(void* p, std::size_t n) {
  if (t_resolving) {
    void* q = bootstrap_alloc(n, 16);
    if (q && p) {
      std::size_t old = in_bootstrap(p) ? bootstrap_usable_size(p) : 0;
      memcpy(q, p, old < n ? old : n);
    }
    return q;
  }
  resolve_all();
  return g_table.realloc.load(std::memory_order_relaxed)(p, n);
}
int first_posix_memalign(void** out, std::size_t align, std::size_t n) {
  if (t_resolving) {
    void* p = bootstrap_alloc(n, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  resolve_all();
  return g_table.posix_memalign.load(std::memory_order_relaxed)(out, align, n);
}
std::size_t first_usable_size(void* p) {
  if (in_bootstrap(p)) return bootstrap_usable_size(p);
  resolve_all();
  return g_table.usable_size.load(std::memory_order_relaxed)(p);
}

[[noreturn]] void no_next(const char* name) {
  os::write_error("tenon: next_allocator: dlsym(RTLD_NEXT, \"");
  os::write_error(name);
  os::write_error("\") found nothing: no allocator after this library\n");
  os::abort_process();
}

template <class Fn>
Fn lookup(const char* name, bool required) {
  void* f = os::next_symbol(name);
  if (!f && required) no_next(name);
  return reinterpret_cast<Fn>(f);
}

void resolve_all() {
  bool was = t_resolving;
  t_resolving = true;
  auto m = lookup<malloc_fn>("malloc", true);
  auto f = lookup<free_fn>("free", true);
  auto c = lookup<calloc_fn>("calloc", true);
  auto r = lookup<realloc_fn>("realloc", true);
  auto pm = lookup<memalign_fn>("posix_memalign", true);
  auto us = lookup<usable_fn>("malloc_usable_size", true);
  auto tr = lookup<trim_fn>("malloc_trim", false);
  g_table.trim.store(tr, std::memory_order_relaxed);
  g_table.usable_size.store(us, std::memory_order_relaxed);
  g_table.posix_memalign.store(pm, std::memory_order_relaxed);
  g_table.realloc.store(r, std::memory_order_relaxed);
  g_table.calloc.store(c, std::memory_order_relaxed);
  g_table.free.store(f, std::memory_order_relaxed);
  g_table.malloc.store(m, std::memory_order_relaxed);
  t_resolving = was;
}

__attribute__((constructor(101))) void at_load() {
  if (g_table.malloc.load(std::memory_order_relaxed) == &first_malloc) resolve_all();
}

}  // namespace

constinit function_table g_table{{&first_malloc}, {&first_free},          {&first_calloc}, {&first_realloc},
                       {&first_posix_memalign}, {&first_usable_size}, {nullptr}};

std::size_t bootstrap_usable_size(const void* p) noexcept {
  std::size_t size;
  memcpy(&size, static_cast<const char*>(p) - kHeader, sizeof size);
  return size;
}

void* bootstrap_realloc(void* p, std::size_t n) noexcept {
  void* q = g_table.malloc.load(std::memory_order_relaxed)(n);  // the resolver still, inside dlsym
  if (!q) return nullptr;
  std::size_t old = bootstrap_usable_size(p);
  memcpy(q, p, old < n ? old : n);
  return q;
}

void* fail_enomem() noexcept {
  errno = ENOMEM;
  return nullptr;
}

const char* next_library() noexcept {
  const char* name = os::library_of(reinterpret_cast<void*>(g_table.malloc.load(std::memory_order_relaxed)));
  return name ? name : "?";
}

std::size_t bootstrap_used() noexcept { return g_bootstrap_top.load(std::memory_order_relaxed); }

}  // namespace tenon::measure::next
