// Secure layers: canary<Inner>, a layer that pads every block and checks it.
//
// Each block gets a 16-byte header before it and an 8-byte canary right after
// the size asked for:
//
//   inner block: [ size | tag ][ user's n bytes ][ canary ]...
//                             ^ p (what the program gets)
//
// `tag` is the block's key (secret.h, mixed with p) XOR the distance from the
// inner block to p (16, or the alignment of an aligned block) and a freed
// bit; `canary` is another key of p. On free (and sized free, realloc,
// malloc_usable_size) the tag must decode to a live block: a pointer that is
// not a block start (interior, unaligned, never handed out, the pointer
// `delete` gets for a new[]'d array) or whose header was overwritten
// (underflow from the block before) fails, and so does a block whose freed
// bit is set (double free, while the block waits in quarantine) or, past the
// quarantine, one the engine's metadata says is free (freed_since,
// large_freed: reported as a double free too). The canary
// catches overflows of 1 byte and more past the size asked for (usable size
// is exactly that size), sized frees check the size. Every failure is one
// report_misuse line and SIGABRT.
//
// A block that is the start of a large or huge block of Inner's (above the
// small classes; in guarded configs the engine puts a guard page before
// both) keeps its header at the end instead, in the last 16 bytes of Inner's
// block, so that the 8 bytes before p are the guard page and an underflow
// faults at the access:
//
//   large or huge inner block: [ user's n bytes ][ canary ]...[ size | tag ]
//                              ^ p                           (Inner's usable end)
//
// Which layout a pointer has is told by p alone: only a page-aligned p is
// looked up (is it a large span's block start, or a huge block's?), at its
// allocation and at every check, so both agree. An aligned allocation that
// would need a large or huge block of Inner's with the header before p (its
// size, alignment and canary together past the small classes) is that
// block's start instead; any other aligned allocation's p is past its inner
// (small) block's start and keeps the header before it, and a copy of it in
// the inner block's first 16 bytes (seal_behind: a quarantine below zeroes
// the header itself while the block waits). So over tenon's engines (a
// large block starts its span, a huge one is found by its start) no header
// is in a large inner block's first page. An inner quarantine closes the
// whole block while it waits, end header included, and marks its span
// (waits_in_quarantine): the checks read that mark before the header.
//
// A freed huge block waits in Inner's huge cache closed (huge_detail.h), its
// header at the end with it: a second free or a check reads the huge
// header's freed mark instead (the header page stays open).
//
// Pointers that are not in tenon's memory (foreign: handed out by glibc
// before tenon was loaded) pass through untouched.
#pragma once
#include <errno.h>
#include <stdint.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenon/common/config.h"
#include "tenon/common/inject.h"
#include "tenon/frontend/foreign.h"
#include "tenon/huge/huge.h"
#include "tenon/layer.hpp"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/platform/misuse.h"
#include "tenon/secure/secret.h"

namespace tenon::secure {

// The tag's top 24 bits hold a check of the size word, so that an
// overwritten size is caught before the canary is looked for behind it.
inline std::uint64_t header_size_check(std::uint64_t n) { return ((n * 0x9e3779b97f4a7c15ull) >> 40) << 40; }

// Where the program's bytes begin in an inner (small) block q of n bytes
// that the canary sealed, for a quarantine below it (its Layout, layers.hpp):
// `align` bytes in for an aligned block, whose first 16 bytes hold the copy
// of its header (seal_behind) naming p = q + align, which the quarantine
// keeps; else 0. A plain block's freed header (p = q + 16, its freed bit
// set) is told first, with one key; else each power of two up to n that q
// is aligned to is tried.
struct canary_layout {
  [[gnu::noinline]] static std::size_t data_offset(const unsigned char* q, std::size_t n) {
    std::uint64_t copy[2];
    std::memcpy(copy, q, sizeof copy);
    if ((copy[1] ^ key_for(q + 16)) == ((std::uint64_t{16} << 1) | 1)) return 0;  // | 1: the freed bit
    auto at = reinterpret_cast<std::uintptr_t>(q);
    for (std::size_t d = 32; d < n; d <<= 1) {
      if (at & (d - 1)) break;  // q is not aligned to d, nor to any larger power
      if ((copy[1] ^ key_for(q + d) ^ header_size_check(copy[0])) == std::uint64_t{d} << 1) return d;
    }
    return 0;
  }
};

template <layer Inner>
struct canary : pass_through<Inner> {
  static constexpr std::size_t kHeader = 16;
  static constexpr std::size_t kTail = 8;
  static constexpr std::uint64_t kFreed = 1;

