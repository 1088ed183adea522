// Secure layers: quarantine<Inner>, delayed reuse. A freed block is not given
// back to Inner at once: it takes the next slot of its thread's ring, and the
// block that held the slot goes back instead, so a block waits exactly as
// many frees of its thread as its pool has slots. Two pools, told apart by
// Inner's usable size with one lookup per block:
//   small (up to kMaxSmallBlock bytes, kSmallSlots slots): while it waits, the
//     block reads as zeros from byte 16 for kZeroed bytes from where the
//     program's bytes begin (Layout: an outer layer may put them further in)
//     (zeroed on entry: the program's data is gone), and on its way out those
//     zeros are checked: a write after free there ends the program;
//   large (to kMaxLargeBlock, kLargeSlots slots): inaccessible while it waits,
//     all of it (its span marked waits_in_quarantine, which an outer layer's check
//     reads instead of a header at the block's end): a read or write after
//     free faults at the access (SIGSEGV).
// Others (blocks of 16 bytes or less, huge blocks) go back at once, and so do
// pointers that are not in tenon's memory (glibc's blocks: the default
// build's foreign path).
// One layer for both pools, not one over the other, so that a block is looked
// up once on its way in and once on its way out.
//
// Where blocks wait. Small blocks over the process allocator, in a ring of
// the thread's own (plain loads and stores: no atomic instruction on a free;
// the ring keeps each block's window end, so a block leaving is not looked up
// again), in a mapping of its own made at the thread's first free (not a
// heap block, which an overflow from its neighbour could reach) and drained
// by a thread-exit hook (a pthread key), so a thread's exit strands nothing.
// Small frees before the ring exists, after the hook ran (a later key's
// destructor) or when it could not be had take the shared slots:
// process-wide atomics, kStripes stripes (a thread's by its TLS address), one
// atomic exchange per free; and so does every large block, which thus waits
// kLargeSlots large frees of its stripe's threads. In a ring, an idle
// thread's large blocks stayed resident (closed) out of every other thread's
// reach, malloc_trim's included (until 2026-11-27: 16 MiB a thread, 392 MB
// for 50 idle threads); in the shared slots at most kLargeSlots * kStripes
// wait, and trim() reaches them all. Their exchange is nothing beside the
// mprotect calls a large block's wait makes. Over a heap that can be
// released (tenon::heap_layer), always the shared slots, which release() can
// reach from any thread. Lock-free either way: no free waits for another
// thread. trim() gives back the shared slots' blocks and the calling
// thread's ring (another thread's ring is its own), and so does an
// allocation Inner fails, before its one retry (at an address-space limit,
// the blocks just freed are reused at once); release() every waiting block
// before a heap underneath drops everything. At most kMaxClosedLarge large
// blocks wait closed at a time, process-wide (their mappings' VMAs); past
// that a large block waits open.
#pragma once
#include <errno.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenon/huge/huge.h"
#include "tenon/layer.hpp"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"
#include "tenon/secure/zeroed.h"

namespace tenon::secure {

// Large blocks waiting closed, process-wide (every quarantine of the
// process): at most kMaxClosedLarge. A closed block splits its chunk's
// mapping, up to two VMAs more (beside its guards': large.ipp). When the
// threads' rings held 8 large blocks each, however many threads there were,
// every waiting block was closed, and 2,553 threads that had freed 8 large
// blocks each used up Linux's 65,530 mappings (vm.max_map_count): the next
// pthread_create, mmap or mprotect failed (until 2026-11-27). The shared
// slots now hold every large block (kLargeSlots * kStripes a quarantine);
// the budget bounds the quarantines of a process together (a secure heap
// over tenon::heap_layer has its own). Past it a block waits open (its reuse
// delayed all the same; a read or write after free there is not caught).
// 4,096 blocks: at most 8,192 VMAs, an eighth of Linux's default, beside the
// guards' quarter.
inline constexpr std::uint32_t kMaxClosedLarge = 4096;
inline constinit std::atomic<std::uint32_t> g_closed_large{0};

// Where the program's bytes begin in an inner block, for a quarantine
// under a layer that moves them (canary.hpp's aligned blocks, `align` bytes
// in): the window of kZeroed bytes zeroed and checked starts there. This
// default knows of no such layer: the window is the block's first kZeroed
// bytes.
struct bytes_at_start {
  static std::size_t data_offset(const unsigned char*, std::size_t) { return 0; }
};

template <layer Inner, std::size_t kSmallSlots, std::size_t kMaxSmallBlock, std::size_t kLargeSlots,
          std::size_t kMaxLargeBlock, std::size_t kStripes = 16, std::size_t kZeroed = 4096,
          class Layout = bytes_at_start>
struct quarantine : pass_through<Inner> {
  static constexpr std::size_t kKept = 16;  // the bytes a free block's owner may use (links, header)

