// Every replaceable operator new/delete form: operator new runs the
// new_handler loop and throws std::bad_alloc when it gives up.
//
// libtenon.so does not link libstdc++ (it would add ~0.8 MiB of resident
// pages to every C program): the few libstdc++ symbols used here are weak
// references. A C++ program has libstdc++ loaded, so they resolve; a C
// program never calls operator new. If one does (a C++ library dlopen'ed
// later), the new_handler cannot be read and failure aborts with a message
// instead of throwing. No try/catch here (that would need libstdc++'s
// personality routine): an exception thrown by a new_handler inside a
// nothrow operator new propagates to the caller (documented in docs/api.md).
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <new>

// Weak, asm-named views of std::get_new_handler and std::__throw_bad_alloc.
extern "C" {
std::new_handler tenon_weak_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] void tenon_weak_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak));
}

#include "frontend/alloc_api.h"
#include "tenon/tenon.h"

using namespace tenon;

namespace {

void* aligned(std::size_t n, std::align_val_t al) {
  std::size_t a = static_cast<std::size_t>(al);
  return api::valid_alignment(a) ? api::alloc_aligned(a, n) : nullptr;
}

// The standard loop: on failure call the installed new_handler and retry;
// with none installed, throw (or return nullptr for the nothrow forms).
[[noreturn]] void throw_bad_alloc() {
  if (tenon_weak_throw_bad_alloc) tenon_weak_throw_bad_alloc();
  static const char msg[] = "tenon: operator new failed and libstdc++ is not loaded to throw std::bad_alloc\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  abort();
}

std::new_handler current_handler() { return tenon_weak_get_new_handler ? tenon_weak_get_new_handler() : nullptr; }

template <bool Nothrow, class Alloc>
void* new_loop(Alloc&& alloc) {
  for (;;) {
    if (void* p = alloc()) return p;
    std::new_handler handler = current_handler();
    if (!handler) {
      if constexpr (Nothrow) return nullptr;
      else throw_bad_alloc();
    }
    handler();
  }
}

}  // namespace

#define TENON_NEW_API __attribute__((visibility("default")))

TENON_NEW_API void* operator new(std::size_t n) {
  if (void* p = api::alloc(n)) return p;
  return new_loop<false>([n] { return api::alloc(n); });
}
TENON_NEW_API void* operator new[](std::size_t n) { return operator new(n); }
TENON_NEW_API void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (void* p = api::alloc(n)) return p;
  return new_loop<true>([n] { return api::alloc(n); });
}
TENON_NEW_API void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }

TENON_NEW_API void* operator new(std::size_t n, std::align_val_t al) {
  return new_loop<false>([=] { return aligned(n, al); });
}
TENON_NEW_API void* operator new[](std::size_t n, std::align_val_t al) { return operator new(n, al); }
TENON_NEW_API void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return new_loop<true>([=] { return aligned(n, al); });
}
TENON_NEW_API void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t& t) noexcept {
  return operator new(n, al, t);
}

TENON_NEW_API void operator delete(void* p) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete(void* p, const std::nothrow_t&) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p, const std::nothrow_t&) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete(void* p, std::size_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p, std::size_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete(void* p, std::align_val_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p, std::align_val_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete(void* p, std::size_t, std::align_val_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { api::dealloc(p); }
TENON_NEW_API void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { api::dealloc(p); }
