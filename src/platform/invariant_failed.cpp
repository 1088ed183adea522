// Layer 1, platform: the end of a TENON_DEBUG build whose invariant broke
// (common/checks.h declares it; writing and aborting are the platform's).
#include "tenon/common/checks.h"

#include "tenon/platform/os.h"
#include "tenon/platform/report.h"

namespace tenon {

void invariant_failed(const char* file, int line, const char* what) noexcept {
  message_line message;
  message.text("invariant broken at ").text(file).text(":").number(line > 0 ? static_cast<unsigned>(line) : 0u)
      .text(": ").text(what);
  message.write();
  os::abort_process();
}

}  // namespace tenon
