// tenon::mass_pool<T>: a lock-free typed bulk pool (see docs/mass_pool.md).
//
// For programs that create tens or hundreds of millions of small objects of
// one type from many threads, link them to each other by 32-bit index, and
// drop them all at once:
//
//   tenon::mass_pool<Node> pool;
//   auto [index, node] = pool.emplace(args...);   // any thread, lock-free
//   pool[index].next = other;                     // elements never move
//   std::sort(pool.begin(), pool.end(), cmp);     // random-access iterators
//   pool.clear();                                 // O(blocks), not O(elements)
//
// Include this header and link -ltenon (or libtenon.a); nothing else.
#pragma once

#include <algorithm>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__cpp_exceptions)
#include <stdexcept>
#endif

#include "tenon/mass_pool.h"

// Owned lanes (see pool_core): a thread claims slots of a lane it owns with a
// plain store inside a restartable sequence (Linux rseq, registered by glibc
// 2.35 and later), so that no claim needs an atomic read-modify-write. x86-64
// only (the sequence is assembly); ThreadSanitizer cannot see it, so its
// builds, other architectures and older C libraries use the CAS on every lane.
#if defined(__x86_64__) && defined(__linux__) && defined(__has_include)
#if __has_include(<sys/rseq.h>)
#define TENON_POOL_HAVE_RSEQ_HEADER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TENON_POOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENON_POOL_TSAN 1
#endif
#endif
#if defined(TENON_POOL_HAVE_RSEQ_HEADER) && !defined(TENON_POOL_TSAN) && !defined(TENON_POOL_NO_RSEQ)
#define TENON_POOL_RSEQ 1
#include <sys/rseq.h>

#include "tenon/platform/rseq_asm.h"
#else
#define TENON_POOL_RSEQ 0
#endif

namespace tenon {
namespace detail {

// The calling thread's lane seed: a per-thread ordinal handed out in order by
// libtenon, so the first 64 threads to use any pool get 64 different lanes
// (hashing thread addresses would make two of eight threads share a lane a
// third of the time). Plain constant-initialised TLS: no wrapper, no lock.
// 0 until the thread's first refill; the fast path then looks at lane 63,
// which it cannot own, and falls through to the slow path that assigns it.
inline thread_local std::uint32_t tl_pool_lane_plus1 = 0;

inline std::uint32_t this_thread_lane_seed() noexcept {
  std::uint32_t v = tl_pool_lane_plus1;
  if (__builtin_expect(v == 0, 0)) {
    v = tenon_pool_thread_ordinal() + 1;
    tl_pool_lane_plus1 = v;
  }
  return v - 1;
}

// Who owns a lane: the owner's thread pointer. It is unique among live
// threads, and the C library reuses it only for a new thread after the old
// one has exited, so a new thread that finds its own thread pointer on a lane
// is the only thread that can still write it, and simply continues (also in
// a fork child, whose thread keeps the parent's thread pointer). Never 0, 1
// or 2, the lane states below.
//
// Read afresh at every use (volatile), and inside the restartable sequences
// themselves: a compiler may keep a thread-local address across a C++20
// coroutine's suspension, which may resume on another thread, and a stale id
// would let that thread write a lane it does not own.
inline std::uintptr_t this_thread_id() noexcept {
#if defined(__x86_64__)
  std::uintptr_t tp;
  asm volatile("movq %%fs:0, %0" : "=r"(tp));  // the x86-64 ABI keeps the thread pointer there
  return tp;
#else
  return reinterpret_cast<std::uintptr_t>(&tl_pool_lane_plus1);  // unique per live thread too
#endif
}

// Test hook for counting instructions under valgrind, which does not
// implement rseq: lets a thread own lanes without it. Safe only in a program
// with a single thread (nothing restarts a sequence another thread cut into).
inline std::atomic<bool> pool_own_without_rseq_for_testing{false};

// Progress-test hook: when set (tests only), the slow paths call it at each
// named step between two operations on shared state, and a test can park a
// thread there forever to prove the others still finish. One relaxed load per
// block refill when unset; never on the per-element path.
inline std::atomic<void (*)(const char*)> pool_step_hook{nullptr};
inline void pool_step(const char* name) noexcept {
  if (auto h = pool_step_hook.load(std::memory_order_relaxed); __builtin_expect(h != nullptr, 0)) h(name);
}

// The untyped engine behind both mass_pool<T> and the C API.
//
// Index space: index = block << shift | slot. A block is 2^shift slots of
// `stride` bytes (about 2 MiB), carved from segments of up to 32 blocks
// reserved from the platform layer (huge page aligned, committed lazily). A
// fixed directory maps block number -> base address; it is reserved once for
// the whole 2^32 index space and committed lazily, so it never moves and a
// lookup is one load.
//
// Claiming: 64 lanes per pool, each a 64-bit word (block + 1, slots used) on
// its own cache line. A thread always uses the same lane (its ordinal mod
// 64), so with up to 64 threads every claim is a CAS on a line nobody else
// touches: no shared counter per element. A lane whose block is used up is
// refilled with a fresh block number from one fetch_add per block; the
// refilling thread installs it by CAS. If two threads race to refill the same
// lane, the loser pushes its block onto a lock-free spare stack, where the
// next refill anywhere finds it. Nobody ever waits for anybody.
//
// What holds elements: each lane's current block (up to its count) and every
// block a lane has used up (marked full before the CAS that replaces it). A
// block taken but not yet installed holds nothing, so a refill frozen (or cut
// off by fork) between the two leaves no phantom: walks skip that block, and
// size() walks blocks instead of lanes while any refill is unfinished.
//
// Dense mode (tenon::dense_indices) uses lane 0 only, claims with fetch_add
// and numbers blocks by succession: exact density, shared contention.
class pool_core {
 public:
  static constexpr unsigned kLanes = 64;
  enum status : int { ok = 0, full = 1, no_memory = 2, retry = 3 };
  struct claim {
    void* slot;
    std::uint32_t index;
    int status;
  };

  // Returns false (errno-free) on bad arguments or when the directory cannot
  // be reserved; the object is then unusable.
  bool init(std::size_t elem_size, std::size_t align, unsigned shift, bool dense = false) noexcept {
    if (elem_size == 0 || align == 0 || (align & (align - 1)) || align > 4096 || shift > 24)
      return false;
    dense_ = dense;
    stride_ = (elem_size + align - 1) & ~(align - 1);
    if (shift == 0) shift = default_shift(stride_);
    shift_ = shift;
    block_elems_ = std::uint32_t{1} << shift;
    block_bytes_ = round_up(stride_ * block_elems_, 4096);
    dir_entries_ = std::uint32_t((std::uint64_t{1} << 32) >> shift);
    seg_shift_ = 0;
    while (seg_shift_ < 10 && (block_bytes_ << (seg_shift_ + 1)) <= kSegmentBytes) ++seg_shift_;
    seg_bytes_ = block_bytes_ << seg_shift_;
    const std::size_t seg_entries = (std::size_t{dir_entries_} + (1u << seg_shift_) - 1) >> seg_shift_;
    // One lazily committed reservation: block bases, spare links, segment bases,
    // full marks (dir_entries_ is a power of two >= 256, so every array stays
    // 8-aligned).
    dir_bytes_ = round_up(std::size_t{dir_entries_} * (sizeof(void*) + sizeof(std::uint32_t) + 1) +
                              seg_entries * sizeof(void*), 4096);
    void* d = tenon_pool_reserve_block(dir_bytes_, 0);
    if (!d) return false;
    dir_ = static_cast<std::atomic<char*>*>(d);
    spare_next_ = reinterpret_cast<std::atomic<std::uint32_t>*>(
        static_cast<char*>(d) + std::size_t{dir_entries_} * sizeof(void*));
    seg_ = reinterpret_cast<std::atomic<char*>*>(
        static_cast<char*>(d) + std::size_t{dir_entries_} * (sizeof(void*) + sizeof(std::uint32_t)));
    full_ = reinterpret_cast<std::atomic<std::uint8_t>*>(reinterpret_cast<char*>(seg_) +
                                                         seg_entries * sizeof(void*));
    set_limit(TENON_POOL_MAX_ELEMENTS);
    next_block_.store(0, std::memory_order_relaxed);
    spare_head_.store(0, std::memory_order_relaxed);
    spare_slots_.store(0, std::memory_order_relaxed);
    refills_in_flight_.store(0, std::memory_order_relaxed);
#if TENON_POOL_RSEQ
    rseq_cs_off_ = __rseq_offset + long(offsetof(struct rseq, rseq_cs));
    // Asked here for its side effect: the first call registers the process
    // for restarting other threads' sequences, and the kernel makes that
    // wait for an RCU grace period once other threads exist (10-12 ms
    // measured here, 4 us with one thread). A pool is usually made before
    // the threads that fill it; its first refill is not.
    (void)tenon_pool_thread_can_own();
#endif
    reset_lanes();
    return true;
  }