  // malloc and operator new pass n on unchecked (layer.hpp): a size past
  // PTRDIFF_MAX would wrap to a tiny block once the header and canary are
  // added. The test is here, in line, so that in a stack whose outer layer
  // has refused such sizes already (zero_size's one signed test) it folds
  // away; the block itself is made out of line, as before.
  static void* alloc(std::size_t n) noexcept {
    if (__builtin_expect(n > kMaxRequest, 0)) return refuse();
    return alloc_fitting(n);
  }

  // A request Inner serves as a large or huge block (past the small classes
  // in size or alignment) is given that block itself, its header at the end
  // like alloc's: with the header before p, an alignment past a page put it
  // on a page of the inner block that the quarantine or the huge cache
  // closes while the block waits, where a second free could not read it
  // (SIGSEGV instead of the report), the underflow guard was `align` bytes
  // away, and at 4 MiB alignment p was past the unit where the huge block is
  // known (free did not find it). Inner's answer is checked (the layout
  // below if it is not such a block).
  // A request whose inner block (n, the alignment and the canary) would pass
  // PTRDIFF_MAX is refused: no block can be that big, and Inner is not asked
  // for one (the layer contract).
  // The layout with the header before p asks Inner for n + align + kTail
  // bytes: past the small classes, that is a large block too, so it is
  // decided on that sum, not on n + kHeader + kTail (until 2026-11-27: a
  // 16 KiB alignment of 20,000 bytes, or 32 KiB of 1,000, had its header
  // on a page the quarantine closes, and a double free ended by SIGSEGV).
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    if (align <= kHeader) return alloc(n);
    if (n > kMaxRequest - kTail || align > kMaxRequest - kTail - n) return refuse();
    if (n + align + kTail > kMaxSmall) return alloc_aligned_start(align, n);
    return alloc_aligned_behind(align, n);
  }

  static void dealloc(void* p) noexcept {
    if (!p) return;
    if (!ours(p)) return Inner::dealloc(p);
    give_back(static_cast<char*>(p), "free", nullptr);
  }

  static void dealloc_sized(void* p, std::size_t n) noexcept {
    if (!p) return;
    if (!ours(p)) return Inner::dealloc(p);
    give_back(static_cast<char*>(p), "free_sized", &n);
  }

  static void dealloc_aligned_sized(void* p, std::size_t, std::size_t n) noexcept {
    if (!p) return;
    if (!ours(p)) return Inner::dealloc(p);
    give_back(static_cast<char*>(p), "free_aligned_sized", &n);
  }

  // Touches no block: the inner layers' trim (the quarantine's) applies.
  static int trim(std::size_t pad) noexcept { return layer_ops<Inner>::trim(pad); }

  // p is checked before the new block is had, under realloc's name. The
  // layers' generic realloc (alloc, then malloc_usable_size's check, copy,
  // free) named malloc_usable_size in its reports, and its alloc could take
  // back the very block p named when p was a freed huge block waiting in the
  // huge cache: realloc then "copied" it onto itself, freed it, and returned
  // it freed (until 2026-11-27). Out of line: no caller's fast path.
  // A huge block that stays huge is resized by Inner (in place, or its
  // pages moved by mremap) and sealed again: copied, every page of the new
  // block was written, untouched ones too (SecureHuge.ReallocOfUntouched...,
  // until 2026-11-27: 16 blocks of 3 MiB grown to 6 MiB made 48 MiB
  // resident, against 64 KiB without the secure layers).
  // A huge block is held while it is read (realloc_held).
  [[gnu::noinline]] static void* realloc(void* p, std::size_t n) noexcept {
    if (!ours(p)) return realloc_foreign(p, n);
    if (huge_start(p)) return realloc_held(static_cast<char*>(p), n);
    std::size_t old = realloc_checked(static_cast<const char*>(p));
    void* q = alloc(n);
    if (!q) return nullptr;
    std::memcpy(q, p, old < n ? old : n);
    realloc_give_back(static_cast<char*>(p));
    return q;
  }

