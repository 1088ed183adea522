// Secure layers: quarantine<Inner>, delayed reuse. A freed block is not given
// back to Inner at once: it takes one of kSlots slots of its thread's stripe
// (kStripes stripes, a thread's chosen by its address), and the block that
// held the slot goes back instead. Each thread walks its stripe's slots in
// turn, so in a thread that frees alone a block waits exactly kSlots frees.
// While it waits, the block reads as zeros from byte 16 to byte kZeroed (zeroed
// on entry: the program's data is gone), and on its way out those zeros are
// checked: a write after free there ends the program (kZero: small blocks).
// Big blocks (kZero false) are made inaccessible while they wait, all but
// their first page (which keeps the header an outer layer checks): a read or
// write after free there faults at the access (SIGSEGV). Blocks of kMinBlock
// to kMaxBlock usable bytes wait; others go back at once.
//
// Lock-free: one atomic exchange per free, no shared counter; the slots are
// process-wide, so a thread's exit strands nothing. trim() gives every
// waiting block back, and so does release() before a heap underneath drops
// everything.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenon/layer.hpp"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"

namespace tenon::secure {

template <layer Inner, std::size_t kSlots, std::size_t kMinBlock, std::size_t kMaxBlock, bool kZero,
          std::size_t kStripes = 16, std::size_t kZeroed = 4096>
struct quarantine : pass_through<Inner> {
  static constexpr std::size_t kKept = 16;  // the bytes a free block's owner may use (links, header)

  static void dealloc(void* p) noexcept {
    if (!p) return;
    std::size_t n = block_size(p);
    if (n > kMaxBlock || n < kMinBlock || n <= kKept) return Inner::dealloc(p);
    if (kZero) std::memset(static_cast<char*>(p) + kKept, 0, zeroed(n) - kKept);
    if (!kZero) guard(p, n, false);
    void* out = slot().exchange(p, std::memory_order_acq_rel);
    if (out) leave(out);
  }

  static int trim(std::size_t pad) noexcept {
    drain();
    return layer_ops<Inner>::trim(pad);
  }

  // Over a heap (tenon::heap_layer): the waiting blocks leave first, checked
  // and accessible again, so that the heap's memory goes back whole.
  static void release() noexcept
    requires releasable<Inner>
  {
    drain();
    Inner::release();
  }

 private:
  static void drain() {
    for (std::size_t i = 0; i < kSlots * kStripes; ++i)
      if (void* out = slots()[i].exchange(nullptr, std::memory_order_acq_rel)) leave(out);
  }

  static std::size_t zeroed(std::size_t n) { return n < kZeroed ? n : kZeroed; }

  // Inner's usable size, the common case (a small block in a chunk with a
  // table slot) read in line from its span.
  static std::size_t block_size(const void* p) {
    if (__builtin_expect(lookup::is_regular(p), 1)) {
      const span* s = lookup::span_of(p);
      if (s->kind == span_kind::small) return s->block_size;
    }
    return Inner::usable_size(p);
  }

  static std::atomic<void*>* slots() {
    static constinit std::atomic<void*> s[kSlots * kStripes]{};
    return s;
  }

  // The next slot of this thread's stripe.
  static std::atomic<void*>& slot() {
    static constinit thread_local unsigned turn __attribute__((tls_model("initial-exec"))) = 0;
    std::uintptr_t me = reinterpret_cast<std::uintptr_t>(&turn) * 0x9e3779b97f4a7c15ull;
    return slots()[(me >> 58) % kStripes * kSlots + turn++ % kSlots];
  }

  // Pages of a big block past its first, inaccessible or accessible again.
  static void guard(void* p, std::size_t n, bool accessible) {
    std::size_t page = os::page_size();
    auto start = (reinterpret_cast<std::uintptr_t>(p) + 2 * page - 1) & ~(page - 1);
    auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
    if (end > start) os::protect(reinterpret_cast<void*>(start), end - start, accessible);
  }

  static void leave(void* p) {
    if (kZero) {
      auto* c = static_cast<const unsigned char*>(p);
      std::size_t n = block_size(p), end = zeroed(n);
      std::uint64_t any = 0;  // one OR over the words (vectorised), then find the byte
      for (std::size_t i = kKept; i + 8 <= end; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, c + i, 8);
        any |= w;
      }
      if (any)
        for (std::size_t i = kKept; i < end; ++i)
          if (c[i] != 0) report_misuse("free", c + i, "write after free (in a block waiting in quarantine)", n);
    }
    if (!kZero) guard(p, block_size(p), true);
    Inner::dealloc(p);
  }
};

}  // namespace tenon::secure
