// libtenon-locked.so: the default engine's parts instantiated for a config
// whose sync policy is locked_sync, exported as a user's composition is.
#include "../../src/engine/all_parts.ipp"
#include "../../src/frontend/engine_front.ipp"
#include "locked_sync.h"
#include "tenon/layer.hpp"
#include "tenon/platform/options.h"

namespace tenon {

struct locked_config {
  using platform = linux_platform;
  using links = plain_links;
  using sync = locked_sync;
  using stats = counting_stats;
};

constinit engine<locked_config> g_locked_engine;

}  // namespace tenon

TENON_INSTANTIATE_ENGINE(tenon::locked_config)
template struct tenon::engine_front<tenon::g_locked_engine>;

TENON_EXPORT_MALLOC(tenon::engine_front<tenon::g_locked_engine>)

namespace {
// TENON_STATS=1: the engine's counters at exit (the mutex waits are printed
// by locked_stats.cpp).
__attribute__((destructor)) void print_stats_at_exit() {
  if (tenon::options().stats) tenon::g_locked_engine.print_stats();
}
}  // namespace
