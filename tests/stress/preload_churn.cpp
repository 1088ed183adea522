// Multithreaded stress through the standard names, run under LD_PRELOAD (the
// library users get, libtenon-secure.so first: its quarantine rings, shared
// slots, canaries, guard pages and huge cache are on every path here).
//
// Threads: a few run throughout; short ones start and exit all the time, many
// of them with freed blocks still waiting in their quarantine rings (drained
// by the thread-exit hook), some calling free and malloc from a key destructor
// that runs after that hook (the shared slots). Blocks go from thread to
// thread through a lock-free table (one word: the address and 16 bits of the
// identity the taker expects) and are freed, reallocated or kept by another.
// Sizes: small (16 B to 32 KiB), large (to 2 MiB) and huge (2 to 6 MiB);
// calls: malloc, calloc, realloc and reallocarray (grow and shrink, across
// the ranges, of own and of others' blocks), aligned_alloc, posix_memalign,
// memalign (alignment 16 B to 64 KiB), operator new and new[] (aligned too),
// and their frees: free, free_sized, free_aligned_sized, sized and aligned
// operator delete, wherever the size is known; zero-size requests and
// realloc(p, 0); sizes at the edges (small and large, large and huge, an
// aligned size whose alignment and canary together are about the small
// limit); now and then 4,400 large blocks live at once (past the 4,096 that
// get guard pages). A thread calls malloc_trim (and reads mallinfo2) beside
// them. Under a library built with -DTENON_INJECT=ON, threads stall at its
// injection points now and then. A watchdog turns a hang into a failure.
//
// Every block carries its identity (thread, sequence) and what it is (size,
// alignment, how it was had), and a pattern over it that is checked at every
// free and realloc: a block handed out twice, or written by anyone but its
// holder, fails. A block from calloc must read zero; a block's address must
// have its alignment; malloc_usable_size must cover the size (and, with
// `secure`, be exactly it). tenon's own checks end the process on a misuse
// they see (SIGABRT, "tenon: ..."): a false report there is a failure too.
//
// At the end, with every block freed, every thread gone and malloc_trim
// called, mallinfo2 must count the bytes in use and the huge blocks it
// counted at the start (nothing lost on the way back: a ring, a slot, an
// outbox), and RSS must be back near where it started.
//
// usage: tenon_preload_churn [secure]      (under LD_PRELOAD)
//   TENON_TEST_SOAK_SECONDS  run time (default 10)
//   TENON_TEST_SEED          the seed (printed; threads make it no replay)
//   TENON_TEST_LONG_THREADS, TENON_TEST_SHORT_THREADS  threads that run
//                            throughout (3) and short ones alive at once (4)
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "random_stall.h"

namespace {

using u64 = std::uint64_t;

constexpr unsigned kMostThreads = 64;   // of each kind
unsigned g_long_threads = 3;            // run from start to end (TENON_TEST_LONG_THREADS)
unsigned g_short_live = 4;              // short threads alive at once (TENON_TEST_SHORT_THREADS)
constexpr std::size_t kTable = 512;     // hand-over slots
constexpr std::size_t kMostHeld = 48;   // blocks one thread holds at most
constexpr long kMostHugeLive = 8;       // huge blocks alive at once, all threads
constexpr std::size_t kSmallMax = 32768;
constexpr std::size_t kLargeMax = std::size_t{2} << 20;
constexpr std::size_t kHugeMax = std::size_t{6} << 20;
constexpr std::size_t kFullPattern = 65536;  // blocks up to this are patterned whole

// ---- randomness ----------------------------------------------------------
using tenon_test::mix;  // splitmix64 (test_support.h)
struct rng {
  u64 s;
  explicit rng(u64 seed) : s(mix(seed) | 1) {}
  u64 operator()() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  u64 below(u64 n) { return (*this)() % n; }
  bool one_in(u64 n) { return below(n) == 0; }
};

// ---- the calls that are not in every glibc's headers -----------------------
using free_sized_fn = void (*)(void*, std::size_t);
using free_aligned_sized_fn = void (*)(void*, std::size_t, std::size_t);
free_sized_fn g_free_sized;
free_aligned_sized_fn g_free_aligned_sized;
bool g_secure;  // the library is libtenon-secure.so: usable size is exact

// ---- failures ------------------------------------------------------------
std::atomic<long> g_failures{0};
std::atomic<bool> g_stop{false};

__attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
  long n = g_failures.fetch_add(1);
  if (n < 20) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAILED: %s\n", buf);
  }
  g_stop.store(true);
}

// ---- blocks --------------------------------------------------------------
// How a block was had, which decides how it may be freed and reallocated.
enum how : unsigned {
  by_malloc,
  by_calloc,
  by_realloc,
  by_aligned_alloc,
  by_posix_memalign,
  by_memalign,
  by_new,
  by_new_array,
  by_new_aligned,
  kHows
};
const char* const kHowNames[kHows] = {"malloc",         "calloc",  "realloc",   "aligned_alloc", "posix_memalign",
                                      "memalign",       "new",     "new[]",     "new(align)"};