  // Releases every block and the directory. Not concurrent with anything.
  void destroy() noexcept {
    if (!dir_) return;
    reset();
    tenon_pool_release_block(dir_, dir_bytes_);
    dir_ = nullptr;
  }

  // Empties the pool; indices start at 0 again. O(blocks). Not concurrent
  // with anything (an emplace frozen for good, or cut off by fork, does not
  // count: what it claimed is simply dropped). Gives every block back to the
  // OS, or with keep_memory keeps them mapped (and their pages resident) for
  // the next fill, which then finds block k's memory already in the directory
  // and faults nothing.
  void reset(bool keep_memory = false) noexcept {
    // Blocks that may have memory: those used now, one more (dense mode may
    // have mapped the next block ahead), and any kept by earlier fills.
    const std::uint64_t mapped = std::max<std::uint64_t>(
        kept_blocks_, std::min<std::uint64_t>(blocks_in_use() + 1, dir_entries_));
    for (std::uint64_t k = 0; k < mapped; ++k) full_[k].store(0, std::memory_order_relaxed);
    if (keep_memory) {
      kept_blocks_ = mapped;  // the bases stay in the directory
    } else {
      for (std::uint64_t k = 0; k < mapped; ++k) dir_[k].store(nullptr, std::memory_order_relaxed);
      // One munmap per segment (up to 32 blocks of 2 MiB): the kernel's fixed
      // cost per call (VMA surgery, TLB shootdown) is paid 32 times less.
      // One segment more than the blocks reach: it may have been reserved
      // ahead (block_memory).
      const std::uint64_t seg_entries = (std::uint64_t{dir_entries_} + (1u << seg_shift_) - 1) >> seg_shift_;
      const std::uint64_t segments =
          std::min<std::uint64_t>(((mapped + (1u << seg_shift_) - 1) >> seg_shift_) + 1, seg_entries);
      for (std::uint64_t s = 0; s < segments; ++s) {
        if (char* seg = seg_[s].load(std::memory_order_relaxed)) tenon_pool_release_block(seg, seg_bytes_);
        seg_[s].store(nullptr, std::memory_order_relaxed);
      }
      kept_blocks_ = 0;
    }
    next_block_.store(0, std::memory_order_relaxed);
    spare_slots_.store(0, std::memory_order_relaxed);
    spare_head_.store(0, std::memory_order_relaxed);
    refills_in_flight_.store(0, std::memory_order_relaxed);
    reset_lanes();
  }

  // Test hook (and C API): lower the element limit. Only on an empty pool.
  bool set_limit(std::uint64_t max_elements) noexcept {
    if (max_elements == 0 || max_elements > TENON_POOL_MAX_ELEMENTS) return false;
    if (blocks_in_use() != 0) return false;
    limit_ = max_elements;
    nblocks_ = std::uint32_t((max_elements + block_elems_ - 1) >> shift_);
    return true;
  }

  // One slot and its index; lock-free. The fast path: the calling thread owns
  // its lane and claims with a load and a plain store inside a restartable
  // sequence (no atomic read-modify-write, no fence). Everything else (no
  // rseq, a shared lane, a used-up block, a thread's first claim) goes to
  // acquire_slow(). Stride: the slot size when the caller knows it at
  // compile time (mass_pool<T>), else 0 for stride_.
  template <std::size_t Stride = 0>
  __attribute__((always_inline)) claim acquire() noexcept {
    if (dense_) return acquire_dense();
#if TENON_POOL_RSEQ
    // A thread without a seed yet looks at lane 63, which it does not own.
    lane& l = lanes_[(tl_pool_lane_plus1 - 1) & (kLanes - 1)];
    std::uint64_t used;
    char* base;
    std::uint32_t first;
    if (__builtin_expect(owned_claim(l, used, base, first), 1)) {
      if (base == nullptr) __builtin_unreachable();  // a copy is only ever set from a mapped block
      return {base + used * (Stride ? Stride : stride_), first | std::uint32_t(used), ok};
    }
#endif
    claim c;
    if (__builtin_expect(claim_shared(1, c) != 0, 1)) return c;
    return acquire_slow();
  }

  // Up to `want` (>= 1) consecutive slots of one block at once, for
  // mass_pool::emplace_n: the first one's address and index go to c, their
  // number is returned; 0, with c.status saying why, when not even one slot
  // can be had. One claim (the owner's restartable sequence, or one CAS on a
  // shared lane) for the whole run, so a batch costs what one emplace costs.
  // A batch stops at the end of the lane's block; the refill that follows
  // (and a thread's first claim, and every claim of a dense pool) gives one
  // slot, as acquire() does.
  template <std::size_t Stride = 0>
  __attribute__((always_inline)) std::uint32_t acquire_n(std::uint32_t want, claim& c) noexcept {
    if (!dense_) {
#if TENON_POOL_RSEQ
      lane& l = lanes_[(tl_pool_lane_plus1 - 1) & (kLanes - 1)];
      std::uint64_t used, n = want;
      char* base;
      std::uint32_t first;
      if (__builtin_expect(owned_claim_n(l, n, used, base, first), 1)) {
        if (base == nullptr) __builtin_unreachable();  // as in acquire()
        c = {base + used * (Stride ? Stride : stride_), first | std::uint32_t(used), ok};
        return std::uint32_t(n);
      }
#endif
      if (const std::uint32_t n = claim_shared(want, c)) return n;
    }
    c = dense_ ? acquire_dense() : acquire_slow();
    return c.slot ? 1 : 0;
  }

  void* at(std::uint32_t index) const noexcept {
    char* base = dir_[index >> shift_].load(std::memory_order_relaxed);
    return base + std::size_t{index & (block_elems_ - 1)} * stride_;
  }

  // Number of slots handed out: every index below the claimed frontier,
  // minus the unfilled tails of lane blocks and the spare blocks. O(lanes),
  // or O(blocks) while a refill is unfinished. Exact when no acquire() runs
  // concurrently; one frozen for good (or cut off by fork) adds nothing.
  std::uint64_t size() const noexcept {
    // Signed and clamped: under concurrent acquire() the parts are read at
    // different moments, and an estimate must not wrap around.
    std::int64_t holes = std::int64_t(spare_slots_.load(std::memory_order_acquire));
    for (const auto& l : lanes_) {
      const std::uint64_t w = l.word.load(std::memory_order_acquire);
      if ((w >> 32) == 0) continue;
      const std::uint32_t k = std::uint32_t(w >> 32) - 1;
      holes += block_end(k) - std::min(std::uint32_t(w), block_end(k));
    }
    const std::int64_t total = std::int64_t(frontier()) - holes;  // read last: it only grows
    // A refill between taking a block and installing it (or pushing it back)
    // holds a block that the lanes do not show, which the subtraction above
    // counts as full: then count what the blocks hold. Read after the parts
    // above (all acquire): a refill whose trace they saw is counted here (see
    // take_block), and one that is over has left no such block.
    if (refills_in_flight_.load(std::memory_order_acquire) != 0) {
      std::uint64_t n = 0;
      for_each_filled([&n](std::uint64_t, std::uint32_t count) { n += count; });
      return n;
    }
    return total < 0 ? 0 : std::uint64_t(total);
  }

