// A thread whose first call frees a block of a parked heap takes that heap
// over (src/heap/attach.ipp). The owner it read from the block's span before
// attaching can be stale by the time it has a heap: while it was between the
// read and the attach, the parked heap may have been given up (its spans
// abandoned) and put on the free-heap stack, from which this very thread
// then attaches it. The heap it holds is then the one it read, but no longer
// the span's owner. A deterministic interleaving, held at the injection
// point heap.attach (-DTENON_INJECT=ON builds only, label `progress`).
//
// This program calls tenon only through the tenon_* API (libtenon.a); gtest
// and std::thread use the system allocator.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "tenon/common/inject.h"
#include "tenon/tenon.h"

namespace {

std::atomic<bool> g_held{false};
std::atomic<bool> g_go{false};
thread_local bool t_hold = false;

// Holds the thread that set t_hold at its first heap.attach until g_go.
void hold_hook(const char* point) {
  if (!t_hold || std::strcmp(point, "heap.attach") != 0) return;
  t_hold = false;
  g_held.store(true, std::memory_order_release);
  while (!g_go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

template <class F>
void wait_until(F done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

// A's heap is parked with b's span; T frees b and is held after reading the
// span's owner (A's heap); G grows a class, which gives up A's heap (a
// contemporary: G attached before A exited), abandoning b's span; T then
// attaches that heap from the free-heap stack. Freed as the owner's, b went
// on the local list of a span nobody owns, whose count then reached zero:
// its slices went back to the arena while the span waited on the partial
// stack, and the next taker of the slices and the next adopter of the span
// shared them (a large block and a small one overlapped).
TEST(TakeOver, OwnerReadBeforeAttachingIsReadAgain) {
  tenon_inject_set_hook(hold_hook);
  std::atomic<int> step{0};
  std::thread g([&] {
    void* first = tenon_malloc(128);  // G's heap, attached before A's exit
    step.store(1);
    wait_until([&] { return step.load() == 2; });
    void* grown = tenon_malloc(256);  // a class it has no span of: it grows
    step.store(3);
    wait_until([&] { return step.load() == 4; });
    tenon_free(grown);
    tenon_free(first);
  });
  wait_until([&] { return step.load() == 1; });

  void* b = nullptr;
  std::thread([&] { b = tenon_malloc(64); }).join();  // A: parked, b's span its current one
  ASSERT_NE(b, nullptr);

  std::atomic<bool> t_may_exit{false};
  std::thread t([&] {
    t_hold = true;
    tenon_free(b);  // T's first call: read b's owner, held at heap.attach
    wait_until([&] { return t_may_exit.load(); });
  });
  wait_until([] { return g_held.load(std::memory_order_acquire); });
  step.store(2);  // G grows: A's heap is given up, b's span abandoned
  wait_until([&] { return step.load() == 3; });
  g_go.store(true, std::memory_order_release);  // T attaches A's old heap and frees b

  // Give T's free time to finish (it is held no longer), then take memory
  // as the next users would: a large block (a run of its own), then a
  // small block of b's class from a new thread, which adopts b's span.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  constexpr std::size_t kLarge = 40000;
  auto* large = static_cast<unsigned char*>(tenon_malloc(kLarge));
  ASSERT_NE(large, nullptr);
  std::memset(large, 0xAA, kLarge);
  unsigned char* small = nullptr;
  std::thread([&] {
    small = static_cast<unsigned char*>(tenon_malloc(64));
    if (small) std::memset(small, 0x55, 64);
  }).join();
  ASSERT_NE(small, nullptr);
  auto l = reinterpret_cast<std::uintptr_t>(large), s = reinterpret_cast<std::uintptr_t>(small);
  EXPECT_FALSE(s + 64 > l && s < l + kLarge) << "a small block inside a live large block";
  std::size_t changed = 0;
  for (std::size_t i = 0; i < kLarge; ++i) changed += large[i] != 0xAA;
  EXPECT_EQ(changed, 0u) << "the large block was overwritten";

  t_may_exit.store(true);
  t.join();
  step.store(4);
  g.join();
  tenon_free(large);
  tenon_inject_set_hook(nullptr);
}