  static std::size_t usable_size(const void* p) noexcept {
    if (!p) return 0;
    if (!ours(p)) return Inner::usable_size(p);
    if (__builtin_expect((reinterpret_cast<std::uintptr_t>(p) & 4095) == 0, 0) && huge_start(p))
      return huge_usable_size(static_cast<const char*>(p));
    return check_block(static_cast<const char*>(p), "malloc_usable_size").size;
  }

 private:
  struct header {
    std::uint64_t size;
    std::uint64_t tag;
  };
  struct opened {
    std::size_t size;
    std::size_t offset;
    std::uint64_t key;
    char* header;
  };

  // What a second free (or a realloc) of a freed block is called; a block
  // already freed given to malloc_usable_size is no second free.
  static constexpr const char* freed_twice(const char* op) {
    return op[0] != 'm' ? "double free" : "block already freed";
  }

  // realloc's check and free, out of line: in line in realloc, the free
  // path's inlining moved (the secure malloc(32)+free pair 273 -> 283).
  [[gnu::noinline]] static std::size_t realloc_checked(const char* p) { return check_block(p, "realloc").size; }
  [[gnu::noinline]] static void realloc_give_back(char* p) { give_back(p, "realloc", nullptr); }

  // p, a live huge block (checked) taken by this call (take_huge gave
  // `usable`), resized to n past kMaxLarge: Inner keeps it huge, its header
  // at its new end (alloc_fitting's layout for a block that starts Inner's),
  // the canary after n. Handed to Inner still taken where Inner can take it
  // so (realloc_taken: the quarantine over tenon's engine); until
  // 2026-11-29 (branch usize) it was given back first and Inner's realloc
  // took it again: a free between that unmapped it left no block at p, and
  // the report said "free(p): invalid pointer" for realloc's double free
  // (RacingFrees.HugeBlockReallocHeldWhileAFreeUnmapsIt); had p's place been
  // handed out again, the new block would have been resized. Any other
  // Inner gets it back first, as then. Inner's answer on failure is
  // realloc's: NULL with ENOMEM, p as it was, given back.
  static void* realloc_huge(huge_header* h, char* p, std::size_t usable, std::size_t n) noexcept {
    void* q;
    std::size_t inner = n + kHeader + kTail;
    if constexpr (requires { Inner::realloc_taken(h, static_cast<void*>(p), inner, usable); }) {
      q = Inner::realloc_taken(h, p, inner, usable);
    } else {
      huge_release(h, usable);
      q = layer_ops<Inner>::realloc(p, inner);
    }
    return q ? seal(static_cast<char*>(q), n, 0) : nullptr;
  }

  // realloc of huge block p, taken (take_huge): checked and, moved to a
  // block that is not huge, copied while held. Until 2026-11-29 its check read
  // the header and the copy read the block with nothing held: a free racing
  // it put the block in the huge cache, which closes its pages, and the copy
  // ended by SIGSEGV (RacingFrees.HugeBlockReallocAndFreeAtOnce). A huge
  // size goes to Inner's realloc still taken (realloc_huge).
  [[gnu::noinline]] static void* realloc_held(char* p, std::size_t n) noexcept {
    std::size_t usable;
    huge_header* h = take_huge(p, "realloc", &usable);
    opened o = check_at(p, p + usable - kHeader, "realloc");
    if (n > kMaxLarge && n <= kMaxRequest - kHeader - kTail) {
      TENON_INJECT_POINT("canary.realloc_huge");
      return realloc_huge(h, p, usable, n);
    }
    void* q = alloc(n);
    if (q) {
      std::memcpy(q, p, o.size < n ? o.size : n);
      mark_freed(o);
    }
    huge_release(h, usable);  // a free that takes it now reads the freed tag
    if (q) Inner::dealloc(p);
    return q;
  }

