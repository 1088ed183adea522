// libtenon_handfused.so: malloc and free written out by hand against the
// thread heaps' fields (the fast path with no function of the composition
// in between): the yardstick the composed libtenon.so is measured against.
// Every other name is the default allocator's.
#include <tenon/layer.hpp>

namespace {

using namespace tenon;
using config = default_config;

struct handfused : default_allocator {
  static void* alloc(std::size_t n) noexcept {
    if (__builtin_expect(n <= 1024, 1)) {
      std::size_t cls = small_class(n);
      thread_heap<config>* h = t_thread<config>.current;
      span* s = h->current[cls];
      if (block* b = s->free; __builtin_expect(b != nullptr, 1)) {
        s->free = b->next;
        b->next = nullptr;
        second_word(b) = 0;  // the free key leaves with the block, as in take_head
        ++s->until_slow;
        return b;
      }
      asm("" : "+r"(cls));  // copied on the slow path only, as heap_alloc does
      return g_default_engine.heaps.alloc_slow(h, static_cast<unsigned>(cls));
    }
    return default_allocator::alloc(n);
  }

  static void dealloc(void* p) noexcept {
    std::uintptr_t tag = lookup::tag_of(p);
    lookup::numbered n = lookup::slice_number(p);
    if (__builtin_expect(lookup::is_regular_numbered(n, tag), 1)) {
      span* s = lookup::span_of_entry(n.entry, tag);
      void* owner = s->owner.load(std::memory_order_relaxed);
      if (__builtin_expect(owner == t_thread<config>.current, 1)) {
        auto* h = static_cast<thread_heap<config>*>(owner);
        auto* b = static_cast<block*>(p);
        // The block-start test (common/block_index.h), written out.
        auto offset = static_cast<std::uint64_t>(static_cast<char*>(p) - s->start);
        if (__builtin_expect(offset * s->block_mult >= s->carved_limit, 0)) return report_not_carved_block(s, b);
        // The free key (heap/free_key.h), as free_to_own_span checks it.
        std::uint64_t key = free_key();
        if (__builtin_expect(second_word(b) == key, 0)) return report_keyed(s, b);
        span* t = s->push_to;  // the span, or h's block cache of its class
        b->next = t->free;
        second_word(b) = key;
        t->free = b;
        if (__builtin_expect(--t->until_slow < 0, 0)) g_default_engine.heaps.local_free_slow(h, t);
        return;
      }
      default_allocator::free_not_owned(s, p);
      return;
    }
    default_allocator::free_irregular(p);
  }
};

}  // namespace

TENON_EXPORT_MALLOC(handfused)
