// A huge block freed while a malloc_usable_size reads it in place waits in a
// deferral slot (src/huge/cache.ipp, huge_maps::defer) until a huge call
// finds its reader done and puts it away (put_away_deferred). Two such calls
// at once scan the slots: one that has read a slot's word must not read the
// block's header before it has claimed the slot, since the other may claim
// it first, put the block away and unmap it. A deterministic interleaving,
// held at the injection point huge.deferred (-DTENON_INJECT=ON builds only,
// label `progress`), run with TENON_PURGE_DELAY_MS=0.
//
// This program calls tenon only through the tenon_* API (libtenon.a) and
// the huge layer's reader (huge_reading, as progress_test does); gtest and
// std::thread use the system allocator.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "tenon/common/inject.h"
#include "tenon/huge/huge.h"
#include "tenon/tenon.h"

namespace {

std::atomic<bool> g_held{false};
std::atomic<bool> g_go{false};
thread_local bool t_hold = false;

// Holds the thread that set t_hold at its first huge.deferred until g_go.
void hold_hook(const char* point) {
  if (!t_hold || std::strcmp(point, "huge.deferred") != 0) return;
  t_hold = false;
  g_held.store(true, std::memory_order_release);
  while (!g_go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

constexpr std::size_t kHuge = 6u << 20;

}  // namespace

// p is freed while a reader counts itself in: deferred. T's huge malloc reads
// p's slot and is held there; the main thread's malloc_trim claims the slot,
// puts p in the huge cache and unmaps it. T then went on to read p's header
// (its user pointer, for the unit of its readers' count) from the unmapped
// page: SIGSEGV until 2026-11-30 (branch review3). The slot is claimed first
// now: T's claim fails and it reads nothing of p.
TEST(HugeDeferred, ScanHeldAfterReadingASlotWhileAnotherPutsItsBlockAway) {
  tenon_inject_set_hook(hold_hook);
  void* p = tenon_malloc(kHuge);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 4096);
  tenon::huge_view v;
  ASSERT_TRUE(tenon::huge_view_of(p, &v));
  {
    tenon::huge_reading r(v);
    ASSERT_TRUE(r.live());
    tenon_free(p);  // read in progress: deferred
  }
  std::thread t([] {
    t_hold = true;
    void* q = tenon_malloc(kHuge);  // scans the slots: held at p's
    std::memset(q, 2, 4096);
    tenon_free(q);
  });
  while (!g_held.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  tenon_malloc_trim(0);  // claims p's slot, caches p, flushes the cache: p unmapped
  g_go.store(true, std::memory_order_release);
  t.join();
  void* r = tenon_malloc(kHuge);  // the allocator still serves huge blocks
  ASSERT_NE(r, nullptr);
  std::memset(r, 3, kHuge);
  tenon_free(r);
  tenon_inject_set_hook(nullptr);
}