  // A pointer not in tenon's memory is answered as the default build answers
  // it (docs/api.md, foreign::plan_resize): a glibc block that n fits stays
  // p itself (until 2026-11-29 every glibc block moved to a new block, as
  // the generic realloc moves); a bigger n moves it; any other pointer (no
  // glibc header before it) is NULL with EINVAL and p left alone, where the
  // generic realloc allocated and then ended the program in the free of p
  // (until 2026-11-27), except a pointer with nothing mapped before it,
  // reported as this build's free reports it: most often a huge block freed
  // and unmapped past its purge delay (the lead's decision, 2026-11-29,
  // branch usw; NULL with EINVAL before, as the default build still
  // answers: SecureDetects.ReallocOfFreedHugeBlockPastItsPurge).
  [[gnu::noinline]] static void* realloc_foreign(void* p, std::size_t n) noexcept {
    std::size_t old = 0;
    switch (foreign::plan_resize(p, n, &old)) {
      case foreign::resize::stay: return p;
      case foreign::resize::invalid: errno = EINVAL; return nullptr;
      case foreign::resize::nothing_mapped: report_misuse("realloc", p, foreign::kNothingMapped, 0);
      case foreign::resize::move: break;
    }
    void* q = alloc(n);
    if (!q) return nullptr;
    std::memcpy(q, p, old < n ? old : n);
    Inner::dealloc(p);
    return q;
  }

  // is_regular first, in line: the common case of in_chunk without its call.
  // Always in line: on the free path (secret.h says why).
  [[gnu::always_inline]] static bool ours(const void* p) {
    return lookup::is_regular(p) || lookup::in_chunk(p) || huge_lookup(p) || huge_contains(p);
  }

  // The canary after the block, from the block's key (one key computed per
  // call).
  static std::uint64_t tail_of(std::uint64_t key) { return ~key; }

  static std::uint64_t size_check(std::uint64_t n) { return header_size_check(n); }

  // The largest n a block can be asked for (the C standard's PTRDIFF_MAX):
  // n plus the header and canary, or plus an alignment, stays below SIZE_MAX.
  static constexpr std::size_t kMaxRequest = static_cast<std::size_t>(PTRDIFF_MAX);

  [[gnu::cold, gnu::noinline]] static void* refuse() noexcept {
    errno = ENOMEM;
    return nullptr;
  }

  // alloc's block, n at most kMaxRequest. Out of line, as alloc was before
  // its test moved in front: inlined into alloc's callers, it used up GCC's
  // growth budget for the unit, and check_block was no longer inlined into
  // free (273 -> 310 instructions a malloc(32)+free pair).
  [[gnu::noinline]] static void* alloc_fitting(std::size_t n) noexcept {
    auto* q = static_cast<char*>(Inner::alloc(n + kHeader + kTail));
    if (!q) return nullptr;
    if (__builtin_expect((reinterpret_cast<std::uintptr_t>(q) & 4095) == 0, 0) && starts_inner_block(q))
      return seal(q, n, 0);
    return seal(q + kHeader, n, kHeader);
  }

  // Out of line: inlined, it changed GCC's choices for the whole layer
  // (check_block was no longer inlined into free: 273 -> 300 instructions a
  // malloc(32)+free pair).
  // Asked for one byte past the small classes at least: a block the header
  // would not fit before (above) must be a large one, not a small block that
  // a class of the alignment happens to serve.
  [[gnu::noinline]] static void* alloc_aligned_start(std::size_t align, std::size_t n) noexcept {
    std::size_t need = n + kHeader + kTail;
    auto* q = static_cast<char*>(Inner::alloc_aligned(align, need > kMaxSmall ? need : kMaxSmall + 1));
    if (!q) return nullptr;
    if (starts_inner_block(q)) return seal(q, n, 0);
    Inner::dealloc(q);
    return alloc_aligned_behind(align, n);
  }

  // An aligned block whose header sits in front of p, in the inner block's
  // first `align` bytes.
  static void* alloc_aligned_behind(std::size_t align, std::size_t n) noexcept {
    auto* q = static_cast<char*>(Inner::alloc_aligned(align, n + align + kTail));
    return q ? seal_behind(q, n, align) : nullptr;
  }

