// operator new's failure paths for every composition (declared in
// <tenon/export_malloc.hpp>).
//
// libtenon.so does not link libstdc++ (it would add ~0.8 MiB of resident
// pages to every C program): the two libstdc++ symbols used here are weak
// references. A C++ program has libstdc++ loaded, so they resolve; a C
// program never calls operator new. If one does (a C++ library dlopen'ed
// later), the new_handler cannot be read and failure aborts with a message
// instead of throwing. No try/catch here (that would need libstdc++'s
// personality routine): when a nothrow form fails with a new_handler
// installed (which may throw), it hands the request to the next definition
// of that form in line, libstdc++'s, which calls our throwing operator new
// inside its own try/catch and returns nullptr on bad_alloc.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "tenon/layer.hpp"

// Weak, asm-named views of std::get_new_handler and std::__throw_bad_alloc.
extern "C" {
std::new_handler tenon_weak_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] void tenon_weak_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak));
}

namespace tenon::detail {

std::new_handler current_new_handler() noexcept {
  return tenon_weak_get_new_handler ? tenon_weak_get_new_handler() : nullptr;
}

void throw_bad_alloc() {
  if (tenon_weak_throw_bad_alloc) tenon_weak_throw_bad_alloc();
  static const char msg[] = "tenon: operator new failed and libstdc++ is not loaded to throw std::bad_alloc\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  abort();
}

// A handler can only be installed where libstdc++ is loaded, so the lookup
// (on this rare path only) finds its definition. The tag is our own: the
// std::nothrow object lives in libstdc++, which we do not link.
static const std::nothrow_t kNothrow{};

void* next_nothrow_new(const char* symbol, std::size_t n) noexcept {
  using fn = void* (*)(std::size_t, const std::nothrow_t&);
  auto next = reinterpret_cast<fn>(dlsym(RTLD_NEXT, symbol));
  return next ? next(n, kNothrow) : nullptr;
}

void* next_nothrow_new_aligned(const char* symbol, std::size_t n, std::align_val_t al) noexcept {
  using fn = void* (*)(std::size_t, std::align_val_t, const std::nothrow_t&);
  auto next = reinterpret_cast<fn>(dlsym(RTLD_NEXT, symbol));
  return next ? next(n, al, kNothrow) : nullptr;
}

}  // namespace tenon::detail
