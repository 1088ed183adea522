// What the huge-block files share: where a block's header and unit map entry
// are, and how an entry is kept true while the mapping changes.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/arena/guard_pages.h"
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
// mapping ends in the unit, where the header is, its usable size), held
// while the block is (usable 0: claimed by a free or realloc, or cached, or
// a split's tail not yet cached): its holder is the only thread that writes
// the entry then. The usable size is the one the entry carries for
// malloc_usable_size (huge_view_of): every change of it is published
// (huge_release; a claim holds the entry first).
inline lookup::unit_entry entry_for(const huge_header* h, std::size_t map_size) {
  char* unit = marked_unit(h);
  std::size_t end = static_cast<std::size_t>(reinterpret_cast<const char*>(h) + map_size - unit);
  std::size_t usable = huge_usable(h);
  lookup::unit_entry e = lookup::unit_entry::huge(static_cast<std::size_t>(h->user - unit),
                                                  end < kChunkSize ? end : kChunkSize, h->far, usable);
  return usable == 0 ? e.with_held() : e;
}

// Lookups see the block once its header is written (the entry's release),
// and stop seeing it before its range is given back (before munmap, or
// before a shrink gives back its tail): the kernel can hand a range out to
// someone else the moment it is free.
inline void publish(const huge_header* h) { lookup::set(marked_unit(h), entry_for(h, h->map_size)); }
inline void withdraw(const huge_header* h) { lookup::clear(marked_unit(h)); }

// A config may ask for its cached (freed) huge blocks to be inaccessible while
// they wait (`static constexpr bool protect_cached_huge = true;`): a read or
// write after free then faults, in the block's first page too. The header
// page stays readable (the double free checks read the huge header's freed
// mark). Until 2026-11-27 the first page stayed open as well, for a layer's
// header at the start of the block; the canary layer, the one that has such
// a header, keeps a huge block's at its end since the head guard (and reads
// the huge header's mark for a freed one), so nothing read it any more, and a
// write after free there went unnoticed.
//
// Only what a block's user may reach is accessible: its first `usable` bytes
// while it is live, nothing while it is cached. The rest of its
// capacity (pages kept for a later, larger request) stays inaccessible all
// along, so that a free hides only the pages its user had and a reuse opens
// only the pages asked for: mprotect's cost grows with the range it walks,
// and a cached block's capacity is often well above the next request.
template <class C>
constexpr bool protects_cached() {
  if constexpr (requires { C::protect_cached_huge; }) return C::protect_cached_huge;
  else return false;
}

// A config that protects its cached blocks and asks for guard pages
// (arena/guard_pages.h) keeps every block's capacity at least one page past
// its usable bytes, fresh blocks included: that page is closed like the
// rest of the capacity (open_bytes), so a linear overflow out of a huge
// block faults at the access instead of reaching the mapping above.
template <class C>
constexpr bool guards_huge() {
  return protects_cached<C>() && has_guard_pages<C>();
}
template <class C>
std::size_t guard_bytes() {
  if constexpr (guards_huge<C>()) return C::platform::page_size();
  else return 0;
}

// Such a config closes a page before the block's data too, between it and
// the header page (the head guard): an underflow out of the block faults at
// the access instead of writing the header page, which every lookup reads
// (and, aligned, the pages between the two). A page-aligned block's data
// starts head_bytes past its header: the header page, then the guard.
template <class C>
std::size_t head_bytes(std::size_t page) {
  if constexpr (guards_huge<C>()) return 2 * page;
  else return page;
}

// The pages between the header page and the user pointer closed (a fresh
// block; again after an mremap) or opened (before one: mremap grows or moves
// one VMA only). Nothing in other configs, whose blocks keep them open.
template <class C>
void guard_head(huge_header* h, bool accessible) {
  if constexpr (guards_huge<C>()) {
    char* from = reinterpret_cast<char*>(h) + C::platform::page_size();
    if (h->user > from) C::platform::protect(from, static_cast<std::size_t>(h->user - from), accessible);
  }
}

// The bytes [from, to) past the user pointer made accessible or not (both
// page multiples; nothing when empty). False if the kernel refused: opening
// pages counts against RLIMIT_DATA, and a refused open must not hand out
// the block (reshape).
template <class C>
bool guard_range(huge_header* h, std::size_t from, std::size_t to, bool accessible) {
  if constexpr (protects_cached<C>()) {
    if (to > from) return C::platform::protect(h->user + from, to - from, accessible);
  }
  return true;
}

// The bytes past the user pointer a block's user may reach now, for a block
// of `usable` bytes (what its claim gave back; 0 for one taken from the
// cache): its usable size while live, none while cached.
template <class C>
std::size_t open_bytes(std::size_t usable) {
  if constexpr (protects_cached<C>()) return usable;
  else return 0;
}

// A block going into the cache: the `open` bytes its user had (its usable
// size before the free took it to 0) close (past them, it is closed
// already: open_bytes).
template <class C>
void close_freed(huge_header* h, std::size_t open) {
  if constexpr (protects_cached<C>()) guard_range<C>(h, 0, open, false);
}

// A tail split off a cached block (cache.ipp) comes from its inaccessible
// part: its header page opens, as a cached block's is; the rest stays
// closed, the head guard and the block's first page included.
// False if the kernel refused (RLIMIT_DATA): the tail's header page may be
// closed, and the caller must not write it.
template <class C>
bool open_split_tail(void* dest, std::size_t page) {
  if constexpr (protects_cached<C>()) return C::platform::protect(dest, page, true);
  return true;
}

// A growth that failed: the pages it opened close again, the head guard
// too; nullptr.
template <class C>
void* close_again(huge_header* h, std::size_t open, std::size_t capacity) {
  guard_range<C>(h, open, capacity, false);
  guard_head<C>(h, false);
  return nullptr;
}

}  // namespace tenon::huge_detail
