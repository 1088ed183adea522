// tenon::percpu_cache<Inner, E>: a front end that caches small blocks per
// CPU (docs/architecture.md, "Per-CPU caches"). Each CPU has a region of
// bounded stacks of block pointers, one per size class up to kMaxCached
// (layout.h); malloc pops from the current CPU's stack and free pushes onto
// it, each in one restartable sequence (rseq_stack.h). An empty stack, a
// full one, a CPU without its region yet, or a thread without rseq goes to
// Inner for that one call: where rseq is missing (qemu-user, valgrind,
// ThreadSanitizer builds, GLIBC_TUNABLES=glibc.pthread.rseq=0, other
// architectures) the layer is Inner with a few instructions more.
//
// Inner must hand out the blocks of engine E's thread heaps unchanged (the
// default allocator, or layers over it that forward blocks as they are): a
// freed block's class is read from its span in line, and only blocks whose
// span belongs to one of E's thread heaps are cached (a first-class heap's
// block, freed with free(), goes straight back: its heap may be destroyed
// while the block would sit here).
//
// The checks the thread heaps make on free (docs/security.md), made here
// for the blocks a CPU's stack takes, which never reach them: the block must
// start a block its span carved (the block-start test against the span's
// carved bound, block_index.h), and must not be free already: a block in a
// stack holds the free key (free_key.h) in its second word, stored before
// the push and cleared as malloc pops it, as does a block on its span's
// lists or waiting in a remote batch, and a free that finds the key reports
// a double free (free_checked).
//
// Cached blocks stay allocated as far as Inner knows. trim() (malloc_trim)
// gives them back from every CPU: it stops each CPU's region (its table
// entry null, so every sequence there fails), restarts every running
// sequence of the process (membarrier's rseq restart), after which nothing
// can commit into a stopped region, drains the stacks into Inner, and puts
// the regions back. A trim stopped forever leaves those CPUs uncached, and
// nobody waits for it.
#pragma once
#include <errno.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenon/common/inject.h"
#include "tenon/heap/free_key.h"
#include "tenon/heap/heap.h"
#include "tenon/layer.hpp"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/percpu/layout.h"
#include "tenon/percpu/rseq_stack.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon {

template <layer Inner, auto& E = g_default_engine>
struct percpu_cache : pass_through<Inner> {
  static_assert(!releasable<Inner>, "percpu_cache over a heap: its cached blocks would outlive a release()");
  using config = typename std::remove_reference_t<decltype(E)>::config;

  __attribute__((always_inline)) static void* alloc(std::size_t n) noexcept {
    if (__builtin_expect(n <= percpu::kMaxCached, 1)) {
      void* p;
      if (__builtin_expect(percpu::pop(s_table, small_class(n), p), 1)) {
        second_word(static_cast<block*>(p)) = 0;  // the free key leaves with the block
        return p;
      }
      return alloc_miss(n);
    }
    return Inner::alloc(n);
  }

  __attribute__((always_inline)) static void dealloc(void* p) noexcept {
    std::uintptr_t tag = lookup::tag_of(p);
    if (__builtin_expect(lookup::is_regular_tagged(p, tag), 1)) {
      const span* s = lookup::span_of_tagged(p, tag);
      // A small block of E's heaps (p is a multiple of 8: the tag matched;
      // anything else is no block start: Inner reports it).
      if (__builtin_expect(small_cached_class(s) && of_our_heaps(s), 1)) {
        auto* b = static_cast<block*>(p);
        // An interior pointer or a slot never carved (the thread heaps'
        // free_to_own_span makes the same test), or a block freed already
        // (the key): both to one cold tail call, which tells them apart (a
        // call that returned, or a second cold call, made GCC set up a
        // stack frame on this path: 2 instructions a free). The second word
        // is read before the carved bound (span::forget_carved: a stale
        // pointer's old bound, read first, admitted it to a CPU's stack
        // after its span was formed again, whose carve handed it out too).
        std::uint64_t key = free_key();
        if (__builtin_expect(second_word_ordered(b) == key, 0)) return free_checked(p, s);
        if (__builtin_expect(!s->starts_carved_block_any_thread(b), 0)) return free_checked(p, s);
        // The key goes in before the push: once pushed, the block may be
        // popped and handed out by another thread on this CPU.
        second_word(b) = key;
        if (__builtin_expect(percpu::push(s_table, s->cls, p), 1)) return;
        return dealloc_miss(p);
      }
    }
    Inner::dealloc(p);
  }

