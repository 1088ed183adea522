// <tenon/heap.hpp> and the layer API in one translation unit: the C++ heap
// class and the engine's per-thread heaps have distinct names, so a program
// may compose layers and use first-class heaps side by side.
#include <gtest/gtest.h>
#include <tenon/default_allocator.hpp>
#include <tenon/heap.hpp>
#include <tenon/layer.hpp>

namespace {

template <class I>
struct counting : tenon::pass_through<I> {
  static inline unsigned long calls = 0;
  static void* alloc(std::size_t n) noexcept {
    ++calls;
    return I::alloc(n);
  }
};

TEST(HeapsWithLayers, BothInOneTranslationUnit) {
  using composed = counting<tenon::default_allocator>;
  void* a = composed::alloc(100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(composed::calls, 1u);
  composed::dealloc(a);
  tenon::heap h;
  void* b = h.malloc(100);
  ASSERT_NE(b, nullptr);
}

}  // namespace
