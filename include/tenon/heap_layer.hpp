// <tenon/heap_layer.hpp>: a composition instantiated as a first-class heap.
//
// tenon::heap_layer<Tag> is an innermost layer whose blocks come from a
// first-class heap of its own (docs/heaps.md), made at its first use. Put
// layers over it and the composition is a heap: its blocks are apart from
// the default allocator's and from every other heap's, and
// tenon::layer_ops<C>::release() drops all of them at once, whatever thread
// allocated them. A secure heap for untrusted input beside the default one:
//
//   struct untrusted_tag { static constexpr std::size_t limit = 256u << 20; };
//   using untrusted = tenon::secure::layers<tenon::heap_layer<untrusted_tag>>;
//   void* p = untrusted::alloc(n);      // canary, quarantine, zero-size checks
//   untrusted::dealloc(p);              // through the composition, not free()
//   tenon::layer_ops<untrusted>::release();   // every block of it is gone
//
// Tag names the heap: each Tag is one heap (one per composition, like every
// layer's static state). An optional `static constexpr std::size_t limit`
// in Tag caps the bytes the heap holds (tenon_heap_options::limit); beyond
// it alloc fails with ENOMEM.
//
// release() is the layer API's hook for compositions over a heap: each layer
// that keeps blocks of its inner layer (a quarantine, a cache) gives them
// back or forgets them, then forwards; layers that keep none simply forward
// (pass_through does). As with tenon_heap_reset, no thread may use the
// composition or one of its blocks while release() runs.
//
// Free a block through the composition (C::dealloc): plain free() would
// give it to the heap too, but past the outer layers' checks. Lock-free like
// the heap: the first users race to make it through one CAS, and the losers
// destroy theirs.
#pragma once
#include <atomic>
#include <cstddef>

#include "tenon/layer.hpp"
#include "tenon/tenon.h"

namespace tenon {

template <class Tag>
struct heap_layer {
  static void* alloc(std::size_t n) noexcept {
    tenon_heap_t* h = heap();
    return h ? tenon_heap_malloc(h, n) : nullptr;
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    tenon_heap_t* h = heap();
    return h ? tenon_heap_aligned_alloc(h, align, n) : nullptr;
  }
  // A block of this heap exists only once the heap does; the heap argument
  // just speeds up the free of the calling thread's own blocks.
  static void dealloc(void* p) noexcept { tenon_heap_free(slot().load(std::memory_order_acquire), p); }
  static std::size_t usable_size(const void* p) noexcept { return tenon_malloc_usable_size(p); }

  // The heap's own realloc and calloc: in place where it can, the result
  // always a block of this heap.
  static void* realloc(void* p, std::size_t n) noexcept { return tenon_heap_realloc(heap(), p, n); }
  static void* alloc_zeroed(std::size_t n) noexcept {
    tenon_heap_t* h = heap();
    return h ? tenon_heap_calloc(h, 1, n) : nullptr;
  }

  // Every block of the heap is released at once (tenon_heap_reset); the
  // heap stays usable.
  static void release() noexcept {
    if (tenon_heap_t* h = slot().load(std::memory_order_acquire)) tenon_heap_reset(h);
  }

  // The heap itself (made if it was not yet), for the tenon_heap_* calls;
  // nullptr with errno ENOMEM when none could be made.
  static tenon_heap_t* heap() noexcept {
    tenon_heap_t* h = slot().load(std::memory_order_acquire);
    return __builtin_expect(h != nullptr, 1) ? h : make();
  }

 private:
  static std::atomic<tenon_heap_t*>& slot() noexcept {
    static constinit std::atomic<tenon_heap_t*> h{nullptr};
    return h;
  }

  static constexpr std::size_t limit() noexcept {
    if constexpr (requires { { Tag::limit } -> std::convertible_to<std::size_t>; }) return Tag::limit;
    else return 0;
  }

  [[gnu::cold, gnu::noinline]] static tenon_heap_t* make() noexcept {
    tenon_heap_options options{limit()};
    tenon_heap_t* fresh = tenon_heap_new(&options);
    if (!fresh) return nullptr;
    tenon_heap_t* seen = nullptr;
    if (slot().compare_exchange_strong(seen, fresh, std::memory_order_acq_rel)) return fresh;
    tenon_heap_destroy(fresh);  // another thread's heap won; this one held nothing
    return seen;
  }
};

}  // namespace tenon
