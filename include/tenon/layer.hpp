// <tenon/layer.hpp>: build an allocator from layers.
//
// A layer is a type with static, noexcept functions (no instance: a
// composition is resolved at compile time and costs no instruction of its
// own). `tenon::layer` states what every layer provides; `pass_through<Inner>`
// forwards all of it, so a layer derives from it and overrides only what it
// changes:
//
//   template <class I> struct counting : tenon::pass_through<I> {
//     static void* alloc(std::size_t n) noexcept { ++g_allocs; return I::alloc(n); }
//   };
//   TENON_EXPORT_MALLOC(counting<tenon::default_allocator>)   // in one .cpp
//
// `tenon::default_allocator` is what libtenon.so exports; TENON_EXPORT_MALLOC
// (<tenon/export_malloc.hpp>, included below) turns any composition into the
// standard malloc/free/new/delete names. docs/layers.md teaches the rest.
#pragma once
#include <errno.h>

#include <concepts>
#include <cstddef>
#include <cstring>

#include "tenon/tenon.h"

namespace tenon {

// What every layer provides. Callers (the standard names, an outer layer)
// have already checked what the C standard asks of the arguments: `align` is
// a power of two, sizes are at most PTRDIFF_MAX. But for alloc and
// alloc_zeroed: malloc, calloc and operator new pass their n on unchecked
// (a test there would cost the default build's fast path; the engine
// refuses what it cannot serve), so a layer that adds bytes to n must
// refuse a size past PTRDIFF_MAX itself (secure/zero_size.hpp, canary.hpp).
template <class L>
concept layer = requires(std::size_t n, std::size_t align, void* p, const void* cp) {
  // A block of at least n bytes (n == 0 too: a unique block), aligned to at least 16 bytes when n >= 16, else 8; nullptr with errno = ENOMEM when none can be had.
  { L::alloc(n) } noexcept -> std::same_as<void*>;
  // A block of at least n bytes whose address is a multiple of `align`; nullptr with errno = ENOMEM.
  { L::alloc_aligned(align, n) } noexcept -> std::same_as<void*>;
  // Give back a block this layer handed out; nullptr does nothing; errno is left as it was.
  { L::dealloc(p) } noexcept -> std::same_as<void>;
  // Bytes usable from the start of a block this layer handed out (at least what was asked); 0 for nullptr.
  { L::usable_size(cp) } noexcept -> std::same_as<std::size_t>;
};

// Optional operations (hooks). A layer that defines one is asked for it; a
// layer that does not gets the generic form built from its four required
// functions (see layer_ops below). Each hook's contract:
//   void* realloc(void* p, std::size_t n)   p a live block (not nullptr), 0 < n <= PTRDIFF_MAX: the block
//                                           resized or moved with its first min(old, n) bytes; nullptr with
//                                           errno = ENOMEM and p untouched when it cannot be done.
//   void* alloc_zeroed(std::size_t n)       as alloc, the first n bytes zero (calloc).
//   void dealloc_sized(void* p, std::size_t n)                       n: the size asked for p.
//   void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n)   p from alloc_aligned(align, n).
//   int trim(std::size_t pad)               give free memory back to the OS; 1 if any was, else 0. A
//                                           wrapper always inherits its inner layer's (it touches no
//                                           block); one that keeps blocks writes its own to give them
//                                           back first.
//   int stats(tenon_stats* s)               fill *s (s->version set by the caller) without allocating:
//                                           0, or EINVAL (NULL, unknown version). Without the hook: ENOSYS
//                                           (glibc's reporting calls then go to the next library's). A
//                                           wrapper always inherits its inner layer's: the figures describe
//                                           the memory underneath.
//   void* realloc_taken(huge_header* h, void* p, std::size_t n, std::size_t usable)
//                                           only among tenon's own layers over its engines, never
//                                           inherited (a layer must state that it passes it on): p starts
//                                           huge block h, which the caller has taken (huge_take gave it
//                                           `usable`, not 0), realloc'd as by realloc without a second
//                                           take, so that no free can come between (the secure canary's
//                                           realloc; <tenon/huge/huge.h>); the block is given back
//                                           whatever the answer.
//   void release()                          only in a composition over a heap (tenon::heap_layer,
//                                           <tenon/heap_layer.hpp>): every block it handed out is
//                                           released at once; a layer keeping blocks of its inner
//                                           layer (a quarantine, a cache) gives them back or forgets
//                                           them, then forwards. Always inherited (unlike the hooks
//                                           above): a layer that keeps no blocks has nothing to add.
//                                           No thread may use the composition while it runs.
template <layer Inner>
struct pass_through;

// A composition that can drop every block at once: one over a heap.
template <class L>
concept releasable = layer<L> && requires { { L::release() } noexcept; };

namespace detail {

// Whether two functions are the same one, decided by template argument
// matching: GCC cannot compare function addresses in a constant expression
// under -fsanitize=undefined (it keeps null-pointer checks), but it can match
// template arguments.
template <auto A, auto B>
inline constexpr bool same_fn = false;
template <auto A>
inline constexpr bool same_fn<A, A> = true;

template <class L>
concept wraps = requires { typename L::inner; } && layer<typename L::inner>;

// L keeps its inner layer's blocks as they are: it inherits all four
// required functions from pass_through<inner>. Only then may it also inherit
// the inner layer's hooks: a layer that changes alloc or dealloc (counts,
// pads, checks) must not have its blocks resized or freed behind its back by
// the inner layer's realloc or sized free.
template <class L>
consteval bool forwards_blocks() {
  if constexpr (wraps<L>) {
    using base = pass_through<typename L::inner>;
    return same_fn<&L::alloc, &base::alloc> && same_fn<&L::alloc_aligned, &base::alloc_aligned> &&
           same_fn<&L::dealloc, &base::dealloc> && same_fn<&L::usable_size, &base::usable_size>;
  } else {
    return false;
  }
}

// A hook of L applies if L wrote it itself, or inherited it from a
// pass_through while forwarding its blocks unchanged.
template <class L, auto Own, auto Inherited>
consteval bool hook_applies() {
  return !same_fn<Own, Inherited> || forwards_blocks<L>();
}

}  // namespace detail

// The generic realloc through L's own operations: a new block from L, the
// bytes copied, p freed through L (so that every hook of L sees both). What
// layer_ops gives a layer without a realloc of its own, and what a layer
// whose realloc handles only some blocks does with the rest.
template <class L>
void* realloc_by_copy(void* p, std::size_t n) noexcept {
  void* q = L::alloc(n);
  if (!q) return nullptr;
  std::size_t old = L::usable_size(p);
  std::memcpy(q, p, old < n ? old : n);
  L::dealloc(p);
  return q;
}

// Every operation of a layer: its own where it has them (as above), the
// generic forms elsewhere. Outer layers and the standard names call these.
template <layer L>
struct layer_ops {
  static void* alloc(std::size_t n) noexcept { return L::alloc(n); }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept { return L::alloc_aligned(align, n); }
  static void dealloc(void* p) noexcept { L::dealloc(p); }
  static std::size_t usable_size(const void* p) noexcept { return L::usable_size(p); }

