// Secure layers: quarantine<Inner>, delayed reuse. A freed block is not given
// back to Inner at once: it takes one of kSlots process-wide slots, and the
// block that held the slot goes back instead. Each thread walks the slots in
// turn (a counter of its own), so in a thread
// that frees alone a block waits exactly kSlots frees. While it waits, the
// block reads as zeros past its first 16 bytes (zeroed on entry: the
// program's data is gone), and on its way out the zeros are checked: a write
// after free in that time ends the program (kZero: small blocks; big ones
// only wait, their pages untouched). Blocks of kMinBlock to kMaxBlock usable
// bytes wait; others go back at once.
//
// Lock-free: one atomic exchange per free, no shared counter; the slots are
// process-wide, so a thread's exit strands nothing. trim() gives every
// waiting block back.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tenon/layer.hpp"
#include "tenon/platform/misuse.h"

namespace tenon::secure {

template <layer Inner, std::size_t kSlots, std::size_t kMinBlock, std::size_t kMaxBlock, bool kZero>
struct quarantine : pass_through<Inner> {
  static constexpr std::size_t kKept = 16;  // the bytes a free block's owner may use (links, header)

  static void dealloc(void* p) noexcept {
    if (!p) return;
    std::size_t n = Inner::usable_size(p);
    if (n > kMaxBlock || n < kMinBlock || n <= kKept) return Inner::dealloc(p);
    if (kZero) std::memset(static_cast<char*>(p) + kKept, 0, n - kKept);
    void* out = slots()[turn()++ % kSlots].exchange(p, std::memory_order_acq_rel);
    if (out) leave(out);
  }

  static int trim(std::size_t pad) noexcept {
    for (std::size_t i = 0; i < kSlots; ++i)
      if (void* out = slots()[i].exchange(nullptr, std::memory_order_acq_rel)) leave(out);
    return layer_ops<Inner>::trim(pad);
  }

 private:
  static std::atomic<void*>* slots() {
    static constinit std::atomic<void*> s[kSlots]{};
    return s;
  }

  static unsigned& turn() {
    static constinit thread_local unsigned t __attribute__((tls_model("initial-exec"))) = 0;
    return t;
  }

  static void leave(void* p) {
    auto* c = static_cast<const unsigned char*>(p);
    std::size_t n = kZero ? Inner::usable_size(p) : 0;
    for (std::size_t i = kKept; i < n; ++i)
      if (c[i] != 0) report_misuse("free", c + i, "write after free (in a block waiting in quarantine)", n);
    Inner::dealloc(p);
  }
};

}  // namespace tenon::secure
