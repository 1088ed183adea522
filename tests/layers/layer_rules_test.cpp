// The composition rules of <tenon/layer.hpp>, on fake layers that record
// which function served each call: which hooks an outer layer inherits,
// when the generic forms take over, and that standard_api answers the
// standard's edge cases before a layer sees the request.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "tenon/layer.hpp"

namespace {

std::string g_log;  // which function served, in call order
alignas(64) unsigned char g_arena[1 << 16];
std::size_t g_used = 0;

// An innermost layer with every hook, serving from a static bump arena.
struct base {
  static void* alloc(std::size_t n) noexcept {
    g_log += "base.alloc ";
    return bump(n, 16);
  }
  static void* alloc_aligned(std::size_t align, std::size_t n) noexcept {
    g_log += "base.alloc_aligned ";
    return bump(n, align);
  }
  static void dealloc(void* p) noexcept {
    if (p) g_log += "base.dealloc ";
  }
  static std::size_t usable_size(const void* p) noexcept { return p ? 64 : 0; }
  static void* realloc(void* p, std::size_t) noexcept {
    g_log += "base.realloc ";
    return p;
  }
  static void* alloc_zeroed(std::size_t n) noexcept {
    g_log += "base.alloc_zeroed ";
    return bump(n, 16);
  }
  static void dealloc_sized(void*, std::size_t) noexcept { g_log += "base.dealloc_sized "; }
  static void dealloc_aligned_sized(void*, std::size_t, std::size_t) noexcept { g_log += "base.dealloc_aligned_sized "; }
  static int trim(std::size_t) noexcept { return 1; }

