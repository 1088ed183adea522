// The C++ adapters of <tenon/heap.hpp> with the standard containers:
// tenon::heap (RAII), tenon::heap_resource (std::pmr), tenon::allocator<T>
// (over the default allocator and over a heap).
#include <gtest/gtest.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory_resource>
#include <string>
#include <thread>
#include <vector>

#include "tenon/heap.hpp"

namespace {

TEST(HeapsCxx, HeapIsRaiiAndMovable) {
  tenon::heap a;
  void* p = a.malloc(100);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(a.calloc(10, 10), nullptr);
  p = a.realloc(p, 5000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.aligned_alloc(4096, 10)) % 4096, 0u);
  a.free(p);
  tenon::heap b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);
  ASSERT_NE(b.get(), nullptr);
  EXPECT_NE(b.malloc(8), nullptr);
  b.reset();
  EXPECT_NE(b.malloc(8), nullptr);
  tenon::heap c;
  c = std::move(b);  // c's own heap is destroyed, b's moves in
  EXPECT_NE(c.malloc(8), nullptr);
}  // c destroys the heap with its blocks

TEST(HeapsCxx, HeapLimitReportsFailure) {
  tenon::heap h(256 * 1024);
  std::size_t n = 0;
  while (h.malloc(1000)) ++n;
  EXPECT_GT(n, 100u);
  EXPECT_LT(n, 300u);
}

TEST(HeapsCxx, PmrContainersOnAHeapResource) {
  tenon::heap_resource res;
  {
    std::pmr::vector<int> v(&res);
    for (int i = 0; i < 100000; ++i) v.push_back(i);
    long sum = 0;
    for (int x : v) sum += x;
    EXPECT_EQ(sum, 100000L * 99999 / 2);
    std::pmr::map<int, std::pmr::string> m(&res);
    for (int i = 0; i < 10000; ++i) m.emplace(i, std::pmr::string(40, static_cast<char>('a' + i % 26)));
    EXPECT_EQ(m.size(), 10000u);
    EXPECT_EQ(std::string(m.at(27)), std::string(40, 'b'));
  }  // containers free their blocks (cheap do_deallocate)
  // A tree dropped without destructors: release() takes everything at once.
  auto* m = new std::pmr::map<int, int>(&res);
  for (int i = 0; i < 50000; ++i) (*m)[i] = i;
  res.release();
  ::operator delete(m);  // the map object itself, not its nodes
  std::pmr::vector<double> again(&res);
  again.assign(1000, 1.5);
  EXPECT_EQ(again[999], 1.5);
  EXPECT_TRUE(res.is_equal(res));
  tenon::heap_resource other;
  EXPECT_FALSE(res.is_equal(other));
  // Over-aligned requests.
  void* p = res.allocate(100, 256);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  res.deallocate(p, 100, 256);
}  // destroying the resource frees whatever is left

TEST(HeapsCxx, PmrResourceSharedByThreads) {
  tenon::heap_resource res;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&res, t] {
      std::pmr::map<int, int> m(&res);
      for (int i = 0; i < 20000; ++i) m[i] = i + t;
      EXPECT_EQ(m[19999], 19999 + t);
    });
  for (auto& th : threads) th.join();
}

struct alignas(64) wide {
  char bytes[64];
};

TEST(HeapsCxx, AllocatorOverTheDefaultAllocator) {
  std::vector<int, tenon::allocator<int>> v;
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  EXPECT_EQ(v[99999], 99999);
  EXPECT_TRUE(tenon_owns(v.data()));
  std::map<int, std::string, std::less<>, tenon::allocator<std::pair<const int, std::string>>> m;
  for (int i = 0; i < 1000; ++i) m[i] = std::to_string(i);
  EXPECT_EQ(m[500], "500");
  std::vector<wide, tenon::allocator<wide>> w(10);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.data()) % 64, 0u);
  EXPECT_TRUE(tenon::allocator<int>() == tenon::allocator<long>());
}

TEST(HeapsCxx, AllocatorOverAHeap) {
  tenon::heap h;
  tenon::allocator<int> a(h);
  EXPECT_FALSE(a == tenon::allocator<int>());
  {
    std::vector<int, tenon::allocator<int>> v(a);
    for (int i = 0; i < 100000; ++i) v.push_back(i);
    EXPECT_EQ(v[12345], 12345);
    std::list<int, tenon::allocator<int>> l(a);
    for (int i = 0; i < 10000; ++i) l.push_back(i);
    EXPECT_EQ(l.size(), 10000u);
    using pair_alloc = tenon::allocator<std::pair<const int, int>>;
    std::map<int, int, std::less<>, pair_alloc> m{pair_alloc(a)};
    for (int i = 0; i < 10000; ++i) m[i] = -i;
    EXPECT_EQ(m[77], -77);
    EXPECT_TRUE(m.get_allocator() == a);
    std::vector<wide, tenon::allocator<wide>> w(5, wide{}, tenon::allocator<wide>(a));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.data()) % 64, 0u);
  }
  // A container whose nodes are dropped with the heap: never destroyed.
  auto* leaked = new std::vector<int, tenon::allocator<int>>(a);
  leaked->resize(1000000);
  h.reset();
  ::operator delete(leaked);  // the vector object itself (std allocation), not its elements
}

}  // namespace
