// libtenon-trace.so: preloaded in front of any allocator, times its calls
// (the latency layer) and, with TENON_TRACE=FILE, writes every call to a
// trace; the allocator itself is whatever comes next in the search order.
//   TENON_LATENCY=1 LD_PRELOAD="libtenon-trace.so libjemalloc.so.2" program
// The trace layer is outermost so that writing a record is not counted in
// the latency figures.
#include "text.h"
#include "tenon/measure/latency.hpp"
#include "tenon/measure/next_allocator.hpp"
#include "tenon/measure/trace.hpp"

TENON_EXPORT_MALLOC(tenon::trace<tenon::latency<tenon::next_allocator>>)

namespace {
void name_the_allocator(int fd) {
  tenon::measure::text::line l;
  l.str("tenon trace: calls forwarded to malloc in ").str(tenon::measure::next::next_library());
  l.write_to(fd);
}
__attribute__((constructor)) void at_load() { tenon::measure::set_report_note(name_the_allocator); }
}  // namespace
