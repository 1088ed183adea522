// Every engine part's implementation, for a translation unit that
// instantiates an engine for a config (default_engine.cpp; the benchmark's
// locked twin). The parts are templates over the config, defined here in
// src/ and instantiated once per shipped config.
#include "../arena/take.ipp"
#include "../arena/release.ipp"
#include "../arena/purge.ipp"
#include "../arena/purger.ipp"
#include "../arena/fresh.ipp"
#include "../arena/run_cache.ipp"
#include "../heap/attach.ipp"
#include "../heap/spans.ipp"
#include "../heap/refill.ipp"
#include "../heap/remote.ipp"
#include "../heap/exit.ipp"
#include "../heap/cache.ipp"
#include "../heap/drop.ipp"
#include "../large/large.ipp"
#include "../huge/map.ipp"
#include "../huge/cache.ipp"
#include "engine.ipp"
#include "figures.ipp"

// Explicit instantiation of every part of engine<C>.
#define TENON_INSTANTIATE_ENGINE(C)      \
  template class tenon::arena<C>;        \
  template class tenon::thread_heaps<C>; \
  template class tenon::large_runs<C>;   \
  template class tenon::huge_maps<C>;    \
  template struct tenon::engine<C>;
