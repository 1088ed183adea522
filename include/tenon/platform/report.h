// Layer 1, platform: tenon's own lines on stderr. Every warning, error and
// settings line tenon writes starts with "tenon: ", so that a user who sees
// one can tell it from the C library's ("free(): invalid pointer" is
// glibc's; "tenon: ..." is ours). Lines are built on the stack and written
// with one write(2): no allocation, no lock, errno kept. Safe inside malloc,
// before main and at exit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tenon {

// One line, "tenon: " first and "\n" last, at most kCapacity characters in
// all (longer text is cut, the newline kept).
class message_line {
 public:
  static constexpr std::size_t kCapacity = 512;

  message_line() { text("tenon: "); }
  message_line& text(const char* s) {
    while (s && *s && n_ < kCapacity - 1) buf_[n_++] = *s++;
    return *this;
  }
  message_line& text(const char* s, std::size_t length) {
    for (std::size_t i = 0; i < length && s[i] && n_ < kCapacity - 1; ++i) buf_[n_++] = s[i];
    return *this;
  }
  message_line& number(std::uint64_t v) {
    char digits[20];
    int k = 0;
    do digits[k++] = static_cast<char>('0' + v % 10); while (v /= 10);
    while (k > 0 && n_ < kCapacity - 1) buf_[n_++] = digits[--k];
    return *this;
  }
  message_line& address(const void* p) {
    static constexpr char kHex[] = "0123456789abcdef";
    auto v = reinterpret_cast<std::uintptr_t>(p);
    char digits[2 * sizeof v];
    int k = 0;
    do digits[k++] = kHex[v & 15]; while (v >>= 4);
    text("0x");
    while (k > 0 && n_ < kCapacity - 1) buf_[n_++] = digits[--k];
    return *this;
  }
  // Ends the line and writes it to stderr in one write.
  void write();

 private:
  char buf_[kCapacity];
  std::size_t n_ = 0;
};

// "tenon: <what>\n", or "tenon: <what>: 0x<pointer>\n" when a pointer is
// given: the one format of tenon's error reports (misuse found in a call,
// a check that failed). Returns; the caller decides what happens next.
void report_error(const char* what, const void* pointer = nullptr) noexcept;

// report_error, then the process ends with SIGABRT (a core dump, as glibc's
// own malloc checks do).
[[noreturn]] void fatal_error(const char* what, const void* pointer = nullptr) noexcept;

}  // namespace tenon