bool reallocatable(unsigned h) { return h <= by_memalign; }

// A block: its first word is its identity (thread serial << 32 | sequence),
// its second what it is (size, log2 of its alignment, how), XOR a word of
// the identity; the rest the identity's pattern (whole up to kFullPattern,
// then the first and last 4 KiB and a word every 4 KiB).
struct block {
  unsigned char* p;
  u64 id;
  std::size_t size;
  unsigned align_log2;  // 0: the default alignment
  unsigned how;
};

u64 meta_word(const block& b) {
  return (u64{b.size} & 0xffffffffffull) | u64{b.align_log2} << 40 | u64{b.how} << 48;
}
u64 meta_key(u64 id) { return mix(id ^ 0x5bd1e995u); }
u64 pattern_word(u64 id, std::size_t off) { return mix(id * 0x100000001b3ull ^ off); }

// Calls f(offset, bytes) for each patterned piece of a block of `size`
// bytes (pieces of 8 bytes, the last maybe fewer), clipped at `limit`.
template <class F>
void for_each_piece(std::size_t size, std::size_t limit, F f) {
  auto piece = [&](std::size_t off) {
    if (off >= limit) return;
    std::size_t n = limit - off < 8 ? limit - off : 8;
    f(off, n);
  };
  if (size <= kFullPattern) {
    for (std::size_t off = 16; off < size; off += 8) piece(off);
    return;
  }
  for (std::size_t off = 16; off < 4096; off += 8) piece(off);
  for (std::size_t off = 4096 + 2048; off + 4096 < size; off += 4096) piece(off);
  for (std::size_t off = (size - 4096) & ~std::size_t{7}; off < size; off += 8) piece(off);
}

void write_block(const block& b) {
  std::memcpy(b.p, &b.id, 8);
  u64 m = meta_word(b) ^ meta_key(b.id);
  std::memcpy(b.p + 8, &m, 8);
  for_each_piece(b.size, b.size, [&](std::size_t off, std::size_t n) {
    u64 w = pattern_word(b.id, off);
    std::memcpy(b.p + off, &w, n);
  });
}

// The first offset below `limit` where b differs from its pattern, or limit.
std::size_t first_mismatch(const block& b, std::size_t limit) {
  std::size_t bad = limit;
  for_each_piece(b.size, limit, [&](std::size_t off, std::size_t n) {
    if (bad != limit) return;
    u64 w = pattern_word(b.id, off);
    if (std::memcmp(b.p + off, &w, n) != 0) bad = off;
  });
  return bad;
}

bool all_zero(const unsigned char* p, std::size_t size) {
  bool zero = true;
  for (std::size_t off = 0; off < 16 && off < size; ++off) zero &= p[off] == 0;
  for_each_piece(size, size, [&](std::size_t off, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) zero &= p[off + i] == 0;
  });
  return zero;
}

// Reads what a block says it is (its first two words); false if they are no
// identity and description of a block (corrupt, or another's).
bool read_block(unsigned char* p, block& b) {
  std::memcpy(&b.id, p, 8);
  u64 m;
  std::memcpy(&m, p + 8, 8);
  m ^= meta_key(b.id);
  b.p = p;
  b.size = m & 0xffffffffffull;
  b.align_log2 = (m >> 40) & 0xff;
  b.how = (m >> 48) & 0xffff;
  return b.size >= 16 && b.size <= kHugeMax + kHugeMax && b.align_log2 <= 16 && b.how < kHows;
}

std::atomic<long> g_huge_live{0};
bool is_huge(std::size_t n) { return n > kLargeMax; }

// The checks every block passes before it is freed or reallocated: its
// identity, its pattern, its alignment, its usable size.
bool check_block(const block& b, const char* when) {
  u64 id;
  std::memcpy(&id, b.p, 8);
  if (id != b.id) {
    fail("%s: block %p of %zu B (%s) holds identity %#llx, expected %#llx: handed out twice or overwritten", when,
         static_cast<void*>(b.p), b.size, kHowNames[b.how], static_cast<unsigned long long>(id),
         static_cast<unsigned long long>(b.id));
    return false;
  }
  u64 m;
  std::memcpy(&m, b.p + 8, 8);
  if ((m ^ meta_key(b.id)) != meta_word(b)) {
    fail("%s: block %p of %zu B (%s): its description word was overwritten", when, static_cast<void*>(b.p), b.size,
         kHowNames[b.how]);
    return false;
  }
  std::size_t bad = first_mismatch(b, b.size);
  if (bad != b.size) {
    fail("%s: block %p of %zu B (%s, id %#llx) corrupt at offset %zu", when, static_cast<void*>(b.p), b.size,
         kHowNames[b.how], static_cast<unsigned long long>(b.id), bad);
    return false;
  }
  if (b.align_log2 && (reinterpret_cast<std::uintptr_t>(b.p) & ((std::uintptr_t{1} << b.align_log2) - 1))) {
    fail("%s: block %p (%s) not aligned to %zu", when, static_cast<void*>(b.p), kHowNames[b.how],
         std::size_t{1} << b.align_log2);
    return false;
  }
  std::size_t usable = malloc_usable_size(b.p);
  if (usable < b.size || (g_secure && usable != b.size)) {
    fail("%s: malloc_usable_size(%p) = %zu for a block of %zu B (%s)", when, static_cast<void*>(b.p), usable, b.size,
         kHowNames[b.how]);
    return false;
  }
  return true;
}

