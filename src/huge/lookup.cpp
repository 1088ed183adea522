// Finding a huge block from a pointer. Both answers come from the unit map
// entry alone: no byte of the block is read, so asking about any pointer is
// safe while another thread frees and unmaps the huge block that shares its
// unit. Taking a block (free, realloc) is decided in the entry too, before
// its header is read.
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

bool huge_contains(const void* p) {
  lookup::unit_entry e = lookup::entry_of(p);
  return e.kind() == lookup::unit_kind::huge &&
         static_cast<std::size_t>(static_cast<const char*>(p) - lookup::unit_base(p)) < e.end_offset();
}

}  // namespace tenon
