// For the locked variant only (see src/common/variant.h): one global mutex per
// named structure, held for the rest of the enclosing scope.
#pragma once
#include <pthread.h>

namespace tenon::locked {
struct guard {
  pthread_mutex_t* m;
  explicit guard(pthread_mutex_t* mutex) : m(mutex) { pthread_mutex_lock(m); }
  ~guard() { pthread_mutex_unlock(m); }
};
}  // namespace tenon::locked

#define TENON_LOCKED_CAT2(a, b) a##b
#define TENON_LOCKED_CAT(a, b) TENON_LOCKED_CAT2(a, b)
#define TENON_LOCKED_SECTION(name)                                          \
  static pthread_mutex_t TENON_LOCKED_CAT(tenon_mutex_, name) = PTHREAD_MUTEX_INITIALIZER; \
  ::tenon::locked::guard TENON_LOCKED_CAT(tenon_guard_, __LINE__)(&TENON_LOCKED_CAT(tenon_mutex_, name))
