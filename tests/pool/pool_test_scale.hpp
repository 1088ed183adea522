// Test sizes for the pool suite: full size normally, scaled down under
// ThreadSanitizer (which is 5-15x slower and keeps shadow memory per access)
// so the suite stays within seconds there too.
#pragma once
#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#define TENON_POOL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENON_POOL_TEST_TSAN 1
#endif
#endif

namespace pool_test {
#ifdef TENON_POOL_TEST_TSAN
constexpr std::size_t kScale = 16;
#else
constexpr std::size_t kScale = 1;
#endif
// n, divided by kScale but never below `at_least`.
constexpr std::size_t scaled(std::size_t n, std::size_t at_least = 1) {
  return n / kScale < at_least ? at_least : n / kScale;
}
}  // namespace pool_test
