// Formatting for reports printed from inside an allocator: a line built in a
// fixed buffer on the stack, written with write(2). No stdio (its buffers
// allocate), no locale, nothing that allocates.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon::measure::text {

struct line {
  char buf[512];
  std::size_t len = 0;

  line& str(const char* s) {
    while (*s && len < sizeof buf) buf[len++] = *s++;
    return *this;
  }
  line& ch(char c) {
    if (len < sizeof buf) buf[len++] = c;
    return *this;
  }
  line& u64(std::uint64_t v) {
    char tmp[24];
    int k = 0;
    do { tmp[k++] = static_cast<char>('0' + v % 10); v /= 10; } while (v);
    while (k) ch(tmp[--k]);
    return *this;
  }
  // v with `decimals` digits after the point (v >= 0), rounded.
  line& fixed(double v, int decimals) {
    std::uint64_t scale = 1;
    for (int i = 0; i < decimals; ++i) scale *= 10;
    std::uint64_t x = static_cast<std::uint64_t>(v * double(scale) + 0.5);
    u64(x / scale);
    if (decimals > 0) {
      ch('.');
      std::uint64_t frac = x % scale;
      for (std::uint64_t d = scale / 10; d; d /= 10) ch(static_cast<char>('0' + (frac / d) % 10));
    }
    return *this;
  }
  // Pads what was appended since `mark` on the left to `width` characters.
  line& right_from(std::size_t mark, std::size_t width) {
    std::size_t used = len - mark;
    if (used >= width || len + (width - used) > sizeof buf) return *this;
    std::size_t pad = width - used;
    for (std::size_t i = len; i-- > mark;) buf[i + pad] = buf[i];
    for (std::size_t i = 0; i < pad; ++i) buf[mark + i] = ' ';
    len += pad;
    return *this;
  }
  line& pad_to(std::size_t col) {
    while (len < col) ch(' ');
    return *this;
  }
  void write_to(int fd) {
    ch('\n');
    os::write_all(fd, buf, len);
  }
};

}  // namespace tenon::measure::text