// ---- sizes ---------------------------------------------------------------
// Log-uniform in [lo, hi].
std::size_t log_uniform(rng& r, std::size_t lo, std::size_t hi) {
  unsigned elo = 63 - __builtin_clzll(lo), ehi = 63 - __builtin_clzll(hi);
  unsigned e = elo + static_cast<unsigned>(r.below(ehi - elo + 1));
  std::size_t base = std::size_t{1} << e;
  std::size_t n = base + r.below(base);
  return n < lo ? lo : n > hi ? hi : n;
}

// Mostly small, some large, a few huge (while fewer than kMostHugeLive are).
std::size_t pick_size(rng& r) {
  unsigned k = static_cast<unsigned>(r.below(1000));
  if (k < 8) return kLargeMax + 1 + r.below(kHugeMax - kLargeMax);
  if (k < 14) return kLargeMax - 64 + r.below(128);  // the edge between large and huge
  if (k < 24) return 4096 * (9 + r.below(120)) - 32 + r.below(64);  // large blocks about a page multiple
  if (k < 120) return log_uniform(r, kSmallMax + 1, kLargeMax);
  if (k < 140) return kSmallMax - r.below(64);  // the edge between small and large
  return log_uniform(r, 16, kSmallMax);
}

// ---- the calls -----------------------------------------------------------
struct counts {
  std::atomic<u64> calls[kHows]{};
  std::atomic<u64> hoards{0}, reallocs{0}, foreign_reallocs{0}, handed_frees{0}, sized_frees{0}, trims{0}, threads{0},
      late_callers{0}, huge{0}, large{0};
};
counts g_counts;
std::atomic<u64> g_progress{0};

// A block of about `size` bytes had by one of the calls, its identity
// written; false when the huge budget is spent (nothing had) or on failure.
bool make_block(rng& r, u64 id, std::size_t size, block& b) {
  if (is_huge(size)) {
    if (g_huge_live.fetch_add(1) >= kMostHugeLive) {
      g_huge_live.fetch_sub(1);
      size = log_uniform(r, kSmallMax + 1, kLargeMax);
    } else {
      g_counts.huge.fetch_add(1, std::memory_order_relaxed);
    }
  } else if (size > kSmallMax) {
    g_counts.large.fetch_add(1, std::memory_order_relaxed);
  }
  unsigned how = static_cast<unsigned>(r.below(100));
  how = how < 40 ? by_malloc
      : how < 52 ? by_calloc
      : how < 58 ? by_realloc
      : how < 66 ? by_aligned_alloc
      : how < 74 ? by_posix_memalign
      : how < 78 ? by_memalign
      : how < 88 ? by_new
      : how < 94 ? by_new_array
                 : by_new_aligned;
  unsigned align_log2 = 0;
  if (how == by_aligned_alloc || how == by_posix_memalign || how == by_memalign || how == by_new_aligned)
    align_log2 = 4 + static_cast<unsigned>(r.below(13));  // 16 B to 64 KiB
  std::size_t align = std::size_t{1} << align_log2;
  // Now and then a size whose alignment and canary together are about the
  // small limit (the secure build's header goes before p or at the end).
  if (align_log2 && align < kSmallMax && r.one_in(5) && !is_huge(size)) size = kSmallMax - align - 40 + r.below(64);
  void* p = nullptr;
  errno = 0;
  switch (how) {
    case by_malloc: p = malloc(size); break;
    case by_calloc:
      if (r.one_in(2)) {
        p = calloc(1, size);
      } else {
        size &= ~std::size_t{15};
        p = calloc(size / 16, 16);
      }
      break;
    case by_realloc: p = realloc(nullptr, size); break;
    case by_aligned_alloc: p = aligned_alloc(align, size); break;
    case by_posix_memalign: {
      int e = posix_memalign(&p, align, size);
      if (e != 0) {
        p = nullptr;
        errno = e;
      }
      break;
    }
    case by_memalign: p = memalign(align, size); break;
    case by_new: p = ::operator new(size); break;
    case by_new_array: p = ::operator new[](size); break;
    case by_new_aligned: p = ::operator new(size, std::align_val_t{align}); break;
  }
  g_counts.calls[how].fetch_add(1, std::memory_order_relaxed);
  if (!p) {
    if (is_huge(size)) g_huge_live.fetch_sub(1);
    fail("%s(%zu, alignment %zu) returned NULL, errno %d", kHowNames[how], size, align, errno);
    return false;
  }
  b = {static_cast<unsigned char*>(p), id, size, align_log2, how};
  if (how == by_calloc && !all_zero(b.p, size)) {
    fail("calloc(%zu) returned %p with a byte not zero", size, p);
    return false;
  }
  if (align_log2 && (reinterpret_cast<std::uintptr_t>(p) & (align - 1))) {
    fail("%s(%zu, alignment %zu) returned %p", kHowNames[how], size, align, p);
    return false;
  }
  write_block(b);
  return true;
}

