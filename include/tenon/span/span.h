// Layer 2, spans: a run of slices cut into blocks of one size class (or one
// large block), described by a descriptor that lives in its chunk's header.
//
// Descriptors are type-stable: chunk headers are never unmapped, so a stale
// descriptor pointer always points at a descriptor (what lock-free stacks of
// spans rely on; ABA is then caught by the stacks' version tags).
//
// Ownership: a small span is owned by at most one thread heap (`owner`). Only
// the owner touches the fields marked "owner". Any other thread frees a block
// by pushing it on `remote` with a CAS; the owner takes the whole list with
// one exchange. The remote word packs, besides the list head, the number of
// blocks on it (so collecting is O(1)) and two flags that tell the pusher who
// must hear of the span:
//   kFull:     the owner parked the span on its full list; the pusher that
//              clears the flag bumps the owner's notify counter for the class.
//   kFloating: the span has no owner and no list (its thread exited while it
//              was full); the pusher that clears the flag publishes the span
//              on the global partial stack of its class.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenon/common/config.h"
#include "tenon/common/block_index.h"
#include "tenon/platform/relaxed_compare.h"

namespace tenon {

struct block {
  block* next;
};

namespace remote_word {
constexpr std::uint64_t kFull = 1;
constexpr std::uint64_t kFloating = 2;
constexpr std::uint64_t kFlags = 7;
constexpr unsigned kCountShift = 48;
constexpr std::uint64_t kPtrMask = ((std::uint64_t{1} << kCountShift) - 1) & ~kFlags;

inline block* head(std::uint64_t w) { return reinterpret_cast<block*>(w & kPtrMask); }
inline std::uint32_t count(std::uint64_t w) { return static_cast<std::uint32_t>(w >> kCountShift); }
inline std::uint64_t make(block* b, std::uint32_t n, std::uint64_t flags) {
  return reinterpret_cast<std::uint64_t>(b) | (std::uint64_t{n} << kCountShift) | flags;
}
}  // namespace remote_word

enum class span_kind : std::uint8_t { small, large };

// Where a small span is, from its owner's point of view (owner-private).
enum class span_state : std::uint8_t { current, avail, full, detached };

// Two cache lines. The first holds what every free reads, a remote one
// included (owner, kind, geometry), written only when the span changes
// hands; the second what the owner writes on every malloc and local free
// (free list, count). Sharing one line, each remote free missed on it and
// took it from the owner's cache, and the owner's next malloc took it back
// (docs/architecture.md, "Where a weak row's time goes").
struct alignas(64) span {
  // --- read by every free; fixed while the span lives, but for owner ---
  // Shared: written on (ab)adoption. The owning thread heap (a
  // thread_heap<C> of the engine whose chunk this is), or nullptr.
  std::atomic<void*> owner{nullptr};
  char* start = nullptr;
  union {
    std::size_t large_usable = 0;  // large spans: usable bytes from the user pointer
    // Small spans: where the owner's free pushes a block (free_to_own_span):
    // the span itself, or for a class with a block cache (heap/block_cache.h)
    // the owner's cache of the class, whose list is the free list of a
    // descriptor inside the heap. One push for both, so that the free fast
    // path has no branch on the class (docs/architecture.md, layer 5, "The
    // owner's free: one push for cached and uncached classes"). Written
    // with the owner (thread_heaps::set_owner), read only by the owner's
    // thread, after its owner test.
    span* push_to;
  };
  std::uint32_t block_size = 0;
  std::uint32_t capacity = 0;
  std::uint64_t block_mult = 0;      // small spans: block_index::multiplier(block_size)
  span_kind kind = span_kind::small;
  std::uint8_t cls = 0;
  std::uint8_t first_slice = 0;
  std::uint8_t nslices = 0;
  bool zeroed = false;         // memory known to read as zeros (fresh or purged)
  bool some_clean = false;     // a slice of it was fresh or purged when taken: TENON_POPULATE pre-faults it
  bool guarded = false;        // large spans of a guarded config: guard pages before and after the block (large.ipp)
  // Small spans: no slice of it held a small span's blocks or a large block
  // since it was fresh or purged (chunk::linked clear when taken), so its blocks not yet
  // carved hold no link and no free key: they can go out unwritten, their
  // page faults left to the program's first write (heap/cache.ipp).
  bool no_links = false;
  // What block_index::starts_block admits on the owner's free: the blocks
  // carved so far. Written by the owner only, through set_carved() (at the
  // span's forming and when it carves: never on a malloc or free), and only
  // ever raised while the span has a live block. On this line, which every
  // free reads anyway: a per-CPU cache's free (percpu_cache.hpp), whoever
  // makes it, reads it too, with a relaxed load (a freer of a live block
  // sees at least the count that carved it).
  std::uint64_t carved_limit = 0;
  // --- owner-only, on the second line ---
  alignas(64) block* free = nullptr;  // local free list: owner's frees land here
  // Blocks out ("used", biased by kCurrentBias while current), kept as the
  // local frees left before the free fast path must take its slow path,
  // used - low_mark: that path's test is then a decrement and a sign test
  // (`subl`, `js`) rather than a compare of two fields. Read and change
  // through used(), set_used(), add_used(), remove_used(), set_low_mark().
  std::int32_t until_slow = -1;
  std::uint32_t low_mark = 1;  // local free calls the slow path when used drops below
  span* next = nullptr;        // owner's avail/full list
  span* prev = nullptr;
  std::uint32_t carved = 0;    // blocks carved from the span's memory so far (and carved_limit above)
  span_state state = span_state::detached;
  // Large spans: whether the block waits in a secure quarantine (its pages
  // closed, its end, the canary's header, included, or past the budget of
  // closed blocks open): a second free, a realloc or a malloc_usable_size of
  // it reads this instead of the header (secure/quarantine.hpp sets it by an
  // exchange, which a second free racing the first finds set, and clears it;
  // secure/canary.hpp reads it). Named waits_closed, and set for closed
  // blocks only, by a store, until 2026-11-29. In the padding after
  // `state`: no field moves.
  std::atomic<bool> waits_in_quarantine{false};
  // --- shared, written by remote pushers and the owner (the owner's line:
  // it takes what they push) ---
  std::atomic<std::uint64_t> remote{0};
  std::atomic<std::uint32_t> stack_next{0};  // link on a partial stack (span id)

