// Layer 1, platform: the end of a TENON_DEBUG build whose invariant broke
// (common/checks.h declares it; writing and aborting are the platform's).
#include "tenon/common/checks.h"

#include "tenon/platform/os.h"

namespace tenon {

void invariant_failed(const char* file, int line, const char* what) noexcept {
  char number[16];
  char* p = number + sizeof number;
  *--p = 0;
  unsigned v = line > 0 ? static_cast<unsigned>(line) : 0;
  do *--p = static_cast<char>('0' + v % 10); while (v /= 10);
  os::write_error("tenon: invariant broken at ");
  os::write_error(file);
  os::write_error(":");
  os::write_error(p);
  os::write_error(": ");
  os::write_error(what);
  os::write_error("\n");
  os::abort_process();
}

}  // namespace tenon
