// libtenon-secure.so: the secure build, a composition. The engine's parts
// instantiated for secure_config (free-list links encoded with per-span keys
// and checked when followed: secure/links.h), under the secure layers
// (tenon::secure::layers, <tenon/secure/layers.hpp>: zero_size, canary and
// two quarantines).
// Every check reports one "tenon: ..." line on stderr and aborts
// (docs/security.md lists what this build catches and what it costs).
#include "../engine/all_parts.ipp"
#include "../frontend/engine_front.ipp"
#include "tenon/layer.hpp"
#include "tenon/platform/options.h"
#include "tenon/secure/layers.hpp"
#include "tenon/secure/links.h"
#include "tenon/secure/shuffle.h"

namespace tenon {

struct secure_config {
  using platform = linux_platform;
  using links = secure::encoded_links;
  using sync = lock_free;
  using stats = counting_stats;
  // Freed huge blocks wait in the huge cache inaccessible (huge/cache.ipp).
  static constexpr bool protect_cached_huge = true;
  // Guard pages: around each chunk's metadata, after each live large block
  // and huge block (arena/guard_pages.h).
  static constexpr bool guard_pages = true;
  // Fresh blocks carved in a random order (secure/shuffle.h).
  using fresh_order = secure::shuffled_fresh_blocks;
  // The lazy purger starts before the first run is given back, not at 1 MiB
  // kept: its thread's allocations never take a freed block's slices
  // (arena/purger.ipp).
  static constexpr bool purger_before_first_release = true;
  // At a thread's exit, its quarantine ring is given back before its heap
  // is parked (heap/attach.ipp, on_thread_exit). Defined below the layers.
  static void before_thread_exit() noexcept;
};

constinit engine<secure_config> g_secure_engine;

using secure_front = engine_front<g_secure_engine>;
using secure_allocator = secure::layers<secure_front>;

void secure_config::before_thread_exit() noexcept { secure::quarantine_of<secure_front>::give_back_ring(); }

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
