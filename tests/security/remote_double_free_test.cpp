// A small block freed twice by threads that do not own its span (issue 11):
// reported, never a hang or a corrupted list. Before this, a block of an
// exited thread's span freed twice by another thread put a cycle on the
// span's remote list, and the next allocation of the class that adopted the
// span walked it forever (found outside the tests, 2026-11-27). In process,
// through the tenon_* API of libtenon.a; each child has an alarm, so that a
// hang fails the test at once instead of at CTest's timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <tenon/tenon.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace {

const char kDoubleFree[] = "tenon:.*free.*double free";

// The next allocations of the class take the span back (adopt it and
// collect its remote list), where a cycle used to hang.
void allocate_the_class_again(std::size_t n) {
  std::vector<void*> v(4096);
  for (auto& b : v) b = tenon_malloc(n);
  for (void* b : v) tenon_free(b);
}

// Blocks of a span whose thread has exited: the span has no owner, so other
// threads' frees go straight onto its remote list.
std::vector<void*> blocks_of_an_exited_thread(std::size_t n, int count) {
  std::vector<void*> v(count);
  std::thread([&] {
    for (auto& b : v) b = tenon_malloc(n);
  }).join();
  return v;
}

// Runs the misuse in a child with an alarm, then allocates the class again:
// the child must end with the report, at the misuse or at that allocation.
template <class Misuse>
void expect_reported(std::size_t n, Misuse misuse) {
  EXPECT_EXIT(
      {
        alarm(20);
        misuse();
        allocate_the_class_again(n);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

TEST(RemoteDoubleFreeDeathTest, TwiceInARowIntoAnExitedThreadsSpan) {
  expect_reported(64, [] {
    auto v = blocks_of_an_exited_thread(64, 2);
    std::thread([&] {
      tenon_free(v[0]);
      tenon_free(v[0]);
    }).join();
  });
}

TEST(RemoteDoubleFreeDeathTest, DelayedIntoAnExitedThreadsSpan) {
  expect_reported(64, [] {
    auto v = blocks_of_an_exited_thread(64, 3);
    std::thread([&] {
      tenon_free(v[0]);
      tenon_free(v[1]);
      tenon_free(v[0]);
    }).join();
  });
}

// By two different threads, one after the other.
TEST(RemoteDoubleFreeDeathTest, ByTwoThreadsIntoAnExitedThreadsSpan) {
  expect_reported(256, [] {
    auto v = blocks_of_an_exited_thread(256, 4);
    std::thread([&] {
      tenon_free(v[0]);
      tenon_free(v[1]);
    }).join();
    std::thread([&] {
      tenon_free(v[2]);
      tenon_free(v[0]);
    }).join();
  });
}

// The owner lives: the freeing thread batches the block for it, and the
// second free finds it at the head of that batch.
TEST(RemoteDoubleFreeDeathTest, TwiceInARowIntoALiveOwnersSpan) {
  expect_reported(64, [] {
    void* p = tenon_malloc(64);
    std::thread([p] {
      tenon_free(p);
      tenon_free(p);
    }).join();
  });
}

// Three blocks of a live owner freed by another thread, then the one at
// `again` (0: the first, which began that thread's batch for the owner;
// 1: one in its middle) a second time; the thread's exit delivers its batch.
void three_then_one_again(int again) {
  void* v[3] = {tenon_malloc(64), tenon_malloc(64), tenon_malloc(64)};
  std::thread([&] {
    for (void* p : v) tenon_free(p);
    tenon_free(v[again]);
  }).join();
}

// The first: the second free links it to the batch's head, a cycle through
// the batch's tail, which the delivery's link from the tail used to cut (the
// blocks freed between were lost to the batch, and the owner's sort saw the
// block once: no report).
TEST(RemoteDoubleFreeDeathTest, FirstOfALiveOwnersBatchFreedAgain) {
  expect_reported(64, [] { three_then_one_again(0); });
}

// One in the middle (caught by the owner's sort, the free key, before and
// after).
TEST(RemoteDoubleFreeDeathTest, MiddleOfALiveOwnersBatchFreedAgain) {
  expect_reported(64, [] { three_then_one_again(1); });
}

// No false report: a live owner's blocks freed once each by another thread,
// in batches of every length up to several deliveries, then the class
// allocated again by the owner.
TEST(RemoteDoubleFree, SingleFreesIntoALiveOwnersBatchesAreQuiet) {
  for (std::size_t n : {16, 64, 256, 4096})
    for (std::size_t count : {1, 2, 3, 63, 64, 65, 1000}) {
      std::vector<void*> v(count);
      for (auto& b : v) b = tenon_malloc(n);
      std::thread([&] {
        for (void* b : v) tenon_free(b);
      }).join();
      allocate_the_class_again(n);
    }
}

// No false report: many blocks of exited threads' spans, each freed once by
// other threads in an interleaved order, then the class allocated again.
TEST(RemoteDoubleFree, SingleFreesOfExitedThreadsBlocksAreQuiet) {
  for (std::size_t n : {16, 64, 256, 4096}) {
    auto v = blocks_of_an_exited_thread(n, 1000);
    std::thread a([&] {
      for (std::size_t i = 0; i < v.size(); i += 2) tenon_free(v[i]);
    });
    std::thread b([&] {
      for (std::size_t i = 1; i < v.size(); i += 2) tenon_free(v[i]);
    });
    a.join();
    b.join();
    allocate_the_class_again(n);
  }
}

}  // namespace
