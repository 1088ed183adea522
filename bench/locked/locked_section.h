// For the locked variant only (see src/common/variant.h): one global mutex per
// named structure, held for the rest of the enclosing scope. Every time a
// thread finds the mutex taken and has to wait, a counter goes up; with
// TENON_STATS=1 the counts are printed at exit beside tenon's own statistics,
// so the locked and lock-free variants' contention can be compared.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstdint>

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

// One mutex and one counter per structure, shared by every function and
// translation unit that names it (inline variable templates are unique).
struct stack_tag { static constexpr const char* name = "tagged stacks (partial spans, heaps)"; };
struct chunks_tag { static constexpr const char* name = "chunk slice bitmaps"; };
struct huge_tag { static constexpr const char* name = "huge cache"; };
template <class Tag> inline pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
template <class Tag> inline wait_counter g_waits{Tag::name};

struct guard {
  pthread_mutex_t* m;
  guard(pthread_mutex_t* mutex, wait_counter& c) : m(mutex) {
    c.entries.fetch_add(1, std::memory_order_relaxed);
    if (pthread_mutex_trylock(m) != 0) {
      c.waits.fetch_add(1, std::memory_order_relaxed);
      pthread_mutex_lock(m);
    }
  }
  ~guard() { pthread_mutex_unlock(m); }
};

}  // namespace tenon::locked

#define TENON_LOCKED_CAT2(a, b) a##b
#define TENON_LOCKED_CAT(a, b) TENON_LOCKED_CAT2(a, b)
#define TENON_LOCKED_SECTION(name)                                                     \
  ::tenon::locked::guard TENON_LOCKED_CAT(tenon_guard_, __LINE__)(                     \
      &::tenon::locked::g_mutex<::tenon::locked::name##_tag>,                           \
      ::tenon::locked::g_waits<::tenon::locked::name##_tag>)
