// Layer 7, huge blocks (above kMaxLarge, or an alignment a slice run cannot
// give): a dedicated mapping with a header page; recently freed ones are kept
// in a small lock-free cache for reuse (pages stay resident: no page-fault
// storm), purged after the delay; realloc grows or moves them with mremap
// instead of copying.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/arena/arena.h"
#include "tenon/common/config.h"

namespace tenon {

struct huge_header {
  std::size_t map_size;  // bytes mapped from the header's page on
  std::size_t usable;    // bytes usable from `user` on (what was asked, page-rounded)
  char* user;            // the pointer handed out
  bool far;              // header one unit below the user pointer's unit
  // TENON_HUGE_PAGES=3 and 4: a fresh mapping not advised, whose pages its first
  // user writes are counted at its free (huge_maps::learn_density)
  bool probe;
  // nullptr, or the first-class heap's record of this block (a large_owner,
  // frontend/large_owner.h): set by the heap after alloc, before the block
  // is handed out; cleared when the block is freed (and so in the cache).
  void* owner;
  // Bytes mapped from `user` on: may exceed `usable`, so that a reused or
  // shrunk block keeps its resident pages for the next, larger request.
  std::size_t capacity() const {
    return map_size - static_cast<std::size_t>(user - reinterpret_cast<const char*>(this));
  }
};

// Its usable size, 0 if freed, in one read (a relaxed atomic load: a free may
// take it to 0 at the same instant, huge_maps::free). An outer layer's end
// header is this far past p, for every layer over the engine passes the
// engine's usable size through.
inline std::size_t huge_usable(const huge_header* h) {
  return std::atomic_ref<std::size_t>(const_cast<huge_header*>(h)->usable).load(std::memory_order_relaxed);
}
// The claim of a block by its free or its realloc: the usable size taken for
// 0 (the freed mark) in one exchange. Called only by huge_take, after its CAS
// on the unit map entry won the block: that CAS decides which of two calls
// on one block at the same instant gets it (since 2026-11-29, branch
// hugeread; before, this exchange decided it, after a read of the header
// that the winner may have unmapped). The exchange gives the size and leaves
// the freed mark, and the block is the claimer's alone until it frees it or
// releases it (huge_release). acq_rel: a claim that
// takes a size huge_set_usable put back sees what that thread wrote before
// (the canary's freed tag at the block's end).
inline std::size_t huge_claim(huge_header* h) {
  return std::atomic_ref<std::size_t>(h->usable).exchange(0, std::memory_order_acq_rel);
}
// The block's usable size set by the one thread that holds it (a claimer
// giving it back unfreed, a realloc that resized it, a block taken from the
// cache): live again, for the next claim. Release: see huge_claim.
inline void huge_set_usable(huge_header* h, std::size_t usable) {
  std::atomic_ref<std::size_t>(h->usable).store(usable, std::memory_order_release);
}

// The header of a huge block, or nullptr if p is not the start of one. Its
// bytes are not the caller's to read (another thread may unmap them the
// next instant) unless it holds the block (huge_take).
huge_header* huge_lookup(const void* p);
// The block p starts taken by a free or a realloc: nullptr if p starts no
// huge block; else its header, with *usable its usable size, the block now
// the caller's alone (its unit map entry held, its usable size 0) until it
// frees it (huge_maps::free_claimed, resize) or gives it back
// (huge_release); or *usable 0 if another call holds it (a free, a realloc,
// the huge cache: p was freed, a double free), whose header the caller must
// not read: the holder may have unmapped or moved it (issue 11; until
// 2026-11-29, branch hugeread, the header's exchange was the first claim,
// and a free that lost the race read the header after the winner unmapped
// it). The entry is taken first, by one CAS: of two calls on one block
// exactly one wins, and the loser's CAS fails on the entry the winner held,
// cleared or moved; only the holder unmaps, moves or releases the block.
huge_header* huge_take(const void* p, std::size_t* usable);
// A block taken (huge_take gave `usable`) live again at `usable` bytes,
// unfreed: its size set, then its entry published not held (release).
void huge_release(huge_header* h, std::size_t usable);
// What malloc_usable_size knows of the huge block p starts, from its unit
// map entry alone (src/huge/lookup.cpp): it cannot take the block (two of
// them on one live block at once are the program's right), so it reads no
// byte of it unless through huge_reading.
struct huge_view {
  const void* p;        // the block's start
  std::uint64_t entry;  // its unit map entry, read once
  std::size_t usable;   // its usable size then: 0 if a call held it (a free, a realloc, the cache)
};
// False if p starts no huge block.
bool huge_view_of(const void* p, huge_view* v);
// A read of v's block in place with nothing held, as malloc_usable_size
// needs (src/huge/lookup.cpp): while it lasts, the block stays mapped and
// open up to its usable size (its holder defers whatever would unmap,
// close or resize it: huge_read_in_progress). live(): the block was live
// and not held when the read began (else read nothing); unchanged(): nor
// taken since, so the bytes read are the live block's.
class huge_reading {
 public:
  explicit huge_reading(const huge_view& v);
  ~huge_reading();
  huge_reading(const huge_reading&) = delete;
  huge_reading& operator=(const huge_reading&) = delete;
  bool live() const { return live_; }
  bool unchanged() const;

