// Huge blocks: dedicated mappings, a lock-free cache of recently freed ones,
// and mremap-based resizing.
#include <errno.h>
#include <string.h>

#include <atomic>

#include "arena/chunk.h"
#include "arena/purger.h"
#include "common/inject.h"
#include "common/options.h"
#include "common/stats.h"
#include "heap/heap.h"
#include "common/variant.h"
#include "large/large.h"
#include "lookup/chunk_map.h"
#include "platform/os.h"

namespace tenon {

namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) & ~(to - 1); }

// Cache slots hold one word each, so that claiming an entry (a CAS to 0) also
// yields everything needed to judge it without touching its memory (which a
// concurrent claimer may unmap): the mapping's unit index, its usable size in
// pages, and the time it was freed (in 64 ms ticks, wrapping).
namespace slot {
constexpr unsigned kUnitBits = kAddressBits - kChunkShift;  // 26
constexpr unsigned kPagesBits = 24;
constexpr unsigned kTickBits = 64 - kUnitBits - kPagesBits;  // 14
inline std::uint64_t make(std::uintptr_t unit, std::size_t pages, std::uint32_t tick) {
  return std::uint64_t{unit} | std::uint64_t{pages} << kUnitBits |
         std::uint64_t{tick & ((1u << kTickBits) - 1)} << (kUnitBits + kPagesBits);
}
inline std::uintptr_t unit(std::uint64_t w) { return w & ((std::uint64_t{1} << kUnitBits) - 1); }
inline std::size_t pages(std::uint64_t w) { return (w >> kUnitBits) & ((std::uint64_t{1} << kPagesBits) - 1); }
inline std::uint32_t tick(std::uint64_t w) { return static_cast<std::uint32_t>(w >> (kUnitBits + kPagesBits)); }
inline std::uint32_t now_tick() { return (arena::now_ms() >> 6) & ((1u << kTickBits) - 1); }
inline std::uint32_t age_ms(std::uint64_t w) {
  return ((now_tick() - tick(w)) & ((1u << kTickBits) - 1)) << 6;
}
}  // namespace slot

std::atomic<std::uint64_t> g_cache[kHugeCacheSlots];
std::atomic<std::size_t> g_cache_bytes{0};

huge_header* header_at_unit(std::uintptr_t unit) {
  return reinterpret_cast<huge_header*>(unit << kChunkShift);
}

// The unit whose entry describes the block: the one its user pointer starts
// in (the header's own unit, or for a far block the unit above it).
char* marked_unit(const huge_header* h) { return lookup::unit_base(h->user); }

// The block's unit map entry as its header says (user pointer, where the
// mapping ends in the unit, where the header is).
lookup::unit_entry entry_for(const huge_header* h, std::size_t map_size) {
  char* unit = marked_unit(h);
  std::size_t end = static_cast<std::size_t>(reinterpret_cast<const char*>(h) + map_size - unit);
  return lookup::unit_entry::huge(static_cast<std::size_t>(h->user - unit), end < kChunkSize ? end : kChunkSize,
                                  h->far);
}

// Lookups see the block once its header is written (the entry's release),
// and stop seeing it before its range is given back (before munmap, or
// before a shrink gives back its tail): the kernel can hand a range out to
// someone else the moment it is free.
void publish(const huge_header* h) { lookup::set(marked_unit(h), entry_for(h, h->map_size)); }
void withdraw(const huge_header* h) { lookup::clear(marked_unit(h)); }

void unmap(huge_header* h) {
  withdraw(h);
  os::release(h, h->map_size);
}

// Resize the mapping in place, keeping its entry true for the range mapped
// at every moment: a shrink updates it first, a growth after.
bool resize_mapping(huge_header* h, std::size_t map_size) {
  bool shrink = map_size < h->map_size;
  if (shrink) lookup::set(marked_unit(h), entry_for(h, map_size));
  if (!os::resize_in_place(h, h->map_size, map_size)) {
    if (shrink) publish(h);
    return false;
  }
  h->map_size = map_size;
  if (!shrink) publish(h);
  return true;
}

// Take cache entries older than the purge delay and unmap them. True if
// any was unmapped.
bool evict_expired() {
  std::uint32_t delay = options().purge_delay_ms;
  bool any = false;
  for (auto& s : g_cache) {
    std::uint64_t w = s.load(std::memory_order_relaxed);
    if (!w || slot::age_ms(w) < delay) continue;
    if (!s.compare_exchange_strong(w, 0, std::memory_order_acquire)) continue;
    huge_header* h = header_at_unit(slot::unit(w));
    g_cache_bytes.fetch_sub(h->map_size, std::memory_order_relaxed);
    unmap(h);
    any = true;
  }
  return any;
}

