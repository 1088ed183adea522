// Layer 1, platform: tenon's messages on stderr (report.h).
#include "tenon/platform/report.h"

#include "tenon/platform/os.h"

namespace tenon {

void message_line::write() {
  buf_[n_++] = '\n';  // text() always leaves room for it
  os::write_error(buf_, n_);
  n_ = 0;
  text("tenon: ");
}

void report_error(const char* what, const void* pointer) noexcept {
  message_line line;
  line.text(what);
  if (pointer) line.text(": ").address(pointer);
  line.write();
}

void fatal_error(const char* what, const void* pointer) noexcept {
  report_error(what, pointer);
  os::abort_process();
}

}  // namespace tenon