  // calloc: small sizes through the cache (a cached block is not known to be
  // zero), the rest to Inner, which knows which fresh memory is zero.
  static void* alloc_zeroed(std::size_t n) noexcept {
    if (n <= percpu::kMaxCached) {
      void* p = alloc(n);
      if (p) std::memset(p, 0, n);
      return p;
    }
    return layer_ops<Inner>::alloc_zeroed(n);
  }

  // realloc: Inner's, in place where it can. The blocks are Inner's as they
  // are, so Inner may resize them and free them itself (they only skip the
  // cache on the way).
  // A block waiting in a CPU's stack is freed: Inner would take it for live.
  static void* realloc(void* p, std::size_t n) noexcept {
    std::uintptr_t tag = lookup::tag_of(p);
    if (lookup::is_regular_tagged(p, tag)) {
      const span* s = lookup::span_of_tagged(p, tag);
      if (small_cached_class(s) && of_our_heaps(s) && s->starts_carved_block_any_thread(p) &&
          second_word(static_cast<block*>(p)) == free_key())
        report_misuse("realloc", p, "double free", s->block_size);
    }
    return layer_ops<Inner>::realloc(p, n);
  }

  // The cached blocks back to Inner first, so that the spans they empty go
  // back too; the answer is Inner's, whether memory went back to the system
  // (docs/api.md): blocks moved from the stacks to their spans are not
  // (until 2026-11-29 they made it 1, preload.trim_answer).
  static int trim(std::size_t pad) noexcept {
    drain_all();
    return layer_ops<Inner>::trim(pad);
  }

  // --- for tests and tools

  // Blocks in every CPU's stacks now (racy while others run).
  static std::size_t cached_blocks() noexcept {
    std::size_t n = 0;
    unsigned limit = s_cpu_limit.load(std::memory_order_acquire);
    for (unsigned c = 0; c < limit; ++c)
      if (char* r = s_regions[c].load(std::memory_order_acquire))
        for (unsigned k = 0; k < percpu::kCachedClasses; ++k) n += (header(r).top[k] - header(r).begin[k]) / 8;
    return n;
  }

  // Whether the calling thread's CPU has its region now (a hint: the thread
  // may move at once).
  static bool cpu_cached() noexcept {
    int cpu = percpu::current_cpu();
    return cpu >= 0 && s_table[cpu + 2].load(std::memory_order_relaxed) != nullptr;
  }

 private:
  // States of a CPU's region.
  enum : std::uint8_t { kNone = 0, kActive = 1, kDraining = 2 };

  static inline constinit percpu::cpu_table s_table{};  // what the sequences read
  static inline constinit std::atomic<char*> s_regions[percpu::kMaxCpus]{};  // set once per CPU
  static inline constinit std::atomic<std::uint8_t> s_state[percpu::kMaxCpus]{};
  static inline constinit std::atomic<unsigned> s_cpu_limit{0};  // above every CPU with a region
  // TENON_TEST_PERCPU_WITHOUT_RSEQ: -1 not read yet, 0 off, 1 on.
  static inline constinit std::atomic<int> s_pretend{-1};
  // Whether membarrier can restart other threads' sequences: 0 not asked, 1, -1.
  static inline constinit std::atomic<int> s_restarts{0};

  static percpu::region_header& header(char* region) { return *reinterpret_cast<percpu::region_header*>(region); }

  // A small span of a cached class: kind and class are adjacent bytes of
  // the descriptor, so both are tested with one 16-bit load and compare
  // (small is 0 in the low byte, the class below kCachedClasses in the
  // high one) instead of two loads and two branches.
  static bool small_cached_class(const span* s) {
    static_assert(offsetof(span, cls) == offsetof(span, kind) + 1 && std::uint8_t(span_kind::small) == 0);
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    std::uint16_t kind_cls;
    std::memcpy(&kind_cls, &s->kind, sizeof kind_cls);
    return kind_cls < percpu::kCachedClasses << 8;
  }

