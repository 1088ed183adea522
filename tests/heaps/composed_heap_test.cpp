// A composition instantiated as a heap (<tenon/heap_layer.hpp>): the secure
// layers over a first-class heap of their own, beside the default
// allocator. Its blocks get the secure checks, its limit holds, and
// layer_ops<C>::release() drops every block at once, with the quarantine's
// waiting blocks given back first (checked, and big ones made accessible
// again) so that nothing of the heap stays referenced after it.
#include <errno.h>
#include <gtest/gtest.h>
#include <tenon/heap_layer.hpp>
#include <tenon/layer.hpp>
#include <tenon/secure/layers.hpp>
#include <tenon/tenon.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace {

struct untrusted_tag {
  static constexpr std::size_t limit = 8u << 20;
};
using untrusted = tenon::secure::layers<tenon::heap_layer<untrusted_tag>>;
using untrusted_ops = tenon::layer_ops<untrusted>;

// A plain composition over another heap: a layer that counts.
struct counted_tag {};
template <class I>
struct counting : tenon::pass_through<I> {
  static inline std::atomic<unsigned long> allocs{0};
  static void* alloc(std::size_t n) noexcept {
    allocs.fetch_add(1, std::memory_order_relaxed);
    return I::alloc(n);
  }
};
using counted = counting<tenon::heap_layer<counted_tag>>;

static_assert(tenon::releasable<untrusted>);
static_assert(tenon::releasable<counted>);
static_assert(!tenon::releasable<tenon::default_allocator>, "the default allocator cannot drop everything");
static_assert(!tenon::releasable<tenon::secure::layers<tenon::default_allocator>>);

void fill(void* p, std::size_t n, unsigned char v) { std::memset(p, v, n); }

TEST(ComposedHeap, SecureChecksOnItsBlocksNotOnTheDefaults) {
  const std::size_t sizes[] = {1, 24, 100, 4096, 32768, 100000, 3u << 20};
  for (std::size_t n : sizes) {
    void* p = untrusted::alloc(n);
    ASSERT_NE(p, nullptr) << n;
    fill(p, n, 0x5a);
    // The canary layer's usable size is exactly the size asked.
    EXPECT_EQ(untrusted::usable_size(p), n);
    untrusted::dealloc(p);
  }
  void* d = tenon_malloc(24);
  ASSERT_NE(d, nullptr);
  EXPECT_GE(tenon_malloc_usable_size(d), 24u);
  tenon_free(d);
}

TEST(ComposedHeapDeathTest, OverflowOfASecureHeapBlockIsCaught) {
  // "fast" (fork, no exec): under qemu-user a guest cannot exec the test
  // binary again ("Exec format error"), which the threadsafe style does.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(untrusted::alloc(40));
        // One byte past the block, the canary's first, changed: flipped, not
        // set to a constant, which that byte held in 1 run of 256 (the
        // canary is drawn per process) and the test then failed to die.
        p[40] = static_cast<char>(~p[40]);
        untrusted::dealloc(p);
      },
      "tenon:.*free");
}

TEST(ComposedHeap, ReallocAndCallocStayInTheComposition) {
  auto* p = static_cast<unsigned char*>(untrusted_ops::alloc_zeroed(3000));
  ASSERT_NE(p, nullptr);
  for (std::size_t i = 0; i < 3000; ++i) ASSERT_EQ(p[i], 0) << i;
  fill(p, 3000, 7);
  p = static_cast<unsigned char*>(untrusted_ops::realloc(p, 70000));
  ASSERT_NE(p, nullptr);
  for (std::size_t i = 0; i < 3000; ++i) ASSERT_EQ(p[i], 7) << i;
  EXPECT_EQ(untrusted::usable_size(p), 70000u);
  untrusted::dealloc(p);
}

// The limit is the heap's: blocks up to it, ENOMEM past it, and release()
// makes the room again (every block, from every thread, is gone).
TEST(ComposedHeap, LimitThenReleaseFromThreads) {
  for (int round = 0; round < 3; ++round) {
    std::atomic<unsigned long> got{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 20000; ++i) {  // 20 MB: far past the limit
          errno = 0;
          void* p = untrusted::alloc(1000);
          if (!p) {
            if (errno == ENOMEM) refused.fetch_add(1);
            return;
          }
          fill(p, 1000, 1);
          got.fetch_add(1000);
        }
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(refused.load(), 4) << "round " << round << ": every thread reaches the 8 MiB limit";
    EXPECT_GT(got.load(), 4u << 20) << "round " << round;
    EXPECT_LE(got.load(), 8u << 20) << "round " << round;
    untrusted_ops::release();
  }
  void* p = untrusted::alloc(1000);
  ASSERT_NE(p, nullptr);
  untrusted::dealloc(p);
}

// Blocks waiting in the quarantine when the heap drops everything: release()
// gives them back first. Were they kept, the quarantine would later check
// and free memory the heap has since handed out again.
TEST(ComposedHeap, ReleaseEmptiesTheQuarantineFirst) {
  for (int round = 0; round < 20; ++round) {
    // 20 big blocks (4 MB) and 100 small ones: within the 8 MiB limit.
    auto size_of = [](int i) -> std::size_t { return i % 6 ? 48 : 200000; };
    std::vector<void*> blocks;
    for (int i = 0; i < 120; ++i) {
      void* p = untrusted::alloc(size_of(i));
      ASSERT_NE(p, nullptr);
      blocks.push_back(p);
    }
    for (void* p : blocks) untrusted::dealloc(p);  // they wait in the quarantines
    untrusted_ops::release();
    // The heap's memory again, written whole: a big block still made
    // inaccessible by the quarantine would fault here.
    blocks.clear();
    for (int i = 0; i < 120; ++i) {
      std::size_t n = size_of(i);
      void* p = untrusted::alloc(n);
      ASSERT_NE(p, nullptr);
      fill(p, n, 0xee);
      blocks.push_back(p);
    }
    // Nonzero bytes in blocks a stale quarantine slot still named would
    // read as a write after free when the slot is reused.
    for (void* p : blocks) untrusted::dealloc(p);
    untrusted_ops::release();
  }
}

TEST(ComposedHeap, TwoCompositionsTwoHeaps) {
  void* a = counted::alloc(64);
  void* b = untrusted::alloc(64);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(tenon::heap_layer<counted_tag>::heap(), tenon::heap_layer<untrusted_tag>::heap());
  EXPECT_EQ(counted::allocs.load(), 1u);
  untrusted::dealloc(b);
  tenon::layer_ops<counted>::release();  // a is gone with its heap; the other heap is untouched
  void* c = untrusted::alloc(64);
  ASSERT_NE(c, nullptr);
  untrusted::dealloc(c);
}

}  // namespace
