// huge_maps<C>: the cache of recently freed huge mappings (the lesson of
// malloc-large: returning big blocks at once and faulting fresh pages in
// again cost millions of page faults).
#include "huge_detail.h"
#include "tenon/common/inject.h"
#include "tenon/common/sync.h"
#include "tenon/huge/huge.h"
#include "tenon/platform/options.h"

namespace tenon {

// Cache slots hold one word each, so that claiming an entry (a CAS to 0) also
// yields everything needed to judge it without touching its memory (which a
// concurrent claimer may unmap): the mapping's unit index, its usable size in
// pages, and the time it was freed (in 64 ms ticks, wrapping).
namespace huge_slot {
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
inline std::uint32_t to_tick(std::uint32_t now_ms) { return (now_ms >> 6) & ((1u << kTickBits) - 1); }
inline std::uint32_t age_ms(std::uint64_t w, std::uint32_t now_ms) {
  return ((to_tick(now_ms) - tick(w)) & ((1u << kTickBits) - 1)) << 6;
}
// A block over kHugeCacheMaxBlock (one at a time, outside the total: config.h).
inline bool big(std::size_t pages, std::size_t page) { return pages > kHugeCacheMaxBlock / page; }
// How long a block of `pages` may wait: the purge delay, or for a big one the
// delay times kHugeCacheMaxBlock over its size (256 MiB: a quarter), so that
// no block holds more byte-milliseconds than the biggest ordinary one. In
// 64 ms ticks, so a big block goes at the first huge call (or purge pass)
// after a tick or two; the loops that reuse it do so at once.
inline std::uint32_t retention_ms(std::uint64_t w, std::uint32_t delay, std::size_t page) {
  std::size_t p = pages(w);
  if (!big(p, page)) return delay;
  return static_cast<std::uint32_t>(std::uint64_t{delay} * (kHugeCacheMaxBlock / page) / p);
}
}  // namespace huge_slot

// A block going into the cache takes its bytes from the budget it falls
// under: the ordinary blocks' total, or the one big block's place (free and
// only if it fits in half of the memory free: a block kept there must not
// be what a program short of memory needed). False: not cached.
template <class C>
bool huge_maps<C>::reserve_budget(huge_header* h) {
  const std::size_t page = C::platform::page_size();
  const std::size_t pages = h->capacity() / page;
  if (!huge_slot::big(pages, page)) {
    if (cache_bytes_.fetch_add(h->map_size, std::memory_order_relaxed) + h->map_size <= kHugeCacheMaxTotal) return true;
    cache_bytes_.fetch_sub(h->map_size, std::memory_order_relaxed);
    return false;
  }
  if (pages >> huge_slot::kPagesBits) return false;  // its size would not fit in a slot
  if (big_bytes_.load(std::memory_order_relaxed) != 0) return false;
  if (!C::platform::fits_free_memory(h->map_size)) return false;
  std::size_t none = 0;
  return big_bytes_.compare_exchange_strong(none, h->map_size, std::memory_order_relaxed);
}

// A block leaving the cache (claimed from slot word w) gives its bytes back
// to the budget it took them from.
template <class C>
void huge_maps<C>::return_budget(std::uint64_t w, const huge_header* h) {
  if (huge_slot::big(huge_slot::pages(w), C::platform::page_size()))
    big_bytes_.fetch_sub(h->map_size, std::memory_order_relaxed);
  else
    cache_bytes_.fetch_sub(h->map_size, std::memory_order_relaxed);
}

// A freed block left mapped for a reader (give_back) into a slot, held (its
// entry says freed). With every slot taken it stays so for good: a block
// lost, which only a program reading a huge block's size while it frees it,
// in more threads than there are slots, can cost.
template <class C>
void huge_maps<C>::defer(huge_header* h, std::size_t open) {
  const std::size_t page = C::platform::page_size();
  std::size_t pages = open / page;
  if (pages >= (std::size_t{1} << huge_slot::kPagesBits)) pages = (std::size_t{1} << huge_slot::kPagesBits) - 1;
  keep_deferred(huge_slot::make(lookup::unit_of(h), pages, 0));
}

// Slot word w into the first empty slot (release: the block's header,
// written before, is seen by the scan that claims it); none: the block is
// held for good (defer).
template <class C>
void huge_maps<C>::keep_deferred(std::uint64_t w) {
  for (auto& s : deferred_) {
    std::uint64_t empty = 0;
    if (s.compare_exchange_strong(empty, w, std::memory_order_release, std::memory_order_relaxed)) {
      deferred_count_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

// The deferred blocks whose readers are done, put away as give_back would
// have: each claimed from its slot first (one CAS), so that two calls never
// put one away twice, and only then its header read (its readers' unit):
// until 2026-11-30 (branch review3) the header was read before the claim,
// and a scan that another one's claim, put-away and unmap overtook there
// read an unmapped page (SIGSEGV, progress.huge_deferred_scan). A block
// whose reader is not done goes back into a slot (a reader cannot begin
// on it: its entry is held). A block whose open size did not fit its slot
// closes its whole capacity. Called when the count (give_back_deferred, in
// line: every huge call asks) is not 0; relaxed: one that reads 0 just
// before a deferral leaves the block to the next call. Out of line, as
// defer: the rare path (GCC's inlining of both into give_back and
// evict_expired cost malloc_large 1 300 4 47-49 instructions an operation,
// both builds).
template <class C>
bool huge_maps<C>::put_away_deferred() {
  const std::size_t page = C::platform::page_size();
  bool any = false;
  for (auto& s : deferred_) {
    std::uint64_t w = s.load(std::memory_order_relaxed);
    if (!w) continue;
    TENON_INJECT_POINT("huge.deferred");  // a slot's word read, its block not claimed yet
    if (!s.compare_exchange_strong(w, 0, std::memory_order_acquire, std::memory_order_relaxed)) continue;
    deferred_count_.fetch_sub(1, std::memory_order_relaxed);
    huge_header* h = huge_detail::header_at_unit(huge_slot::unit(w));
    if (huge_read_in_progress(h)) {
      keep_deferred(w);
      continue;
    }
    std::size_t pages = huge_slot::pages(w);
    put_away(h, pages == (std::size_t{1} << huge_slot::kPagesBits) - 1 ? h->capacity() : pages * page);
    any = true;
  }
  return any;
}

template <class C>
bool huge_maps<C>::evict_expired() {
  bool deferred = give_back_deferred();
  std::uint32_t delay = options().purge_delay_ms;
  std::uint32_t now = C::platform::now_ms();
  const std::size_t page = C::platform::page_size();
  bool any = false;
  for (auto& s : cache_) {
    std::uint64_t w = s.load(std::memory_order_relaxed);
    if (!w || huge_slot::age_ms(w, now) < huge_slot::retention_ms(w, delay, page)) continue;
    if (!s.compare_exchange_strong(w, 0, std::memory_order_acquire)) continue;
    huge_header* h = huge_detail::header_at_unit(huge_slot::unit(w));
    return_budget(w, h);
    unmap(h);
    any = true;
  }
  return any || deferred;
}

template <class C>
bool huge_maps<C>::cache_put(huge_header* h, std::size_t open) {
  using platform = typename C::platform;
  [[maybe_unused]] section<typename C::sync, shared_structure::huge_cache> guard;
  if (h->far || h->user != reinterpret_cast<char*>(h) + huge_detail::head_bytes<C>(platform::page_size()))
    return false;
  if (!reserve_budget(h)) return false;
  std::uint64_t w = huge_slot::make(lookup::unit_of(h), h->capacity() / platform::page_size(),
                                    huge_slot::to_tick(platform::now_ms()));
  // Marked freed (usable 0) before a slot publishes it, by the free's claim
  // (or a split's tail, below): a claimer then sets its usable size again
  // (reshape), so a free that finds 0 is a second one.
  huge_detail::close_freed<C>(h, open);
  for (auto& s : cache_) {
    std::uint64_t empty = 0;
    TENON_INJECT_POINT("huge.cache.put");
    if (s.compare_exchange_strong(empty, w, std::memory_order_release, std::memory_order_relaxed)) {
      chunks_->note_retained();  // cached pages go back on time even if the program goes idle
      return true;
    }
  }
  return_budget(w, h);
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
// (architecture.md, layer 7, has the figures). A tail below kHugeSplitMin
// stays with the block: it could serve no huge request alone.
template <class C>
void huge_maps<C>::split_tail(huge_header* h, std::size_t usable) {
  using platform = typename C::platform;
  const std::size_t page = platform::page_size();
  const std::size_t head = huge_detail::head_bytes<C>(page);
  std::size_t keep = head + usable;
  if (h->map_size < keep + kHugeSplitMin) return;
  std::size_t tail = h->map_size - keep;
  char* from = reinterpret_cast<char*>(h) + keep;
  std::size_t probe = kHugeSplitProbePages * page;
  if (probe > tail) probe = tail;
  if (platform::resident_bytes(from, probe) < probe) return;
  // The tail's first page becomes its header: the moved range is then the
  // whole new mapping, one VMA that mremap can grow or move later (a fresh
  // header page in front of it would be a second VMA: mremap fails, EFAULT).
  // Keep the block whole rather than fail the request when the new mapping
  // or its unit map leaf cannot be had.
  void* dest = platform::reserve(tail, kChunkSize);
  if (!dest) return;
  if (!lookup::prepare(static_cast<char*>(dest))) {
    platform::release(dest, tail);
    return;
  }
  // The block's entry narrows before its tail leaves: the kernel may hand
  // the vacated range to another mapping at once.
  lookup::set(huge_detail::marked_unit(h), huge_detail::entry_for(h, keep));
  if (!platform::move_to(from, tail, tail, dest)) {
    huge_detail::publish(h);
    platform::release(dest, tail);
    return;
  }
  h->map_size = keep;
  chunks_->shared_stats().add_shared(stat_huge_remaps);  // the tail moved: the bytes mapped stay the same
  // A tail whose header page would not open (RLIMIT_DATA) is given back to
  // the system rather than written: nothing names it yet.
  if (!huge_detail::open_split_tail<C>(dest, page)) {
    count(stat_huge_unmaps);
    count(stat_huge_bytes_unmapped, tail);
    platform::release(dest, tail);
    return;
  }
  auto* t = static_cast<huge_header*>(dest);
  t->map_size = tail;
  t->usable = 0;  // freed: nothing of it open where cached blocks are closed (above)
  t->user = static_cast<char*>(dest) + head;
  t->far = false;
  t->probe = false;
  t->owner = nullptr;
  huge_detail::publish(t);
  TENON_INJECT_POINT("huge.cache.split");
  if (!cache_put(t, 0)) unmap(t);
}

// The best cached mapping for `usable` bytes: the smallest whose capacity
// holds it, else the largest smaller one (grown with mremap by the caller:
// its resident pages are reused, only the tail is new). A big block serves
// only a request of at least half its size, or a bigger one: it is kept for
// a loop over a buffer of its size, and a small request would keep its pages
// resident under it (and in the tails split off it) for the whole purge
// delay instead of its own short one. *alone: no other block was cached when
// it was chosen.
template <class C>
huge_header* huge_maps<C>::claim_cached(std::size_t usable, bool* alone) {
  [[maybe_unused]] section<typename C::sync, shared_structure::huge_cache> guard;
  const std::size_t page = C::platform::page_size();
  std::size_t want = usable / page;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::atomic<std::uint64_t>* best = nullptr;
    std::uint64_t best_w = 0;
    unsigned cached = 0;
    for (auto& s : cache_) {
      std::uint64_t w = s.load(std::memory_order_relaxed);
      if (!w) continue;
      ++cached;
      std::size_t p = huge_slot::pages(w), bp = huge_slot::pages(best_w);
      if (huge_slot::big(p, page) && want < p / 2) continue;
      bool better = !best || (p >= want ? bp < want || p < bp : bp < want && p > bp);
      if (better) {
        best = &s;
        best_w = w;
      }
    }
    if (!best) return nullptr;
    TENON_INJECT_POINT("huge.cache.take");
    if (best->compare_exchange_strong(best_w, 0, std::memory_order_acquire)) {
      huge_header* h = huge_detail::header_at_unit(huge_slot::unit(best_w));
      return_budget(best_w, h);
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
template <class C>
huge_header* huge_maps<C>::cache_take(std::size_t usable) {
  bool alone = false;
  huge_header* h = claim_cached(usable, &alone);
  if (h && alone) split_tail(h, usable);
  return h;
}

template <class C>
bool huge_maps<C>::flush_cache() {
  bool any = give_back_deferred();
  for (auto& s : cache_) {
    std::uint64_t w = s.exchange(0, std::memory_order_acquire);
    if (!w) continue;
    huge_header* h = huge_detail::header_at_unit(huge_slot::unit(w));
    return_budget(w, h);
    unmap(h);
    any = true;
  }
  return any;
}

}  // namespace tenon
