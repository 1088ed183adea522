// Every replaceable operator new/delete form. The only translation unit built
// with exceptions: operator new must throw std::bad_alloc after the
// new_handler loop gives up.
#include <cstddef>
#include <new>

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
template <bool Nothrow, class Alloc>
void* new_loop(Alloc&& alloc) {
  for (;;) {
    if (void* p = alloc()) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) {
      if constexpr (Nothrow) return nullptr;
      else throw std::bad_alloc();
    }
    if constexpr (Nothrow) {
      try { handler(); } catch (...) { return nullptr; }
    } else {
      handler();
    }
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