  static void* realloc(void* p, std::size_t n) noexcept {
    if constexpr (has_realloc()) {
      return L::realloc(p, n);
    } else {
      return realloc_by_copy<L>(p, n);
    }
  }

  static void* alloc_zeroed(std::size_t n) noexcept {
    if constexpr (has_alloc_zeroed()) {
      return L::alloc_zeroed(n);
    } else {
      void* p = L::alloc(n);
      if (p) std::memset(p, 0, n);
      return p;
    }
  }

  static void dealloc_sized(void* p, std::size_t n) noexcept {
    if constexpr (has_dealloc_sized()) L::dealloc_sized(p, n);
    else L::dealloc(p);
  }

  static void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    if constexpr (has_dealloc_aligned_sized()) L::dealloc_aligned_sized(p, align, n);
    else L::dealloc(p);
  }

  static int trim(std::size_t pad) noexcept {
    if constexpr (has_trim()) return L::trim(pad);
    else return 0;
  }

  static int stats(tenon_stats* s) noexcept {
    if constexpr (requires { { L::stats(s) } noexcept -> std::same_as<int>; }) return L::stats(s);
    else return ENOSYS;
  }

  static void release() noexcept
    requires releasable<L>
  {
    L::release();
  }

 private:
  // One test per hook: L has it, and (for a wrapper) it applies.
  static consteval bool has_realloc() {
    if constexpr (!requires(void* p, std::size_t n) { { L::realloc(p, n) } noexcept -> std::same_as<void*>; }) return false;
    else if constexpr (!detail::wraps<L>) return true;
    else return detail::hook_applies<L, &L::realloc, &pass_through<typename L::inner>::realloc>();
  }
  static consteval bool has_alloc_zeroed() {
    if constexpr (!requires(std::size_t n) { { L::alloc_zeroed(n) } noexcept -> std::same_as<void*>; }) return false;
    else if constexpr (!detail::wraps<L>) return true;
    else return detail::hook_applies<L, &L::alloc_zeroed, &pass_through<typename L::inner>::alloc_zeroed>();
  }
  static consteval bool has_dealloc_sized() {
    if constexpr (!requires(void* p, std::size_t n) { { L::dealloc_sized(p, n) } noexcept; }) return false;
    else if constexpr (!detail::wraps<L>) return true;
    else return detail::hook_applies<L, &L::dealloc_sized, &pass_through<typename L::inner>::dealloc_sized>();
  }
  static consteval bool has_dealloc_aligned_sized() {
    if constexpr (!requires(void* p, std::size_t a, std::size_t n) { { L::dealloc_aligned_sized(p, a, n) } noexcept; })
      return false;
    else if constexpr (!detail::wraps<L>) return true;
    else
      return detail::hook_applies<L, &L::dealloc_aligned_sized,
                                  &pass_through<typename L::inner>::dealloc_aligned_sized>();
  }
  // trim, like stats, applies whatever a wrapper changes: it gives back
  // memory no block holds, so it cannot bypass what the wrapper does to its
  // blocks (a wrapper that keeps blocks of its own writes trim to give them
  // back first).
  static consteval bool has_trim() {
    return requires(std::size_t n) { { L::trim(n) } noexcept -> std::same_as<int>; };
  }
};

