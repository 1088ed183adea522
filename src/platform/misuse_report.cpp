// Layer 1, platform: report_misuse (platform/misuse.h), in tenon's one message
// format (platform/report.h): a line built on the stack, one write(2).
#include "tenon/platform/misuse.h"

#include "tenon/platform/os.h"
#include "tenon/platform/report.h"

namespace tenon {

void report_misuse(const char* op, const void* p, const char* what, std::size_t block_size) noexcept {
  message_line line;
  line.text(op).text("(").address(p).text("): ").text(what);
  if (block_size) line.text(" (block of ").number(block_size).text(" bytes)");
  line.write();
  os::abort_process();
}

}  // namespace tenon