// Frees a checked block the way its call allows, with its size where that
// call has a sized free.
void free_block(rng& r, const block& b) {
  if (!check_block(b, "free")) return;  // not freed: it may be another's
  if (is_huge(b.size)) g_huge_live.fetch_sub(1);
  std::size_t align = std::size_t{1} << b.align_log2;
  bool sized = r.one_in(2);
  if (sized) g_counts.sized_frees.fetch_add(1, std::memory_order_relaxed);
  switch (b.how) {
    case by_malloc:
    case by_calloc:
    case by_realloc:
      if (sized && g_free_sized) return g_free_sized(b.p, b.size);
      return free(b.p);
    case by_aligned_alloc:
      if (sized && g_free_aligned_sized) return g_free_aligned_sized(b.p, align, b.size);
      return free(b.p);
    case by_posix_memalign:
    case by_memalign: return free(b.p);
    case by_new: return sized ? ::operator delete(b.p, b.size) : ::operator delete(b.p);
    case by_new_array: return sized ? ::operator delete[](b.p, b.size) : ::operator delete[](b.p);
    case by_new_aligned:
      return sized ? ::operator delete(b.p, b.size, std::align_val_t{align})
                   : ::operator delete(b.p, std::align_val_t{align});
  }
}

// Reallocates a checked block to a new size (grow or shrink, within its
// range or across), checks what it kept, and writes a new identity over it.
bool realloc_block(rng& r, block& b, u64 new_id) {
  if (!reallocatable(b.how) || !check_block(b, "realloc")) return false;
  std::size_t n;
  switch (r.below(4)) {
    case 0: n = b.size + r.below(b.size / 4 + 16); break;          // grow a little (in place, often)
    case 1: n = b.size - r.below(b.size / 4 + 1); break;           // shrink a little
    case 2: n = b.size > 64 ? b.size / (2 + r.below(64)) : b.size; break;  // shrink much
    default: n = pick_size(r); break;                              // anywhere
  }
  if (n < 16) n = 16;
  if (is_huge(n) && !is_huge(b.size)) {
    if (g_huge_live.fetch_add(1) >= kMostHugeLive) {
      g_huge_live.fetch_sub(1);
      n = log_uniform(r, kSmallMax + 1, kLargeMax);
    }
  }
  if (n > kHugeMax + kHugeMax) n = kHugeMax;
  void* q;
  errno = 0;
  if (r.one_in(4) && n % 16 == 0) q = reallocarray(b.p, n / 16, 16);
  else q = realloc(b.p, n);
  g_counts.reallocs.fetch_add(1, std::memory_order_relaxed);
  if (!q) {
    if (is_huge(n) && !is_huge(b.size)) g_huge_live.fetch_sub(1);
    fail("realloc(%p of %zu B, %zu) returned NULL, errno %d", static_cast<void*>(b.p), b.size, n, errno);
    return false;
  }
  if (is_huge(b.size) && !is_huge(n)) g_huge_live.fetch_sub(1);
  block kept = b;
  kept.p = static_cast<unsigned char*>(q);
  std::size_t limit = n < b.size ? n : b.size;
  u64 id;
  std::memcpy(&id, q, 8);
  if (id != b.id) {
    fail("realloc(%p of %zu B, %zu) = %p: the identity was not kept", static_cast<void*>(b.p), b.size, n, q);
    return false;
  }
  if (std::size_t bad = first_mismatch(kept, limit); bad != limit) {
    fail("realloc(%p of %zu B, %zu) = %p: contents differ at offset %zu of the %zu kept",
         static_cast<void*>(b.p), b.size, n, q, bad, limit);
    return false;
  }
  b = {static_cast<unsigned char*>(q), new_id, n, 0, by_realloc};
  write_block(b);
  return true;
}

// ---- the hand-over table ---------------------------------------------------
std::atomic<u64> g_table[kTable];

u64 tag_of(u64 id) { return mix(id) >> 48; }
u64 table_word(const block& b) { return reinterpret_cast<std::uintptr_t>(b.p) | tag_of(b.id) << 48; }

// A block taken from the table, read back from its own words; false (and a
// failure) when they are not the block the word named.
bool take_word(u64 word, block& b) {
  auto* p = reinterpret_cast<unsigned char*>(word & ((u64{1} << 48) - 1));
  if (!read_block(p, b) || tag_of(b.id) != word >> 48) {
    u64 id;
    std::memcpy(&id, p, 8);
    fail("handed-over block %p holds identity %#llx, not the one it was left with: handed out twice or overwritten",
         static_cast<void*>(p), static_cast<unsigned long long>(id));
    return false;
  }
  return true;
}

// ---- a thread's life -------------------------------------------------------
class churner {
 public:
  churner(u64 serial, u64 seed) : r_(seed ^ serial), serial_(serial) {}
  rng& r() { return r_; }