  // Calls f(first_index, count) for the filled part of every claimed block,
  // in index order, skipping empty ones. A lane's current block is filled up
  // to the lane's count; any other block is full if a lane used it up (in
  // dense mode every block below the lane's is) and empty otherwise: a spare,
  // or a block whose refill has not installed it (and, if frozen, never will).
  // O(blocks); meaningful when no acquire() runs. Allocates nothing.
  template <class F>
  void for_each_filled(F&& f) const {
    std::uint64_t partial[kLanes];  // block << 32 | used, sorted
    unsigned np = 0;
    for (const auto& l : lanes_) {
      const std::uint64_t w = l.word.load(std::memory_order_acquire);
      if ((w >> 32) != 0) partial[np++] = w - (std::uint64_t{1} << 32);
    }
    std::sort(partial, partial + np);
    const std::uint64_t claimed = blocks_in_use();
    unsigned p = 0;
    for (std::uint64_t k = 0; k < claimed; ++k) {
      const bool full = dense_ || full_[k].load(std::memory_order_relaxed);
      std::uint32_t filled = full ? block_end(std::uint32_t(k)) : 0;
      while (p < np && (partial[p] >> 32) < k) ++p;
      if (p < np && (partial[p] >> 32) == k)
        filled = std::min(block_end(std::uint32_t(k)), std::uint32_t(partial[p]));
      if (filled) f(k << shift_, filled);
    }
  }

  // One past the highest index that was claimed (as a block), capped at the limit.
  std::uint64_t frontier() const noexcept {
    return std::min<std::uint64_t>(blocks_in_use() << shift_, limit_);
  }
  // Blocks numbered below this have been handed to a lane (capped at the
  // limit). Dense mode numbers blocks by succession on its one lane, so there
  // the lane word itself says how far it got.
  std::uint64_t blocks_in_use() const noexcept {
    const std::uint64_t n = dense_ ? lanes_[0].word.load(std::memory_order_acquire) >> 32
                                   : next_block_.load(std::memory_order_acquire);
    return std::min<std::uint64_t>(n, nblocks_);
  }
  bool dense() const noexcept { return dense_; }
  // Slots of block k that are inside the limit (block_elems_ except for the last block).
  std::uint32_t block_end(std::uint32_t k) const noexcept {
    const std::uint64_t first = std::uint64_t{k} << shift_;
    return std::uint32_t(std::min<std::uint64_t>(block_elems_, limit_ - first));
  }
  std::uint32_t block_elements() const noexcept { return block_elems_; }
  unsigned block_shift() const noexcept { return shift_; }
  std::size_t stride() const noexcept { return stride_; }
  std::size_t block_bytes() const noexcept { return block_bytes_; }
  std::uint64_t limit() const noexcept { return limit_; }
  // How often a refill lost the race to install its block (statistics/tests).
  std::uint64_t refill_races() const noexcept { return refill_races_.load(std::memory_order_relaxed); }
  // How often a thread took a lane from the thread that owned it (statistics/tests).
  std::uint64_t lane_takeovers() const noexcept { return lane_takeovers_.load(std::memory_order_relaxed); }
  // Lanes owned by a thread right now: their claims take the fast path.
  unsigned owned_lanes() const noexcept {
    unsigned n = 0;
    for (const auto& l : lanes_) n += l.mode.load(std::memory_order_relaxed) > kRevoking;
    return n;
  }

 private:
  // A lane's mode: free (nobody has used it since the pool was made or
  // cleared), owned by one thread (its thread id, see this_thread_id: claims
  // by plain store inside the owner's restartable sequence), being taken
  // from its owner, or shared (claims by CAS, by any thread, until clear()).
  static constexpr std::uintptr_t kFree = 0, kShared = 1, kRevoking = 2;

  struct alignas(64) lane {
    // (block number + 1) << 32 | slots used. 0 << 32 | block_elems_ means
    // "no block yet", which the fast path sees as "block used up".
    std::atomic<std::uint64_t> word{0};
    std::atomic<std::uintptr_t> mode{kFree};
    // The owner's copy of a block, written and read only by the owner (and
    // its signal handlers) inside restartable sequences, or by reset():
    // words start .. start + len - 1 are that block's free slots, at base,
    // with indices first | slot. len is 0 while the copy is being written.
    // The fast path uses the copy only for a word inside that window, so a
    // copy of an older block (the lane moved on, possibly to a lower block
    // number from the spare stack) is never used, whoever moved it and when.
    std::uint64_t start = 0;  // (block + 1) << 32
    std::uint64_t len = 0;    // block_end(block), or 0
    char* base = nullptr;
    std::uint32_t first = 0;
  };

  static constexpr std::size_t kSegmentBytes = std::size_t{64} << 20;

  static std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) & ~(a - 1); }

  // Smallest power of two whose block is at least 2 MiB (one transparent huge
  // page), between 2^8 and 2^24 elements.
  static unsigned default_shift(std::size_t stride) noexcept {
    unsigned s = 8;
    while (s < 24 && (stride << s) < (std::size_t{2} << 20)) ++s;
    return s;
  }

  std::uint64_t exhausted() const noexcept { return block_elems_; }

  bool has_room(std::uint64_t w) const noexcept {
    const std::uint32_t used = std::uint32_t(w);
    const std::uint64_t first = ((w >> 32) - 1) << shift_;
    return used < block_elems_ && first + used < limit_;
  }

  // Free slots of word w's block (has_room(w) must hold).
  std::uint64_t room(std::uint64_t w) const noexcept {
    const std::uint32_t k = std::uint32_t(w >> 32) - 1;
    return block_end(k) - std::uint32_t(w);
  }

  // A shared lane (no rseq here, or the lane was taken from its owner): a
  // load and one CAS for up to `want` slots of its block. 0 when the lane is
  // not shared or its block is used up (the caller takes the slow path).
  // Inlined, so that acquire()'s want of 1 computes no room.
  __attribute__((always_inline)) std::uint32_t claim_shared(std::uint32_t want, claim& c) noexcept {
    lane& s = lanes_[this_thread_lane_seed() & (kLanes - 1)];
    if (__builtin_expect(s.mode.load(std::memory_order_acquire) != kShared, 0)) return 0;
    std::uint64_t sw = s.word.load(std::memory_order_relaxed);
    while (has_room(sw)) {
      const std::uint64_t n = want == 1 ? 1 : std::min<std::uint64_t>(want, room(sw));
      if (s.word.compare_exchange_weak(sw, sw + n, std::memory_order_acquire, std::memory_order_relaxed)) {
        c = slot_of(sw);
        return std::uint32_t(n);
      }
    }
    return 0;
  }

  // The two writes by which size() can tell that a block was taken (the
  // block counter here, spare_slots_ in pop_spare) are releases: whoever sees
  // them sees this refill counted in refills_in_flight_. So does a fork
  // child, whose memory may hold only part of what a running thread wrote.
  bool take_block(std::uint32_t& k) noexcept {
    if (pop_spare(k)) return true;
    if (next_block_.load(std::memory_order_relaxed) >= nblocks_) return false;
    const std::uint64_t n = next_block_.fetch_add(1, std::memory_order_release);
    if (n >= nblocks_) return false;
    k = std::uint32_t(n);
    return true;
  }

