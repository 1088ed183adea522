// Foreign pointers: see foreign.h. Nothing here waits for another thread:
// the header is read in place and the only call out is munmap.
#include "tenon/frontend/foreign.h"

#include <errno.h>
#include <string.h>

#include "tenon/frontend/alloc_api.h"
#include "tenon/platform/glibc_chunk.h"
#include "tenon/platform/os.h"

namespace tenon::api {

namespace {

void release(const os::glibc_chunk& c) {
  if (c.mapping) os::release(c.mapping, c.mapping_size);
}

}  // namespace

void foreign_free(void* p) {
  os::glibc_chunk c;
  if (os::read_glibc_chunk(p, &c)) release(c);
}

void* foreign_realloc(void* p, std::size_t n) {
  os::glibc_chunk c;
  if (!os::read_glibc_chunk(p, &c)) {
    errno = EINVAL;
    return nullptr;
  }
  // Staying costs nothing: moving a heap block out would copy it and still
  // keep its old place (see foreign_free).
  if (n <= c.usable && (!c.mapping || n >= c.usable / 2)) return p;
  void* q = alloc(n);
  if (!q) return nullptr;  // errno is ENOMEM; p is untouched
  memcpy(q, p, n < c.usable ? n : c.usable);
  release(c);
  return q;
}

std::size_t foreign_usable_size(const void* p) {
  os::glibc_chunk c;
  return os::read_glibc_chunk(p, &c) ? c.usable : 0;
}

}  // namespace tenon::api
