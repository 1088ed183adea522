// Layer 3, metadata lookup: the unit map says what a 4 MiB unit of the address
// space holds, for every question the free fast path's chunk table does not
// answer: a huge block (where its user pointer is, where its mapping ends in
// the unit, where its header is), or a chunk without a table slot.
//
// One 64-bit entry per unit, and one count of the calls reading its huge block
// in place (readers_of), in leaves of 2^kUnitLeafBits units reserved from
// the platform the first time a unit in their range is marked, and never
// unmapped: a reader may hold a leaf pointer forever. The directory of leaves
// is in .bss (zero: no leaf). Address space grows with the spread of what
// tenon maps (128 KiB a leaf for 32 GiB, 64 KiB before the count: 16 bytes
// a 4 MiB unit, of which a process touches the pages its blocks' units
// fall in), not with the size of the space.
//
// An entry is written whole (release) and read whole (acquire), so a reader
// never sees half of one, and the answer never depends on memory that the
// block itself occupies: asking about a pointer in a unit whose huge block
// another thread is unmapping reads only this never-unmapped entry.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"

namespace tenon::lookup {

inline std::uintptr_t unit_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) >> kChunkShift;
}
inline char* unit_base(const void* p) {
  return reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
}

enum class unit_kind : std::uint8_t { none = 0, chunk = 1, huge = 2 };

// An entry: kind (bits 0-1); for a huge block, whether its header is one unit
// below (bit 2), the offset of its user pointer in the unit (bits 3-12) and
// the offset where its mapping ends in the unit (bits 13-23, at most 4 MiB),
// both in 4 KiB pages (every page size is a multiple, and both are page
// multiples), its usable size in 4 KiB pages (bits 24-48: below 128 GiB;
// all ones for a bigger block, whose size only its header has), and whether
// a call holds the block (bit 49: a free or realloc that took it, or the
// huge cache; huge_take, src/huge/lookup.cpp). Only the holder reads the
// block's header, changes the entry or gives the range back: a lookup may
// read the entry of a block that is unmapped the next instant, never its
// header; malloc_usable_size answers from the entry (since 2026-11-29,
// branch usize: the offsets were in bytes, 23 bits each, and the size only
// in the header, which it read with nothing held and could fault on).
// Bits 50-63 of every entry count its writes (set, clear: all but the take's
// CAS, which keeps them), mod 2^14: a block freed and its place handed out
// again (from the huge cache, or unmapped and mapped anew) has an entry
// whose other bits may equal the old block's, and a CAS from the old entry
// must fail (a free that read it, then lost the race: huge_take; until
// 2026-11-29, branch usable, it took and freed the new block). It fails
// unless 16384 writes to the entry fall between the read and the CAS.
class unit_entry {
 public:
  static constexpr unsigned kPageShift = 12;
  static constexpr std::uint64_t kUsablePagesMax = (std::uint64_t{1} << 25) - 1;  // all ones: not in the entry
  // usable_size() of a block too big for the entry's field.
  static constexpr std::size_t kUsableInHeader = ~std::size_t{0};
  constexpr unit_entry() = default;
  constexpr explicit unit_entry(std::uint64_t w) : w_(w) {}
  static constexpr unit_entry chunk() { return unit_entry(static_cast<std::uint64_t>(unit_kind::chunk)); }
  static constexpr unit_entry huge(std::size_t user_offset, std::size_t end_offset, bool header_below,
                                   std::size_t usable) {
    std::uint64_t pages = usable >> kPageShift;
    if (pages > kUsablePagesMax) pages = kUsablePagesMax;
    return unit_entry(static_cast<std::uint64_t>(unit_kind::huge) | std::uint64_t{header_below} << 2 |
                      std::uint64_t{user_offset >> kPageShift} << 3 | std::uint64_t{end_offset >> kPageShift} << 13 |
                      pages << 24);
  }
  unit_kind kind() const { return static_cast<unit_kind>(w_ & 3); }
  bool header_below() const { return (w_ >> 2) & 1; }
  std::size_t user_offset() const { return ((w_ >> 3) & ((std::uint64_t{1} << 10) - 1)) << kPageShift; }
  std::size_t end_offset() const { return ((w_ >> 13) & ((std::uint64_t{1} << 11) - 1)) << kPageShift; }
  // The block's usable size when the entry was last written (0 if it was
  // then held: cached, or taken), or kUsableInHeader. The take's CAS keeps
  // it: ask held() first.
  std::size_t usable_size() const {
    std::uint64_t pages = (w_ >> 24) & kUsablePagesMax;
    return pages == kUsablePagesMax ? kUsableInHeader : static_cast<std::size_t>(pages << kPageShift);
  }
  bool held() const { return (w_ >> 49) & 1; }
  unit_entry with_held() const { return unit_entry(w_ | std::uint64_t{1} << 49); }
  static constexpr int kGenerationShift = 50;
  std::uint64_t generation() const { return w_ >> kGenerationShift; }
  // This entry's bits with the generation after `previous`'s (the entry it
  // replaces), mod 2^14.
  unit_entry after(unit_entry previous) const {
    constexpr std::uint64_t low = (std::uint64_t{1} << kGenerationShift) - 1;
    return unit_entry((w_ & low) | (previous.generation() + 1) << kGenerationShift);
  }
  std::uint64_t word() const { return w_; }

 private:
  std::uint64_t w_ = 0;
};

// What the unit of p holds (none for a unit never marked, or p above the
// address space).
unit_entry entry_of(const void* p);

// The entry of a prepared unit, read after a reader counted itself in
// (readers_of): seq_cst, as the count's increment and the take's CAS
// (replace), so that of a reader and a holder at once at least one sees
// the other (huge_reading, src/huge/lookup.cpp).
unit_entry entry_after_reader(const void* unit_base);

// The count of calls reading a prepared unit's huge block in place with
// nothing held (huge_reading): while it is not 0, the block's holder does
// not unmap, close or resize it (huge_maps, src/huge/).
std::atomic<std::uint64_t>& readers_of(const void* unit_base);

// Makes sure the entry of the unit at `unit_base` exists (reserves its leaf).
// False (errno ENOMEM) if the leaf cannot be reserved. Done before any step
// that cannot be undone, so that set() itself never fails.
bool prepare(const void* unit_base);

// Publishes / withdraws the entry of a prepared unit (release), its
// generation one past the entry it replaces (unit_entry). Only the unit's
// one writer calls them (the holder of its huge block, or the one that
// maps its chunk or block): the entry's read and store are not one step.
void set(const void* unit_base, unit_entry e);
void clear(const void* unit_base);
// The entry of a prepared unit replaced by `desired` if it is `expected`
// (one CAS, seq_cst: see entry_after_reader): false if it was not.
bool replace(const void* unit_base, unit_entry expected, unit_entry desired);

}  // namespace tenon::lookup
