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

// A seqlock's reader, with no writer to wait for, that keeps the block
// mapped while it reads: it counts itself in the unit's readers, then reads
// the entry (both seq_cst, as the take's CAS: lookup::entry_after_reader).
// An entry equal to the view's, not held, means no holder had taken the
// block when the count went up, and every holder looks at the count after
// its take (huge_maps::give_back, resize): it leaves the block mapped and
// open while the count is not 0 (its free deferred, its resize a copy).
// The bytes are then read in place: no system call (until 2026-11-29,
// branch usw, through the kernel, os::copy_quietly: 4.2-15 us a call). An
// entry equal again after the read means nobody took the block meanwhile
// (every take sets the held bit, every other write bumps the generation):
// a holder that did may have written the bytes as they were read (the
// canary's freed tag). Either test failing is a block freed (or resized)
// while this call looked: the caller answers as for a freed one, without a
// retry.
huge_reading::huge_reading(const huge_view& v) : v_(v), readers_(&lookup::readers_of(lookup::unit_base(v.p))) {
  readers_->fetch_add(1, std::memory_order_seq_cst);
  live_ = lookup::entry_after_reader(lookup::unit_base(v.p)).word() == v.entry;
  TENON_INJECT_POINT("huge.read");  // live and counted: a free now must leave the block mapped
}

huge_reading::~huge_reading() { readers_->fetch_sub(1, std::memory_order_release); }

bool huge_reading::unchanged() const {
  std::atomic_thread_fence(std::memory_order_acquire);  // the reads before the entry's second read
  return lookup::entry_of(v_.p).word() == v_.entry;
}

bool huge_copy_out(const huge_view& v, const void* from, void* to, std::size_t n) {
  huge_reading r(v);
  if (!r.live()) return false;
  std::memcpy(to, from, n);
  return r.unchanged();
}

bool huge_read_in_progress(const huge_header* h) {
  return lookup::readers_of(huge_detail::marked_unit(h)).load(std::memory_order_seq_cst) != 0;
}

bool huge_contains(const void* p) {
  lookup::unit_entry e = lookup::entry_of(p);
  return e.kind() == lookup::unit_kind::huge &&
         static_cast<std::size_t>(static_cast<const char*>(p) - lookup::unit_base(p)) < e.end_offset();
}

}  // namespace tenon
