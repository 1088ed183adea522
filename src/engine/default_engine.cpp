// The default engine: its one instance, and the engine code instantiated for
// libtenon's config (what tenon::default_allocator runs on).
#include "all_parts.ipp"
#include "tenon/platform/options.h"
#include "tenon/platform/os.h"

namespace tenon {

constinit engine<default_config> g_default_engine;

namespace {

// TENON_STATS=1: print once at exit (or when the library is unloaded).
__attribute__((destructor)) void print_stats_at_exit() {
  if (options().stats) g_default_engine.print_stats();
}

// TENON_BACKGROUND_PURGE=2: start the purger at load, before the program has
// threads of its own. Read here without publishing the options, which a
// program linking libtenon.a may still set in main before its first
// allocation.
__attribute__((constructor)) void start_purger_at_load() {
  const char* v = os::env("TENON_BACKGROUND_PURGE");
  if (v && v[0] == '2' && v[1] == '\0') g_default_engine.chunks.start_purger();
}

}  // namespace

}  // namespace tenon

TENON_INSTANTIATE_ENGINE(tenon::default_config)
