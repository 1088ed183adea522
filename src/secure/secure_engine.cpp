// libtenon-secure.so: the secure build, a composition. The engine's parts
// instantiated for secure_config (free-list links encoded with per-span keys
// and checked when followed: secure/links.h), under three layers:
//   zero_size   malloc(0) gets a unique address no access may touch
//   canary      a keyed header and a canary after every block, checked on
//               free, sized free, realloc and malloc_usable_size
//   quarantine  delayed reuse: freed small blocks wait for 64 more frees,
//               zeroed, and are checked on the way out (write after free);
//               large blocks (up to 2 MiB) wait for 8 more, untouched
// Every check reports one "tenon: ..." line on stderr and aborts
// (docs/security.md lists what this build catches and what it costs).
#include "../engine/all_parts.ipp"
#include "../frontend/engine_front.ipp"
#include "tenon/layer.hpp"
#include "tenon/platform/options.h"
#include "tenon/secure/canary.hpp"
#include "tenon/secure/links.h"
#include "tenon/secure/quarantine.hpp"
#include "tenon/secure/zero_size.hpp"

namespace tenon {

struct secure_config {
  using platform = linux_platform;
  using links = secure::encoded_links;
  using sync = lock_free;
  using stats = counting_stats;
  // Freed huge blocks wait in the huge cache inaccessible (huge/cache.ipp).
  static constexpr bool protect_cached_huge = true;
};

constinit engine<secure_config> g_secure_engine;

using secure_front = engine_front<g_secure_engine>;
using secure_large_quarantine = secure::quarantine<secure_front, 8, kMaxSmall + 1, kMaxLarge, false>;
using secure_small_quarantine = secure::quarantine<secure_large_quarantine, 64, 0, kMaxSmall, true>;
using secure_allocator = secure::zero_size<secure::canary<secure_small_quarantine>>;

}  // namespace tenon

TENON_INSTANTIATE_ENGINE(tenon::secure_config)
template struct tenon::engine_front<tenon::g_secure_engine>;

TENON_EXPORT_MALLOC(tenon::secure_allocator)

namespace {
// TENON_STATS=1: the engine's counters at exit.
__attribute__((destructor)) void print_stats_at_exit() {
  if (tenon::options().stats) tenon::g_secure_engine.print_stats();
}
}  // namespace
