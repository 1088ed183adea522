// Every replaceable operator new/delete form: operator new runs the
// new_handler loop and throws std::bad_alloc when it gives up.
//
// libtenon.so does not link libstdc++ (it would add ~0.8 MiB of resident
// pages to every C program): the few libstdc++ symbols used here are weak
// references. A C++ program has libstdc++ loaded, so they resolve; a C
// program never calls operator new. If one does (a C++ library dlopen'ed
// later), the new_handler cannot be read and failure aborts with a message
// instead of throwing. No try/catch here (that would need libstdc++'s
// personality routine): when a nothrow form fails with a new_handler
// installed (which may throw), it hands the request to the next definition
// of that form in line, libstdc++'s, which calls our throwing operator new
// inside its own try/catch and returns nullptr on bad_alloc.
#include <dlfcn.h>
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

[[noreturn]] void throw_bad_alloc() {
  if (tenon_weak_throw_bad_alloc) tenon_weak_throw_bad_alloc();
  static const char msg[] = "tenon: operator new failed and libstdc++ is not loaded to throw std::bad_alloc\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  abort();
}

std::new_handler current_handler() { return tenon_weak_get_new_handler ? tenon_weak_get_new_handler() : nullptr; }

// The standard loop: on failure call the installed new_handler and retry;
// with none installed, throw std::bad_alloc.
template <class Alloc>
void* new_loop(Alloc&& alloc) {
  for (;;) {
    if (void* p = alloc()) return p;
    std::new_handler handler = current_handler();
    if (!handler) throw_bad_alloc();
    handler();
  }
}

// Failure of a nothrow form with a handler installed: let libstdc++'s own
// definition of the form (looked up with dlsym, on this rare path only) run
// the handler loop around our throwing form and catch. A handler can only be
// installed where libstdc++ is loaded, so the lookup finds it.
template <class Fn, class... Args>
void* nothrow_fallback(const char* symbol, Args... args) {
  if (current_handler()) {
    if (auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, symbol))) return next(args...);
  }
  return nullptr;
}

using new_nothrow_fn = void* (*)(std::size_t, const std::nothrow_t&);
using new_aligned_nothrow_fn = void* (*)(std::size_t, std::align_val_t, const std::nothrow_t&);

}  // namespace

#define TENON_NEW_API __attribute__((visibility("default")))

TENON_NEW_API void* operator new(std::size_t n) {
  if (void* p = api::alloc(n)) return p;
  return new_loop([n] { return api::alloc(n); });
}
TENON_NEW_API void* operator new[](std::size_t n) { return operator new(n); }
TENON_NEW_API void* operator new(std::size_t n, const std::nothrow_t& t) noexcept {
  if (void* p = api::alloc(n)) return p;
  return nothrow_fallback<new_nothrow_fn>("_ZnwmRKSt9nothrow_t", n, t);
}
TENON_NEW_API void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  if (void* p = api::alloc(n)) return p;
  return nothrow_fallback<new_nothrow_fn>("_ZnamRKSt9nothrow_t", n, t);
}

TENON_NEW_API void* operator new(std::size_t n, std::align_val_t al) {
  return new_loop([=] { return aligned(n, al); });
}
TENON_NEW_API void* operator new[](std::size_t n, std::align_val_t al) { return operator new(n, al); }
TENON_NEW_API void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t& t) noexcept {
  if (void* p = aligned(n, al)) return p;
  return nothrow_fallback<new_aligned_nothrow_fn>("_ZnwmSt11align_val_tRKSt9nothrow_t", n, al, t);
}
TENON_NEW_API void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t& t) noexcept {
  if (void* p = aligned(n, al)) return p;
  return nothrow_fallback<new_aligned_nothrow_fn>("_ZnamSt11align_val_tRKSt9nothrow_t", n, al, t);
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
