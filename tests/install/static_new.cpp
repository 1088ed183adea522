// A fully static C++ program whose only use of the C++ library is operator
// new: nothing in it brings libstdc++'s std::__throw_bad_alloc along, so a
// failing new throws std::bad_alloc only if the link took it because of
// tenon::override's -u options (or the documented -Wl,-u,... by hand);
// without them tenon aborts with a message. Exits 0 when bad_alloc is caught.
#include <tenon/tenon.h>

#include <cstddef>
#include <cstdio>
#include <new>

int main() {
  int* small = new int(42);
  bool owned = tenon_owns(small);
  delete small;
  volatile std::size_t huge = std::size_t{1} << 62;
  try {
    char* p = new char[huge];
    std::printf("static_new: new char[2^62] returned %p\n", static_cast<void*>(p));
    return 1;
  } catch (const std::bad_alloc&) {
    std::printf("static_new: std::bad_alloc caught; new is tenon's: %s\n", owned ? "yes" : "no");
    return owned ? 0 : 1;
  }
}
