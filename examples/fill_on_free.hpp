// A debugging layer: overwrites every freed block with a byte pattern, so a
// use after free reads garbage at once instead of stale, plausible data.
#pragma once
#include <cstddef>
#include <cstring>

#include <tenon/layer.hpp>

namespace example {

template <class I, unsigned char Fill = 0xDF>
struct fill_on_free : tenon::pass_through<I> {
  static void dealloc(void* p) noexcept {
    if (p) std::memset(p, Fill, I::usable_size(p));
    I::dealloc(p);
  }
};

}  // namespace example