  static void dealloc(void* p) noexcept {
    if (!p) return;
    // The common case, a small block of a small span waiting in this thread's
    // ring, in a function of its own with no call but tail calls: no
    // register to save.
    // The tag kept for the span's lookup, as the engine's free does: the
    // chunk's base folded into the load (two instructions fewer).
    std::uintptr_t tag = lookup::tag_of(p);
    if (__builtin_expect(!lookup::is_regular_tagged(p, tag), 0)) return dealloc_other(p);
    span* s = lookup::span_of_tagged(p, tag);
    ring* r = kRings ? mine().r : nullptr;
    std::size_t n = s->block_size;
    // Blocks past kZeroed bytes out of line too: their window is looked for
    // (window()); here the whole block is the window.
    if (__builtin_expect(s->kind != span_kind::small || n <= kKept || n > kZeroed || !r, 0))
      return dealloc_other(p);
    zero_words(static_cast<unsigned char*>(p) + kKept, n - kKept);
    entry out = take_turn(r->small, r->small_turn, {p, n, s});
    if (out.p) leave_small(out.p, out.end, out.s);  // n <= kZeroed: the window is the block
  }

  // An allocation Inner fails (ENOMEM: an address-space limit, a memory
  // source run dry) gives back the blocks waiting here that this thread can
  // reach without waiting for another, as malloc_trim does (flush), and is
  // tried once more: at a limit, the blocks freed just before are had again,
  // as in the default build. The retry is out of line: one test of the
  // answer, which the caller makes anyway. Always in line: with realloc's
  // call beside the canary's, GCC made it a function of its own (the secure
  // malloc(32)+free pair 239.35 -> 252.35 instructions).
  // errno is read before the first try: a retry that succeeds puts it back
  // (a call that succeeds leaves errno as it was, docs/api.md; until
  // 2026-11-29, branch audit2, it left the first try's ENOMEM; a huge
  // block's realloc and realloc_taken below until 2026-11-30, branch
  // review3: QuarantineRing.AHugeReallocRetriedAfterTheFlushKeepsErrno).
  [[gnu::always_inline]] static void* alloc(std::size_t n) noexcept {
    int before = errno;
    void* p = Inner::alloc(n);
    return __builtin_expect(p != nullptr, 1) ? p : alloc_after_flush(n, before);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    int before = errno;
    void* p = Inner::alloc_aligned(align, n);
    return __builtin_expect(p != nullptr, 1) ? p : alloc_aligned_after_flush(align, n, before);
  }

  // A huge block (past kMaxLargeBlock: its free goes straight to Inner, it
  // never waits here) is resized by Inner, in place or its pages moved, with
  // no copy that would write every page of the new block (an outer layer's
  // realloc of one: canary::realloc_huge). Any other block as the layers'
  // generic realloc: through this layer's alloc and dealloc, the old block
  // waiting as any freed one. Out of line: no fast path calls it.
  [[gnu::noinline]] static void* realloc(void* p, std::size_t n) noexcept {
    if (huge_lookup(p) && n > kMaxLargeBlock) {
      int before = errno;  // a retry that succeeds puts it back, as alloc_after_flush
      void* q = layer_ops<Inner>::realloc(p, n);
      return q || !flush_for_retry() ? q : restore_errno(layer_ops<Inner>::realloc(p, n), before);
    }
    return realloc_by_copy<quarantine>(p, n);
  }

