// A shared object that fills a mass_pool and is then unloaded by
// pool_dlclose_test: the pool's owned-lane claim runs a restartable sequence
// whose descriptor lives in this object's __rseq_cs section.
#include <tenon/mass_pool.hpp>

extern "C" __attribute__((visibility("default"))) long pool_plugin_fill(int n) {
  tenon::mass_pool<long> pool;
  long sum = 0;
  for (int i = 0; i < n; ++i) sum += pool.emplace(i).ref;
  return sum;
}