  u64 next_id() { return serial_ << 32 | (seq_++ & 0xffffffffu); }

  void allocate() {
    if (held_n_ == kMostHeld) free_own();
    block b;
    if (make_block(r_, next_id(), pick_size(r_), b)) held_[held_n_++] = b;
  }

  void free_own() {
    if (held_n_ == 0) return;
    block b = take_held();
    free_block(r_, b);
  }

  void realloc_own() {
    if (held_n_ == 0) return;
    block& b = held_[r_.below(held_n_)];
    if (!reallocatable(b.how)) return;
    realloc_block(r_, b, next_id());
  }

  // Leaves one of ours in the table; what it displaces is kept or freed.
  void leave_one() {
    if (held_n_ == 0) return;
    block b = take_held();
    u64 old = g_table[r_.below(kTable)].exchange(table_word(b), std::memory_order_acq_rel);
    if (old) adopt(old);
  }

  // Takes a block another thread left (it may have exited since): freed,
  // reallocated or kept. False if the few slots looked at were empty.
  bool take_one(bool free_only = false) {
    for (int tries = 0; tries < 8; ++tries)
      if (u64 word = g_table[r_.below(kTable)].exchange(0, std::memory_order_acq_rel)) {
        adopt(word, free_only);
        return true;
      }
    return false;
  }

  // A burst of frees of others' blocks (with a realloc among them).
  void take_burst(bool free_only = false) {
    for (unsigned n = 1 + static_cast<unsigned>(r_.below(24)); n-- > 0;) take_one(free_only);
  }

  // Small blocks of one size had and freed at once: the ring turns over
  // (each free sends out the block freed 64 frees before).
  void ring_turns() {
    std::size_t n = 16 + r_.below(r_.one_in(4) ? kSmallMax : 512);
    for (unsigned k = 8 + static_cast<unsigned>(r_.below(120)); k-- > 0;) {
      auto* p = static_cast<unsigned char*>(malloc(n));
      if (!p) {
        fail("malloc(%zu) returned NULL", n);
        return;
      }
      p[0] = 1;
      p[n - 1] = 2;
      free(p);
    }
  }

  // Zero-size requests (a unique address, in the secure build one in a
  // region no access may touch): freed, sized-freed with 0, or reallocated
  // into a block; and realloc(p, 0) of a held block.
  void zero_sizes() {
    std::size_t align = std::size_t{16} << r_.below(13);
    void* p;
    unsigned k = static_cast<unsigned>(r_.below(6));
    switch (k) {
      case 0: p = malloc(0); break;
      case 1: p = calloc(0, 16); break;
      case 2: p = calloc(16, 0); break;
      case 3: p = realloc(nullptr, 0); break;
      case 4: p = aligned_alloc(align, 0); break;
      default: p = ::operator new(0); break;
    }
    if (!p) return fail("a zero-size request (%u) returned NULL", k);
    if (k == 4 && (reinterpret_cast<std::uintptr_t>(p) & (align - 1)))
      return fail("aligned_alloc(%zu, 0) returned %p", align, p);
    if (k != 5 && r_.one_in(3)) {
      // Into a block of its own.
      std::size_t n = pick_size(r_);
      if (is_huge(n)) n = kSmallMax;
      auto* q = static_cast<unsigned char*>(realloc(p, n));
      if (!q) return fail("realloc(%p of 0 B, %zu) returned NULL", p, n);
      block b{q, next_id(), n, 0, by_realloc};
      write_block(b);
      if (held_n_ < kMostHeld) held_[held_n_++] = b;
      else free_block(r_, b);
      return;
    }
    bool sized = r_.one_in(2);
    switch (k) {
      case 4: return sized ? g_free_aligned_sized(p, align, 0) : free(p);
      case 5: return sized ? ::operator delete(p, std::size_t{0}) : ::operator delete(p);
      default: return sized ? g_free_sized(p, 0) : free(p);
    }
  }

  void realloc_to_zero() {
    if (held_n_ == 0) return;
    std::size_t i = r_.below(held_n_);
    if (!reallocatable(held_[i].how) || !check_block(held_[i], "realloc to 0")) return;
    block b = held_[i];
    held_[i] = held_[--held_n_];
    if (is_huge(b.size)) g_huge_live.fetch_sub(1);
    // tenon frees the block and answers a unique minimal one (NULL is
    // allowed too: the block is freed either way).
    if (void* q = realloc(b.p, 0)) free(q);
  }