  // A huge block an outer layer has taken (huge_take gave `usable`: the
  // canary's realloc, which has checked it) handed on still taken to
  // Inner's realloc (layer.hpp, realloc_taken), so that no free can take it
  // between the two (since 2026-11-29, branch usize). Given back whatever
  // the answer; a retry after the flush takes it again, as realloc does.
  static void* realloc_taken(huge_header* h, void* p, std::size_t n, std::size_t usable) noexcept
    requires requires { Inner::realloc_taken(h, p, n, usable); }
  {
    if (n <= kMaxLargeBlock) {  // not a size this layer resizes in place: as realloc
      huge_release(h, usable);
      return realloc(p, n);
    }
    int before = errno;
    void* q = Inner::realloc_taken(h, p, n, usable);
    return q || !flush_for_retry() ? q : restore_errno(layer_ops<Inner>::realloc(p, n), before);
  }

  static int trim(std::size_t pad) noexcept {
    flush();
    return layer_ops<Inner>::trim(pad);
  }

  // The calling thread's ring given back now, at its exit, before the heap
  // underneath is parked (secure_config::before_thread_exit: the engine's
  // thread-exit hook calls it first), so that its blocks reach spans the
  // heap still owns; the ring's own key then has nothing left to give back.
  // The thread's later frees take the shared slots.
  static void give_back_ring() noexcept {
    if constexpr (kRings) {
      if (ring* r = mine().r) {
        if (long key = key_cell().load(std::memory_order_acquire); key != -1) os::thread_key_set(key, nullptr);
        on_thread_exit(r);
      }
    }
  }

  // Over a heap (tenon::heap_layer): the waiting blocks leave first, checked
  // and accessible again, so that the heap's memory goes back whole.
  static void release() noexcept
    requires releasable<Inner>
  {
    drain_shared();
    Inner::release();
  }

 private:
  // Every other free: a block of another size or kind, or no ring yet, or
  // a pointer tenon did not hand out.
  [[gnu::noinline]] static void dealloc_other(void* p) {
    if (!tenons(p)) return Inner::dealloc(p);
    span* s = small_span(p);
    std::size_t n = s ? s->block_size : Inner::usable_size(p);
    if (n <= kMaxSmallBlock && n > kKept) {
      std::size_t end = window(p, n);
      ring* r = kRings ? mine().r : nullptr;
      if (r) {
        // The block whose turn p takes leaves first (its window's zeros
        // checked), then p's window is zeroed. In the other order (until
        // 2026-11-30) glibc-thread, blocks of 4 B to 32 KiB, took 2 to 3%
        // more CPU time (docs/security.md, "What it costs"); the likely
        // cause, not measured: the check's loads waited behind the
        // zeroing's stores to p's window, most of it out of the cache by
        // p's free. free returns with both blocks as before.
        entry out = take_turn(r->small, r->small_turn, {p, end, s});
        if (out.p) leave_small(out.p, out.end, out.s);
        zero_window(static_cast<unsigned char*>(p), end);
      } else {
        zero_window(static_cast<unsigned char*>(p), end);
        if (void* out = wait_shared(p, end)) leave_shared_small(out);
      }
      return;
    }
    if (n <= kKept || n > kMaxLargeBlock) return Inner::dealloc(p);
    // Large: the shared slots (above), the block's span marked first.
    claim_wait(p);
    if (void* out = large_slot().exchange(close_pages(p, n), std::memory_order_acq_rel))
      leave_large(out, block_size(unmarked(out)));
  }

