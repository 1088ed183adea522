// Layer 8, engine: the engine parts of one allocator instance, wired
// together: the arena (slices and chunks), the thread heaps (small blocks),
// the large runs and the huge mappings. All state lives in these objects, so
// an engine can be instantiated more than once; the process-wide lookup
// layer (which units hold chunks and huge blocks) is shared by all of them.
//
// A config names the policies the parts take:
//   platform  where memory, time and threads come from (platform/platform.h)
//   links     how free-list links are stored in free blocks (span/links.h)
//   sync      what surrounds each shared-structure operation (common/sync.h)
//   stats     counters, or none (common/stats.h)
// The engines are explicitly instantiated for each config tenon ships
// (src/engine/default_engine.cpp; the benchmark's locked twin in
// bench/locked/), so a composition over them compiles against these
// headers alone and links libtenon.a.
#pragma once
#include "tenon/arena/arena.h"
#include "tenon/common/stats.h"
#include "tenon/common/sync.h"
#include "tenon/heap/thread_heaps.h"
#include "tenon/huge/huge.h"
#include "tenon/large/large.h"
#include "tenon/platform/platform.h"
#include "tenon/span/links.h"

namespace tenon {

template <class C>
struct engine {
  using config = C;

  arena<C> chunks{&engine::purge_hook, this};
  thread_heaps<C> heaps{chunks};
  large_runs<C> large{chunks};
  huge_maps<C> huge{chunks};

  // malloc_trim: everything free goes back to the OS now. True if any did.
  bool trim(thread_heap<C>* calling_thread_heap);
  // The byte figures (walked over the chunks when asked) into f, and every
  // counter (all heaps and the shared counts) added into `counts`.
  void figures(memory_figures& f, typename C::stats& counts);
  // The figures and every counter to stderr, without allocating.
  void print_stats();

 private:
  // Each purge pass's hook (arena::purge): the heaps' run caches expire
  // (their idle runs go back to the arena, purged by a later pass), then the
  // huge cache's. True if the huge cache gave memory back.
  static bool purge_hook(void* self);
};

// libtenon's own config: Linux, plain links, lock-free, counters.
struct default_config {
  using platform = linux_platform;
  using links = plain_links;
  using sync = lock_free;
  using stats = counting_stats;
};

// The engine behind tenon::default_allocator (libtenon.so, tenon_*).
extern constinit engine<default_config> g_default_engine;

}  // namespace tenon