  // Past the large blocks' guard budget (4,096 live blocks have guards):
  // about 4,400 live at once, then freed, one in two with its size. Their
  // first and last words are checked (every page is not touched).
  void hoard() {
    constexpr std::size_t kBlocks = 4400;
    g_counts.hoards.fetch_add(1, std::memory_order_relaxed);
    auto** blocks = static_cast<unsigned char**>(malloc(kBlocks * sizeof(void*)));
    auto* sizes = static_cast<std::size_t*>(malloc(kBlocks * sizeof(std::size_t)));
    if (!blocks || !sizes) return fail("malloc of the hoard's arrays");
    u64 id = next_id();
    std::size_t made = 0;
    for (; made < kBlocks && !g_stop.load(std::memory_order_relaxed); ++made) {
      std::size_t n = kSmallMax + 1 + r_.below(3 * 4096);
      auto* p = static_cast<unsigned char*>(malloc(n));
      if (!p) {
        fail("malloc(%zu) returned NULL with %zu blocks of the hoard live", n, made);
        break;
      }
      u64 w = id ^ made;
      std::memcpy(p, &w, 8);
      std::memcpy(p + n - 8, &w, 8);
      blocks[made] = p;
      sizes[made] = n;
      g_progress.fetch_add(1, std::memory_order_relaxed);
    }
    for (std::size_t i = 0; i < made; ++i) {
      u64 w = id ^ i, a, b;
      std::memcpy(&a, blocks[i], 8);
      std::memcpy(&b, blocks[i] + sizes[i] - 8, 8);
      if (a != w || b != w) fail("hoarded block %p of %zu B overwritten", static_cast<void*>(blocks[i]), sizes[i]);
      if (i % 2) g_free_sized(blocks[i], sizes[i]);
      else free(blocks[i]);
    }
    free(sizes);
    free(blocks);
  }

  void step() {
    unsigned k = static_cast<unsigned>(r_.below(100));
    if (k < 34) allocate();
    else if (k < 54) free_own();
    else if (k < 64) realloc_own();
    else if (k < 76) leave_one();
    else if (k < 90) take_one();
    else if (k < 93) take_burst();
    else if (k < 96) ring_turns();
    else if (k < 98) zero_sizes();
    else if (k < 99 && r_.one_in(3)) realloc_to_zero();
    else {
      // A check of a held block without freeing it.
      if (held_n_) check_block(held_[r_.below(held_n_)], "check");
    }
    g_progress.fetch_add(1, std::memory_order_relaxed);
  }

  // The end: everything held freed, or left in the table.
  void finish(bool leave) {
    while (held_n_) leave ? leave_one() : free_own();
  }

  std::size_t held() const { return held_n_; }

 private:
  void adopt(u64 word, bool free_only = false) {
    block b;
    if (!take_word(word, b)) return;
    g_counts.handed_frees.fetch_add(1, std::memory_order_relaxed);
    unsigned k = free_only ? 3 : static_cast<unsigned>(r_.below(4));
    if (k == 0 && reallocatable(b.how)) {
      g_counts.foreign_reallocs.fetch_add(1, std::memory_order_relaxed);
      if (!realloc_block(r_, b, next_id())) return;
      if (held_n_ < kMostHeld) held_[held_n_++] = b;
      else free_block(r_, b);
    } else if (k == 1 && held_n_ < kMostHeld) {
      if (check_block(b, "adopt")) held_[held_n_++] = b;
    } else {
      free_block(r_, b);
    }
  }

  block take_held() {
    std::size_t i = r_.below(held_n_);
    block b = held_[i];
    held_[i] = held_[--held_n_];
    return b;
  }

  rng r_;
  u64 serial_;
  u64 seq_ = 0;
  block held_[kMostHeld];
  std::size_t held_n_ = 0;
};

u64 g_seed;
std::atomic<u64> g_serial{1};

// A key created after the quarantine's (which is made at the first free of
// any thread): its destructor runs after the quarantine's thread-exit hook,
// so its frees find the thread's ring drained and gone (the shared slots).
pthread_key_t g_late_key;

void late_calls(void*) {
  g_counts.late_callers.fetch_add(1, std::memory_order_relaxed);
  churner c(g_serial.fetch_add(1), g_seed);
  for (int k = 0; k < 6; ++k) c.take_one();
  for (int k = 0; k < 4; ++k) c.allocate();
  c.ring_turns();
  c.finish(c.r().one_in(2));
}

// The kinds of short life.
void* short_life(void*) {
  churner c(g_serial.fetch_add(1), g_seed);
  g_counts.threads.fetch_add(1, std::memory_order_relaxed);
  if (c.r().one_in(6)) pthread_setspecific(g_late_key, &c);
  unsigned kind = static_cast<unsigned>(c.r().below(100));
  static std::atomic<bool> hoarding{false};
  if (kind < 2 && !hoarding.exchange(true)) {
    c.hoard();
    hoarding.store(false);
  } else if (kind < 10) {
    c.take_one(true);  // a first and only call, a free: the ring is made, and drained at once
  } else if (kind < 25) {
    c.take_burst(true);  // a consumer: exits with the ring full of others' blocks
    c.take_burst(true);
  } else if (kind < 40) {
    // A producer: allocates, leaves most for others, frees the rest.
    for (unsigned n = 1 + static_cast<unsigned>(c.r().below(40)); n-- > 0;) c.allocate();
    c.finish(c.r().below(4) != 0);
  } else {
    unsigned steps = 20 + static_cast<unsigned>(c.r().below(1500));
    while (steps-- > 0 && !g_stop.load(std::memory_order_relaxed)) c.step();
  }
  c.finish(c.r().one_in(3));
  return nullptr;
}