  // Inner's errno (ENOMEM) stands when nothing was waiting; a retry that
  // fails sets it again.
  [[gnu::cold, gnu::noinline]] static void* alloc_after_flush(std::size_t n, int before) {
    return restore_errno(flush_for_retry() ? Inner::alloc(n) : nullptr, before);
  }
  [[gnu::cold, gnu::noinline]] static void* alloc_aligned_after_flush(std::size_t align, std::size_t n, int before) {
    return restore_errno(flush_for_retry() ? Inner::alloc_aligned(align, n) : nullptr, before);
  }
  static void* restore_errno(void* p, int before) {
    if (p) errno = before;
    return p;
  }
  // flush(), and the runs of large blocks that left closed into Inner's run
  // caches (leave_closed) back to Inner's arena, where the retry can have
  // them at any size: since branch secrow (2026-11-29) a run kept closed
  // served only a block of its own slice count, and malloc(200000) after 2
  // blocks of 100,000 B were freed at an address-space limit failed
  // (preload.secure.address_space_limit). Whether a retry may find more.
  static bool flush_for_retry() {
    bool any = flush();
    if constexpr (requires { Inner::release_closed_runs(); }) {
      Inner::release_closed_runs();
      any = true;
    }
    return any;
  }

  // The blocks of the shared slots and of the calling thread's ring leave
  // (checked, accessible again); another thread's ring is its own. One
  // atomic exchange a shared slot, plain loads and stores on the ring: no
  // wait for another thread. Whether any block left.
  static bool flush() {
    bool any = drain_shared();
    if (kRings)
      if (ring* r = mine().r) any |= drain_ring(r);
    return any;
  }

  // Rings over the process allocator; a releasable heap keeps the shared
  // slots only, for release() to reach every waiting block.
  static constexpr bool kRings = !releasable<Inner>;

  // A ring's block keeps the end of its window (window()), found once on
  // its way in: its way out checks up to there without looking for it again
  // (until 2026-11-27, sixth session, a block past kZeroed bytes had
  // canary_layout::data_offset, a key and a loop, run at its entry and again
  // at its exit). The first kKept bytes, which a write after free could
  // change, no longer decide the window checked.
  // A block of the common free (dealloc's own path) keeps its span too, for
  // Inner's free on the way out where Inner takes it (dealloc_in_span): the
  // block is live for Inner while it waits, so its span stays its own, and
  // the second lookup of the block is saved.
  struct entry {
    void* p;
    std::size_t end;  // the window's end, from the block's start
    span* s;          // p's span, or nullptr: Inner looks it up
  };
  struct ring {
    entry small[kSmallSlots];
    unsigned small_turn;
  };
  // The entry in comes into the pool's next slot; the one there goes out.
  template <std::size_t kSlots>
  static entry take_turn(entry (&slots)[kSlots], unsigned& turn, entry in) {
    entry& slot = slots[turn++ % kSlots];
    entry out = slot;
    slot = in;
    return out;
  }
  static std::size_t ring_bytes() { return (sizeof(ring) + os::page_size() - 1) & ~(os::page_size() - 1); }

  // This thread's ring; `shared` once the thread must use the shared slots
  // (its ring drained at exit, or none to be had), `making` while its ring is
  // made (a free nested in that, from the key's calloc, takes the shared
  // slots).
  enum class state : unsigned char { none, making, ring, shared };
  struct thread_ring {
    ring* r;
    state st;
  };
  static thread_ring& mine() {
    static constinit thread_local thread_ring t __attribute__((tls_model("initial-exec"))) = {nullptr, state::none};
    return t;
  }
  static std::atomic<long>& key_cell() {
    static constinit std::atomic<long> k{-1};
    return k;
  }

  // A small free with no ring: the thread's ring is made at its first small
  // free, else the block waits in the shared slots. Returns the block that
  // leaves (its size to be looked up), or nullptr.
  [[gnu::noinline]] static void* wait_shared(void* p, std::size_t end) {
    if (kRings && mine().st == state::none && make_ring()) {
      ring* r = mine().r;  // new: the slot taken is empty
      take_turn(r->small, r->small_turn, {p, end, nullptr});
      return nullptr;
    }
    return small_slot().exchange(p, std::memory_order_acq_rel);
  }

