// Finding a huge block from a pointer, and its usable size. The answers
// come from the unit map entry alone: no byte of the block is read, so
// asking about any pointer is safe while another thread frees and unmaps
// the huge block that shares its unit. Taking a block (free, realloc) is
// decided in the entry too, before its header is read.
#include <atomic>
#include <cstring>

#include "huge_detail.h"
#include "tenon/common/inject.h"
#include "tenon/huge/huge.h"
#include "tenon/lookup/unit_map.h"
#include "tenon/platform/os.h"

namespace tenon {

namespace {
// The header of the huge block whose entry e (of p's unit) says it starts
// at p, or nullptr.
huge_header* header_if_start(lookup::unit_entry e, const void* p) {
  char* unit = lookup::unit_base(p);
  if (e.kind() != lookup::unit_kind::huge || static_cast<const char*>(p) != unit + e.user_offset()) return nullptr;
  return reinterpret_cast<huge_header*>(e.header_below() ? unit - kChunkSize : unit);
}
}  // namespace

huge_header* huge_lookup(const void* p) { return header_if_start(lookup::entry_of(p), p); }

// The entry of a live block not held changes only by a call that holds it
// (the held bit set, a resize, a move's clear, an unmap's clear), so a CAS
// from the entry read here fails exactly when another call took the block
// since: a double free, reported without a read of the header, which the
// other may have unmapped or moved by then. A block freed and its place
// handed out again between the read and the CAS (from the huge cache, or
// unmapped and mapped anew) has an entry equal but for its generation
// (unit_map.h), which every write bumps: the CAS fails there too (until
// 2026-11-29, branch usable, it took and freed the new block).
huge_header* huge_take(const void* p, std::size_t* usable) {
  lookup::unit_entry e = lookup::entry_of(p);
  huge_header* h = header_if_start(e, p);
  if (!h) return nullptr;
  TENON_INJECT_POINT("huge.take");
  *usable = 0;
  if (e.held() || !lookup::replace(lookup::unit_base(p), e, e.with_held())) return h;
  // Held: the block is mapped until this call lets it go, and live (an
  // entry not held has its size set before it, huge_release).
  *usable = huge_claim(h);
  return h;
}

void huge_release(huge_header* h, std::size_t usable) {
  huge_set_usable(h, usable);
  huge_detail::publish(h);  // not held: usable is set
}

// The size comes from the entry, which every change of it publishes
// (huge_release): no read of the header, which a free racing this call may
// unmap the next instant (until 2026-11-29, branch usize: SIGSEGV,
// RacingFrees.HugeBlockUsableSizeHeldWhileAFreeUnmapsIt). Only a block
// too big for the entry's field (128 GiB) has its header read, through the
// kernel.
bool huge_view_of(const void* p, huge_view* v) {
  lookup::unit_entry e = lookup::entry_of(p);
  huge_header* h = header_if_start(e, p);
  if (!h) return false;
  TENON_INJECT_POINT("huge.usable");
  *v = {p, e.word(), e.held() ? 0 : e.usable_size()};
  if (v->usable == lookup::unit_entry::kUsableInHeader) {
    std::size_t usable = 0;
    v->usable = huge_copy_out(*v, &h->usable, &usable, sizeof usable) ? usable : 0;
  }
  return true;
}

// A seqlock's reader, with no writer to wait for: the entry changes with
// every take (its held bit) and every other write (its generation), so an
// entry equal after the copy means nobody took the block meanwhile, and
// only a holder unmaps, closes or resizes it. A copy that fails or an entry
// that changed is a block freed (or resized) while this call looked: the
// caller answers as for a freed one, without a retry.
bool huge_copy_out(const huge_view& v, const void* from, void* to, std::size_t n) {
  int copied = os::copy_quietly(from, to, n);
  if (copied == 0) return false;
  if (copied < 0) std::memcpy(to, from, n);  // the kernel would not copy: a plain read, as before
  std::atomic_thread_fence(std::memory_order_acquire);  // the copy before the entry's second read
  return lookup::entry_of(v.p).word() == v.entry;
}

bool huge_contains(const void* p) {
  lookup::unit_entry e = lookup::entry_of(p);
  return e.kind() == lookup::unit_kind::huge &&
         static_cast<std::size_t>(static_cast<const char*>(p) - lookup::unit_base(p)) < e.end_offset();
}

}  // namespace tenon