  // The owner's view of the count (owner-only, like the fields).
  constexpr std::uint32_t used() const { return static_cast<std::uint32_t>(until_slow) + low_mark; }
  constexpr void set_used(std::uint32_t u) { until_slow = static_cast<std::int32_t>(u - low_mark); }
  void add_used(std::uint32_t n) { until_slow += static_cast<std::int32_t>(n); }
  void remove_used(std::uint32_t n) { until_slow -= static_cast<std::int32_t>(n); }
  // A large span's count (its one block live, 1, or not, 0), which any
  // thread's free of the block reads and takes to 0: with atomics, so that
  // of two frees of the block racing, one takes it and the other finds 0
  // (large_runs::free; until 2026-11-29 both read 1, both freed the run).
  std::uint32_t used_any_thread() const {
    return static_cast<std::uint32_t>(__atomic_load_n(&until_slow, __ATOMIC_RELAXED)) + low_mark;
  }
  bool take_only_block_back() {
    auto live = static_cast<std::int32_t>(1 - low_mark), gone = static_cast<std::int32_t>(0 - low_mark);
    return __atomic_compare_exchange_n(&until_slow, &live, gone, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  // The blocks carved so far, and the bound block_index::starts_block admits
  // for them (written with relaxed stores: a per-CPU cache's free reads the
  // bound from another thread).
  void set_carved(std::uint32_t n) {
    carved = n;
    __atomic_store_n(&carved_limit, block_index::limit(block_mult, block_size, n), __ATOMIC_RELAXED);
  }
  // The bound to 0 as the span goes back to the chunk layer (carved stays,
  // which the release reads), before the owner's null store and the slices'
  // release. A thread that does not own the span tests a block against the
  // bound after it read the block's second word (second_word_ordered): a
  // stale pointer (freed already) that the test would admit against the
  // span it was carved in holds the free key until the span is released
  // and its memory purged or reused; read without the key, the word was
  // changed after this store, and so the bound then reads 0 or a later
  // span's (with its geometry). Read before, the old bound admitted it after
  // the span was formed again, and the block reached the new span's list
  // through its owner's inbox or its remote list: a slot not carved yet,
  // handed out twice (tests/progress/stale_free_test.cpp; 2026-11-29,
  // branch `stale`).
  void forget_carved() { __atomic_store_n(&carved_limit, 0, __ATOMIC_RELAXED); }
  // Whether p starts a block of this small span that its owner carved (the
  // owner's free fast path and checks: an interior pointer, or one never
  // handed out, is not).
  __attribute__((always_inline)) bool starts_carved_block(const void* p) const {
    auto offset = static_cast<std::uint64_t>(static_cast<const char*>(p) - start);
    return block_index::starts_block(offset, block_mult, carved_limit);
  }
  // The same test by any thread (a per-CPU cache's free, the thread heaps'
  // remote free): the bound read with a relaxed load, as the owner may be
  // carving more blocks meanwhile; compared in memory (os::below_relaxed:
  // GCC folds no atomic load into a compare, an instruction a free).
  __attribute__((always_inline)) bool starts_carved_block_any_thread(const void* p) const {
    auto offset = static_cast<std::uint64_t>(static_cast<const char*>(p) - start);
    return os::below_relaxed(offset * block_mult, carved_limit);
  }
  // Where the owner's free pushes (push_to above).
  __attribute__((always_inline)) span* push_target() const { return __atomic_load_n(&push_to, __ATOMIC_RELAXED); }
  void set_push_target(span* t) { __atomic_store_n(&push_to, t, __ATOMIC_RELAXED); }
  void set_low_mark(std::uint32_t m) {
    std::uint32_t u = used();
    low_mark = m;
    set_used(u);
  }
};
static_assert(sizeof(span) == 128, "two cache lines: what freers read, what the owner writes");
static_assert(__builtin_offsetof(span, carved_limit) < 64, "carved_limit on the line every free reads");

// The descriptor of a span with nothing to give: every class of a heap with
// no span of its own points here, so the malloc fast path needs no null test.
extern constinit span g_empty_span;

// The descriptor of every slice that no span has used yet (the chunk header's
// slice too): its owner is never a heap, so a free of a pointer there leaves
// the fast path and its check finds it is no block (instead of reading a null
// descriptor).
extern constinit span g_no_span;

// While a span is its heap's current span for a class, its `used` carries this
// bias so that a local free never sees it reach zero: the fast path's single
// "used < low_mark" test then covers empty and formerly-full spans alike.
constexpr std::uint32_t kCurrentBias = 1u << 30;

}  // namespace tenon