  static bool make_ring() {
    thread_ring& t = mine();
    t.st = state::making;
    long key = os::shared_thread_key(key_cell(), on_thread_exit);
    auto* r = key == -1 ? nullptr : static_cast<ring*>(os::reserve(ring_bytes(), os::page_size()));
    if (r && !os::thread_key_set(key, r)) {
      os::release(r, ring_bytes());
      r = nullptr;
    }
    if (r) std::memset(r, 0, sizeof(ring));  // empty (a memory source's ranges need not read as zeros)
    t.r = r;
    t.st = r ? state::ring : state::shared;
    return r != nullptr;
  }

  // The thread-exit hook: the ring's blocks leave (checked, accessible
  // again) and the ring goes back; the thread's later frees take the shared
  // slots.
  static void on_thread_exit(void* arg) {
    auto* r = static_cast<ring*>(arg);
    thread_ring& t = mine();
    t.r = nullptr;
    t.st = state::shared;
    drain_ring(r);
    os::release(r, ring_bytes());
  }

  // Both drains: whether any block left.
  static bool drain_ring(ring* r) {
    bool any = false;
    for (entry& e : r->small)
      if (entry out = e; out.p) {
        e = {nullptr, 0, nullptr};
        leave_small(out.p, out.end, out.s);
        any = true;
      }
    return any;
  }

  static bool drain_shared() {
    bool any = false;
    for (std::size_t i = 0; i < kSmallSlots * kStripes; ++i)
      if (void* out = small_slots()[i].exchange(nullptr, std::memory_order_acq_rel)) {
        leave_shared_small(out);
        any = true;
      }
    for (std::size_t i = 0; i < kLargeSlots * kStripes; ++i)
      if (void* out = large_slots()[i].exchange(nullptr, std::memory_order_acq_rel)) {
        leave_large(out, block_size(unmarked(out)));
        any = true;
      }
    return any;
  }

  // The end of a small block's window, zeroed on its way in and checked on
  // its way out: kZeroed bytes from where the program's bytes begin
  // (Layout), the whole block when it is shorter. Its way in and its way
  // out agree: Layout reads the block's first kKept bytes, which are kept.
  // Until 2026-11-27 (fifth session) every window began at the block's
  // start, and a block aligned to 4 KiB or more under the canary (p that
  // far in) had none of its bytes in it.
  static std::size_t window(const void* p, std::size_t n) {
    if (n <= kZeroed) return n;
    std::size_t end = Layout::data_offset(static_cast<const unsigned char*>(p), n) + kZeroed;
    return end < n ? end : n;
  }
  // A block's window (to end, window()) zeroed. The common window of a
  // block past kZeroed bytes, its first kZeroed, as a constant length:
  // zeroed by stores in line, not by a call to memset.
  static void zero_window(unsigned char* c, std::size_t end) {
    if (end == kZeroed)
      zero_words(c + kKept, kZeroed - kKept);
    else
      zero_words(c + kKept, end - kKept);
  }

  // Whether p is in tenon's memory: a chunk's, or a huge block's start. Any
  // other pointer (a glibc block from before tenon was loaded, or one no
  // allocator handed out) goes on to Inner at once, to the default build's
  // foreign path: held here, a block glibc had mapped on its own stayed
  // mapped (and closed by close_pages()) instead of being unmapped, and a small
  // one was zeroed.
  static bool tenons(const void* p) { return lookup::is_regular(p) || lookup::in_chunk(p) || huge_lookup(p); }

  // Inner's usable size, the common case (a small block in a chunk with a
  // table slot) read in line from its span.
  static std::size_t block_size(const void* p) {
    const span* s = small_span(p);
    return s ? s->block_size : Inner::usable_size(p);
  }
  // p's span when it is a small one of a chunk with a table slot (the ring
  // keeps it for the block's way out), else nullptr.
  static span* small_span(const void* p) {
    if (__builtin_expect(lookup::is_regular(p), 1)) {
      span* s = lookup::span_of(p);
      if (s->kind == span_kind::small) return s;
    }
    return nullptr;
  }