 private:
  huge_view v_;
  std::atomic<std::uint64_t>* readers_;
  bool live_;
};
// n bytes of v's block at `from` (inside its usable size) copied to `to`,
// true only if the block was live and not held all along (huge_reading).
bool huge_copy_out(const huge_view& v, const void* from, void* to, std::size_t n);
// Whether a call reads h's block in place (huge_reading): asked by its
// holder, after its take, before anything that would unmap, close or
// resize the block.
bool huge_read_in_progress(const huge_header* h);
// Is p inside the range a huge block maps in the unit where its user pointer
// is (its header page, its start, or after)? A pointer elsewhere in that unit
// lies in someone else's memory. Neither call reads the block's memory unless
// p is its start (src/huge/lookup.cpp): both are safe on any pointer, while
// any other thread frees any block.
bool huge_contains(const void* p);

template <class C>
class huge_maps {
 public:
  constexpr explicit huge_maps(arena<C>& chunks) : chunks_(&chunks) {}

  // Returns nullptr (errno ENOMEM) when memory cannot be had; *zeroed: the
  // block is known to read as zeros.
  void* alloc(std::size_t n, std::size_t align, bool* zeroed);
  // Frees the block p starts, unless another call holds it: false then (a
  // double free, which the caller reports). The free takes the block first
  // (huge_take): of two frees at the same instant exactly one gets it.
  [[nodiscard]] bool free(const void* p);
  // Frees h's block, taken by the caller (huge_take gave it `usable`).
  void free_claimed(huge_header* h, std::size_t usable);
  // Grow or shrink h's block, taken by the caller (huge_take gave it
  // `usable`), without copying: the block, live again at its new size; or
  // nullptr if it cannot, the block unchanged and still taken (the caller
  // copies it, or gives it back: huge_release).
  void* resize(huge_header* h, std::size_t usable, std::size_t n);
  // Drop every cached block; true if anything was released.
  bool flush_cache();
  // Unmap cached blocks older than the purge delay; true if any was.
  bool evict_expired();
  // evict_expired for the arena's purge pass (its hook).
  static bool purge_hook(void* self) { return static_cast<huge_maps*>(self)->evict_expired(); }
  // Bytes of the mappings in the cache (for the statistics).
  std::size_t cached_bytes() const {
    return cache_bytes_.load(std::memory_order_relaxed) + big_bytes_.load(std::memory_order_relaxed);
  }

 private:
  // map.ipp
  void count(stat_id id, std::uint64_t n = 1) { chunks_->shared_stats().add_shared(id, n); }
  // A block handed out or given back, in the counts and the held gauge.
  void note_given(std::size_t usable);
  void note_taken(std::size_t usable);
  void give_back(huge_header* h, std::size_t open);
  void put_away(huge_header* h, std::size_t open);
  [[gnu::cold, gnu::noinline]] void defer(huge_header* h, std::size_t open);
  void keep_deferred(std::uint64_t w);
  bool give_back_deferred() { return deferred_count_.load(std::memory_order_relaxed) != 0 && put_away_deferred(); }
  [[gnu::cold, gnu::noinline]] bool put_away_deferred();
  void* reshape(huge_header* h, std::size_t n, std::size_t open);
  void unmap(huge_header* h);
  bool resize_mapping(huge_header* h, std::size_t map_size);
  bool advise_fresh();
  void advise_grown(huge_header* h);
  void learn_density(huge_header* h, std::size_t usable);
  // cache.ipp
  bool cache_put(huge_header* h, std::size_t open);
  void split_tail(huge_header* h, std::size_t usable);
  huge_header* claim_cached(std::size_t usable, bool* alone);
  huge_header* cache_take(std::size_t usable);
  bool reserve_budget(huge_header* h);
  void return_budget(std::uint64_t slot, const huge_header* h);

  arena<C>* chunks_;
  // Recently freed mappings, one word a slot (see cache.ipp), and their bytes.
  std::atomic<std::uint64_t> cache_[kHugeCacheSlots]{};
  std::atomic<std::size_t> cache_bytes_{0};
  // Freed blocks whose pages a reader still reads (defer), one word a slot:
  // the cache's (its unit, its open pages; no time).
  std::atomic<std::uint64_t> deferred_[kHugeDeferSlots]{};
  // How many slots hold a block: 0 spares every huge call the slots' scan.
  std::atomic<unsigned> deferred_count_{0};
  // The bytes of the one cached block over kHugeCacheMaxBlock, 0 if none.
  std::atomic<std::size_t> big_bytes_{0};
  // TENON_HUGE_PAGES=3 and 4: whether the last probe's first user wrote (nearly)
  // all of it, and how many fresh mappings were made while it was so.
  std::atomic<bool> dense_{false};
  std::atomic<std::uint32_t> fresh_dense_{0};
};

}  // namespace tenon
