// Layer 1, platform: report_misuse (platform/misuse.h).
#include "tenon/platform/misuse.h"

#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon {

namespace {

// Digits of v in base (10 or 16) at the end of buf; returns where they start.
char* format_number(std::uintptr_t v, unsigned base, char* end) {
  char* p = end;
  *--p = 0;
  do *--p = "0123456789abcdef"[v % base]; while (v /= base);
  return p;
}

}  // namespace

void report_misuse(const char* op, const void* p, const char* what, std::size_t block_size) noexcept {
  // One write per piece: the line is short and the process ends at once.
  char number[32];
  os::write_error("tenon: ");
  os::write_error(op);
  os::write_error("(0x");
  os::write_error(format_number(reinterpret_cast<std::uintptr_t>(p), 16, number + sizeof number));
  os::write_error("): ");
  os::write_error(what);
  if (block_size) {
    os::write_error(" (block of ");
    os::write_error(format_number(block_size, 10, number + sizeof number));
    os::write_error(" bytes)");
  }
  os::write_error("\n");
  os::abort_process();
}

}  // namespace tenon
