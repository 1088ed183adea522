// huge_maps<C>: mapping, unmapping and resizing huge blocks, with their unit
// map entries kept true for the range mapped at every moment.
#include <errno.h>

#include "huge_detail.h"
#include "tenon/common/inject.h"
#include "tenon/huge/huge.h"

namespace tenon {

template <class C>
void huge_maps<C>::unmap(huge_header* h) {
  huge_detail::withdraw(h);
  count(stat_huge_unmaps);
  count(stat_huge_bytes_unmapped, h->map_size);
  C::platform::release(h, h->map_size);
}

template <class C>
void huge_maps<C>::note_given(std::size_t usable) {
  count(stat_huge_bytes_given, usable);
  chunks_->shared_stats().hold(static_cast<std::int64_t>(usable));
}

template <class C>
void huge_maps<C>::note_taken(std::size_t usable) {
  count(stat_huge_bytes_taken, usable);
  chunks_->shared_stats().hold(-static_cast<std::int64_t>(usable));
}

// Resize the mapping in place: a shrink updates the entry first, a growth
// after.
template <class C>
bool huge_maps<C>::resize_mapping(huge_header* h, std::size_t map_size) {
  bool shrink = map_size < h->map_size;
  if (shrink) lookup::set(huge_detail::marked_unit(h), huge_detail::entry_for(h, map_size));
  if (!C::platform::resize_in_place(h, h->map_size, map_size)) {
    if (shrink) huge_detail::publish(h);
    return false;
  }
  count(stat_huge_remaps);
  if (shrink) count(stat_huge_bytes_unmapped, h->map_size - map_size);
  else count(stat_huge_bytes_mapped, map_size - h->map_size);
  h->map_size = map_size;
  if (!shrink) huge_detail::publish(h);
  if (!shrink && learns_density(options().thp)) advise_grown(h);
  return true;
}

// TENON_HUGE_PAGES=3 and 4: a grown mapping's new pages come as a fresh block's
// would (op-size grows its cached blocks to each next size: most of its
// faults were there); past kHugeAdviseMax the advice a smaller block had is
// taken back, or the growth (mremap) would keep it for all its new pages.
template <class C>
void huge_maps<C>::advise_grown(huge_header* h) {
  if (h->capacity() > kHugeAdviseMax) C::platform::unadvise_huge(h, h->map_size);
  else if (dense_.load(std::memory_order_relaxed)) C::platform::advise_huge(h, h->map_size);
}

template <class C>
void* huge_maps<C>::alloc(std::size_t n, std::size_t align, bool* zeroed) {
  using platform = typename C::platform;
  const std::size_t page = platform::page_size();
  if (n > (std::size_t{1} << kAddressBits)) {
    errno = ENOMEM;
    return nullptr;
  }
  std::size_t usable = huge_detail::round_up(n, page);
  const std::size_t guard = huge_detail::guard_bytes<C>();
  const std::size_t head = huge_detail::head_bytes<C>(page);
  evict_expired();
  if (align <= page) {
    if (huge_header* h = cache_take(usable + guard)) {
      if (void* p = reshape(h, usable, 0)) {
        count(stat_huge_cache_hits);
        note_given(usable);  // not h->usable: h may have moved
        *zeroed = false;
        return p;
      }
      give_back(h, 0);  // taken from the cache: usable 0, nothing open
    }
  }
  TENON_INJECT_POINT("huge.map");
  huge_header* h;
  char* user;
  bool far = align >= kChunkSize;
  if (!far) {
    // Header at a 4 MiB boundary, user pointer in the same unit (past the
    // head guard where the config has one).
    std::size_t off = align <= head ? head : align;
    char* base = static_cast<char*>(platform::reserve(off + usable + guard, kChunkSize));
    if (!base) {
      errno = ENOMEM;
      return nullptr;
    }
    h = reinterpret_cast<huge_header*>(base);
    user = base + off;
    h->map_size = off + usable + guard;
  } else {
    // The user pointer is itself 4 MiB aligned: header one unit below it.
    std::size_t total = kChunkSize + usable + guard + align;
    auto* raw = static_cast<char*>(platform::reserve(total, kChunkSize));
    if (!raw) {
      errno = ENOMEM;
      return nullptr;
    }
    user = reinterpret_cast<char*>(huge_detail::round_up(reinterpret_cast<std::uintptr_t>(raw) + kChunkSize, align));
    char* base = user - kChunkSize;
    if (base > raw) platform::release(raw, static_cast<std::size_t>(base - raw));
    char* end = user + usable + guard;
    if (raw + total > end) platform::release(end, static_cast<std::size_t>(raw + total - end));
    h = reinterpret_cast<huge_header*>(base);
    h->map_size = kChunkSize + usable + guard;
  }
  h->usable = usable;
  h->user = user;
  h->far = far;
  h->probe = false;
  h->owner = nullptr;
  if (!lookup::prepare(huge_detail::marked_unit(h))) {  // no unit map leaf: nobody has seen the block yet
    platform::release(h, h->map_size);
    errno = ENOMEM;
    return nullptr;
  }
  huge_detail::guard_range<C>(h, usable, usable + guard, false);
  huge_detail::guard_head<C>(h, false);
  huge_detail::publish(h);
  // Huge-page advice first, so that a pre-fault gets huge pages too.
  huge_pages mode = options().thp;
  if (mode == huge_pages::blocks || mode == huge_pages::chunks) {
    platform::advise_huge(h, h->map_size);
  } else if (learns_density(mode) && usable <= kHugeAdviseMax) {
    if (advise_fresh()) platform::advise_huge(h, h->map_size);
    else h->probe = true;
  }
  prefault_fresh<platform>(user, usable, n);
  count(stat_huge_allocs);
  count(stat_huge_bytes_mapped, h->map_size);
  note_given(usable);
  *zeroed = true;
  return user;
}

// TENON_HUGE_PAGES=3 and 4 for a fresh mapping: advised while the last probe was
// written densely, except one in kHugeProbeEvery, left unadvised as the next
// probe (an advised block is resident whole once touched, so only a probe
// tells what the program writes). malloc-large writes a few pages of its
// 2-35 MiB blocks (advised all, its peak RSS went 11 -> 115 MiB), op-size
// every page of its 4-64 MiB ones.
template <class C>
bool huge_maps<C>::advise_fresh() {
  if (!dense_.load(std::memory_order_relaxed)) return false;
  return fresh_dense_.fetch_add(1, std::memory_order_relaxed) % kHugeProbeEvery != kHugeProbeEvery - 1;
}

// At a probe's first free: did its user write at least 7/8 of it? One
// mincore pass over the block (a call per 4 MiB), once per probe; the
// probe's mapping then goes on as any other.
template <class C>
void huge_maps<C>::learn_density(huge_header* h, std::size_t usable) {
  h->probe = false;
  std::size_t resident = C::platform::resident_bytes(h->user, usable);
  dense_.store(resident >= usable - usable / 8, std::memory_order_relaxed);
}

template <class C>
bool huge_maps<C>::free(const void* p) {
  std::size_t usable = 0;
  huge_header* h = huge_take(p, &usable);
  if (!h || usable == 0) return false;
  free_claimed(h, usable);
  return true;
}

template <class C>
void huge_maps<C>::free_claimed(huge_header* h, std::size_t usable) {
  if (h->probe) learn_density(h, usable);
  count(stat_huge_frees);
  note_taken(usable);
  give_back(h, huge_detail::open_bytes<C>(usable));
}

// Into the cache, or unmapped; no count of its own (free counts the block).
// Its usable size is 0 already (the free's claim, or a block taken from the
// cache); `open` is what its user could reach (open_bytes), which a config
// that protects cached blocks closes. The owner is cleared only where set (a
// first-class heap's block, freed by its heap alone): a second free racing
// this one reads it.
// A block that a malloc_usable_size reads in place (huge_reading, counted
// in its unit's readers since before this free took it) stays mapped and
// open, held, until the reader is done: deferred, and put away by the next
// huge call or purge pass that finds no reader (give_back_deferred). No
// waiting: the reader may be stopped forever, and the block then stays.
template <class C>
void huge_maps<C>::give_back(huge_header* h, std::size_t open) {
  TENON_INJECT_POINT("huge.free");
  if (h->owner) h->owner = nullptr;
  if (huge_read_in_progress(h)) defer(h, open);
  else put_away(h, open);
  evict_expired();
}

template <class C>
void huge_maps<C>::put_away(huge_header* h, std::size_t open) {
  if (!cache_put(h, open)) unmap(h);
}

// realloc's resize: the block's bytes move in the counts by the change.
// A block a malloc_usable_size reads in place (huge_reading) is not
// resized: its pages would move or close under the reader. nullptr: the
// caller copies it, and its free is deferred (give_back).
template <class C>
void* huge_maps<C>::resize(huge_header* h, std::size_t usable, std::size_t n) {
  if (huge_read_in_progress(h)) return nullptr;
  void* p = reshape(h, n, huge_detail::open_bytes<C>(usable));
  if (p) {  // reshape made the block's usable size n rounded up to pages
    note_taken(usable);
    note_given(huge_detail::round_up(n, C::platform::page_size()));
  }
  return p;
}

// Called for a block just taken from the cache (nothing open past its
// header page) and for a block realloc took (its usable bytes open):
// `open`, the bytes open past the user pointer (open_bytes). Either way the
// block is the caller's alone, marked freed (usable 0), and the pages past
// what is open are closed where the config protects cached blocks
// (cache.ipp), and they are again on return. The block is released last
// (huge_release: its usable size, then its entry not held): until then a
// free or realloc of it racing this one finds it held.
template <class C>
void* huge_maps<C>::reshape(huge_header* h, std::size_t n, std::size_t open) {
  using platform = typename C::platform;
  const std::size_t page = platform::page_size();
  const std::size_t head = huge_detail::head_bytes<C>(page);
  if (h->far || h->user != reinterpret_cast<char*>(h) + head) return nullptr;
  std::size_t usable = huge_detail::round_up(n, page);
  std::size_t capacity = h->capacity();
  const std::size_t guard = huge_detail::guard_bytes<C>();
  if (usable + guard <= capacity) {
    // Fits: keep the mapping and its resident pages, so that a later, larger
    // request needs no page faults (on malloc-large, 2-35 MiB blocks, trimming
    // at 2x the need made 17x the faults of never trimming, 8x made 8x). Only a
    // mapping over 16x the need is trimmed, to twice the need; a cached
    // mapping is at most kHugeCacheMaxBlock, which bounds the idle part.
    if (capacity / 16 > usable) {
      TENON_INJECT_POINT("huge.remap");
      // A live block shrunk so far keeps open no more than the mapping left.
      if (resize_mapping(h, head + 2 * usable) && open > h->capacity()) open = h->capacity();
    }
    // Only the pages asked for open; a shrink closes the ones given up. An
    // open the kernel refuses (RLIMIT_DATA) fails the request instead of
    // handing out closed pages: the caller maps afresh or copies (realloc),
    // or answers ENOMEM.
    if (!huge_detail::guard_range<C>(h, open, usable, true)) {
      huge_detail::guard_range<C>(h, open, usable, false);  // what it opened, if anything
      return nullptr;
    }
    huge_detail::guard_range<C>(h, usable, open, false);
    huge_release(h, usable);
    return h->user;
  }
  // mremap grows or moves one VMA only: the closed pages open first (the
  // block then uses them all, the head guard too), and close again if the
  // mapping cannot grow.
  huge_detail::guard_range<C>(h, open, capacity, true);
  huge_detail::guard_head<C>(h, true);
  TENON_INJECT_POINT("huge.remap");
  std::size_t map_size = head + usable + guard;
  if (!resize_mapping(h, map_size)) {
    // Move the pages (no copy) to a fresh 4 MiB-aligned reservation. The
    // old range is free the instant the move succeeds and another thread's
    // new mapping may take it and mark its unit at once, so our entry goes
    // first: only the caller holds this block, and no one else may look it
    // up in between. The new unit's leaf is reserved before anything moves.
    void* dest = platform::reserve(map_size, kChunkSize);
    if (!dest) return huge_detail::close_again<C>(h, open, capacity);
    if (!lookup::prepare(dest)) {
      platform::release(dest, map_size);
      return huge_detail::close_again<C>(h, open, capacity);
    }
    huge_detail::withdraw(h);
    if (!platform::move_to(h, h->map_size, map_size, dest)) {
      huge_detail::publish(h);
      platform::release(dest, map_size);
      return huge_detail::close_again<C>(h, open, capacity);
    }
    h = static_cast<huge_header*>(dest);  // the old header moved with the pages
    count(stat_huge_remaps);
    count(stat_huge_bytes_unmapped, h->map_size);
    count(stat_huge_bytes_mapped, map_size);
    h->user = static_cast<char*>(dest) + head;
    h->map_size = map_size;
    huge_detail::publish(h);
    if (learns_density(options().thp)) advise_grown(h);  // the move kept the old advice
  }
  huge_detail::guard_range<C>(h, usable, usable + guard, false);  // the growth opened it
  huge_detail::guard_head<C>(h, false);
  huge_release(h, usable);
  return h->user;
}

}  // namespace tenon