// Forwards everything to Inner. Derive from it and override what your layer
// changes; call the next layer as Inner::f (or layer_ops<Inner>::f for a hook
// Inner may not define).
template <layer Inner>
struct pass_through {
  using inner = Inner;
  static void* alloc(std::size_t n) noexcept { return Inner::alloc(n); }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept { return Inner::alloc_aligned(align, n); }
  static void dealloc(void* p) noexcept { Inner::dealloc(p); }
  static std::size_t usable_size(const void* p) noexcept { return Inner::usable_size(p); }
  static void* realloc(void* p, std::size_t n) noexcept { return layer_ops<Inner>::realloc(p, n); }
  static void* alloc_zeroed(std::size_t n) noexcept { return layer_ops<Inner>::alloc_zeroed(n); }
  static void dealloc_sized(void* p, std::size_t n) noexcept { layer_ops<Inner>::dealloc_sized(p, n); }
  static void dealloc_aligned_sized(void* p, std::size_t align, std::size_t n) noexcept {
    layer_ops<Inner>::dealloc_aligned_sized(p, align, n);
  }
  static int trim(std::size_t pad) noexcept { return layer_ops<Inner>::trim(pad); }
  static int stats(tenon_stats* s) noexcept { return layer_ops<Inner>::stats(s); }
  static void release() noexcept
    requires releasable<Inner>
  {
    Inner::release();
  }
};

}  // namespace tenon

#include "tenon/default_allocator.hpp"
#include "tenon/export_malloc.hpp"
