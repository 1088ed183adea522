// tenon::default_allocator: the composition libtenon.so exports, usable as
// the innermost layer of any other. Included by <tenon/layer.hpp>.
#pragma once
#include <cstddef>

#include "tenon/frontend/alloc_api.h"

namespace tenon {

struct default_allocator {
  static void* alloc(std::size_t n) noexcept { return api::alloc(n); }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept { return api::alloc_aligned(align, n); }
  static void dealloc(void* p) noexcept { api::dealloc(p); }
  static std::size_t usable_size(const void* p) noexcept { return api::usable_size(p); }
  static void* realloc(void* p, std::size_t n) noexcept { return api::realloc(p, n); }
  static void* alloc_zeroed(std::size_t n) noexcept { return api::zalloc(1, n); }
  static int trim(std::size_t) noexcept { return api::trim(); }
};

}  // namespace tenon
