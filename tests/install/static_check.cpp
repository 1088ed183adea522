// A fully static C++ program (g++ -static) linked with libtenon-override.a:
// new/delete, containers, a thread and std::bad_alloc all on tenon.
#include <tenon/tenon.h>

#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <vector>

int main() {
  int failures = 0;
  auto* v = new std::vector<std::string>(100, "a string long enough to live on the heap");
  if (!tenon_owns(v) || !tenon_owns((*v)[0].data())) {
    std::fprintf(stderr, "FAILED: operator new or std::string's allocation is not tenon's\n");
    ++failures;
  }
  delete v;
  bool thread_ok = false;
  std::thread t([&] {
    int* q = new int[1000];
    thread_ok = tenon_owns(q);
    delete[] q;
  });
  t.join();
  if (!thread_ok) {
    std::fprintf(stderr, "FAILED: new[] in a thread is not tenon's\n");
    ++failures;
  }
  volatile std::size_t huge = std::size_t{1} << 62;
  try {
    char* p = new char[huge];
    std::fprintf(stderr, "FAILED: new char[2^62] returned %p\n", static_cast<void*>(p));
    ++failures;
  } catch (const std::bad_alloc&) {
  }
  if (new (std::nothrow) char[huge] != nullptr) {
    std::fprintf(stderr, "FAILED: nothrow new char[2^62] did not return nullptr\n");
    ++failures;
  }
  if (failures) return 1;
  std::printf("static_check_cxx: tenon %s serves new/delete of this static program\n", tenon_version());
  return 0;
}