  // The header goes in front of p = q + align, and a copy of it in the
  // inner block's first 16 bytes, which an inner quarantine keeps while the
  // block waits (its kKept) where it zeroes the header itself (align below
  // its 4 KiB): a second free then finds the header zero and the copy
  // naming p, a double free (freed_since). Out of line, as the other
  // aligned paths: no instruction on malloc's.
  [[gnu::noinline]] static void* seal_behind(char* q, std::size_t n, std::size_t align) {
    auto* p = static_cast<char*>(seal(q + align, n, align));
    std::memcpy(q, p - kHeader, kHeader);
    return p;
  }

  // Whether p, whose header failed its check, is a block freed since, by
  // what the layers below left of it (over tenon's engines; any other Inner
  // has no chunks, and this says no):
  //  - an aligned block (seal_behind) waiting in an inner quarantine: its
  //    header reads zero (the quarantine zeroed it) and the first 16 bytes
  //    of its inner block hold the copy of a header for p at p's offset;
  //  - any small block past the quarantine, on the engine's free list
  //    (freed_inner_block).
  // A live block's header is never zero; one the program overwrote with 16
  // zero bytes reads as freed. (A large block's is decided before its
  // header is read: aligned_header_of.)
  [[gnu::noinline]] static bool freed_since(const char* p) {
    if (!(lookup::is_regular(p) || lookup::in_chunk(p))) return false;
    const span* s = lookup::span_of(p);
    if (s->kind != span_kind::small || s->block_size == 0 || p < s->start) return false;
    auto offset = static_cast<std::size_t>(p - s->start);
    if (offset / s->block_size >= s->capacity) return false;
    std::size_t d = offset % s->block_size;
    if (d < kHeader) return false;
    if (d > kHeader) {
      header h, copy;
      std::memcpy(&h, p - kHeader, sizeof h);
      // A non-zero header may still be a freed block's: past the quarantine
      // a remote batch writes its prefetch pointer into the inner block's
      // third word, the size word of a 32-aligned block's header (the
      // engine's key, asked below, tells; "invalid pointer" until
      // 2026-11-27, seventh session).
      std::memcpy(&copy, p - d, sizeof copy);
      if (!(h.size | h.tag) && (copy.tag ^ key_for(p) ^ size_check(copy.size)) == std::uint64_t{d} << 1) return true;
    }
    return freed_inner_block(p, d);
  }

  // Past the quarantine, the inner block q = p - d is on the engine's free
  // list (or its block cache): its first word a link, its second the
  // engine's free key (free_key.h: a random word that no block a program
  // owns holds), where the canary's header (d = 16: the header is q's
  // first 16 bytes) or the copy of an aligned block's (d > 16, whose header
  // in front of p stays zero: the engine writes the first 16 bytes only)
  // had been. p at an alignment's offset into it, and aligned to it, is the
  // pointer a block there was handed out as (until 2026-11-27, fifth
  // session, all such second frees said "invalid pointer"). Where the
  // engine keeps no key (a block its owner took back through the remote
  // list, one handed out again, a span given back) this says no: invalid
  // pointer. A pointer the program made at such an offset into a free block
  // reads the same, and is reported as a double free too, as libtenon.so
  // reports a pointer to a carved block it never handed out.
  static bool freed_inner_block(const char* p, std::size_t d) {
    if ((d & (d - 1)) != 0 || (reinterpret_cast<std::uintptr_t>(p) & (d - 1)) != 0) return false;
    std::uint64_t second;
    std::memcpy(&second, p - d + 8, sizeof second);
    return second == free_key();
  }

  // The bits of a decoded tag that a live block's header has clear: the
  // size check's and the freed bit.
  static constexpr std::uint64_t kHeaderBad = (~std::uint64_t{0} << 40) | kFreed;

