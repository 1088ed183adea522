// Finding a huge block from a pointer. Both answers come from the unit map
// entry alone: no byte of the block is read unless p is its user pointer
// (which only a caller holding the block can pass), so asking about any
// pointer is safe while another thread frees and unmaps the huge block that
// shares its unit.
#include "tenon/huge/huge.h"
#include "tenon/lookup/unit_map.h"

namespace tenon {

huge_header* huge_lookup(const void* p) {
  lookup::unit_entry e = lookup::entry_of(p);
  char* unit = lookup::unit_base(p);
  if (e.kind() != lookup::unit_kind::huge || static_cast<const char*>(p) != unit + e.user_offset()) return nullptr;
  return reinterpret_cast<huge_header*>(e.header_below() ? unit - kChunkSize : unit);
}

bool huge_contains(const void* p) {
  lookup::unit_entry e = lookup::entry_of(p);
  return e.kind() == lookup::unit_kind::huge &&
         static_cast<std::size_t>(static_cast<const char*>(p) - lookup::unit_base(p)) < e.end_offset();
}

}  // namespace tenon