  // The span's owner is one of E's thread heaps (not a first-class heap's,
  // not abandoned). (Testing first whether it is the calling thread's own
  // heap saves three instructions on such frees, but where blocks of
  // several heaps are freed in mixed order, as in larson, that branch is
  // mispredicted about every other free and the layer was markedly slower:
  // the null and home tests are always taken the same way.)
  static bool of_our_heaps(const span* s) {
    auto* h = static_cast<const thread_heap<config>*>(s->owner.load(std::memory_order_relaxed));
    return h != nullptr && h->home == &E.heaps;
  }

  // Why a sequence failed: the CPU's region is there (its stack was empty
  // or full, or the thread moved: a hint either way), there is no rseq
  // (cpu_id negative: the fallback, unless the test knob is unread or on),
  // or the region is still to be made (make_region, then Inner).
  enum miss_kind { kStack, kNoRseq, kNoRegion };
  static miss_kind why_missed() noexcept {
    int cpu = percpu::current_cpu();
    if (cpu >= 0) return s_table[cpu + 2].load(std::memory_order_relaxed) != nullptr ? kStack : kNoRegion;
    return __builtin_expect(s_pretend.load(std::memory_order_relaxed) == 0, 1) ? kNoRseq : kNoRegion;
  }

  // A sequence failed: the stack was empty or full, or there is no region
  // (made here if the CPU has none yet). Inner serves the one call.
  // Misses are not refilled or drained in batches: Inner has no bulk
  // interface, so a batch is a loop of single calls, and measured with rseq
  // it was slower than this (docs/architecture.md, "Per-CPU caches").
  __attribute__((noinline)) static void* alloc_miss(std::size_t n) noexcept {
    if (__builtin_expect(why_missed() == kNoRegion, 0)) make_region();
    return Inner::alloc(n);
  }

  // The key dealloc stored goes: the block was not pushed, and Inner's free
  // would take it for a block freed already and walk its span's list.
  __attribute__((noinline)) static void dealloc_miss(void* p) noexcept {
    second_word(static_cast<block*>(p)) = 0;
    if (__builtin_expect(why_missed() == kNoRegion, 0)) make_region();
    Inner::dealloc(p);
  }

  // A free that failed dealloc's block-start test, or found the key in p's
  // second word: p is free already (free_key.h). Reported either way; a
  // tail call from dealloc, and noipa: GCC, seeing that it never returns,
  // made the call no tail call and set up a stack frame on the free path
  // (2 instructions).
  [[gnu::cold, gnu::noipa]] static void free_checked(void* p, const span* s) noexcept {
    if (!s->starts_carved_block_any_thread(p)) report_not_carved_block(s, static_cast<block*>(p));
    report_misuse("free", p, "double free", s->block_size);
  }

  // Makes the calling thread's CPU's region if it has none: the first
  // thread to claim the CPU (one CAS) reserves and fills it, then publishes
  // it; a racer just goes on without the cache this time.
  __attribute__((noinline)) static void make_region() noexcept {
    if (!TENON_PERCPU_RSEQ) return;  // built without the sequences: nothing would use a region
    int cpu = percpu::current_cpu();
    if (cpu < 0) {
      if (!pretend()) return;
      percpu::pretend_cpu0();
      cpu = 0;
    }
    if (s_table[cpu + 2].load(std::memory_order_relaxed) != nullptr) return;
    std::uint8_t none = kNone;
    if (!s_state[cpu].compare_exchange_strong(none, kActive, std::memory_order_acq_rel)) return;
    char* r = s_regions[cpu].load(std::memory_order_relaxed);
    if (!r) {
      int saved = errno;
      r = static_cast<char*>(os::reserve(percpu::kLayout.bytes, os::page_size()));
      errno = saved;
      if (!r) {
        s_state[cpu].store(kNone, std::memory_order_release);
        return;
      }
      for (unsigned c = 0; c < percpu::kCachedClasses; ++c) {
        header(r).top[c] = header(r).begin[c] = percpu::kLayout.begin[c];
        header(r).end[c] = percpu::kLayout.end[c];
      }
      s_regions[cpu].store(r, std::memory_order_release);
    }
    unsigned limit = s_cpu_limit.load(std::memory_order_relaxed);
    while (limit < unsigned(cpu) + 1 &&
           !s_cpu_limit.compare_exchange_weak(limit, unsigned(cpu) + 1, std::memory_order_acq_rel)) {
    }
    // A trim may see the region from here on; it drains it only once the
    // entry below is set (drain_all).
    TENON_INJECT_POINT("percpu.publish");
    s_table[cpu + 2].store(r, std::memory_order_release);
  }