  // Treiber stack of block numbers; the head carries a 32-bit version tag
  // (ABA) and top + 1; links live in spare_next_, which is never freed.
  // Walks over blocks need not find spares: a spare was never installed, so
  // it is not full and holds nothing.
  void push_spare(std::uint32_t k) noexcept {
    spare_slots_.fetch_add(block_end(k), std::memory_order_relaxed);
    std::uint64_t h = spare_head_.load(std::memory_order_relaxed);
    std::uint64_t nh;
    do {
      spare_next_[k].store(std::uint32_t(h), std::memory_order_relaxed);
      pool_step("pool.spare.push");
      nh = (((h >> 32) + 1) << 32) | (k + 1);
    } while (!spare_head_.compare_exchange_weak(h, nh, std::memory_order_release,
                                                std::memory_order_relaxed));
  }
  bool pop_spare(std::uint32_t& k) noexcept {
    std::uint64_t h = spare_head_.load(std::memory_order_acquire);
    while (std::uint32_t(h) != 0) {
      const std::uint32_t top = std::uint32_t(h) - 1;
      const std::uint32_t next = spare_next_[top].load(std::memory_order_relaxed);
      pool_step("pool.spare.pop");
      const std::uint64_t nh = (((h >> 32) + 1) << 32) | next;
      if (spare_head_.compare_exchange_weak(h, nh, std::memory_order_acquire,
                                            std::memory_order_acquire)) {
        k = top;
        spare_slots_.fetch_sub(block_end(k), std::memory_order_release);  // see take_block
        return true;
      }
    }
    return false;
  }

  // The slot and index of the claim that moved a lane from word w to w + 1.
  // Acquire on the directory entry: the block's publisher wrote it (release)
  // before installing the block, and the claim may have read a word an
  // owner's plain store wrote, which carries no release of its own.
  claim slot_of(std::uint64_t w) const noexcept {
    const std::uint32_t k = std::uint32_t(w >> 32) - 1;
    const std::uint32_t used = std::uint32_t(w);
    char* base = dir_[k].load(std::memory_order_acquire);
    return {base + std::size_t{used} * stride_, (k << shift_) | used, ok};
  }

  bool may_own() const noexcept {
    return pool_own_without_rseq_for_testing.load(std::memory_order_relaxed) || tenon_pool_thread_can_own() != 0;
  }

  // Everything but an owner's claim with room: a thread's first claim on a
  // lane (it owns the lane if it can, else shares it), a lane owned by
  // another thread (taken from it: shared from then on), claims by CAS on
  // shared lanes and by owners whose copy of the block is cleared, refills.
  __attribute__((noinline)) claim acquire_slow() noexcept {
    lane& l = lanes_[this_thread_lane_seed() & (kLanes - 1)];
    const std::uintptr_t me = this_thread_id();
    std::uintptr_t m = l.mode.load(std::memory_order_acquire);
    if (m == kFree) {
      const std::uintptr_t want = may_own() ? me : kShared;
      if (l.mode.compare_exchange_strong(m, want, std::memory_order_acq_rel, std::memory_order_acquire)) m = want;
    }
    if (m != me && !claimable_by_cas(l, me)) return {nullptr, TENON_POOL_NO_INDEX, no_memory};
    return claim_by_cas(l, m == me);
  }

  // Makes lane l one this thread may claim from by CAS: its own, or shared
  // (taking it from another owner if need be). False only if the kernel
  // refused to restart sequences, which cannot happen once it accepted the
  // registration an owner needed.
  bool claimable_by_cas(lane& l, std::uintptr_t me) noexcept {
    for (;;) {
      std::uintptr_t m = l.mode.load(std::memory_order_acquire);
      if (m == me || m == kShared) return true;
      if (m == kFree) {
        l.mode.compare_exchange_strong(m, kShared, std::memory_order_acq_rel, std::memory_order_relaxed);
        continue;
      }
      if (m != kRevoking) {
        if (!l.mode.compare_exchange_strong(m, kRevoking, std::memory_order_acq_rel, std::memory_order_relaxed))
          continue;
        lane_takeovers_.fetch_add(1, std::memory_order_relaxed);
        pool_step("pool.lane.revoke");
      }
      // Once the mode says kRevoking, an owner's sequence that starts reads
      // it and gives up; one that read the old mode is still running or
      // preempted, and the restart below sends it back to its start. So
      // after it no plain store can land on the lane: it is shared from now
      // on. Whoever finds kRevoking finishes the job itself, so a thread
      // stopped between the two steps stops nobody.
      if (tenon_pool_restart_sequences() != 0) return false;
      m = kRevoking;
      l.mode.compare_exchange_strong(m, kShared, std::memory_order_acq_rel, std::memory_order_relaxed);
    }
  }

  // Claims a slot of lane l by CAS (a shared lane, or this thread's own lane
  // when its copy of the block is cleared or used up), refilling it if need
  // be. An owner refreshes its copy afterwards, so its next claim takes the
  // fast path.
  claim claim_by_cas(lane& l, bool owner) noexcept {
    std::uint64_t w = l.word.load(std::memory_order_relaxed);
    for (;;) {
      if (has_room(w)) {
        if (l.word.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
          if (owner) refresh_copy(l, w);
          return slot_of(w);
        }
        continue;
      }
      const claim c = refill(l, w);
      if (c.status == ok && owner) {
        // The lane is in the new block, the copy may still be of an older one
        // (a signal handler of this thread may have set it meanwhile): the
        // fast path must not use it (see owned_claim).
        pool_step("pool.copy.refresh");
        refresh_copy(l, std::uint64_t{(c.index >> shift_) + 1} << 32);
      }
      if (c.status != retry) return c;
      w = l.word.load(std::memory_order_relaxed);
    }
  }

#if TENON_POOL_RSEQ
  // The lane's fields are addressed from one register (the lane's address)
  // with constant offsets: an "m" operand per field needs a register of its
  // own for the address in an unoptimised build, more than x86-64 has.
#define LANE_FIELD_OFFSETS                                                                          \
  [word] "i"(offsetof(lane, word)), [mode] "i"(offsetof(lane, mode)), [start] "i"(offsetof(lane, start)), \
      [len] "i"(offsetof(lane, len)), [base_] "i"(offsetof(lane, base)), [first_] "i"(offsetof(lane, first))

  // The start and the end of the owner's claims (owned_claim, owned_claim_n).
  // Enter: set this thread's rseq descriptor pointer, check that this thread
  // (its id read here, see this_thread_id) owns the lane (else to 5, which
  // fails with the carry clear), read the word into w and its slot number in
  // the copy's window into used (huge when the word is below the window).
  // Exit: label 2, reached with the carry set by a commit; the descriptor
  // pointer is cleared (a mov, which keeps the flags) because the descriptor
  // may be in a library dlclose'd later.
#define OWNED_CLAIM_ENTER                     \
  TENON_RSEQ_DESCRIPTOR                       \
  "6:\n\t"                                    \
  "leaq 3b(%%rip), %%rcx\n\t"                 \
  "movq %%rcx, %%fs:(%[cs])\n\t"              \
  "1:\n\t"                                    \
  "movq %%fs:0, %%rcx\n\t"                    \
  "cmpq %%rcx, %c[mode](%[l])\n\t"            \
  "jne 5f\n\t"                                \
  "movq %c[word](%[l]), %[w]\n\t"             \
  "movq %[w], %[used]\n\t"                    \
  "subq %c[start](%[l]), %[used]\n\t"
#define OWNED_CLAIM_EXIT          \
  "2:\n\t"                        \
  "movq $0, %%fs:(%[cs])\n\t"     \
  TENON_RSEQ_ABORT_HANDLER        \
  "jmp 6b\n\t"                    \
  "5:\n\t"                        \
  "clc\n\t"                       \
  "jmp 2b\n\t"                    \
  ".popsection\n\t"

