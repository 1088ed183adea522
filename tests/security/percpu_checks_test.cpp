// The per-CPU front end's checks on free (include/tenon/percpu/
// percpu_cache.hpp, issue 11): a block its free would put on a CPU's stack
// must start a block of its span (the block-start test, as the thread heaps'
// free makes it) and must not be waiting in a CPU's stack already (the free
// key, confirmed by a look through the stacks of its class). In process,
// through tenon::percpu_cache over the default allocator of libtenon.a, which
// lets the tests read the free key and pin threads to CPUs. The tests that
// need blocks cached skip where rseq is missing (qemu-user, valgrind,
// ThreadSanitizer builds): there the layer is the thread heaps, whose checks
// block_start_test.cpp and free_key_test.cpp cover.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <tenon/layer.hpp>
#include <tenon/percpu/percpu_cache.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "tenon/heap/free_key.h"
#include "test_support.h"

namespace {

using C = tenon::percpu_cache<tenon::default_allocator>;

const char kDoubleFree[] = "tenon: free\\(0x[0-9a-f]+\\): double free";
const char kNotABlock[] = "tenon: free\\(0x[0-9a-f]+\\): invalid pointer \\(not the start of a block\\)";
const char kNeverAllocated[] = "tenon: free\\(0x[0-9a-f]+\\): invalid pointer \\(never allocated\\)";

// Whether this process runs restartable sequences (built with them, and
// glibc registered them).
bool rseq_here() { return tenon::percpu::sequences_here(); }

std::uint64_t second(const void* p) {
  std::uint64_t w;
  std::memcpy(&w, static_cast<const char*>(p) + 8, sizeof w);
  return w;
}
void set_second(void* p, std::uint64_t w) { std::memcpy(static_cast<char*>(p) + 8, &w, sizeof w); }

using tenon_test::nth_allowed_cpu;
using tenon_test::pin_to;

// A block of n bytes, freed and allocated again on this CPU until the CPU's
// region exists (its first free makes it): the block then comes from, and
// goes back to, the CPU's stack.
void* cached_block(std::size_t n) {
  for (int i = 0; i < 4; ++i) C::dealloc(C::alloc(n));
  return C::alloc(n);
}

#define SKIP_UNLESS_CACHED()                                                                  \
  do {                                                                                         \
    if (!rseq_here()) GTEST_SKIP() << "no rseq here: the layer is the thread heaps underneath"; \
  } while (0)

// n blocks of 64 bytes allocated, then freed: this CPU's stack of the
// class full (it holds 1,024), the rest on the span's lists.
void fill_this_cpus_stack(std::size_t n) {
  std::vector<void*> v(n);
  for (auto& b : v) b = C::alloc(64);
  for (void* b : v) C::dealloc(b);
}

// free(p); free(p) of a block that waits in the CPU's stack: caught at the
// second free, for every size the stacks hold.
TEST(PercpuChecksDeathTest, DoubleFreeOfEveryCachedSize) {
  SKIP_UNLESS_CACHED();
  for (std::size_t n : {1, 16, 48, 64, 200, 1024})
    EXPECT_EXIT(
        {
          void* p = cached_block(n);
          C::dealloc(p);
          C::dealloc(p);
        },
        testing::KilledBySignal(SIGABRT), kDoubleFree)
        << n;
}

// free(p); free(100 others); free(p).
TEST(PercpuChecksDeathTest, DelayedDoubleFree) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        void* p = cached_block(48);
        std::vector<void*> v(100);
        for (auto& b : v) b = C::alloc(48);
        C::dealloc(p);
        for (void* b : v) C::dealloc(b);
        C::dealloc(p);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// The first free put p on one CPU's stack, the second comes from a thread on
// another CPU: the look goes through every CPU's stack of the class.
TEST(PercpuChecksDeathTest, DoubleFreeFromAnotherCpu) {
  SKIP_UNLESS_CACHED();
  int a = nth_allowed_cpu(0), b = nth_allowed_cpu(1);
  if (b < 0) GTEST_SKIP() << "one CPU";
  EXPECT_EXIT(
      {
        if (!pin_to(b)) std::abort();
        C::dealloc(cached_block(48));  // CPU b gets its region
        if (!pin_to(a)) std::abort();
        void* p = cached_block(48);
        C::dealloc(p);  // on CPU a's stack
        std::thread([p, b] {
          if (!pin_to(b)) std::abort();
          C::dealloc(p);
        }).join();
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// A block freed through the heaps (its stack was full, so it went on its
// span's free list with the key), then freed again into a CPU's stack: the
// look through the stacks finds nothing, the heaps' walk finds it.
TEST(PercpuChecksDeathTest, DoubleFreeOfABlockOnTheSpansList) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        std::vector<void*> v(4000);
        for (auto& b : v) b = C::alloc(64);
        void* p = v.back();
        v.pop_back();
        void* keep = v.back();  // p's span keeps a live block: never released
        v.pop_back();
        for (void* b : v) C::dealloc(b);  // the stack takes 1,024, the span's lists the rest
        C::dealloc(p);                     // the stack full: on its span's list
        (void)keep;
        for (int i = 0; i < 8; ++i) (void)C::alloc(64);  // room in the stack again
        C::dealloc(p);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// The first free went to the heaps from a thread that does not own the
// block (its CPU's stack was full: an outbox, then the owner's inbox, holds
// it, its second word no key but the batch's), the second lands in a CPU's
// stack. Nothing at the second free can tell (issue 11); the owner's sort
// of its inbox finds the key the stack's push stored, and must look through
// the stacks as well as its own lists (it found nothing before 2026-11-27:
// the block went on the span's free list while it also waited in the stack,
// and two mallocs handed it out).
TEST(PercpuChecksDeathTest, RemoteFreeThenCachedFree) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        int cpu = nth_allowed_cpu(0);
        if (!pin_to(cpu)) std::abort();
        std::atomic<void*> block{nullptr};
        std::atomic<int> go{0};
        // The owner: its heap hands out p, and it sorts its inbox as it exits.
        std::thread owner([&] {
          void* p = tenon::default_allocator::alloc(64);
          void* keep = tenon::default_allocator::alloc(64);  // p's span stays the owner's
          (void)keep;
          block.store(p);
          while (go.load() == 0) std::this_thread::yield();
        });
        while (block.load() == nullptr) std::this_thread::yield();
        void* p = block.load();
        // This CPU's stack of 64-byte blocks full.
        fill_this_cpus_stack(1100);
        std::thread([p, cpu] {
          if (!pin_to(cpu)) std::abort();
          C::dealloc(p);  // the stack full: to the heaps, a remote free (delivered as the thread exits)
        }).join();
        void* room = C::alloc(64);  // one slot free again
        (void)room;
        C::dealloc(p);  // the second free: on this CPU's stack
        go.store(1);
        owner.join();  // the owner's exit sorts its inbox: p holds the key
        std::fprintf(stderr, "not reported\n");
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// RemoteFreeThenCachedFree with a malloc on that CPU between the second
// free and the owner's sort (issue 11's gaps, item 1): the malloc pops p
// and clears the key its push stored, and the sort found nothing, put p on
// its span's list while the program held it, and two mallocs handed it out
// (missed until 2026-11-27, branch gap). The batch's block now holds the
// key from its first free, so the second free finds it.
TEST(PercpuChecksDeathTest, RemoteFreeThenCachedFreeThenMalloc) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        int cpu = nth_allowed_cpu(0);
        if (!pin_to(cpu)) std::abort();
        std::atomic<void*> block{nullptr};
        std::atomic<int> go{0};
        std::thread owner([&] {
          void* p = tenon::default_allocator::alloc(64);
          void* keep = tenon::default_allocator::alloc(64);
          (void)keep;
          block.store(p);
          while (go.load() == 0) std::this_thread::yield();
        });
        while (block.load() == nullptr) std::this_thread::yield();
        void* p = block.load();
        fill_this_cpus_stack(1100);  // this CPU's stack of 64-byte blocks full
        std::thread([p, cpu] {
          if (!pin_to(cpu)) std::abort();
          C::dealloc(p);  // the stack full: a remote free, delivered as the thread exits
        }).join();
        (void)C::alloc(64);  // one slot free again
        C::dealloc(p);       // the second free: on this CPU's stack
        void* q = C::alloc(64);  // p again, its key cleared
        go.store(1);
        owner.join();  // the owner's exit sorts its inbox
        std::fprintf(stderr, "not reported (p %p, the malloc after it %p)\n", p, q);
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// The same through a span's remote list (issue 11's gaps, item 1: "the same
// via an abandoned span's list", found by reading): the owner has exited,
// its heap is parked with its inbox closed, and still owns the span, so
// frees of p are cached; a first free that misses the stack is delivered
// onto the span's remote list (the closed inbox), unkeyed, and the second,
// on a CPU's stack, found no key. Whoever takes the heap over, or dissolves
// it, collects the list and puts p on the span's free list while the stack
// (or the program, after a malloc) still holds it.
TEST(PercpuChecksDeathTest, RemoteFreeIntoAnExitedOwnersSpanThenCachedFree) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        int cpu = nth_allowed_cpu(0);
        if (!pin_to(cpu)) std::abort();
        void* p = nullptr;
        std::thread([&p] {
          p = tenon::default_allocator::alloc(64);
          void* keep = tenon::default_allocator::alloc(64);  // the span keeps a live block
          (void)keep;
        }).join();  // the owner exits: its heap parked, its inbox closed
        fill_this_cpus_stack(1100);  // this CPU's stack full
        C::dealloc(p);                     // a remote free, into this thread's outbox
        (void)tenon::default_allocator::alloc(5000);  // a slow path delivers it: the span's remote list
        (void)C::alloc(64);                // one slot free again
        C::dealloc(p);                     // the second free: on this CPU's stack
        void* q = C::alloc(64);            // p again
        std::fprintf(stderr, "not reported (p %p, the malloc after it %p)\n", p, q);
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// The same with the owner's own second free: its free goes onto its CPU's
// stack too (the thread heaps never see it), and its exit sorts the inbox
// that holds the first.
TEST(PercpuChecksDeathTest, RemoteFreeThenOwnersCachedFree) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        int cpu = nth_allowed_cpu(0);
        if (!pin_to(cpu)) std::abort();
        std::atomic<void*> block{nullptr};
        std::atomic<int> go{0};
        std::thread owner([&] {
          if (!pin_to(cpu)) std::abort();
          void* p = tenon::default_allocator::alloc(64);
          void* keep = tenon::default_allocator::alloc(64);
          (void)keep;
          block.store(p);
          while (go.load() == 0) std::this_thread::yield();
          (void)C::alloc(64);  // one slot free in this CPU's stack
          C::dealloc(p);       // the second free, by the owner, on the stack
        });
        while (block.load() == nullptr) std::this_thread::yield();
        void* p = block.load();
        fill_this_cpus_stack(1100);  // the stack full
        std::thread([p] { C::dealloc(p); }).join();  // to the heaps: the owner's inbox
        go.store(1);
        owner.join();
        std::fprintf(stderr, "not reported\n");
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kDoubleFree);
}

// Interior pointers of blocks the stacks hold, and an aligned pointer 8
// bytes in (delete of a new[]'d array with destructors).
TEST(PercpuChecksDeathTest, InteriorPointers) {
  SKIP_UNLESS_CACHED();
  for (std::size_t n : {16, 48, 64, 1024})
    EXPECT_EXIT(C::dealloc(static_cast<char*>(cached_block(n)) + 8), testing::KilledBySignal(SIGABRT), kNotABlock)
        << n;
  EXPECT_EXIT(C::dealloc(static_cast<char*>(cached_block(64)) + 32), testing::KilledBySignal(SIGABRT), kNotABlock);
}

// Another thread's free of an interior pointer: the same test against the
// span's bound.
TEST(PercpuChecksDeathTest, InteriorPointerFreedByAnotherThread) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(
      {
        char* p = static_cast<char*>(cached_block(96));
        std::thread([p] { C::dealloc(p + 48); }).join();
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGABRT), kNotABlock);
}

// A slot of a 16-byte span never carved (free(p + 16 KiB), the misuse
// programs' free_never_allocated_near).
TEST(PercpuChecksDeathTest, NeverCarvedSlot) {
  SKIP_UNLESS_CACHED();
  EXPECT_EXIT(C::dealloc(static_cast<char*>(cached_block(16)) + 16 * 1024), testing::KilledBySignal(SIGABRT),
              kNeverAllocated);
}

// realloc of a block waiting in a CPU's stack (freed): the thread heaps
// underneath take it for a live block (they know nothing of the stacks) and
// would resize it in place, handing the program a block the next malloc
// also returns.
TEST(PercpuChecksDeathTest, ReallocOfABlockWaitingInAStack) {
  SKIP_UNLESS_CACHED();
  for (std::size_t n : {40, 48})  // in place (40 -> 48 B fits), and moved
    EXPECT_EXIT(
        {
          void* p = cached_block(48);
          C::dealloc(p);
          void* q = tenon::layer_ops<C>::realloc(p, n == 40 ? 40 : 4000);
          std::fprintf(stderr, "realloc returned %p\n", q);
          std::_Exit(0);
        },
        testing::KilledBySignal(SIGABRT), "tenon: realloc\\(0x[0-9a-f]+\\): double free")
        << n;
}

// A live block whose second word holds the key (the program copied it from
// a freed block) is taken for a freed one (since 2026-11-27, branch gap;
// free_key.h), through the stacks as through the thread heaps.
TEST(PercpuChecksDeathTest, LiveBlockHoldingTheKeyIsTakenForFreed) {
  SKIP_UNLESS_CACHED();
  for (std::size_t n : {16, 64, 1024})
    EXPECT_EXIT(
        {
          void* p = cached_block(n);
          set_second(p, tenon::free_key());
          C::dealloc(p);
          std::fprintf(stderr, "not reported\n");
          std::_Exit(0);
        },
        testing::KilledBySignal(SIGABRT), kDoubleFree)
        << n;
}

// No block malloc hands out holds the key: from a CPU's stack, from the
// heaps after a stack overflowed into them, after trim drained the stacks,
// and after frees by other threads.
TEST(PercpuChecks, NoBlockHandedOutHoldsTheKey) {
  std::vector<void*> v;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t n = 1; n <= 1024; n += 7)
      for (int i = 0; i < 3; ++i) v.push_back(C::alloc(n));
    if (round == 1) {
      std::thread([&v] {
        for (void* p : v) C::dealloc(p);
      }).join();
    } else {
      for (void* p : v) C::dealloc(p);
    }
    v.clear();
    if (round == 2) C::trim(0);
    for (std::size_t n = 1; n <= 1024; n += 7)
      for (int i = 0; i < 3; ++i) {
        void* p = C::alloc(n);
        ASSERT_NE(p, nullptr);
        EXPECT_NE(second(p), tenon::free_key()) << n;
        v.push_back(p);
      }
    for (void* p : v) C::dealloc(p);
    v.clear();
  }
}

// Bursts past a stack's size, frees by another thread, and trim from another
// thread (the drained blocks reach the heaps underneath as remote frees): no
// report, every block usable.
TEST(PercpuChecks, BurstsRemoteFreesAndTrimReportNothing) {
  std::vector<void*> v(5000);
  for (int round = 0; round < 4; ++round) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = C::alloc(16 + 48 * (i % 8));
      ASSERT_NE(v[i], nullptr);
      std::memset(v[i], 0xab, 16);
    }
    if (round % 2) {
      std::thread([&v] {
        for (void* p : v) C::dealloc(p);
        C::trim(0);
      }).join();
    } else {
      for (void* p : v) C::dealloc(p);
    }
  }
  C::trim(0);
}

}  // namespace
