// What the huge-block files share: where a block's header and unit map entry
// are, and how an entry is kept true while the mapping changes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/huge/huge.h"
#include "tenon/lookup/unit_map.h"

namespace tenon::huge_detail {

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }

inline huge_header* header_at_unit(std::uintptr_t unit) { return reinterpret_cast<huge_header*>(unit << kChunkShift); }

// The unit whose entry describes the block: the one its user pointer starts
// in (the header's own unit, or for a far block the unit above it).
inline char* marked_unit(const huge_header* h) { return lookup::unit_base(h->user); }

// The block's unit map entry as its header says (user pointer, where the
// mapping ends in the unit, where the header is).
inline lookup::unit_entry entry_for(const huge_header* h, std::size_t map_size) {
  char* unit = marked_unit(h);
  std::size_t end = static_cast<std::size_t>(reinterpret_cast<const char*>(h) + map_size - unit);
  return lookup::unit_entry::huge(static_cast<std::size_t>(h->user - unit), end < kChunkSize ? end : kChunkSize,
                                  h->far);
}

// Lookups see the block once its header is written (the entry's release),
// and stop seeing it before its range is given back (before munmap, or
// before a shrink gives back its tail): the kernel can hand a range out to
// someone else the moment it is free.
inline void publish(const huge_header* h) { lookup::set(marked_unit(h), entry_for(h, h->map_size)); }
inline void withdraw(const huge_header* h) { lookup::clear(marked_unit(h)); }

}  // namespace tenon::huge_detail
