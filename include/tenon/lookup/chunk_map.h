// Layer 3, metadata lookup: from any pointer to its owner in O(1), no locks.
//
// The address space is divided into 4 MiB units, the size and alignment of a
// chunk. The free fast path asks one question, "is p a multiple of 8 inside a
// chunk?", of a direct-mapped table: slot (unit number mod 2^kChunkTableBits)
// holds the tag of the chunk that took it, the chunk's last multiple of 8
// (base | kTagBits, kTagBits = 4 MiB-8). p | kTagBits keeps p's unit and its
// low 3 bits, so it equals the tag exactly when p is in that chunk and a
// multiple of 8 (every block start is; a pointer that is not goes to the
// irregular path, which reports it): one load and one compare answer both,
// exact for every pointer (the whole address is compared, so no unit
// aliases another), and the tag is never 0, so an empty slot never matches
// (NULL's tag is 4 MiB-8). 512 KiB of .bss, whatever the address space; a
// unit of the 48-bit space would need 8 MiB as a bitmap.
//
// A chunk whose slot another chunk holds (one 256 GiB away: rare, chunks are
// mapped close together) is marked in the unit map instead; in_chunk() asks
// both. Chunks are never unmapped, so a slot, once taken, stays.
//
// Everything that is not a chunk (huge blocks; foreign memory) is in the unit
// map (lookup/unit_map.h). A pointer in no chunk and no huge block was not
// handed out by tenon ("foreign").
// Entries are set (release) after the chunk header is written; a reader
// holding a pointer we handed out is ordered after that by the program's own
// hand-off of the pointer, so the fast path reads the slot relaxed.
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/lookup/unit_map.h"
#include "tenon/platform/relaxed_compare.h"

namespace tenon::lookup {

struct chunk_table {
  std::atomic<std::uintptr_t> slot[std::size_t{1} << kChunkTableBits];
};
extern chunk_table g_chunk_table;

// The bits a tag sets: all of a unit's offset but the low 3.
constexpr std::uintptr_t kTagBits = kChunkSize - 8;

// The tag of p: p | kTagBits (a chunk's slot holds its base's).
inline std::uintptr_t tag_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p) | kTagBits; }

// The fast-path question, given p's tag: is p a multiple of 8 inside a chunk
// that has its table slot? The free fast path keeps the tag: the chunk's
// slice index is at tag - kTagBits, a displacement folded into the
// descriptor's load (span_of_tagged): one instruction fewer than comparing
// slot ^ base. The alignment comes free with the tag: a separate test of
// p's low bits cost the free 2 instructions.
inline bool is_regular_tagged(const void* p, std::uintptr_t tag) {
  std::uintptr_t s = unit_of(p) & ((std::uintptr_t{1} << kChunkTableBits) - 1);
  return os::equals_relaxed(g_chunk_table.slot[s], tag);
}

// The same for callers that go on to a block's fast path (tenon_heap_free,
// realloc, the secure layers): false for p not a multiple of 8, which their
// slow paths take to in_chunk. (False for a chunk in the unit map: callers
// that must be exact use in_chunk.)
inline bool is_regular(const void* p) { return is_regular_tagged(p, tag_of(p)); }

// Is p inside any chunk, a multiple of 8 or not? The table first (for the 8
// bytes p is in), then the unit map.
inline bool in_chunk(const void* p) {
  const void* word = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{7});
  return is_regular(word) || entry_of(p).kind() == unit_kind::chunk;
}

// Makes a freshly mapped chunk (header written) known to lookups: its table
// slot, or if another chunk holds that, its unit map entry. False (errno
// ENOMEM) only if the unit map needed a leaf and none could be reserved.
bool add_chunk(const void* chunk_base);

}  // namespace tenon::lookup
