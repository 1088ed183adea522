// A composition built against an installed libtenon.a (docs/layers.md):
// the default allocator under a counting layer, preloaded into
// plain_malloc. Its last line says it was the allocator in use.
#include <tenon/layer.hpp>
#include <unistd.h>

#include <atomic>
#include <cstdio>

static std::atomic<unsigned long> g_allocs{0};

template <class I>
struct counting : tenon::pass_through<I> {
  static void* alloc(std::size_t n) noexcept {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    return I::alloc(n);
  }
};

TENON_EXPORT_MALLOC(counting<tenon::default_allocator>)

__attribute__((destructor)) static void report() {
  char line[80];  // formatted on the stack: nothing here may allocate
  int n = std::snprintf(line, sizeof line, "composition: %lu allocations\n", g_allocs.load());
  if (n > 0) (void)!write(2, line, static_cast<std::size_t>(n));
}