  // The shared slots: kStripes stripes of each pool's slots, a thread's
  // stripe chosen by its TLS address (threads rarely share one), walked in
  // turn with a counter of the thread's own.
  static std::atomic<void*>* small_slots() {
    static constinit std::atomic<void*> s[kSmallSlots * kStripes]{};
    return s;
  }
  static std::atomic<void*>* large_slots() {
    static constinit std::atomic<void*> s[kLargeSlots * kStripes]{};
    return s;
  }
  struct walk {
    unsigned small, large;
  };
  static walk& turn() {
    static constinit thread_local walk t __attribute__((tls_model("initial-exec"))) = {0, 0};
    return t;
  }
  static std::size_t stripe() {
    std::uintptr_t me = reinterpret_cast<std::uintptr_t>(&turn()) * 0x9e3779b97f4a7c15ull;
    return (me >> 58) % kStripes;
  }
  static std::atomic<void*>& small_slot() {
    return small_slots()[stripe() * kSmallSlots + turn().small++ % kSmallSlots];
  }
  static std::atomic<void*>& large_slot() {
    return large_slots()[stripe() * kLargeSlots + turn().large++ % kLargeSlots];
  }

  // The pages of a large block of n bytes that wait closed: all of them,
  // from its first byte to its last page, where the canary keeps its header
  // (canary.hpp): the block's span says it waits (waits_in_quarantine, set
  // here), and a second free reads that instead of the header. Until
  // 2026-11-27 (fifth session) the last page stayed open for the header, and
  // the program's last n mod 4 KiB bytes on it (up to 4,072) could be read or
  // written after free unnoticed; closed, the block also merges with its two
  // guard pages into one mapping, where the open page left two more. The
  // first page stayed open until 2026-11-27 (fourth session), for a header
  // before the block.
  struct pages {
    void* start;
    std::size_t bytes;
  };
  static pages closable(void* p, std::size_t n) {
    std::size_t page = os::page_size();
    auto start = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
    auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
    return {reinterpret_cast<void*>(start), end > start ? end - start : 0};
  }

  // The mark on the block's span (span.h, waits_in_quarantine): set by one
  // exchange as the block comes in, before its pages close, and cleared as
  // it leaves, once they are open, so that a check that finds the pages
  // closed finds the mark too (the same thread's, or one that saw the block
  // freed). Of two frees of p racing past the canary's check (both read its
  // header live), the one whose exchange finds the mark set reports: until
  // 2026-11-29 the mark was a store, set only for a block that closed, and
  // p waited twice, to be freed twice on its way out, the second time maybe
  // the live block of the run's next user (RacingFrees.LargeBlockInTwoThreadsAtOnce).
  static void claim_wait(void* p) {
    if (!(lookup::is_regular(p) || lookup::in_chunk(p))) return;
    if (lookup::span_of(p)->waits_in_quarantine.exchange(true, std::memory_order_relaxed))
      report_misuse("free", p, "double free", 0);
  }
  static void end_wait(void* p) {
    if (lookup::is_regular(p) || lookup::in_chunk(p))
      lookup::span_of(p)->waits_in_quarantine.store(false, std::memory_order_relaxed);
  }

