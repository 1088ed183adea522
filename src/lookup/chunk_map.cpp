#include "lookup/chunk_map.h"

namespace tenon::lookup {

constinit unit_bitmap g_regular{};
constinit unit_bitmap g_huge_near{};
constinit unit_bitmap g_huge_far{};

namespace {
unit_bitmap& map_for(map_kind kind) {
  switch (kind) {
    case map_kind::regular: return g_regular;
    case map_kind::huge_near: return g_huge_near;
    case map_kind::huge_far: break;
  }
  return g_huge_far;
}
}  // namespace

void mark(map_kind kind, const void* unit_base) {
  std::uintptr_t u = unit_of(unit_base);
  map_for(kind).words[u >> 6].fetch_or(std::uint64_t{1} << (u & 63), std::memory_order_release);
}

void unmark(map_kind kind, const void* unit_base) {
  std::uintptr_t u = unit_of(unit_base);
  map_for(kind).words[u >> 6].fetch_and(~(std::uint64_t{1} << (u & 63)), std::memory_order_release);
}

}  // namespace tenon::lookup
