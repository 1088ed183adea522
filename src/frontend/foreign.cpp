// Foreign pointers: see foreign.h. Nothing here waits for another thread:
// the header is read in place and the only calls out are munmap and the
// mapping probe (os::is_mapped: mincore, or msync and process_vm_readv
// where a seccomp filter refuses it).
#include "tenon/frontend/foreign.h"

#include "tenon/common/inject.h"

#include "tenon/platform/glibc_chunk.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon::foreign {

namespace {

// glibc's header is the 16 bytes before a 16-aligned p, in p - 16's page.
// Nothing mapped there: no allocator's block (a huge block's old address
// after realloc moved it or its free unmapped it, or a made-up pointer), and
// reading it would fault. (A misaligned p is no glibc block: read_glibc_chunk
// rejects it before reading.)
bool nothing_mapped_before(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && !os::is_mapped(static_cast<const char*>(p) - 16);
}

}  // namespace

void free(void* p) {
  if (nothing_mapped_before(p))
    report_misuse("free", p, "invalid pointer (nothing mapped there: not a block, or one already freed)", 0);
  TENON_INJECT_POINT("foreign.read");
  // No glibc header either (glibc's own free checks the same and aborts:
  // "free(): invalid pointer", "invalid size"): a stack or static buffer,
  // another mapping, a made-up pointer.
  os::glibc_chunk c;
  if (!os::read_glibc_chunk(p, &c))
    report_misuse("free", p, "invalid pointer (not a block: neither tenon's nor one with a glibc header)", 0);
  if (c.mapping) os::release(c.mapping, c.mapping_size);
}

resize plan_resize(const void* p, std::size_t n, std::size_t* usable) {
  os::glibc_chunk c;
  if (nothing_mapped_before(p) || !os::read_glibc_chunk(p, &c)) return resize::invalid;
  // Staying costs nothing: moving a heap block out would copy it and still
  // keep its old place (see free).
  if (n <= c.usable && (!c.mapping || n >= c.usable / 2)) return resize::stay;
  *usable = c.usable;
  return resize::move;
}

std::size_t usable_size(const void* p) {
  os::glibc_chunk c;
  if (nothing_mapped_before(p)) return 0;
  TENON_INJECT_POINT("foreign.read");
  return os::read_glibc_chunk(p, &c) ? c.usable : 0;
}

}  // namespace tenon::foreign