  // A large block waits as its pointer with bit 0 set when its pages were
  // closed (a large block starts on a page): its way out opens them again.
  static void* marked(void* p) { return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) | 1); }
  static void* unmarked(void* w) {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(w) & ~std::uintptr_t{1});
  }

  // Closing is best effort: a refusal leaves the block open, less guarded.
  // Closed, its pages are owed their reopening (os::owe_reopening: under
  // RLIMIT_DATA no mapping may take the share they lend meanwhile), and it
  // counts against kMaxClosedLarge (above the class): past that budget a block
  // waits open. p, marked if closed.
  static void* close_pages(void* p, std::size_t n) {
    pages g = closable(p, n);
    if (!g.bytes) return p;
    if (g_closed_large.fetch_add(1, std::memory_order_relaxed) < kMaxClosedLarge) {
      if (os::protect(g.start, g.bytes, false)) {
        os::owe_reopening(static_cast<std::ptrdiff_t>(g.bytes));
        return marked(p);
      }
    }
    g_closed_large.fetch_sub(1, std::memory_order_relaxed);
    return p;
  }

  // Opening is not: a page made writable again counts against RLIMIT_DATA,
  // and a refused open leaves closed pages in the block (leave_large). False
  // then. Out of line with leave_large: in line, the branch changed GCC's
  // inlining for the whole unit (the secure malloc(32)+free pair 273 -> 283
  // instructions). A block left closed keeps its place in the budget (its
  // mapping stays split).
  static bool reopen_pages(void* p, std::size_t n) {
    pages g = closable(p, n);
    bool opened = os::protect(g.start, g.bytes, true);
    os::owe_reopening(-static_cast<std::ptrdiff_t>(g.bytes));  // opened, or given up with the block
    if (opened) g_closed_large.fetch_sub(1, std::memory_order_relaxed);
    return opened;
  }

  // A small block leaves: its window's zeros (to end, from the block's
  // start) are checked, then Inner has it, with its span where it was kept
  // (s) and Inner takes one.
  static void leave_small(void* p, std::size_t end, span* s) {
    auto* c = static_cast<const unsigned char*>(p);
    if (__builtin_expect(!all_zero(c + kKept, end - kKept), 0)) report_write_after_free(c, end);
    if constexpr (requires { Inner::dealloc_in_span(p, s); }) {
      if (s) return Inner::dealloc_in_span(p, s);
    }
    Inner::dealloc(p);
  }
  // One from the shared slots, which keep its pointer alone: its window is
  // looked for again.
  [[gnu::noinline]] static void leave_shared_small(void* p) {
    leave_small(p, window(p, block_size(p)), nullptr);
  }

  // A large block leaves (as it waited: marked if closed): open again, then
  // Inner has it. One whose pages the kernel would not open (RLIMIT_DATA) is
  // never handed back: Inner would give it out with closed pages, and its
  // next user would fault at the first write (preload.data_limit). A leak of
  // its size, and a second free of it is still reported (the canary's freed
  // tag).
  [[gnu::noinline]] static void leave_large(void* waiting, std::size_t n) {
    void* p = unmarked(waiting);
    if (waiting != p) {
      if (leave_closed(p, n)) return;
      if (__builtin_expect(!reopen_pages(p, n), 0)) return;  // still marked: freed
    }
    end_wait(p);
    Inner::dealloc(p);
  }
  // A closed block that Inner takes closed (engine_front::dealloc_closed: its
  // run, closed whole with its guards, waits in the thread's run cache, and
  // its next block opens its own pages): the pages and the span's mark are
  // Inner's from here. Since 2026-11-29 (branch secrow): the block's opening
  // here and its guards' opening in Inner were two mprotect calls of the
  // five a large block's life took (docs/security.md, "What the checks cost").
  static bool leave_closed(void* p, std::size_t n) {
    if constexpr (requires { Inner::dealloc_closed(p, n); }) {
      pages g = closable(p, n);
      if (g.start == p && Inner::dealloc_closed(p, g.bytes)) {
        os::owe_reopening(-static_cast<std::ptrdiff_t>(g.bytes));  // Inner owes them now
        g_closed_large.fetch_sub(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  // No return: all_zero found a byte that is not zero (a caller that can
  // go on after the call keeps its registers across it).
  [[noreturn, gnu::cold, gnu::noinline]] static void report_write_after_free(const unsigned char* c, std::size_t end) {
    std::size_t n = block_size(c);
    std::size_t i = kKept;
    while (i + 1 < end && c[i] == 0) ++i;
    report_misuse("free", c + i, "write after free (in a block waiting in quarantine)", n);
  }
};

}  // namespace tenon::secure
