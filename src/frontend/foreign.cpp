// Foreign pointers: see foreign.h. Nothing here waits for another thread:
// the header is read in place and the only call out is munmap.
#include "tenon/frontend/foreign.h"

#include "tenon/platform/glibc_chunk.h"
#include "tenon/platform/os.h"

namespace tenon::foreign {

void free(void* p) {
  os::glibc_chunk c;
  if (os::read_glibc_chunk(p, &c) && c.mapping) os::release(c.mapping, c.mapping_size);
}

resize plan_resize(const void* p, std::size_t n, std::size_t* usable) {
  os::glibc_chunk c;
  if (!os::read_glibc_chunk(p, &c)) return resize::invalid;
  // Staying costs nothing: moving a heap block out would copy it and still
  // keep its old place (see free).
  if (n <= c.usable && (!c.mapping || n >= c.usable / 2)) return resize::stay;
  *usable = c.usable;
  return resize::move;
}

std::size_t usable_size(const void* p) {
  os::glibc_chunk c;
  return os::read_glibc_chunk(p, &c) ? c.usable : 0;
}

}  // namespace tenon::foreign
