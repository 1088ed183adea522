// operator new's failure paths for every composition (declared in
// <tenon/export_malloc.hpp>).
//
// libtenon.so does not link libstdc++ (it would add ~0.8 MiB of resident
// pages to every C program): the two libstdc++ symbols used here are weak
// references. A C++ program has libstdc++ loaded, so they resolve. A C
// program that dlopens a C++ library (Python and its C++ extension modules)
// gets libstdc++ after us, maybe in that library's local scope: the weak
// references stayed null, so a failing operator new finds libstdc++ by its
// soname then (late_libstdcxx), on that failure only. With no libstdc++
// loaded at all, failure aborts with a message. No try/catch here (that would need libstdc++'s
// personality routine): when a nothrow form fails with a new_handler
// installed (which may throw), it hands the request to the next definition
// of that form in line, libstdc++'s, which calls our throwing operator new
// inside its own try/catch and returns nullptr on bad_alloc.
#include <atomic>

#include "tenon/layer.hpp"
#include "tenon/platform/os.h"
#include "tenon/platform/report.h"

// Weak, asm-named views of std::get_new_handler and std::__throw_bad_alloc.
extern "C" {
std::new_handler tenon_weak_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] void tenon_weak_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak));
}

namespace tenon::detail {

namespace {

// The next definitions of the nothrow forms in line (libstdc++'s), looked up
// when the library is loaded: dlsym takes the dynamic linker's lock, which a
// thread stopped inside dlopen would hold for ever, so no allocation may
// call it. A handler can only be installed where libstdc++ is loaded; a C
// program that loads it later (a C++ library dlopen'ed) finds nothing here
// at load and looks once more on this rare path, the only time it can.
constexpr int kForms = 4;  // [aligned][array]
const char* const kNextSymbols[kForms] = {"_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
                                          "_ZnwmSt11align_val_tRKSt9nothrow_t",
                                          "_ZnamSt11align_val_tRKSt9nothrow_t"};
std::atomic<void*> g_next[kForms];

// libstdc++'s `name` where libstdc++ was loaded after this library (a C
// program that dlopen'ed a C++ library, RTLD_LOCAL included: dlsym(RTLD_NEXT)
// does not see it). Looked up on each failure and never kept: that library,
// and the libstdc++ it brought, may be unloaded and loaded again elsewhere.
// Takes the dynamic linker's lock, on operator new's failure path only, in
// a process where the other answer is to abort.
void* late_libstdcxx(const char* name) { return os::loaded_library_symbol("libstdc++.so.6", name); }

void* next_form(bool aligned, nothrow_form form) {
  int f = (aligned ? 2 : 0) + (form == nothrow_form::array ? 1 : 0);
  void* fn = g_next[f].load(std::memory_order_acquire);
  if (!fn && (fn = os::next_symbol(kNextSymbols[f]))) g_next[f].store(fn, std::memory_order_release);
  return fn ? fn : late_libstdcxx(kNextSymbols[f]);
}

__attribute__((constructor)) void resolve_next_forms_at_load() {
  for (int f = 0; f < kForms; ++f) g_next[f].store(os::next_symbol(kNextSymbols[f]), std::memory_order_release);
}

// The tag is our own: the std::nothrow object lives in libstdc++, which we
// do not link.
const std::nothrow_t kNothrow{};

}  // namespace

std::new_handler current_new_handler() noexcept {
  if (tenon_weak_get_new_handler) return tenon_weak_get_new_handler();
  using get_fn = std::new_handler (*)() noexcept;
  auto get = reinterpret_cast<get_fn>(late_libstdcxx("_ZSt15get_new_handlerv"));
  return get ? get() : nullptr;
}

void throw_bad_alloc() {
  if (tenon_weak_throw_bad_alloc) tenon_weak_throw_bad_alloc();
  using throw_fn = void (*)();
  if (auto late = reinterpret_cast<throw_fn>(late_libstdcxx("_ZSt17__throw_bad_allocv"))) late();
  fatal_error("operator new failed and libstdc++ is not loaded to throw std::bad_alloc");
}

void* next_nothrow_new(nothrow_form form, std::size_t n) noexcept {
  using fn = void* (*)(std::size_t, const std::nothrow_t&);
  auto next = reinterpret_cast<fn>(next_form(false, form));
  return next ? next(n, kNothrow) : nullptr;
}

void* next_nothrow_new_aligned(nothrow_form form, std::size_t n, std::align_val_t al) noexcept {
  using fn = void* (*)(std::size_t, std::align_val_t, const std::nothrow_t&);
  auto next = reinterpret_cast<fn>(next_form(true, form));
  return next ? next(n, al, kNothrow) : nullptr;
}

}  // namespace tenon::detail