bool cache_put(huge_header* h) {
  arena::set_purge_hook(evict_expired);  // idempotent: cached blocks expire even if no huge call follows
  TENON_LOCKED_SECTION(huge);
  if (h->far || h->user != reinterpret_cast<char*>(h) + os::page_size() || h->capacity() > kHugeCacheMaxBlock)
    return false;
  if (g_cache_bytes.fetch_add(h->map_size, std::memory_order_relaxed) + h->map_size > kHugeCacheMaxTotal) {
    g_cache_bytes.fetch_sub(h->map_size, std::memory_order_relaxed);
    return false;
  }
  std::uint64_t w = slot::make(lookup::unit_of(h), h->capacity() / os::page_size(), slot::now_tick());
  for (auto& s : g_cache) {
    std::uint64_t empty = 0;
    TENON_INJECT_POINT("huge.cache.put");
    if (s.compare_exchange_strong(empty, w, std::memory_order_release, std::memory_order_relaxed)) {
      purger::note_retained();  // cached pages go back on time even if the program goes idle
      return true;
    }
  }
  g_cache_bytes.fetch_sub(h->map_size, std::memory_order_relaxed);
  return false;
}

// A cached block taken for a request well below its capacity, whose pages
// past the request are resident, gives them up: they move (mremap, no copy:
// the resident pages go along) to a mapping of their own, which is cached
// again, and the next requests reuse them instead of the block keeping them
// idle under a smaller user (sort reuses its freed buffer for smaller merge
// buffers). An excess that is not densely resident costs little to keep and
// spares a later, bigger request its mremap, so only an excess whose first
// kHugeSplitProbePages pages are all resident is split; probing more of it, or
// splitting on a partly resident probe, cost malloc-large time or RSS
// (architecture.md, layer 6, has the figures). A tail below kHugeSplitMin
// stays with the block: it could serve no huge request alone.
void split_tail(huge_header* h, std::size_t usable) {
  const std::size_t page = os::page_size();
  std::size_t keep = page + usable;
  if (h->map_size < keep + kHugeSplitMin) return;
  std::size_t tail = h->map_size - keep;
  char* from = reinterpret_cast<char*>(h) + keep;
  std::size_t probe = kHugeSplitProbePages * page;
  if (probe > tail) probe = tail;
  if (os::resident_bytes(from, probe) < probe) return;
  // The tail's first page becomes its header: the moved range is then the
  // whole new mapping, one VMA that mremap can grow or move later (a fresh
  // header page in front of it would be a second VMA: mremap fails, EFAULT).
  // Keep the block whole rather than fail the request when the new mapping
  // or its unit map leaf cannot be had.
  void* dest = os::reserve(tail, kChunkSize);
  if (!dest) return;
  if (!lookup::prepare(static_cast<char*>(dest))) {
    os::release(dest, tail);
    return;
  }
  // The block's entry narrows before its tail leaves: the kernel may hand
  // the vacated range to another mapping at once.
  lookup::set(marked_unit(h), entry_for(h, keep));
  if (!os::move_to(from, tail, tail, dest)) {
    publish(h);
    os::release(dest, tail);
    return;
  }
  h->map_size = keep;
  auto* t = static_cast<huge_header*>(dest);
  t->map_size = tail;
  t->usable = tail - page;
  t->user = static_cast<char*>(dest) + page;
  t->far = false;
  publish(t);
  TENON_INJECT_POINT("huge.cache.split");
  if (!cache_put(t)) unmap(t);
}

// The best cached mapping for `usable` bytes: the smallest whose capacity
// holds it, else the largest smaller one (grown with mremap by the caller:
// its resident pages are reused, only the tail is new). *alone: no other
// block was cached when it was chosen.
huge_header* claim_cached(std::size_t usable, bool* alone) {
  TENON_LOCKED_SECTION(huge);
  std::size_t want = usable / os::page_size();
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::atomic<std::uint64_t>* best = nullptr;
    std::uint64_t best_w = 0;
    unsigned cached = 0;
    for (auto& s : g_cache) {
      std::uint64_t w = s.load(std::memory_order_relaxed);
      if (!w) continue;
      ++cached;
      std::size_t p = slot::pages(w), bp = slot::pages(best_w);
      bool better = !best || (p >= want ? bp < want || p < bp : bp < want && p > bp);
      if (better) {
        best = &s;
        best_w = w;
      }
    }
    if (!best) return nullptr;
    TENON_INJECT_POINT("huge.cache.take");
    if (best->compare_exchange_strong(best_w, 0, std::memory_order_acquire)) {
      huge_header* h = header_at_unit(slot::unit(best_w));
      g_cache_bytes.fetch_sub(h->map_size, std::memory_order_relaxed);
      *alone = cached == 1;
      return h;
    }
  }
  return nullptr;
}

// A cached mapping for `usable` bytes. When it was the only cached block its
// resident excess is split off (a stream of smaller requests draining one
// big freed block, as sort's merge buffers drain its sort buffer); while
// other blocks are cached it stays whole, for a later request as big as it
// (thread-chunks reuses 33 MiB blocks for 8 MiB ones, then needs 33 MiB
// again). The split puts the excess back with cache_put, so it runs outside
// the claim's section (the locked benchmark variant's mutex is not recursive).
huge_header* cache_take(std::size_t usable) {
  bool alone = false;
  huge_header* h = claim_cached(usable, &alone);
  if (h && alone) split_tail(h, usable);
  return h;
}

