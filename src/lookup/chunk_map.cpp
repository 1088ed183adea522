#include "tenon/lookup/chunk_map.h"

namespace tenon::lookup {

constinit chunk_table g_chunk_table{};

bool add_chunk(const void* chunk_base) {
  std::uintptr_t s = unit_of(chunk_base) & ((std::uintptr_t{1} << kChunkTableBits) - 1);
  std::uintptr_t empty = 0;
  if (g_chunk_table.slot[s].compare_exchange_strong(empty, tag_of(chunk_base), std::memory_order_release,
                                                    std::memory_order_relaxed))
    return true;
  // The slot is another chunk's for good (chunks are never unmapped).
  if (!prepare(chunk_base)) return false;
  set(chunk_base, unit_entry::chunk());
  return true;
}

}  // namespace tenon::lookup