  // check_block's header h of p (key: p's) that failed the one test: which
  // misuse it is, in the order the questions were asked in line until
  // 2026-11-27 (sixth session). A freed block's size word is the free-list
  // link, so its freed bit is asked for before the size check.
  [[noreturn, gnu::cold, gnu::noinline]] static void report_header(const char* op, const char* p, header h,
                                                                   std::uint64_t key) {
    std::uint64_t x = h.tag ^ key;
    if ((x & ~kFreed) >> 40 == 0 && (x & kFreed)) report_misuse(op, p, freed_twice(op), 0);
    x ^= size_check(h.size);
    if (x >> 40) report_bad_header(op, p);
    report_misuse(op, p, freed_twice(op), 0);  // the freed bit
  }

  // A header that fails its check: a double free when freed_since says so,
  // else a pointer that is no block start (or whose header was overwritten).
  // Called as report_misuse is (op, p first): other arguments changed the
  // free path's registers (the secure malloc(32)+free pair 273 -> 277).
  [[noreturn, gnu::cold, gnu::noinline]] static void report_bad_header(const char* op, const char* p) {
    if (freed_since(p)) report_misuse(op, p, freed_twice(op), 0);
    report_misuse(op, p, "invalid pointer (not the start of a block, or its header overwritten)", 0);
  }

  // Whether p starts a large block of Inner's (a page-aligned block start
  // of a large span) or a huge one: its header is at the end (above). p is
  // a multiple of 8: is_regular first, in line, as ours() does (GCC stopped
  // inlining in_chunk into alloc_fitting on branch hugeread: the secure
  // pair 284.26 -> 284.35).
  static bool starts_inner_block(const void* p) {
    return lookup::is_regular(p) || lookup::in_chunk(p) ? starts_large_span(p) : starts_huge_block(p);
  }
  static bool starts_large_span(const void* p) {
    const span* s = lookup::span_of(p);
    return s->kind == span_kind::large && s->free == p;
  }
  // Whether the large block a span still names was freed: waiting in an
  // inner quarantine (the span's mark: quarantine.hpp; its header is
  // unreadable while the block waits closed), or past it, given back to the engine, which
  // counts no block live in the span any more (its header is in a run the
  // arena may hand out or purge: until 2026-11-27, fifth session, it was
  // read, and the report said "invalid pointer").
  static bool large_freed(const span* s) {
    return s->waits_in_quarantine.load(std::memory_order_relaxed) || s->used_any_thread() == 0;
  }
  // Out of line: the small blocks' page-aligned path stays as it was.
  [[gnu::noinline]] static bool starts_huge_block(const void* p) { return huge_lookup(p) != nullptr; }

  // Where the header of p is, checked by op: the 16 bytes before p, or the
  // last 16 of a large or huge inner block that p starts. Only a pointer
  // 4 KiB aligned (no page is smaller) is looked up, out of line: one test
  // and branch for the others.
  static char* header_of(const char* p, const char* op) {
    if (__builtin_expect((reinterpret_cast<std::uintptr_t>(p) & 4095) == 0, 0)) return aligned_header_of(p, op);
    return const_cast<char*>(p) - kHeader;
  }
  [[gnu::noinline]] static char* aligned_header_of(const char* p, const char* op) {
    if (lookup::in_chunk(p)) {
      if (starts_large_span(p)) {
        if (large_freed(lookup::span_of(p))) report_misuse(op, p, freed_twice(op), 0);
        return end_header_of(p);
      }
    } else if (const huge_header* h = huge_lookup(p)) {
      // Freed, its end is closed (or no longer its end): the huge header says.
      // Its usable size read once, for the test and the header's place: a
      // free racing this one may take it to 0 between two reads (the
      // engine's claim, huge_maps::free), and the second would then place
      // the header before p, in the head guard (a fault, not the report).
      // No call reads a huge block's start here any more: free and realloc
      // hold the block first (give_back_huge, realloc_held), and
      // malloc_usable_size reads it as a counted reader (huge_usable_size),
      // each once huge_start has found it; only a block mapped at p since
      // (p was no block of the program's) comes here.
      std::size_t usable = huge_usable(h);
      if (usable == 0) report_misuse(op, p, freed_twice(op), 0);
      return const_cast<char*>(p) + usable - kHeader;
    }
    return const_cast<char*>(p) - kHeader;
  }
  // The header of a block that starts Inner's (offset 0): at its end. Seal
  // calls it, not header_of: with header_of's lookup in it, GCC stopped
  // inlining seal into alloc (the secure malloc(32)+free pair 273 -> 300).
  [[gnu::noinline]] static char* end_header_of(const char* p) {
    return const_cast<char*>(p) + Inner::usable_size(p) - kHeader;
  }