  // The owner's claim: one restartable sequence checks that this thread
  // still owns the lane and that the word is inside its copy's window,
  // reads the copy, and commits word + 1 with a plain store. The kernel
  // sends the thread back to the start (label 6) if it is preempted,
  // migrated or signalled inside it, and a thread that takes the lane away
  // restarts every running sequence first (claimable_by_cas), so an owner
  // never commits on a lane it no longer owns. Gives the slot number within
  // the block in `used`. False, with nothing written, when the caller must
  // take the slow path.
  bool owned_claim(lane& l, std::uint64_t& used, char*& base, std::uint32_t& first) const noexcept {
    bool ok;
    std::uint64_t w;
    asm volatile(
        OWNED_CLAIM_ENTER
        "cmpq %c[len](%[l]), %[used]\n\t"
        "jae 2f\n\t"                    // carry clear: not in the copy's window
        "movq %c[base_](%[l]), %[base]\n\t"
        "movl %c[first_](%[l]), %[first]\n\t"
        "leaq 1(%[w]), %%rcx\n\t"
        "movq %%rcx, %c[word](%[l])\n\t"  // the commit; carry still set from the cmpq
        OWNED_CLAIM_EXIT
        : "=@ccb"(ok), [w] "=&r"(w), [used] "=&r"(used), [base] "=&r"(base), [first] "=&r"(first)
        : [cs] "r"(rseq_cs_off_), [l] "r"(&l), LANE_FIELD_OFFSETS
        : "rcx", "memory");
    return ok;
  }

  // owned_claim for up to n slots at once (n >= 1): the same checks, then n
  // becomes min(n, free slots of the copy's block) and the commit stores
  // word + n. The carry is set before the commit (stc; the lea and the store
  // keep it), since nothing may follow the commit inside the sequence.
  bool owned_claim_n(lane& l, std::uint64_t& n, std::uint64_t& used, char*& base, std::uint32_t& first) const noexcept {
    bool ok;
    std::uint64_t w;
    asm volatile(
        OWNED_CLAIM_ENTER
        "movq %c[len](%[l]), %%rcx\n\t"
        "subq %[used], %%rcx\n\t"       // free slots of the copy's block
        "jbe 5f\n\t"                    // none, or the word is not in the copy's window
        "cmpq %%rcx, %[n]\n\t"
        "cmovaq %%rcx, %[n]\n\t"        // n = min(n, free slots)
        "movq %c[base_](%[l]), %[base]\n\t"
        "movl %c[first_](%[l]), %[first]\n\t"
        "leaq (%[w],%[n]), %%rcx\n\t"
        "stc\n\t"
        "movq %%rcx, %c[word](%[l])\n\t"  // the commit
        OWNED_CLAIM_EXIT
        : "=@ccb"(ok), [w] "=&r"(w), [used] "=&r"(used), [base] "=&r"(base), [first] "=&r"(first),
          [n] "+&r"(n)
        : [cs] "r"(rseq_cs_off_), [l] "r"(&l), LANE_FIELD_OFFSETS
        : "rcx", "memory");
    return ok;
  }

  // Sets the owner's copy for the block of word w, in a restartable sequence
  // that clears len first and sets it last, and only while this thread owns
  // the lane and the lane is still in that block: a signal handler of this
  // thread that writes the copy in between leaves it cleared or its own,
  // never fields of two blocks.
  void refresh_copy(lane& l, std::uint64_t w) noexcept {
    const std::uint64_t start = w & ~std::uint64_t{0xFFFFFFFF};
    const std::uint32_t k = std::uint32_t(w >> 32) - 1;
    char* base = dir_[k].load(std::memory_order_relaxed);
    const std::uint32_t first = k << shift_;
    const std::uint64_t len = block_end(k);
    asm volatile(
        TENON_RSEQ_DESCRIPTOR
        "6:\n\t"
        "leaq 3b(%%rip), %%rcx\n\t"
        "movq %%rcx, %%fs:(%[cs])\n\t"
        "1:\n\t"
        "movq $0, %c[len](%[l])\n\t"
        "movq %%fs:0, %%rcx\n\t"
        "cmpq %%rcx, %c[mode](%[l])\n\t"
        "jne 2f\n\t"
        "movq %c[word](%[l]), %%rcx\n\t"
        "shrq $32, %%rcx\n\t"
        "shlq $32, %%rcx\n\t"
        "cmpq %[startv], %%rcx\n\t"
        "jne 2f\n\t"
        "movq %[startv], %c[start](%[l])\n\t"
        "movq %[basev], %c[base_](%[l])\n\t"
        "movl %[firstv], %c[first_](%[l])\n\t"
        "movq %[lenv], %c[len](%[l])\n\t"  // the commit
        "2:\n\t"
        "movq $0, %%fs:(%[cs])\n\t"     // rseq->rseq_cs = 0, as in owned_claim
        TENON_RSEQ_ABORT_HANDLER
        "jmp 6b\n\t"
        ".popsection\n\t"
        :
        : [cs] "r"(rseq_cs_off_), [l] "r"(&l), [startv] "r"(start), [basev] "r"(base), [firstv] "r"(first),
          [lenv] "r"(len), LANE_FIELD_OFFSETS
        : "rcx", "cc", "memory");
  }
#undef OWNED_CLAIM_ENTER
#undef OWNED_CLAIM_EXIT
#undef LANE_FIELD_OFFSETS
#else
  void refresh_copy(lane&, std::uint64_t) noexcept {}  // nothing reads the copy without rseq
#endif

  void reset_lanes() noexcept {
    for (auto& l : lanes_) {
      l.word.store(exhausted(), std::memory_order_relaxed);
      l.mode.store(kFree, std::memory_order_relaxed);
      l.start = 0;
      l.len = 0;
      l.base = nullptr;
      l.first = 0;
    }
  }

  // Slow path: the lane's block is used up (or absent). From taking a block
  // until installing it (or pushing it back) this thread holds a block that
  // no lane shows; refills_in_flight_ tells size() so. A thread frozen here
  // leaves it counted, which costs size() its O(lanes) shortcut, nothing else.
  __attribute__((noinline)) claim refill(lane& l, std::uint64_t w) noexcept {
    refills_in_flight_.fetch_add(1, std::memory_order_relaxed);
    const claim c = refill_lane(l, w);
    refills_in_flight_.fetch_sub(1, std::memory_order_release);
    return c;
  }

  claim refill_lane(lane& l, std::uint64_t w) noexcept {
    std::uint32_t k;
    if (!take_block(k)) return scavenge();
    pool_step("pool.refill.claimed");
    char* base = publish_block(k);
    if (!base) {
      push_spare(k);  // its number stays usable once memory is back
      return {nullptr, TENON_POOL_NO_INDEX, no_memory};
    }
    pool_step("pool.refill.install");
    // Install the block with its first slot taken by us.
    const std::uint64_t fresh = (std::uint64_t{k + 1} << 32) | 1u;
    for (;;) {
      if (has_room(w)) {  // another thread refilled this lane first
        refill_races_.fetch_add(1, std::memory_order_relaxed);
        push_spare(k);
        return {nullptr, TENON_POOL_NO_INDEX, retry};
      }
      // The block we replace is used up: mark it full before it leaves the
      // lane (the release CAS publishes the mark), so walks count it from
      // then on. Other refillers of this lane may mark it too; all agree.
      if ((w >> 32) != 0) full_[std::uint32_t(w >> 32) - 1].store(1, std::memory_order_relaxed);
      if (l.word.compare_exchange_weak(w, fresh, std::memory_order_acq_rel, std::memory_order_relaxed))
        return {base, k << shift_, ok};
    }
  }

  // Dense mode: every thread claims from lane 0 with one fetch_add, and the
  // block after block k is always k + 1, so the indices handed out are
  // exactly 0 .. n-1 at any moment no emplace is running. The price is one
  // read-modify-write per element on a line every thread writes (what the
  // default lanes avoid); see docs/mass_pool.md for when that is worth it.
  claim acquire_dense() noexcept {
    lane& l = lanes_[0];
    for (;;) {
      // Acquire pairs with the release CAS that installed the block (the
      // fetch_adds in between continue its release sequence).
      const std::uint64_t w = l.word.fetch_add(1, std::memory_order_acquire);
      if (__builtin_expect(has_room(w), 1)) {
        const std::uint32_t k = std::uint32_t(w >> 32) - 1;
        const std::uint32_t used = std::uint32_t(w);
        return {dir_[k].load(std::memory_order_relaxed) + std::size_t{used} * stride_,
                (k << shift_) | used, ok};
      }
      claim c = refill_dense(l, w + 1);
      if (c.status != retry) return c;
    }
  }

