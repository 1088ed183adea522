// A lock-free LIFO of objects named by 32-bit ids (0 = none), the only shared
// list structure in tenon (partial spans per size class, recycled heaps).
//
// The head word packs a 32-bit version tag above the id; every successful
// push or pop bumps the tag, so a pop that read a head, was delayed, and finds
// the same id on top again (ABA) still fails its CAS. Popping reads the next
// link of an object that may meanwhile have been popped and reused: that is
// safe because every object kept here is type-stable (never unmapped), and
// the stale value is discarded by the failing CAS. Plain 64-bit CAS, so the
// same code runs on aarch64.
//
// `Link` maps an id to its std::atomic<uint32_t> next field (a function
// object, which may hold a pointer to the objects' storage); `Sync` is the
// engine's synchronisation policy (common/sync.h).
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/common/sync.h"

namespace tenon {

template <class Link, class Sync = lock_free>
class id_stack {
 public:
  // Not explicit: arrays of stacks are initialised with {}.
  constexpr id_stack(Link link = Link{}) : link_(link) {}

  // Returns the number of failed CAS attempts (contention statistics).
  unsigned push(std::uint32_t id) {
    TENON_CHECK(id != 0);
    [[maybe_unused]] section<Sync, shared_structure::stacks> guard;
    unsigned retries = 0;
    std::uint64_t old = head_.load(std::memory_order_relaxed);
    for (;;) {
      TENON_CHECK(static_cast<std::uint32_t>(old) != id);
      link_(id).store(static_cast<std::uint32_t>(old), std::memory_order_relaxed);
      std::uint64_t next = ((old >> 32) + 1) << 32 | id;
      TENON_INJECT_POINT("stack.push");
      if (head_.compare_exchange_weak(old, next, std::memory_order_release, std::memory_order_relaxed))
        return retries;
      ++retries;
    }
  }

  std::uint32_t pop(unsigned* retries) {
    [[maybe_unused]] section<Sync, shared_structure::stacks> guard;
    std::uint64_t old = head_.load(std::memory_order_acquire);
    for (;;) {
      auto id = static_cast<std::uint32_t>(old);
      if (id == 0) return 0;
      std::uint32_t next = link_(id).load(std::memory_order_relaxed);
      std::uint64_t desired = ((old >> 32) + 1) << 32 | next;
      TENON_INJECT_POINT("stack.pop");
      if (head_.compare_exchange_weak(old, desired, std::memory_order_acquire, std::memory_order_acquire))
        return id;
      ++*retries;
    }
  }

  // Take the whole stack with one successful CAS (the tag is bumped, so a
  // racing pop fails its CAS). Returns the top id; the rest follow through the
  // links, which belong to the caller alone from now on.
  std::uint32_t pop_all() {
    [[maybe_unused]] section<Sync, shared_structure::stacks> guard;
    std::uint64_t old = head_.load(std::memory_order_relaxed);
    while (static_cast<std::uint32_t>(old) != 0) {
      TENON_INJECT_POINT("stack.pop_all");
      if (head_.compare_exchange_weak(old, ((old >> 32) + 1) << 32, std::memory_order_acquire,
                                      std::memory_order_relaxed))
        return static_cast<std::uint32_t>(old);
    }
    return 0;
  }

  bool empty() const { return static_cast<std::uint32_t>(head_.load(std::memory_order_relaxed)) == 0; }
  // The id on top at this moment (0: none): a hint, popped by anyone
  // meanwhile. Acquire, as a pop's: what the pusher wrote before the push
  // (the element's construction included) can be read through it.
  std::uint32_t top() const { return static_cast<std::uint32_t>(head_.load(std::memory_order_acquire)); }

 private:
  std::atomic<std::uint64_t> head_{0};
  [[no_unique_address]] Link link_;
};

}  // namespace tenon