  static void* seal(char* p, std::size_t n, std::size_t offset) {
    std::uint64_t key = key_for(p);
    header h{n, key ^ (std::uint64_t{offset} << 1) ^ size_check(n)};
    std::memcpy(offset ? p - kHeader : end_header_of(p), &h, sizeof h);
    std::uint64_t t = tail_of(key);
    std::memcpy(p + n, &t, sizeof t);
    return p;
  }

  // The header of p, checked; ends the program unless p is a live block.
  // Always in line, as give_back: on the free path (secret.h says why).
  // A live block's header passes one test (its size check and freed bit
  // together); any other is told apart out of line (report_header), where
  // the order of the questions decides the report. The canary is read only
  // after the header passed: a bad size could point anywhere.
  [[gnu::always_inline]] static opened check_block(const char* p, const char* op) {
    if (reinterpret_cast<std::uintptr_t>(p) & 15) report_misuse(op, p, "invalid pointer (not the start of a block)", 0);
    return check_at(p, header_of(p, op), op);
  }
  // check_block's test of the header at `at`.
  [[gnu::always_inline]] static opened check_at(const char* p, char* at, const char* op) {
    header h;
    std::memcpy(&h, at, sizeof h);
    // A live block was sealed (its key made with the secret drawn) before
    // the program handed it to this free: no test (secret.h). Read as 0 (no
    // block sealed yet), the key fails the header of any pointer.
    std::uint64_t key = drawn_key_for(p);
    std::uint64_t x = h.tag ^ key ^ size_check(h.size);
    if (__builtin_expect((x & kHeaderBad) != 0, 0)) report_header(op, p, h, key);
    std::size_t offset = static_cast<std::size_t>(x >> 1);
    std::uint64_t t;
    std::memcpy(&t, p + h.size, sizeof t);
    if (t != tail_of(key)) report_misuse(op, p, "heap overflow past the end of the block", h.size);
    return {static_cast<std::size_t>(h.size), offset, key, at};
  }

  // Always in line: see check_block. A page-aligned p out of line, as
  // header_of's lookup was (give_back_aligned).
  [[gnu::always_inline]] static void give_back(char* p, const char* op, const std::size_t* sized) {
    if (__builtin_expect((reinterpret_cast<std::uintptr_t>(p) & 4095) == 0, 0)) return give_back_aligned(p, op, sized);
    give_back_checked(p, check_block(p, op), op, sized);
  }
  [[gnu::always_inline]] static void give_back_checked(char* p, opened o, const char* op, const std::size_t* sized) {
    if (sized && *sized != o.size) report_misuse(op, p, "size does not match the block", o.size);
    mark_freed(o);
    Inner::dealloc(p - o.offset);
  }
  // Freed: the size check leaves the tag (the size word becomes a link).
  [[gnu::always_inline]] static void mark_freed(const opened& o) {
    std::uint64_t tag = o.key ^ (std::uint64_t{o.offset} << 1) ^ kFreed;
    std::memcpy(o.header + 8, &tag, sizeof tag);
  }

  // A page-aligned p: a huge block's start is held while it is read
  // (give_back_huge); any other is checked as give_back checks it.
  [[gnu::noinline]] static void give_back_aligned(char* p, const char* op, const std::size_t* sized) {
    if (huge_start(p)) return give_back_huge(p, op, sized);
    give_back_checked(p, check_block(p, op), op, sized);
  }