  // Maps block nb (if it has no memory yet: a fresh block, not one a
  // keep_memory reset left in place) and publishes it in the directory. Every
  // thread computes the same address for a block (its slice of its segment),
  // so racing publishers (dense mode) store the same value.
  char* publish_block(std::uint32_t nb) noexcept {
    char* base = dir_[nb].load(std::memory_order_acquire);
    if (base) return base;
    base = block_memory(nb);
    if (base) dir_[nb].store(base, std::memory_order_release);
    return base;
  }

  __attribute__((noinline)) void prepare_next_dense(std::uint32_t nb) noexcept {
    if (nb >= nblocks_) return;
    pool_step("pool.dense.prefault");
    if (char* base = publish_block(nb)) tenon_pool_prefault_block(base, block_bytes_);
  }

  // The lane's block is used up (w: the word after our fetch_add). Install
  // block k + 1 by CAS; a failed CAS means another thread claimed a slot or
  // installed the block, so this loop only retries after others' progress.
  // The installer takes no slot: it maps and faults in the block after the
  // one it installed while the others claim (so they do not all fault the
  // same fresh page when a block turns over), then claims like everyone
  // else. Holding no slot meanwhile, it leaves no unconstructed element
  // behind if it is frozen or cut off by fork during that long step.
  __attribute__((noinline)) claim refill_dense(lane& l, std::uint64_t w) noexcept {
    const std::uint64_t gen = w >> 32;  // block number + 1 of the used-up block
    const std::uint32_t nb = std::uint32_t(gen);  // the block that follows it
    int status = ok;
    char* base = nullptr;
    if (nb >= nblocks_)
      status = full;
    else if (!(base = publish_block(nb)))
      status = no_memory;
    pool_step("pool.dense.install");
    const std::uint64_t fresh = status == ok ? std::uint64_t{nb + 1} << 32
                                             : (gen << 32) | block_elems_;  // undo our overshoot
    for (;;) {
      if ((w >> 32) != gen) return {nullptr, TENON_POOL_NO_INDEX, retry};  // someone installed
      if (status != ok && std::uint32_t(w) == block_elems_) break;  // already reset
      if (l.word.compare_exchange_weak(w, fresh, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
    }
    if (status != ok) return {nullptr, TENON_POOL_NO_INDEX, status};
    // Not after block 0: a pool that may never outgrow one block should not
    // fault in a second.
    if (nb != 0) prepare_next_dense(nb + 1);
    return {nullptr, TENON_POOL_NO_INDEX, retry};
  }

  // Block k's memory: its slice of segment k >> seg_shift_. A segment is
  // reserved (lazily committed address space) by the first block that needs
  // it, or ahead of need by the refill that takes the middle block of the
  // segment before it: threads that fill side by side take consecutive
  // blocks and would otherwise all find the next segment missing at once,
  // and all but one reserve it in vain (at 8 threads, 80 M elements: dozens
  // of mmap/munmap pairs, each taking the address-space lock that page
  // faults need too). Nobody waits for anybody.
  char* block_memory(std::uint32_t k) noexcept {
    const std::uint32_t s = k >> seg_shift_, in_seg = k & ((1u << seg_shift_) - 1);
    char* seg = seg_[s].load(std::memory_order_acquire);
    if (!seg && !(seg = reserve_segment(s))) return nullptr;
    if (seg_shift_ != 0 && in_seg == (1u << (seg_shift_ - 1)) &&
        (std::uint64_t{s} + 1) << seg_shift_ < nblocks_ && !seg_[s + 1].load(std::memory_order_relaxed))
      reserve_segment(s + 1);  // best effort: the first block of s + 1 tries again
    return seg + std::size_t{in_seg} * block_bytes_;
  }

  // Reserves segment s and installs it by CAS; a thread that loses that race
  // gives its reservation back and uses the winner's. Null without memory.
  char* reserve_segment(std::uint32_t s) noexcept {
    char* mine = static_cast<char*>(tenon_pool_reserve_block(seg_bytes_, 1));
    if (!mine) return nullptr;
    pool_step("pool.segment.reserved");
    char* seg = nullptr;
    if (seg_[s].compare_exchange_strong(seg, mine, std::memory_order_acq_rel, std::memory_order_acquire))
      return mine;
    tenon_pool_release_block(mine, seg_bytes_);
    return seg;
  }

  // The index space is used up: take any slot left in any lane, so that the
  // pool holds exactly limit() elements before it reports full.
  // A lane another thread owns is taken from it first: its slots must not
  // wait for a thread that may never come back.
  claim scavenge() noexcept {
    const std::uintptr_t me = this_thread_id();
    for (auto& l : lanes_) {
      if (!has_room(l.word.load(std::memory_order_relaxed)) || !claimable_by_cas(l, me)) continue;
      std::uint64_t w = l.word.load(std::memory_order_relaxed);
      while (has_room(w))
        if (l.word.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed))
          return slot_of(w);
    }
    // A block whose memory could not be mapped earlier may sit on the spare
    // stack; take_block() would have found it, so the pool is really full.
    return {nullptr, TENON_POOL_NO_INDEX, full};
  }

  // Read-mostly fields, shared by every thread.
  long rseq_cs_off_ = 0;  // %fs offset of this thread's rseq->rseq_cs (glibc's __rseq_offset + 8)
  std::atomic<char*>* dir_ = nullptr;
  std::atomic<std::uint32_t>* spare_next_ = nullptr;
  std::atomic<char*>* seg_ = nullptr;
  std::atomic<std::uint8_t>* full_ = nullptr;  // per block: 1 once a lane used it up
  std::size_t seg_bytes_ = 0;
  unsigned seg_shift_ = 0;
  std::size_t stride_ = 0;
  std::size_t block_bytes_ = 0;
  std::size_t dir_bytes_ = 0;
  std::uint64_t limit_ = 0;
  unsigned shift_ = 0;
  std::uint32_t block_elems_ = 0;
  std::uint32_t nblocks_ = 0;  // blocks that start below limit_
  std::uint32_t dir_entries_ = 0;
  bool dense_ = false;  // one shared lane, blocks in succession: exact density
  std::uint64_t kept_blocks_ = 0;  // blocks whose memory reset(keep_memory) kept
  // Written once per block.
  alignas(64) std::atomic<std::uint64_t> next_block_{0};
  alignas(64) std::atomic<std::uint64_t> spare_head_{0};
  std::atomic<std::uint64_t> spare_slots_{0};  // slots in spare blocks, for size()
  std::atomic<std::uint64_t> refill_races_{0};  // statistics: lost lane refills
  std::atomic<std::uint64_t> lane_takeovers_{0};  // statistics: lanes taken from their owner
  std::atomic<std::uint64_t> refills_in_flight_{0};  // refills between take_block and install
  lane lanes_[kLanes];
};

// Without exceptions: "tenon: <what>" on stderr, then abort.
[[noreturn]] inline void pool_fatal(const char* what) noexcept {
  std::fputs("tenon: ", stderr);
  std::fputs(what, stderr);
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace detail

// Tag for mass_pool's exact-density constructor: mass_pool<T> p(tenon::dense_indices);
struct dense_indices_t {
  explicit dense_indices_t() = default;
};
inline constexpr dense_indices_t dense_indices{};

// Tag for mass_pool::clear(tenon::keep_memory): empty the pool but keep its
// blocks mapped for the next fill.
struct keep_memory_t {
  explicit keep_memory_t() = default;
};
inline constexpr keep_memory_t keep_memory{};

// A pool of T with a 32-bit index per element. See docs/mass_pool.md for the
// exact guarantees; in short:
//  - emplace() is lock-free and may run on any number of threads at once;
//    indices are unique; an element's address never changes until clear().
//  - size(), iteration and clear() see every element whose emplace() has
//    returned (happens-before), and must not run concurrently with emplace().
//    An emplace() that never finishes (its thread frozen, or cut off by fork)
//    leaves them nothing to see but the slot it may be constructing.
//  - Indices are dense except for the unfilled tail of each lane's current
//    block: with one emplacing thread they are exactly 0 .. size()-1. The
//    iterators skip those tails: they visit every element once, in index
//    order, and (it - begin()) is the element's rank, it.index() its index.
//  - mass_pool<T>(tenon::dense_indices) makes indices exactly 0 .. size()-1
//    under any concurrency, for one shared atomic increment per element.
template <class T>
class mass_pool {
  static_assert(!std::is_reference_v<T> && !std::is_const_v<T>, "mass_pool<T>: T must be an object type");
  static_assert(alignof(T) <= 4096, "mass_pool<T>: alignments above 4096 are not supported");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using index_type = std::uint32_t;
  using reference = T&;
  using const_reference = const T&;

  // What emplace() gives back: `auto [index, ref] = pool.emplace(...)`.
  struct emplaced {
    index_type index;
    T& ref;
  };
  // What try_emplace() gives back; ptr is null when the pool is full (the
  // limit) or the OS had no memory, and the pool stays usable.
  struct try_emplaced {
    index_type index;
    T* ptr;
  };

  // block_shift: 2^block_shift elements per block (1 .. 24); 0 picks the
  // smallest power of two giving at least 2 MiB. A shift above 24 throws
  // std::invalid_argument; no address space for the directory, bad_alloc.
  explicit mass_pool(unsigned block_shift = 0) : mass_pool(block_shift, false) {}
  // Exact density: indices are always 0 .. size()-1, whatever the threads
  // do, at the cost of one shared atomic increment per element (see
  // docs/mass_pool.md, "Choosing dense indices").
  explicit mass_pool(dense_indices_t, unsigned block_shift = 0) : mass_pool(block_shift, true) {}
  mass_pool(const mass_pool&) = delete;
  mass_pool& operator=(const mass_pool&) = delete;
  ~mass_pool() {
    destroy_elements();
    core_.destroy();
  }

  // Constructs T(args...) in a new slot. Lock-free. Throws std::length_error
  // when the pool already holds max_size() elements and std::bad_alloc when
  // the OS has no memory (without exceptions: prints why and aborts; use
  // try_emplace to get a null pointer instead).
  template <class... Args>
  __attribute__((always_inline)) emplaced emplace(Args&&... args) {
    int status = 0;
    try_emplaced r = construct(status, std::forward<Args>(args)...);
    if (!r.ptr) fail(status);
    return {r.index, *r.ptr};
  }

  // Like emplace, but a full pool or no memory gives ptr == nullptr (and
  // index TENON_POOL_NO_INDEX); the pool stays usable. If T's constructor
  // throws, the exception propagates and no slot is used.
  template <class... Args>
  __attribute__((always_inline)) try_emplaced try_emplace(Args&&... args) {
    int status = 0;
    return construct(status, std::forward<Args>(args)...);
  }

  // Constructs n elements, the k-th from make(index) where index is the
  // element's own index (T(make(index)); a make that returns a T constructs
  // it in the slot, by guaranteed copy elision). The thread claims up to
  // kBatch slots of its lane at once and fills them, so a batch costs one
  // claim (see docs/mass_pool.md, "Filling in batches"). make must not throw,
  // nor T's construction from what it returns: a claimed slot is always
  // filled. Lock-free; any thread; make may emplace into the pool itself.
  // Throws (or aborts) as emplace does when the limit or the OS stops it;
  // the elements made before that stay in the pool.
  template <class F>
  void emplace_n(std::size_t n, F&& make) {
    static_assert(std::is_nothrow_invocable_v<F&, index_type>,
                  "mass_pool<T>::emplace_n: make(index) must be noexcept (a claimed slot must be filled)");
    using made = std::invoke_result_t<F&, index_type>;  // a T itself is built in the slot: no move
    static_assert(std::is_same_v<made, T> || std::is_nothrow_constructible_v<T, made>,
                  "mass_pool<T>::emplace_n: T must be constructible from make(index) without throwing");
    while (n != 0) {
      detail::pool_core::claim c;
      const std::uint32_t got = core_.acquire_n<sizeof(T)>(std::uint32_t(std::min<std::size_t>(n, kBatch)), c);
      if (got == 0) fail(c.status);
      T* slot = static_cast<T*>(c.slot);
      for (std::uint32_t k = 0; k < got; ++k) ::new (slot + k) T(make(index_type(c.index + k)));
      n -= got;
    }
  }
  // The most slots emplace_n claims at once: an emplace_n that never
  // finishes (its thread frozen, or cut off by fork) leaves at most this
  // many claimed slots, one of them possibly half made, that size(),
  // iteration and clear() count although no T was made in them.
  static constexpr std::uint32_t kBatch = 64;

  T& operator[](index_type i) noexcept { return *std::launder(static_cast<T*>(core_.at(i))); }
  const T& operator[](index_type i) const noexcept {
    return *std::launder(static_cast<const T*>(core_.at(i)));
  }

  // Elements constructed since the last clear(). O(lanes), not a counter
  // (a shared counter is exactly the per-element contention this avoids);
  // O(blocks) while a block refill is unfinished, or after one never finished.
  size_type size() const noexcept { return size_type(core_.size()); }
  bool empty() const noexcept { return size() == 0; }
  static constexpr std::uint64_t max_size() noexcept { return TENON_POOL_MAX_ELEMENTS; }
  // One past the highest index handed out so far (an upper bound of every
  // index): size arrays indexed by element index with this.
  std::uint64_t index_bound() const noexcept { return core_.frontier(); }
  std::uint32_t block_elements() const noexcept { return core_.block_elements(); }
  // True when built with tenon::dense_indices.
  bool dense() const noexcept { return core_.dense(); }
  // Statistics: how often two threads raced to refill the same lane (the
  // loser's block went to the spare stack). Not reset by clear().
  std::uint64_t refill_races() const noexcept { return core_.refill_races(); }
  // Statistics: how often a thread took a lane from the thread that owned
  // it (a lane shared by two threads: more than 64 threads, or a lane whose
  // owner exited); that lane is then claimed by CAS until clear(). Not
  // reset by clear().
  std::uint64_t lane_takeovers() const noexcept { return core_.lane_takeovers(); }
  // Lanes owned by one thread right now, whose emplaces take the fast path
  // (a plain store in a restartable sequence). 0 where the kernel or the C
  // library offers no rseq (then every emplace is a CAS).
  unsigned owned_lanes() const noexcept { return core_.owned_lanes(); }

  // Runs destructors (unless T is trivially destructible) and gives every
  // block back to the OS. O(blocks) for trivial T, O(elements) otherwise.
  void clear() noexcept { empty_out(false); }
  // The same, but the blocks stay mapped (and resident) for the next fill,
  // like std::vector::clear keeping its capacity: for programs that rebuild
  // the pool again and again, the refill then costs no page faults. The
  // memory goes back to the OS at the next clear() or destruction.
  void clear(keep_memory_t) noexcept { empty_out(true); }

  // Test hook: lower the element limit (on an empty pool) so the overflow
  // path can be tested without 4e9 elements. Returns false if not empty or
  // max_elements is 0 or above max_size().
  bool set_max_elements_for_testing(std::uint64_t max_elements) noexcept {
    return core_.set_limit(max_elements);
  }

  struct at_end {};  // tag: an iterator past the last element, made without the view

  // Random-access iterator over the elements in index order. Like a deque's:
  // it holds the element's address and the bounds of the piece (the filled
  // part of one block, contiguous in memory) it is in, so that *it, ++, --
  // and small jumps are pointer arithmetic; only leaving the piece looks the
  // next one up (by its neighbour, or by a binary search over the pieces).
  template <bool Const>
  class basic_iterator {
    using pool_ptr = std::conditional_t<Const, const mass_pool*, mass_pool*>;

   public:
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const T&, T&>;
    using pointer = std::conditional_t<Const, const T*, T*>;

    basic_iterator() = default;
    basic_iterator(pool_ptr p, difference_type rank) noexcept : p_(p) { seat(rank); }
    // end() may be called before begin() takes the view (argument order is
    // unspecified), so it looks at no piece; moving back from it seats it.
    basic_iterator(pool_ptr p, difference_type rank, at_end) noexcept
        : p_(p), r_(rank), lo_(rank), hi_(rank), piece_(~std::size_t{0}) {}
    // iterator -> const_iterator
    template <bool C = Const, class = std::enable_if_t<C>>
    basic_iterator(const basic_iterator<false>& o) noexcept
        : p_(o.p_), r_(o.r_), lo_(o.lo_), hi_(o.hi_), cur_(o.cur_), piece_(o.piece_) {}

    reference operator*() const noexcept { return *cur_; }
    pointer operator->() const noexcept { return cur_; }
    reference operator[](difference_type n) const noexcept { return *(*this + n); }

    basic_iterator& operator++() noexcept {
      ++cur_;
      if (++r_ == hi_) seat_piece(piece_ + 1, r_);
      return *this;
    }
    basic_iterator operator++(int) noexcept { auto t = *this; ++*this; return t; }
    basic_iterator& operator--() noexcept {
      if (r_ == lo_) {
        seat(r_ - 1);
      } else {
        --r_;
        --cur_;
      }
      return *this;
    }
    basic_iterator operator--(int) noexcept { auto t = *this; --*this; return t; }
    basic_iterator& operator+=(difference_type n) noexcept {
      const difference_type r = r_ + n;
      if (r >= lo_ && r < hi_) {
        cur_ += n;
        r_ = r;
      } else {
        seat(r);
      }
      return *this;
    }
    basic_iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    friend basic_iterator operator+(basic_iterator it, difference_type n) noexcept { return it += n; }
    friend basic_iterator operator+(difference_type n, basic_iterator it) noexcept { return it += n; }
    friend basic_iterator operator-(basic_iterator it, difference_type n) noexcept { return it -= n; }
    friend difference_type operator-(const basic_iterator& a, const basic_iterator& b) noexcept {
      return a.r_ - b.r_;
    }
    friend bool operator==(const basic_iterator& a, const basic_iterator& b) noexcept { return a.r_ == b.r_; }
    friend std::strong_ordering operator<=>(const basic_iterator& a, const basic_iterator& b) noexcept {
      return a.r_ <=> b.r_;
    }

    // The element's index (what emplace returned for it).
    index_type index() const noexcept { return index_type(p_->pieces_[piece_].index + std::uint64_t(r_ - lo_)); }

   private:
    friend class mass_pool;
    friend class basic_iterator<!Const>;

    // Points at rank r: in its piece, or (past the last element, or on a
    // pool with no view yet) at no piece, where lo_ == hi_ == r.
    void seat(difference_type r) noexcept { seat_piece(p_->piece_of(r), r); }
    void seat_piece(std::size_t k, difference_type r) noexcept {
      r_ = r;
      piece_ = k;
      if (k < p_->pieces_.size()) {
        const piece& pc = p_->pieces_[k];
        lo_ = difference_type(pc.rank);
        hi_ = difference_type(pc.rank + pc.count);
        cur_ = pc.base + (r - lo_);
      } else {
        lo_ = hi_ = r;
        cur_ = nullptr;
      }
    }

    pool_ptr p_ = nullptr;
    difference_type r_ = 0;
    difference_type lo_ = 0, hi_ = 0;  // ranks of the current piece
    pointer cur_ = nullptr;
    std::size_t piece_ = 0;
  };
  using iterator = basic_iterator<false>;
  using const_iterator = basic_iterator<true>;

  // begin() takes a snapshot of where the holes are (O(blocks)); it must not
  // run concurrently with emplace(), clear() or another begin(). Iterators
  // stay valid until the next emplace() or clear().
  iterator begin() { refresh_view(); return {this, 0}; }
  iterator end() { return {this, difference_type(size()), at_end{}}; }
  const_iterator begin() const { refresh_view(); return {this, 0}; }
  const_iterator end() const { return {this, difference_type(size()), at_end{}}; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }

 private:
  // The filled part of one block: ranks [rank, rank + count) are the
  // indices [index, index + count), at base[0 .. count).
  struct piece {
    std::uint64_t rank;
    std::uint64_t index;
    std::uint64_t count;
    T* base;
  };

  // The piece that holds rank r, or pieces_.size() if none does.
  std::size_t piece_of(std::ptrdiff_t r) const noexcept {
    if (r < 0 || pieces_.empty() || std::uint64_t(r) >= pieces_.back().rank + pieces_.back().count)
      return pieces_.size();
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), std::uint64_t(r),
                               [](std::uint64_t v, const piece& pc) { return v < pc.rank; });
    return std::size_t(it - pieces_.begin()) - 1;
  }

