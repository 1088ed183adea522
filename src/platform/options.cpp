#include "tenon/platform/options.h"

#include "tenon/common/inject.h"
#include "tenon/platform/os.h"

#include <atomic>

namespace tenon {

namespace {
enum : int { kUnread, kParsing, kReady };
options_t g_options;
std::atomic<int> g_state{kUnread};

std::uint32_t parse_u32(const char* s, std::uint32_t fallback) {
  if (!s || !*s) return fallback;
  std::uint32_t v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return fallback;
    v = v * 10 + static_cast<std::uint32_t>(*s - '0');
  }
  return v;
}

// os::env (getenv) neither allocates nor locks, so this is safe at any point.
options_t parse() {
  options_t o;
  o.purge_delay_ms = parse_u32(os::env("TENON_PURGE_DELAY_MS"), o.purge_delay_ms);
  std::uint32_t bg = parse_u32(os::env("TENON_BACKGROUND_PURGE"), static_cast<std::uint32_t>(o.background_purge));
  if (bg <= static_cast<std::uint32_t>(purge_thread::at_load)) o.background_purge = static_cast<purge_thread>(bg);
  const char* st = os::env("TENON_STATS");
  o.stats = st && *st && *st != '0';
  return o;
}
}  // namespace

options_t options() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kReady) return g_options;
  options_t o = parse();
  if (state == kUnread && g_state.compare_exchange_strong(state, kParsing, std::memory_order_relaxed)) {
    TENON_INJECT_POINT("options.publish");
    g_options = o;
    g_state.store(kReady, std::memory_order_release);
  }
  return o;
}

}  // namespace tenon