// Huge-path counters go to the calling thread's heap, or the shared ones.
void count(stat_id id) {
  heap* h = t_heap;
  if (h != &g_empty_heap) h->st.add(id);
  else stat_add_shared(orphan_stats(), id);
}

}  // namespace

void* huge_alloc(std::size_t n, std::size_t align, bool* zeroed) {
  const std::size_t page = os::page_size();
  if (n > (std::size_t{1} << kAddressBits)) {
    errno = ENOMEM;
    return nullptr;
  }
  std::size_t usable = round_up(n, page);
  evict_expired();
  if (align <= page) {
    if (huge_header* h = cache_take(usable)) {
      if (void* p = huge_resize(h, usable)) {
        count(stat_huge_cache_hits);
        *zeroed = false;
        return p;
      }
      huge_free(h);
    }
  }
  TENON_INJECT_POINT("huge.map");
  count(stat_huge_allocs);
  huge_header* h;
  char* user;
  bool far = align >= kChunkSize;
  if (!far) {
    // Header at a 4 MiB boundary, user pointer in the same unit.
    std::size_t off = align <= page ? page : align;
    char* base = static_cast<char*>(os::reserve(off + usable, kChunkSize));
    if (!base) { errno = ENOMEM; return nullptr; }
    h = reinterpret_cast<huge_header*>(base);
    user = base + off;
    h->map_size = off + usable;
  } else {
    // The user pointer is itself 4 MiB aligned: header one unit below it.
    std::size_t total = kChunkSize + usable + align;
    auto* raw = static_cast<char*>(os::reserve(total, kChunkSize));
    if (!raw) { errno = ENOMEM; return nullptr; }
    user = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(raw) + kChunkSize, align));
    char* base = user - kChunkSize;
    if (base > raw) os::release(raw, static_cast<std::size_t>(base - raw));
    char* end = user + usable;
    if (raw + total > end) os::release(end, static_cast<std::size_t>(raw + total - end));
    h = reinterpret_cast<huge_header*>(base);
    h->map_size = kChunkSize + usable;
  }
  h->usable = usable;
  h->user = user;
  h->far = far;
  if (!lookup::prepare(marked_unit(h))) {  // no unit map leaf: nobody has seen the block yet
    os::release(h, h->map_size);
    errno = ENOMEM;
    return nullptr;
  }
  publish(h);
  *zeroed = true;
  return user;
}

void huge_free(huge_header* h) {
  TENON_INJECT_POINT("huge.free");
  if (!cache_put(h)) unmap(h);
  evict_expired();
}

// Both answers come from the unit map entry alone: no byte of the block is
// read unless p is its user pointer (which only a caller holding the block
// can pass), so asking about any pointer is safe while another thread frees
// and unmaps the huge block that shares its unit.
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

void* huge_resize(huge_header* h, std::size_t n) {
  const std::size_t page = os::page_size();
  if (h->far || h->user != reinterpret_cast<char*>(h) + page) return nullptr;
  std::size_t usable = round_up(n, page);
  std::size_t capacity = h->capacity();
  if (usable <= capacity) {
    // Fits: keep the mapping and its resident pages, so that a later, larger
    // request needs no page faults (on malloc-large, 2-35 MiB blocks, trimming
    // at 2x the need made 17x the faults of never trimming, 8x made 8x). Only a
    // mapping over 16x the need is trimmed, to twice the need; a cached
    // mapping is at most kHugeCacheMaxBlock, which bounds the idle part.
    if (capacity / 16 > usable) {
      TENON_INJECT_POINT("huge.remap");
      resize_mapping(h, page + 2 * usable);
    }
    h->usable = usable;
    return h->user;
  }
  TENON_INJECT_POINT("huge.remap");
  std::size_t map_size = page + usable;
  if (!resize_mapping(h, map_size)) {
    // Move the pages (no copy) to a fresh 4 MiB-aligned reservation. The
    // old range is free the instant the move succeeds and another thread's
    // new mapping may take it and mark its unit at once, so our entry goes
    // first: only the caller holds this block, and no one else may look it
    // up in between. The new unit's leaf is reserved before anything moves.
    void* dest = os::reserve(map_size, kChunkSize);
    if (!dest) return nullptr;
    if (!lookup::prepare(dest)) {
      os::release(dest, map_size);
      return nullptr;
    }
    withdraw(h);
    if (!os::move_to(h, h->map_size, map_size, dest)) {
      publish(h);
      os::release(dest, map_size);
      return nullptr;
    }
    h = static_cast<huge_header*>(dest);
    h->user = static_cast<char*>(dest) + page;
    h->map_size = map_size;
    publish(h);
  }
  h->usable = usable;
  return h->user;
}

bool huge_cache_flush() {
  bool any = false;
  for (auto& s : g_cache) {
    std::uint64_t w = s.exchange(0, std::memory_order_acquire);
    if (!w) continue;
    huge_header* h = header_at_unit(slot::unit(w));
    g_cache_bytes.fetch_sub(h->map_size, std::memory_order_relaxed);
    unmap(h);
    any = true;
  }
  return any;
}

}  // namespace tenon
