// Heaps parked at thread exit and handed to the next thread (src/heap/attach.ipp):
// no block freed on the way may be lost. One process for the case (its
// own executable): the heap stacks must start empty for the sequence below.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "read_stats.h"
#include "tenon/tenon.h"

namespace {

void wait_for(const std::atomic<int>& step, int value) {
  while (step.load() != value) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::size_t blocks_in_use_of(std::size_t block_size) {
  tenon_stats s = tenon_test::read_stats();
  for (unsigned c = 0; c < s.classes; ++c)
    if (s.class_stats[c].block_size == block_size) return s.class_stats[c].blocks_in_use;
  ADD_FAILURE() << "no " << block_size << "-byte class";
  return 0;
}

std::size_t blocks_in_use_of_64() { return blocks_in_use_of(64); }

}  // namespace

// A heap that was given up (dissolved) goes on the free-heap stack with its
// inbox closed; a thread whose first call is a free attaches it there
// (reopening the inbox) and, at its first allocation, trades it for a
// parked heap. Meanwhile a batch another thread had gathered for the heap
// when it still owned spans is delivered into that reopened inbox: it must
// reach the blocks' spans, not vanish with the inbox at the trade (the span
// then counted the block in use for good).
TEST(Park, StaleBatchDeliveredToATradedHeapReachesItsSpan) {
  std::atomic<int> g_step{0}, x_step{0}, t_step{0};
  void* g_block = nullptr;
  void* b = nullptr;
  // G and X attach before A exits: A's parked heap is their contemporary,
  // so G's growth gives it up at once.
  std::thread g([&] {
    g_block = tenon_malloc(128);
    g_step.store(1);
    wait_for(g_step, 2);
    void* grown = tenon_malloc(256);  // a class G has no span of: it gives A's heap up
    g_step.store(3);
    wait_for(g_step, 4);
    tenon_free(grown);
  });
  std::thread x([&] {
    void* own = tenon_malloc(128);
    x_step.store(1);
    wait_for(x_step, 2);
    tenon_free(b);  // batched in X's outbox for A's heap
    x_step.store(3);
    wait_for(x_step, 4);
    tenon_free(own);
  });  // X's exit delivers the batch, and parks X's heap
  wait_for(g_step, 1);
  wait_for(x_step, 1);
  std::thread([&] { b = tenon_malloc(64); }).join();  // A: its heap parked, owning b's span
  ASSERT_NE(b, nullptr);
  x_step.store(2);
  wait_for(x_step, 3);
  g_step.store(2);
  wait_for(g_step, 3);  // A's heap dissolved, on the free-heap stack
  std::thread t([&] {
    tenon_free(g_block);  // T's first call: a free; attaches A's old heap
    t_step.store(1);
    wait_for(t_step, 2);
    void* mine = tenon_malloc(64);  // trades it for X's parked heap
    tenon_free(mine);
  });
  wait_for(t_step, 1);
  x_step.store(4);
  x.join();  // the batch holding b is in the inbox of T's heap now
  t_step.store(2);
  t.join();
  g_step.store(4);
  g.join();
  EXPECT_EQ(blocks_in_use_of_64(), 0u) << "a freed 64-byte block still counts as in use: lost on its way";
}

// A thread whose first call is a free attaches an empty heap, marked to be
// traded for a parked one at its first allocation. If that thread exits
// before allocating, the heap is parked with the mark still on; a thread
// that trades for it then holds a heap marked "not traded yet", and at its
// next allocation slow path must not trade it away again: by then it owns
// spans and holds blocks in its block cache, which went with it onto the
// free-heap stack (the blocks counted in use for good; the spans owned by a
// heap that no thread used).
TEST(Park, HeapParkedBeforeItsFirstAllocationIsNotTradedAgain) {
  std::atomic<int> l_step{0}, t_step{0};
  void* b = nullptr;
  void* c = nullptr;
  std::thread l([&] {  // L: a live heap, owner of the blocks A and T free first
    b = tenon_malloc(64);
    c = tenon_malloc(64);
    l_step.store(1);
    wait_for(l_step, 2);
  });
  wait_for(l_step, 1);
  std::thread([&] { tenon_free(b); }).join();  // A: attaches an empty heap on a free, parks it unallocated
  std::thread t([&] {
    tenon_free(c);                    // T: an empty heap of its own, on a free
    void* cached = tenon_malloc(2048);  // trades it for A's parked heap; fills its 2 KiB block cache
    t_step.store(1);
    wait_for(t_step, 2);
    void* other = tenon_malloc(64);  // a slow path: must keep A's heap, not trade it for B's
    tenon_free(other);
    tenon_free(cached);
  });
  wait_for(t_step, 1);
  std::thread([] { tenon_free(tenon_malloc(16)); }).join();  // B: takes T's traded heap, parks it
  t_step.store(2);
  t.join();
  l_step.store(2);
  l.join();
  EXPECT_EQ(blocks_in_use_of(2048), 0u) << "freed 2 KiB blocks still count as in use: lost in a traded heap's block cache";
}
