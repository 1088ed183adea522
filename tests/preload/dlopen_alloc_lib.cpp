// A library that allocates from its static initialisers, hands blocks to its
// loader and frees the loader's blocks; dlopen_dlclose.c loads and unloads it
// repeatedly under LD_PRELOAD=libtenon.so.
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {
// Built at dlopen, destroyed at dlclose.
std::map<std::string, std::vector<int>> g_table = {{"one", {1}}, {"two", std::vector<int>(1000, 2)}};
std::string g_name(5000, 'n');
thread_local std::vector<char> t_buffer;
}  // namespace

extern "C" __attribute__((visibility("default"))) void* lib_make(std::size_t n) {
  void* p = std::malloc(n);
  if (p) std::memset(p, 0x5a, n);
  g_table["k" + std::to_string(n)].resize(n % 100);
  return p;
}

extern "C" __attribute__((visibility("default"))) void lib_release(void* p) { std::free(p); }

// Threads started by the library, allocating and exiting before dlclose.
extern "C" __attribute__((visibility("default"))) int lib_threads(int n) {
  std::vector<std::thread> ts;
  int ok = 0;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([i] {
      t_buffer.resize(1000 + i * 10);
      auto* v = new std::vector<std::string>(50, std::string(i + 20, 'x'));
      delete v;
    });
  for (auto& t : ts) {
    t.join();
    ++ok;
  }
  return ok;
}