  void refresh_view() const {
    pieces_.clear();
    std::uint64_t rank = 0;
    core_.for_each_filled([&](std::uint64_t first, std::uint32_t count) {
      T* base = std::launder(static_cast<T*>(core_.at(index_type(first))));
      pieces_.push_back({rank, first, count, base});
      rank += count;
    });
  }

  void empty_out(bool keep_memory) noexcept {
    destroy_elements();
    core_.reset(keep_memory);
    pieces_.clear();
  }

  void destroy_elements() noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      core_.for_each_filled([&](std::uint64_t first, std::uint32_t count) {
        for (std::uint64_t i = first; i < first + count; ++i) (*this)[index_type(i)].~T();
      });
    }
  }

  // A constructor that may throw builds a temporary first, which is then
  // moved into the slot (nothrow): a slot, once claimed, is always filled.
  template <class... Args>
  __attribute__((always_inline)) try_emplaced construct(int& status, Args&&... args) {
#if defined(__cpp_exceptions)
    if constexpr (!std::is_nothrow_constructible_v<T, Args&&...>) {
      static_assert(std::is_nothrow_move_constructible_v<T>,
                    "mass_pool<T>::emplace: T's constructor may throw and its move constructor "
                    "too; a claimed slot could be left empty. Make one of them noexcept.");
      T tmp(std::forward<Args>(args)...);
      const detail::pool_core::claim c = core_.acquire<sizeof(T)>();
      status = c.status;
      if (!c.slot) return {TENON_POOL_NO_INDEX, nullptr};
      return {c.index, ::new (c.slot) T(std::move(tmp))};
    } else
#endif
    {
      const detail::pool_core::claim c = core_.acquire<sizeof(T)>();
      status = c.status;
      if (!c.slot) return {TENON_POOL_NO_INDEX, nullptr};
      return {c.index, ::new (c.slot) T(std::forward<Args>(args)...)};
    }
  }

  static constexpr int kInvalid = -1;

  [[noreturn]] static void fail(int status) {
#if defined(__cpp_exceptions)
    if (status == kInvalid) throw std::invalid_argument("tenon::mass_pool: block_shift above 24");
    if (status == detail::pool_core::full)
      throw std::length_error("tenon::mass_pool: more than 2^32-1 elements (or the test limit)");
    throw std::bad_alloc();
#else
    detail::pool_fatal(status == kInvalid ? "mass_pool: block_shift above 24"
                       : status == detail::pool_core::full
                           ? "mass_pool: more than 2^32-1 elements (or the test limit)"
                           : "mass_pool: out of memory");
#endif
  }

  mass_pool(unsigned block_shift, bool dense) {
    if (!core_.init(sizeof(T), alignof(T), block_shift, dense))
      fail(block_shift > 24 ? kInvalid : int(detail::pool_core::no_memory));
  }

  detail::pool_core core_;
  mutable std::vector<piece> pieces_;  // the view begin() took
};

}  // namespace tenon