void* long_life(void*) {
  churner c(g_serial.fetch_add(1), g_seed);
  while (!g_stop.load(std::memory_order_relaxed)) c.step();
  c.finish(false);
  return nullptr;
}

// malloc_trim beside everything else (the shared slots, this thread's ring,
// the engine's caches), and the statistics read.
void* trimmer(void*) {
  rng r(g_seed ^ 0x7431);
  while (!g_stop.load(std::memory_order_relaxed)) {
    timespec pause{0, static_cast<long>(1000000 + r.below(20000000))};
    nanosleep(&pause, nullptr);
    malloc_trim(r.one_in(4) ? r.below(1 << 20) : 0);
    g_counts.trims.fetch_add(1, std::memory_order_relaxed);
    if (r.one_in(4)) {
      struct mallinfo2 mi = mallinfo2();
      asm volatile("" : : "r"(mi.uordblks) : "memory");
    }
  }
  return nullptr;
}


// ---- the run -------------------------------------------------------------
double soak_seconds() {
  const char* s = getenv("TENON_TEST_SOAK_SECONDS");
  return s && atof(s) > 0 ? atof(s) : 10.0;
}

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::size_t resident_bytes() {
  long pages = 0, rss = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return static_cast<std::size_t>(rss) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Stops a run that stopped moving (a hang inside the allocator): no step by
// any thread for 30 s, or the end not reached 120 s past the deadline.
std::atomic<bool> g_done{false};
double g_deadline;
void* watchdog(void*) {
  u64 last = g_progress.load();
  double last_move = now();
  while (!g_done.load()) {
    sleep(1);
    u64 p = g_progress.load();
    if (p != last) {
      last = p;
      last_move = now();
    }
    if ((now() - last_move > 30 && !g_stop.load()) || now() > g_deadline + 120) {
      fprintf(stderr, "FAILED: no progress for 30 s, or no end 120 s past the deadline: a hang (%llu steps)\n",
              static_cast<unsigned long long>(p));
      abort();
    }
  }
  return nullptr;
}

bool start(pthread_t* t, void* (*f)(void*)) {
  int e = pthread_create(t, nullptr, f, nullptr);
  if (e != 0) fail("pthread_create: %s", strerror(e));
  return e == 0;
}

// Every block left in the table freed by a thread that then exits.
void* sweep(void*) {
  churner c(g_serial.fetch_add(1), g_seed);
  for (auto& slot : g_table)
    if (u64 word = slot.exchange(0, std::memory_order_acq_rel)) {
      block b;
      if (take_word(word, b)) free_block(c.r(), b);
    }
  malloc_trim(0);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  g_secure = argc > 1 && strcmp(argv[1], "secure") == 0;
  // Under the library: its malloc_info names it.
  {
    char* text = nullptr;
    std::size_t len = 0;
    FILE* f = open_memstream(&text, &len);
    if (!f || malloc_info(0, f) != 0) {
      fprintf(stderr, "FAILED: malloc_info\n");
      return 1;
    }
    fclose(f);
    bool tenon = text && strstr(text, "allocator=\"tenon\"");
    free(text);
    if (!tenon) {
      fprintf(stderr, "FAILED: malloc is not tenon's: run under LD_PRELOAD=libtenon-secure.so (or libtenon.so)\n");
      return 1;
    }
  }
  g_free_sized = reinterpret_cast<free_sized_fn>(dlsym(RTLD_DEFAULT, "free_sized"));
  g_free_aligned_sized = reinterpret_cast<free_aligned_sized_fn>(dlsym(RTLD_DEFAULT, "free_aligned_sized"));
  if (!g_free_sized || !g_free_aligned_sized) {
    fprintf(stderr, "FAILED: free_sized or free_aligned_sized not found in the preloaded library\n");
    return 1;
  }
  using inject_hook = void (*)(const char*);
  auto set_hook = reinterpret_cast<void (*)(inject_hook)>(dlsym(RTLD_DEFAULT, "tenon_inject_set_hook"));
  // In a library built with -DTENON_INJECT=ON: stalls at its injection points.
  if (set_hook) set_hook(tenon_test::stall_sometimes);
  g_seed = static_cast<u64>(time(nullptr)) ^ static_cast<u64>(getpid()) << 32;
  if (const char* s = getenv("TENON_TEST_SEED")) g_seed = strtoull(s, nullptr, 0);
  double seconds = soak_seconds();
  auto threads = [](const char* name, unsigned fallback) {
    const char* v = getenv(name);
    unsigned n = v ? static_cast<unsigned>(atoi(v)) : fallback;
    return n < 1 ? 1 : n > kMostThreads ? kMostThreads : n;
  };
  g_long_threads = threads("TENON_TEST_LONG_THREADS", g_long_threads);
  g_short_live = threads("TENON_TEST_SHORT_THREADS", g_short_live);
  printf("preload churn: seed %llu (TENON_TEST_SEED), %.0f s (TENON_TEST_SOAK_SECONDS)%s%s\n",
         static_cast<unsigned long long>(g_seed), seconds, g_secure ? ", secure" : "",
         set_hook ? ", stalls at the injection points" : "");
  fflush(stdout);

  // The quarantine's key exists once a thread has freed; ours comes after.
  {
    pthread_t t;
    if (!start(&t, [](void*) -> void* {
          free(malloc(64));
          return nullptr;
        }))
      return 1;
    pthread_join(t, nullptr);
    if (pthread_key_create(&g_late_key, late_calls) != 0) {
      fprintf(stderr, "FAILED: pthread_key_create\n");
      return 1;
    }
  }
  malloc_trim(0);
  struct mallinfo2 before = mallinfo2();
  std::size_t rss_before = resident_bytes();

  double t0 = now();
  g_deadline = t0 + seconds;
  pthread_t dog, trim, longs[kMostThreads], shorts[kMostThreads];
  bool running[kMostThreads] = {};
  if (!start(&dog, watchdog) || !start(&trim, trimmer)) return 1;
  for (unsigned i = 0; i < g_long_threads; ++i)
    if (!start(&longs[i], long_life)) return 1;
  u64 short_threads = 0;
  while (now() < g_deadline && !g_stop.load()) {
    bool started = false;
    for (unsigned i = 0; i < g_short_live; ++i) {
      if (running[i]) {
        if (pthread_tryjoin_np(shorts[i], nullptr) != 0) continue;
        running[i] = false;
      }
      running[i] = start(&shorts[i], short_life);
      short_threads += running[i];
      started = true;
    }
    if (!started) usleep(200);
  }
  g_stop.store(true);
  for (unsigned i = 0; i < g_short_live; ++i)
    if (running[i]) pthread_join(shorts[i], nullptr);
  for (unsigned i = 0; i < g_long_threads; ++i) pthread_join(longs[i], nullptr);
  pthread_join(trim, nullptr);
  pthread_t sweeper;
  if (start(&sweeper, sweep)) pthread_join(sweeper, nullptr);
  double elapsed = now() - t0;
  std::size_t rss_end_before_trim = resident_bytes();
  malloc_trim(0);
  struct mallinfo2 after = mallinfo2();
  std::size_t rss_after = resident_bytes();
  g_done.store(true);
  pthread_join(dog, nullptr);

  printf("preload churn: %.1f s, %llu short threads (%llu called after their exit hook), %llu steps\n", elapsed,
         static_cast<unsigned long long>(short_threads), static_cast<unsigned long long>(g_counts.late_callers.load()),
         static_cast<unsigned long long>(g_progress.load()));
  printf("  calls:");
  for (unsigned h = 0; h < kHows; ++h)
    printf(" %s %llu", kHowNames[h], static_cast<unsigned long long>(g_counts.calls[h].load()));
  printf("\n  large %llu, huge %llu, reallocs %llu (%llu of another thread's block), %llu taken from another, "
         "%llu sized frees, %llu trims, %llu hoards of 4,400 large blocks\n",
         static_cast<unsigned long long>(g_counts.large.load()), static_cast<unsigned long long>(g_counts.huge.load()),
         static_cast<unsigned long long>(g_counts.reallocs.load()),
         static_cast<unsigned long long>(g_counts.foreign_reallocs.load()),
         static_cast<unsigned long long>(g_counts.handed_frees.load()),
         static_cast<unsigned long long>(g_counts.sized_frees.load()),
         static_cast<unsigned long long>(g_counts.trims.load()),
         static_cast<unsigned long long>(g_counts.hoards.load()));
  printf("  in use: %zu B and %zu huge blocks at the start, %zu B and %zu at the end; RSS %zu MiB at the start, "
         "%zu MiB at the end (%zu before the last trim)\n",
         before.uordblks, before.hblks, after.uordblks, after.hblks, rss_before >> 20, rss_after >> 20,
         rss_end_before_trim >> 20);
  if (g_failures.load() != 0) {
    fprintf(stderr, "FAILED: %ld failures (the first above)\n", g_failures.load());
    return 1;
  }
  // Nothing lost: every block freed and every thread gone, the bytes in use
  // are those of the start, but for what glibc keeps for threads that ended
  // (a cached stack's thread-local storage vector, a few hundred bytes).
  int bad = 0;
  if (after.uordblks > before.uordblks + 16384) {
    fprintf(stderr, "FAILED: %zu B in use at the end against %zu at the start: blocks freed but never given back\n",
            after.uordblks, before.uordblks);
    ++bad;
  }
  if (after.hblks != before.hblks || after.hblkhd != before.hblkhd) {
    fprintf(stderr, "FAILED: %zu huge blocks (%zu B) in use at the end against %zu (%zu B) at the start\n",
            after.hblks, after.hblkhd, before.hblks, before.hblkhd);
    ++bad;
  }
  if (rss_after > rss_before + (std::size_t{96} << 20)) {
    fprintf(stderr, "FAILED: RSS %zu MiB at the end against %zu MiB at the start (trimmed)\n", rss_after >> 20,
            rss_before >> 20);
    ++bad;
  }
  return bad ? 1 : 0;
}
