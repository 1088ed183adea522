// <tenon/valgrind.hpp>: tenon::valgrind_annotations<I>, a layer that tells
// valgrind's memcheck about every block its inner layer hands out, so that
// memcheck checks a program running on tenon's own heap (leaks, overflows,
// use after free, uninitialised reads, invalid and double frees).
//
// Memcheck replaces malloc with its own by default; run a program on a
// library built with this layer (libtenon-valgrind.so) with
//   valgrind --soname-synonyms=somalloc=nouserintercepts ...
// so that the calls reach tenon (docs/install.md, "Under valgrind").
//
// The client requests come from Debian's valgrind headers
// (<valgrind/memcheck.h>). TENON_HAVE_VALGRIND=1 compiles them in (the CMake
// build defines it when the headers are present; without it, when
// <valgrind/memcheck.h> can be included); =0, or no headers, makes the layer
// a plain pass_through. Outside valgrind a client request is a few
// instructions that do nothing; this layer is never part of libtenon.so.
//
// What each block looks like to memcheck: [p, p + n) is the block (undefined
// after malloc, defined after calloc). Around it, inside the inner layer's
// block, are a head of 16 bytes (or the alignment asked, if larger) and a
// tail of at least 16, both unaddressable: an overrun or underrun of up to
// 16 bytes is caught even where the neighbouring block is unused, and the
// block never starts where the inner layer's bookkeeping points (a span's
// first block: memcheck would count that pointer and call a leak of it
// "still reachable"). The head keeps the requested size and the head's
// length, so usable_size(p) is n, as under memcheck's own malloc. The inner
// allocator's own reads and writes of freed blocks (its free lists) run with
// error reporting off. A free memcheck refuses (a double or invalid free:
// reported) is not passed on: the block leaks instead of corrupting the
// heap, as memcheck's own free does.
#pragma once
#include <errno.h>
#include <stdint.h>

#include <cstddef>
#include <cstring>

#include "tenon/layer.hpp"

#ifndef TENON_HAVE_VALGRIND
#if __has_include(<valgrind/memcheck.h>)
#define TENON_HAVE_VALGRIND 1
#else
#define TENON_HAVE_VALGRIND 0
#endif
#endif

#if TENON_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

namespace tenon {

#if TENON_HAVE_VALGRIND

template <layer I>
struct valgrind_annotations : pass_through<I> {
  // Unaddressable bytes before and after every block.
  static constexpr std::size_t kHead = 16;
  static constexpr std::size_t kTail = 16;

  // malloc, calloc and operator new pass n on unchecked (layer.hpp): a
  // size past PTRDIFF_MAX is refused here, before the head and tail are
  // added to it (until 2026-11-27 one within 32 bytes of SIZE_MAX wrapped to
  // a tiny block, handed out as a block of n bytes).
  static void* alloc(std::size_t n) noexcept {
    if (n > kMaxRequest) return refuse();
    return annotate(quietly([&] { return I::alloc(kHead + n + kTail); }), kHead, n, false);
  }

  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    std::size_t head = align > kHead ? align : kHead;
    return annotate(quietly([&] { return I::alloc_aligned(align, head + n + kTail); }), head, n, false);
  }

  static void* alloc_zeroed(std::size_t n) noexcept {
    if (n > kMaxRequest) return refuse();
    return annotate(quietly([&] { return layer_ops<I>::alloc_zeroed(kHead + n + kTail); }), kHead, n, true);
  }

  static void dealloc(void* p) noexcept {
    if (!p || !accepted_free(p)) return;
    quietly([&] { I::dealloc(inner_block(p)); return 0; });
  }

  static std::size_t usable_size(const void* p) noexcept {
    return p ? quietly([&] { return field(p, 1); }) : 0;
  }

  // In place while the inner block has room for n and the tail (and would
  // not be mostly empty); else moved (alloc, copy the bytes memcheck knows,
  // free), as memcheck's own realloc does.
  static void* realloc(void* p, std::size_t n) noexcept {
    if (!live(p)) {
      VALGRIND_FREELIKE_BLOCK(p, 0);  // memcheck reports the bad realloc
      return nullptr;
    }
    std::size_t old = quietly([&] { return field(p, 1); });
    std::size_t head = quietly([&] { return field(p, 2); });
    std::size_t inner_size = quietly([&] { return I::usable_size(inner_block(p)); });
    if (head + n + kTail <= inner_size && n >= inner_size / 4) {
      VALGRIND_RESIZEINPLACE_BLOCK(p, old, n, 0);
      quietly([&] { set_field(p, 1, n); return 0; });
      VALGRIND_MAKE_MEM_NOACCESS(static_cast<char*>(p) + n, inner_size - head - n);
      return p;
    }
    void* q = alloc(n);
    if (!q) return nullptr;
    std::memcpy(q, p, old < n ? old : n);
    dealloc(p);
    return q;
  }

  static int trim(std::size_t pad) noexcept { return quietly([&] { return layer_ops<I>::trim(pad); }); }

 private:
  // The largest size a block can be asked for (the C standard's
  // PTRDIFF_MAX): the head (at most an alignment of 2^62, which
  // standard_api allows) and the tail added to it stay below SIZE_MAX.
  static constexpr std::size_t kMaxRequest = static_cast<std::size_t>(PTRDIFF_MAX);

  static void* refuse() noexcept {
    errno = ENOMEM;
    return nullptr;
  }

  // The inner layer's own work, with memcheck's reports off: it reads and
  // writes the links inside freed (unaddressable) blocks. Reporting is per
  // thread, so other threads' errors still show.
  template <class F>
  static auto quietly(F f) noexcept {
    VALGRIND_DISABLE_ERROR_REPORTING;
    auto r = f();
    VALGRIND_ENABLE_ERROR_REPORTING;
    return r;
  }

  // The head's words, counted back from p: 1 the requested size, 2 the
  // head's length.
  static std::size_t field(const void* p, int k) noexcept {
    std::size_t v;
    std::memcpy(&v, static_cast<const char*>(p) - 8 * k, 8);
    return v;
  }
  static void set_field(void* p, int k, std::size_t v) noexcept { std::memcpy(static_cast<char*>(p) - 8 * k, &v, 8); }

  static void* inner_block(void* p) noexcept { return static_cast<char*>(p) - field(p, 2); }

  static void* annotate(void* block, std::size_t head, std::size_t n, bool zeroed) noexcept {
    if (!block) return nullptr;
    char* p = static_cast<char*>(block) + head;
    std::size_t inner_size = quietly([&] {
      set_field(p, 1, n);
      set_field(p, 2, head);
      return I::usable_size(block);
    });
    VALGRIND_MAKE_MEM_NOACCESS(block, head);
    VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
    VALGRIND_MAKE_MEM_NOACCESS(p + n, inner_size - head - n);
    return p;
  }

  // Whether p's first byte is addressable: a live block's is; a freed one's
  // is not.
  static bool live(const void* p) noexcept {
    return quietly([&] { return VALGRIND_CHECK_MEM_IS_ADDRESSABLE(p, 1) == 0; });
  }

  // Tells memcheck p is freed; false when memcheck refused (and reported)
  // it: not a block handed out, or freed already.
  static bool accepted_free(void* p) noexcept {
    unsigned before = VALGRIND_COUNT_ERRORS;
    VALGRIND_FREELIKE_BLOCK(p, 0);
    return VALGRIND_COUNT_ERRORS == before;
  }
};

#else

// Built without valgrind's headers: forwards everything.
template <layer I>
struct valgrind_annotations : pass_through<I> {};

#endif

}  // namespace tenon
