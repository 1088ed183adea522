// Layer 5, thread heaps: the remote free's common case, a block joining the
// batch its thread has started for the block's owner heap (the rest of the
// path, and the batches' delivery, are src/heap/remote.ipp's). Inline, so
// that the front end's free_not_owned takes it in: there the engine part is
// a constant, and neither the call between the two nor the arguments moved
// for it are paid on every remote free.
#pragma once
#include <bit>
#include <cstdint>

#include "tenon/common/checks.h"
#include "tenon/heap/thread_heaps.h"
#include "tenon/platform/misuse.h"

namespace tenon {

// The outbox slot of a destination heap: from the heap's address, not a
// field of it (reading the destination heap's memory on every free would
// need ordering and a cache line we do not have). Heaps of one segment are
// contiguous, so they take consecutive slots: the address divided by the
// heap's size, modulo kOutboxes, taken as the top log2(kOutboxes) bits of
// the address times 2^(64 - log2(kOutboxes)) / size rounded up (the same
// but within 2^-11 of a heap boundary, addresses being below 2^47; the slot
// is only a hash, as the batch's `dest` is compared anyway). A division by
// a constant is a widening `mul`, which takes two fixed registers and a
// mask more.
template <std::size_t HeapSize>
__attribute__((always_inline)) inline unsigned outbox_slot(const void* dest) {
  constexpr unsigned kShift = 64 - std::countr_zero(kOutboxes);
  constexpr std::uint64_t kMul = ((std::uint64_t{1} << kShift) + HeapSize - 1) / HeapSize;
  static_assert(kShift >= 47 + 8, "addresses below 2^47 err by less than 1/256 of a heap");
  return static_cast<unsigned>((reinterpret_cast<std::uintptr_t>(dest) * kMul) >> kShift);
}

// The common case on its own: the block joins a batch already started for
// its owner. Everything else is free_remote_slow's, so that this path saves
// no registers and sets up no frame (docs/architecture.md, "Where a weak
// row's time goes"; "The remote free's instructions" for what the code
// below is shaped by).
template <class C>
template <bool kKept>
__attribute__((always_inline)) inline void thread_heaps<C>::free_remote(heap_t* h, span* s, block* b) {
  TENON_CHECK(s->kind == span_kind::small);
  // Acquire pairs with the release that published the owner: the heap's
  // construction (its inbox word) happens before our delivery to it.
  void* dest = s->owner.load(std::memory_order_acquire);
  // The outbox's address hidden from the compiler, which otherwise kept the
  // slot's index live to address the ring from h, and ran out of scratch
  // registers for the key (a push and a pop).
  outbox* slot = &h->out[outbox_slot<sizeof(heap_t)>(dest)];
  asm("" : "+r"(slot));
  outbox& ob = *slot;
  // An outbox names a heap only while it holds a batch (heap.h, outbox):
  // a started batch's destination is a live heap, never ours (our own
  // blocks never enter an outbox); an empty outbox names g_no_span, which
  // no owner is, null (an unowned span's) included; the empty heap's
  // outboxes stay empty.
  // A block holding the free key is free already (free_key.h): reported in
  // free_remote_slow. Read once for the test and the store (join_batch).
  std::uint64_t key = free_key();
  std::uint64_t word = kKept ? second_word(b) : second_word_ordered(b);
  if (__builtin_expect(ob.dest != dest || word == key, 0)) {
    free_remote_slow(h, s, b);
    return;
  }
  // The block-start test against the carved bound, after the second word's
  // read: a stale pointer's old bound, read before, admitted it into the
  // span formed again on its slices (span::forget_carved). Not again for a
  // block back from this thread's cache (tested as it was kept), nor its
  // word read ordered: with either, GCC no longer inlined cache_return into
  // cache_trim (docs/architecture.md, layer 5, "A stale pointer's remote
  // free and the span formed again").
  if (!kKept && __builtin_expect(!s->starts_carved_block_any_thread(b), 0)) return report_not_carved_remote(s, b);
  TENON_CHECK(dest != h && dest != nullptr && ob.count > 0);
  join_batch(h, ob, s, b, key);
}

// b joins the batch ob has started for b's owner; handed over when full.
// The block this thread freed last for that owner, freed again, is a double
// free in a row (also caught by the key, which free_remote tests first). A
// repeat further back holds the key its first free stored here and is
// reported before it joins (free_remote_slow); flush_outbox's test of the
// batch's first block (its link, null until the delivery) stays for a
// program that wrote into a freed block's first words.
template <class C>
__attribute__((always_inline)) inline void thread_heaps<C>::join_batch(heap_t* h, outbox& ob, span* s, block* b,
                                                                        std::uint64_t key) {
  // The fields are read once into locals: the stores into the block (which
  // may alias anything) would make the compiler read them again.
  block* head = ob.head;
  std::uint32_t n = ob.count;
  // Tail-called (report_keyed, heap.h): a call that never returns made the
  // compiler set up a stack frame on this path.
  if (__builtin_expect(b == head, 0)) return report_keyed(s, b);
  block*& earlier = ob.ahead[n % kOutboxAhead];
  block* ahead = earlier;
  earlier = b;
  ob.head = b;
  ob.count = ++n;
  // The key, as on every list of free blocks (free_key.h): a second free of
  // b, by its owner, onto a CPU's stack or by another thread, finds it.
  // (Stored after the outbox's fields: the stores into the block may alias
  // the outbox, and before them would make the compiler read it again.)
  second_word(b) = key;
  if (s->block_size > 16) third_word(b) = reinterpret_cast<std::uintptr_t>(ahead);
  C::links::set_next(b, head, s);
  if (n >= kRemoteBatchMax) flush_outbox(h, ob);
}

}  // namespace tenon