  static void* bump(std::size_t n, std::size_t align) noexcept {
    g_used = (g_used + align - 1) & ~(align - 1);
    if (g_used + (n < 64 ? 64 : n) > sizeof g_arena) {
      errno = ENOMEM;
      return nullptr;
    }
    void* p = g_arena + g_used;
    g_used += n < 64 ? 64 : n;
    return p;
  }
};

// A layer with only the four required functions.
struct minimal {
  static void* alloc(std::size_t n) noexcept { return base::alloc(n); }
  static void* alloc_aligned(std::size_t a, std::size_t n) noexcept { return base::alloc_aligned(a, n); }
  static void dealloc(void* p) noexcept { base::dealloc(p); }
  static std::size_t usable_size(const void* p) noexcept { return base::usable_size(p); }
};

template <class I>
struct changes_alloc : tenon::pass_through<I> {
  static void* alloc(std::size_t n) noexcept {
    g_log += "outer.alloc ";
    return I::alloc(n);
  }
};

template <class I>
struct changes_dealloc : tenon::pass_through<I> {
  static void dealloc(void* p) noexcept {
    if (p) g_log += "outer.dealloc ";
    I::dealloc(p);
  }
};

template <class I>
struct own_realloc : changes_alloc<I> {
  static void* realloc(void* p, std::size_t n) noexcept {
    g_log += "outer.realloc ";
    return tenon::layer_ops<I>::realloc(p, n);
  }
};

struct Layers : ::testing::Test {
  void SetUp() override {
    g_log.clear();
    g_used = 0;
  }
};

static_assert(tenon::layer<base> && tenon::layer<minimal> && tenon::layer<tenon::default_allocator>);
static_assert(tenon::layer<tenon::pass_through<tenon::pass_through<tenon::default_allocator>>>);
static_assert(tenon::layer<changes_alloc<base>> && tenon::layer<own_realloc<changes_dealloc<base>>>);
static_assert(!tenon::layer<int>);

TEST_F(Layers, PassThroughForwardsEveryHook) {
  using L = tenon::layer_ops<tenon::pass_through<tenon::pass_through<base>>>;
  void* p = L::alloc(10);
  L::realloc(p, 100);
  L::alloc_zeroed(8);
  L::dealloc_sized(p, 10);
  L::dealloc_aligned_sized(p, 64, 10);
  EXPECT_EQ(L::trim(0), 1);
  EXPECT_EQ(g_log, "base.alloc base.realloc base.alloc_zeroed base.dealloc_sized base.dealloc_aligned_sized ");
}

TEST_F(Layers, ChangingAllocMakesInheritedHooksGeneric) {
  // The inner realloc/calloc/sized free would bypass the outer alloc: the
  // generic forms, built from the outer layer's own functions, serve them.
  using L = tenon::layer_ops<changes_alloc<base>>;
  void* p = L::alloc(10);
  g_log.clear();
  void* q = L::realloc(p, 100);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(g_log, "outer.alloc base.alloc base.dealloc ");
  g_log.clear();
  L::alloc_zeroed(8);
  L::dealloc_sized(q, 100);
  L::dealloc_aligned_sized(q, 16, 100);
  EXPECT_EQ(g_log, "outer.alloc base.alloc base.dealloc base.dealloc ");
}

// trim is inherited by every wrapper, like stats: it gives back memory no
// block holds, so it cannot bypass what a wrapper does to its blocks, and a
// wrapper that changes alloc (a counting layer) over a layer that caches
// (the per-CPU caches, the default engine's purge) kept malloc_trim from
// reaching them (it answered 0) until 2026-11-27.
TEST_F(Layers, EveryWrapperInheritsTrim) {
  EXPECT_EQ(tenon::layer_ops<changes_alloc<base>>::trim(0), 1);
  EXPECT_EQ(tenon::layer_ops<changes_dealloc<base>>::trim(0), 1);
  EXPECT_EQ(tenon::layer_ops<own_realloc<changes_dealloc<base>>>::trim(0), 1);
}

TEST_F(Layers, ChangingDeallocMakesSizedFreesGeneric) {
  using L = tenon::layer_ops<changes_dealloc<base>>;
  void* p = L::alloc(10);
  L::dealloc_sized(p, 10);
  L::dealloc_aligned_sized(p, 16, 10);
  EXPECT_EQ(g_log, "base.alloc outer.dealloc base.dealloc outer.dealloc base.dealloc ");
}

TEST_F(Layers, AHookALayerWritesItselfIsUsed) {
  using L = tenon::layer_ops<own_realloc<base>>;
  void* p = L::alloc(10);
  L::realloc(p, 100);
  EXPECT_EQ(g_log, "outer.alloc base.alloc outer.realloc base.realloc ");
}

TEST_F(Layers, MissingHooksGetGenericForms) {
  using L = tenon::layer_ops<minimal>;
  void* p = L::alloc(10);
  std::memset(p, 0xAB, 10);
  void* q = L::realloc(p, 20);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(static_cast<unsigned char*>(q)[9], 0xAB) << "generic realloc copies the old bytes";
  auto* z = static_cast<unsigned char*>(L::alloc_zeroed(32));
  ASSERT_NE(z, nullptr);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(z[i], 0);
  EXPECT_EQ(L::trim(0), 0);
}

// The stats hook: absent gives ENOSYS; every wrapper inherits its inner
// layer's, also one that changes alloc (the figures describe the memory
// underneath).
TEST_F(Layers, StatsHookIsInheritedByEveryWrapper) {
  tenon_stats s{};
  s.version = TENON_STATS_VERSION;
  EXPECT_EQ(tenon::layer_ops<minimal>::stats(&s), ENOSYS);
  EXPECT_EQ(tenon::layer_ops<changes_alloc<base>>::stats(&s), ENOSYS);
  EXPECT_EQ(tenon::layer_ops<changes_alloc<tenon::default_allocator>>::stats(&s), 0);
  EXPECT_EQ(s.classes, tenon::kNumClasses);
  EXPECT_EQ(tenon::layer_ops<tenon::pass_through<tenon::default_allocator>>::stats(nullptr), EINVAL);
}

TEST_F(Layers, StandardApiAnswersBadRequestsBeforeTheLayer) {
  using api = tenon::standard_api<base>;
  errno = 0;
  EXPECT_EQ(api::calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(api::aligned_alloc(3, 16), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void* out = nullptr;
  errno = 1234;
  EXPECT_EQ(api::posix_memalign(&out, 2, 16), EINVAL);
  EXPECT_EQ(api::posix_memalign(&out, 64, SIZE_MAX), ENOMEM);
  EXPECT_EQ(errno, 1234) << "posix_memalign reports through its result";
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(api::reallocarray(nullptr, SIZE_MAX, 2), nullptr);
  EXPECT_EQ(g_log, "") << "no layer function may see these requests";
}

TEST_F(Layers, StandardApiReallocEdgeCases) {
  using api = tenon::standard_api<base>;
  void* p = api::realloc(nullptr, 10);
  EXPECT_EQ(g_log, "base.alloc ");
  g_log.clear();
  errno = 0;
  EXPECT_EQ(api::realloc(p, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(g_log, "") << "an impossible size leaves the block alone";
  void* q = api::realloc(p, 0);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(g_log, "base.dealloc base.alloc ") << "realloc(p, 0) frees p and returns a minimal block";
}

// What the layer must check itself (docs/layers.md): malloc, calloc and
// unaligned operator new hand an impossible size on unchecked (the default
// build's fast path has no test for it); realloc, reallocarray and the
// aligned calls refuse it first. A layer that adds bytes to n must refuse
// n > PTRDIFF_MAX itself, or n wraps (as valgrind_annotations' did).
TEST_F(Layers, StandardApiPassesMallocSizesOnUnchecked) {
  using api = tenon::standard_api<base>;
  api::malloc(SIZE_MAX);
  api::calloc(1, SIZE_MAX);
  (void)api::op_new_nothrow(SIZE_MAX, tenon::detail::nothrow_form::scalar);
  EXPECT_EQ(g_log, "base.alloc base.alloc_zeroed base.alloc ");
  g_log.clear();
  void* p = api::malloc(10);
  g_log.clear();
  errno = 0;
  EXPECT_EQ(api::realloc(p, SIZE_MAX - 8), nullptr);
  EXPECT_EQ(api::reallocarray(p, 1, std::size_t{PTRDIFF_MAX} + 1), nullptr);
  EXPECT_EQ(api::aligned_alloc(64, SIZE_MAX), nullptr);
  EXPECT_EQ(api::memalign(64, SIZE_MAX), nullptr);
  EXPECT_EQ(api::valloc(SIZE_MAX - 4096), nullptr);
  EXPECT_EQ(api::pvalloc(SIZE_MAX / 2 + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(g_log, "") << "these refuse before the layer";
}

}  // namespace