  static bool pretend() {
    int v = s_pretend.load(std::memory_order_relaxed);
    if (v < 0) {
      v = os::env("TENON_TEST_PERCPU_WITHOUT_RSEQ") != nullptr ? 1 : 0;
      s_pretend.store(v, std::memory_order_relaxed);
    }
    return v == 1 && os::single_threaded();
  }

  static bool restarts_work() {
    int v = s_restarts.load(std::memory_order_acquire);
    if (v == 0) {
      v = os::register_sequence_restarts() ? 1 : -1;
      s_restarts.store(v, std::memory_order_release);
    }
    return v == 1;
  }

  // trim: every CPU's stacks back to Inner. True if any block went back.
  static bool drain_all() noexcept {
    // Built without the sequences (ThreadSanitizer, other architectures):
    // no region is ever made. (TSan would also warn about the fences.)
    if constexpr (!TENON_PERCPU_RSEQ) return false;
    unsigned limit = s_cpu_limit.load(std::memory_order_acquire);
    if (limit == 0) return false;
    // The CPUs this call stopped (another trim may be draining others).
    std::uint64_t mine[percpu::kMaxCpus / 64] = {};
    bool any = false;
    for (unsigned c = 0; c < limit; ++c) {
      std::uint8_t active = kActive;
      char* r = s_regions[c].load(std::memory_order_acquire);
      if (r == nullptr || !s_state[c].compare_exchange_strong(active, kDraining, std::memory_order_acq_rel))
        continue;
      // Only a region its maker has published: taken from the entry, not
      // overwritten with null, since a maker between its s_regions store
      // and its table store would publish the region afterwards, and this
      // CPU's threads would push and pop in it while it is drained.
      if (!s_table[c + 2].compare_exchange_strong(r, nullptr, std::memory_order_relaxed)) {
        s_state[c].store(kActive, std::memory_order_release);
        continue;
      }
      mine[c / 64] |= std::uint64_t{1} << (c % 64);
      any = true;
    }
    if (!any) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A process that never had a second thread has nobody in a sequence;
    // otherwise every running sequence must restart (and then fail on the
    // null entry) before the stacks are read. Without membarrier the
    // stacks stay as they are. So too where a thread may have pretended to
    // be on CPU 0 (TENON_TEST_PERCPU_WITHOUT_RSEQ without rseq): it runs its
    // sequences with nothing to restart them, so membarrier does not stop
    // it, and once the process has a second thread the trim could drain
    // CPU 0's region under it (before 2026-11-27: a block handed out and
    // given to Inner at once, preload.percpu.pretend_trim).
    bool pretending = s_pretend.load(std::memory_order_relaxed) == 1;
    bool fenced = os::single_threaded() || (!pretending && restarts_work() && os::restart_sequences() == 0);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool drained = false;
    for (unsigned c = 0; c < limit; ++c) {
      if (!(mine[c / 64] >> (c % 64) & 1)) continue;
      char* r = s_regions[c].load(std::memory_order_acquire);
      if (fenced) {
        for (unsigned k = 0; k < percpu::kCachedClasses; ++k) {
          percpu::region_header& hd = header(r);
          for (std::uint32_t at = hd.begin[k]; at < hd.top[k]; at += 8) {
            void* p;
            std::memcpy(&p, r + at, sizeof p);
            second_word(static_cast<block*>(p)) = 0;  // its free key: Inner takes it as a live block
            Inner::dealloc(p);
            drained = true;
          }
          hd.top[k] = hd.begin[k];
        }
      }
      s_table[c + 2].store(r, std::memory_order_release);
      s_state[c].store(kActive, std::memory_order_release);
    }
    return drained;
  }
};

}  // namespace tenon
