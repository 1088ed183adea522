// The hook behind TENON_INJECT_POINT (built only with -DTENON_INJECT=ON).
#include "tenon/common/inject.h"

#ifdef TENON_INJECT
#include <atomic>

namespace {
std::atomic<tenon_inject_hook_fn> g_hook{nullptr};
}

namespace tenon::inject {
void hit(const char* point) {
  if (auto fn = g_hook.load(std::memory_order_acquire)) fn(point);
}
}  // namespace tenon::inject

extern "C" void tenon_inject_set_hook(tenon_inject_hook_fn fn) {
  g_hook.store(fn, std::memory_order_release);
}
#endif