  // Huge block p, held while its end header and canary are read and
  // the freed tag written, then set live again for Inner's free, which
  // claims it once more. Until 2026-11-29 the check read the mark and then
  // the end header: a free racing it that claimed the block between the two
  // reads closed its pages in the huge cache, and this one's read of the
  // header faulted (SIGSEGV instead of the report;
  // RacingFrees.HugeBlockFreeHeldPastTheMark holds it there). Now of two
  // frees one holds the block and the other finds it taken, or finds the
  // freed tag once it is set live again, or Inner's claim finds it taken by
  // the other: a report each time, and no read of a page that may be closed.
  // The block is taken (take_huge gave `usable`) before its header is read
  // (since 2026-11-29, branch hugeread: before, the claim was the header's
  // exchange, and a free that lost the race read the header the other had
  // unmapped).
  [[gnu::noinline]] static void give_back_huge(char* p, const char* op, const std::size_t* sized) {
    std::size_t usable;
    huge_header* h = take_huge(p, op, &usable);
    TENON_INJECT_POINT("canary.huge_end");
    opened o = check_at(p, p + usable - kHeader, op);
    if (sized && *sized != o.size) report_misuse(op, p, "size does not match the block", o.size);
    mark_freed(o);
    huge_release(h, usable);  // release: a take that wins it sees the freed tag
    Inner::dealloc(p);
  }

  // malloc_usable_size of huge block p: its end header and canary read
  // and checked as check_block does, with nothing held (two such calls on
  // one live block at once are the program's right, so it cannot take the
  // block), as a seqlock's reader counted in the block's unit
  // (huge_reading): a free racing it that takes the block leaves it mapped
  // and open until the read is done, and the block is reported freed, as
  // one found in the huge cache is. Until 2026-11-29 (branch usize) it read
  // them in place after the lookup with nothing counted: SIGSEGV
  // (RacingFrees.HugeBlockUsableSizeHeldWhileAFreeUnmapsIt); then (until
  // branch usw) through the kernel, two system calls, 4.2-15 us a call.
  // Reported after the read: a report ends the program, and the count must
  // not stay up while it prints (it does not wait for it, but the block
  // would stay mapped).
  [[gnu::noinline]] static std::size_t huge_usable_size(const char* p) {
    const char* op = "malloc_usable_size";
    huge_view v;
    if (!huge_view_of(p, &v) || v.usable < kHeader + kTail) report_misuse(op, p, freed_twice(op), 0);
    header h{};
    std::uint64_t t = 0;
    if (!read_huge_end(v, p, &h, &t)) report_misuse(op, p, freed_twice(op), 0);
    std::uint64_t key = drawn_key_for(p);
    if (((h.tag ^ key ^ size_check(h.size)) & kHeaderBad) != 0) report_header(op, p, h, key);
    if (h.size > v.usable - kHeader - kTail) report_bad_header(op, p);
    if (t != tail_of(key)) report_misuse(op, p, "heap overflow past the end of the block", h.size);
    return static_cast<std::size_t>(h.size);
  }
  // The end header of huge block p (view v) and, where its size lies inside
  // the block, the canary after it, read in place under one huge_reading:
  // false if the block was freed (or resized) before or while they were read.
  static bool read_huge_end(const huge_view& v, const char* p, header* h, std::uint64_t* t) {
    huge_reading r(v);
    if (!r.live()) return false;
    std::memcpy(h, p + v.usable - kHeader, sizeof *h);
    if (h->size <= v.usable - kHeader - kTail) std::memcpy(t, p + h->size, sizeof *t);
    return r.unchanged();
  }

  // Whether p starts a huge block (page-aligned, outside the chunks): a
  // lookup of its entry, nothing of the block read.
  [[gnu::noinline]] static bool huge_start(const void* p) {
    return (reinterpret_cast<std::uintptr_t>(p) & 4095) == 0 && !lookup::in_chunk(p) && starts_huge_block(p);
  }

  // The huge block p, which huge_start found, taken as the engine's free
  // takes it (huge_take): the block is this call's alone (no other free or
  // realloc closes its pages) until it gives it back (huge_release);
  // *usable its usable size. Held by another call (a free, a realloc, the
  // huge cache), or gone since the lookup (freed and unmapped, or moved, by
  // another call): a double free, reported with nothing of it read.
  static huge_header* take_huge(const char* p, const char* op, std::size_t* usable) {
    huge_header* h = huge_take(p, usable);
    if (!h || *usable == 0) report_misuse(op, p, freed_twice(op), 0);
    return h;
  }
};

}  // namespace tenon::secure
