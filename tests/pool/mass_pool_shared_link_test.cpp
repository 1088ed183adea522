// Links against libtenon.so (not libtenon.a) to prove what a user gets with
// `#include <tenon/mass_pool.hpp>` and -ltenon: every function the header and
// the C API need is exported from the shared library (the core is built with
// -fvisibility=hidden; a missing TENON_API fails this link). Exits 0 on success.
#include <cstdio>

#include "tenon/mass_pool.h"
#include "tenon/mass_pool.hpp"

int main() {
  tenon::mass_pool<long> pool;
  for (long i = 0; i < 100000; ++i)
    if (pool.emplace(i).index != std::uint32_t(i)) return std::puts("index"), 1;
  long sum = 0;
  for (long v : pool) sum += v;
  if (sum != 100000L * 99999L / 2) return std::puts("sum"), 1;

  tenon_pool* p = tenon_pool_new(12, 4);
  if (!p || tenon_pool_set_max_elements(p, 2) != 0) return std::puts("new"), 1;
  std::uint32_t i0, i1, i2;
  if (!tenon_pool_alloc(p, &i0) || !tenon_pool_alloc(p, &i1) || tenon_pool_alloc(p, &i2))
    return std::puts("alloc"), 1;
  if (tenon_pool_at(p, 1) == nullptr || tenon_pool_size(p) != 2) return std::puts("at/size"), 1;
  tenon_pool_clear(p);
  tenon_pool_free(p);
  std::puts("mass_pool_shared_link_test: ok");
  return 0;
}
