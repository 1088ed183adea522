// The locked synchronisation policy (benchmark use only): one global mutex
// per shared structure (common/sync.h names them), held for the rest of the
// scope that opens a section. Every time a thread finds the mutex taken and
// has to wait, a counter goes up; with TENON_STATS=1 the counts are printed
// at exit beside tenon's own statistics, so the locked and lock-free
// variants' contention can be compared.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "tenon/common/sync.h"

namespace tenon::locked {

struct wait_counter {
  const char* name;
  std::atomic<std::uint64_t> waits{0};
  std::atomic<std::uint64_t> entries{0};
  wait_counter* next;
  explicit wait_counter(const char* n);
};

inline std::atomic<wait_counter*> g_counters{nullptr};

inline wait_counter::wait_counter(const char* n) : name(n), next(g_counters.load()) {
  while (!g_counters.compare_exchange_weak(next, this)) {
  }
}

constexpr const char* name_of(shared_structure s) {
  switch (s) {
    case shared_structure::stacks: return "tagged stacks (partial spans, heaps)";
    case shared_structure::chunks: return "chunk slice bitmaps";
    case shared_structure::huge_cache: break;
  }
  return "huge cache";
}

// One mutex and one counter per structure, shared by every function and
// translation unit that names it (inline variable templates are unique).
template <shared_structure S>
inline pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
template <shared_structure S>
inline wait_counter g_waits{name_of(S)};

}  // namespace tenon::locked

namespace tenon {

struct locked_sync {
  template <shared_structure S>
  struct section {
    section() {
      locked::g_waits<S>.entries.fetch_add(1, std::memory_order_relaxed);
      if (pthread_mutex_trylock(&locked::g_mutex<S>) != 0) {
        locked::g_waits<S>.waits.fetch_add(1, std::memory_order_relaxed);
        pthread_mutex_lock(&locked::g_mutex<S>);
      }
    }
    ~section() { pthread_mutex_unlock(&locked::g_mutex<S>); }
    section(const section&) = delete;
    section& operator=(const section&) = delete;
  };
};

}  // namespace tenon
