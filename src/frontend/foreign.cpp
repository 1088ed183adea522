// Foreign pointers: see foreign.h. Nothing here waits for another thread:
// the header is copied through the kernel (process_vm_readv; where a
// seccomp filter refuses it, the mapping probe, os::is_mapped, and a read
// in place) and the only other call out is munmap.
#include "tenon/frontend/foreign.h"

#include "tenon/common/inject.h"

#include "tenon/platform/glibc_chunk.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon::foreign {

namespace {

enum class header { glibc, nothing_mapped, none };

// glibc's header, the 16 bytes before a 16-aligned p (in p - 16's page),
// read: glibc (*c), nothing_mapped (no allocator's block: a huge block's old
// address after realloc moved it or its free unmapped it, or a made-up
// pointer), or none (p misaligned, or bytes that are no glibc header).
// Copied through the kernel (os::copy_quietly): a range another thread
// unmaps meanwhile fails the copy instead of faulting the read; until
// 2026-11-29 (branch usw) the page was probed (os::is_mapped) and then read
// in place, and an unmap between faulted
// (RacingFrees.ForeignBlockFreeHeldWhileItIsUnmapped: SIGSEGV, free and
// malloc_usable_size, both libraries). A page mapped but not readable is
// nothing_mapped too (the probe said mapped, and the read faulted). Where
// the kernel will not copy (a seccomp filter), the probe and the read.
header read_header(const void* p, os::glibc_chunk* c) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0 || reinterpret_cast<std::uintptr_t>(p) < 16) return header::none;
  const char* before = static_cast<const char*>(p) - 16;
  TENON_INJECT_POINT("foreign.read");
  std::size_t words[2];
  int copied = os::copy_quietly(before, words, sizeof words);
  if (copied == 0 || (copied < 0 && !os::is_mapped(before))) return header::nothing_mapped;
  bool ok = copied > 0 ? os::parse_glibc_chunk(p, words, c) : os::read_glibc_chunk(p, c);
  return ok ? header::glibc : header::none;
}

}  // namespace

void free(void* p) {
  os::glibc_chunk c;
  switch (read_header(p, &c)) {
    case header::nothing_mapped: report_misuse("free", p, kNothingMapped, 0);
    // No glibc header either (glibc's own free checks the same and aborts:
    // "free(): invalid pointer", "invalid size"): a stack or static buffer,
    // another mapping, a made-up pointer.
    case header::none:
      report_misuse("free", p, "invalid pointer (not a block: neither tenon's nor one with a glibc header)", 0);
    case header::glibc: break;
  }
  if (c.mapping) os::release(c.mapping, c.mapping_size);
}

resize plan_resize(const void* p, std::size_t n, std::size_t* usable) {
  os::glibc_chunk c;
  switch (read_header(p, &c)) {
    case header::nothing_mapped: return resize::nothing_mapped;
    case header::none: return resize::invalid;
    case header::glibc: break;
  }
  // Staying costs nothing: moving a heap block out would copy it and still
  // keep its old place (see free).
  if (n <= c.usable && (!c.mapping || n >= c.usable / 2)) return resize::stay;
  *usable = c.usable;
  return resize::move;
}

std::size_t usable_size(const void* p) {
  os::glibc_chunk c;
  return read_header(p, &c) == header::glibc ? c.usable : 0;
}

}  // namespace tenon::foreign
