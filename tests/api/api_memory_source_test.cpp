// tenon_set_memory_source and tenon_use_fixed_region (docs/api.md): a source
// must be installed before tenon's first reservation, so each case runs in a
// child process of its own (gtest's death-test fork) that has not called
// tenon yet.
#include <errno.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tenon/tenon.h"

namespace {

constexpr std::size_t kRegion = std::size_t{64} << 20;
alignas(4096) char g_region[kRegion];

bool in_region(const void* p) {
  auto* c = static_cast<const char*>(p);
  return c >= g_region && c < g_region + kRegion;
}

// Exit status 0 if every expectation held; a failed one prints and exits 1.
#define CHILD_CHECK(cond)                                         \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "failed: %s (line %d)\n", #cond, __LINE__); \
      _exit(1);                                                   \
    }                                                             \
  } while (0)

void fixed_region_serves_every_size() {
  CHILD_CHECK(tenon_use_fixed_region(g_region, kRegion) == 0);
  std::vector<void*> blocks;
  for (std::size_t n : {std::size_t{1}, std::size_t{48}, std::size_t{4000}, std::size_t{100000},
                        std::size_t{3} << 20, std::size_t{9} << 20}) {
    void* p = tenon_malloc(n);
    CHILD_CHECK(p && in_region(p));
    memset(p, 0x5a, n);
    blocks.push_back(p);
  }
  void* a = tenon_aligned_alloc(1 << 20, 1 << 20);
  CHILD_CHECK(a && in_region(a) && reinterpret_cast<std::uintptr_t>(a) % (1 << 20) == 0);
  // realloc of a huge block cannot remap memory the kernel does not own: it copies.
  void* g = tenon_realloc(blocks.back(), std::size_t{12} << 20);
  CHILD_CHECK(g && in_region(g) && static_cast<unsigned char*>(g)[(std::size_t{9} << 20) - 1] == 0x5a);
  blocks.back() = g;
  for (void* p : blocks) tenon_free(p);
  tenon_free(a);
  // A second source is refused once one is set.
  CHILD_CHECK(tenon_use_fixed_region(g_region, kRegion) == EBUSY);
  _exit(0);
}

void fixed_region_runs_out_with_enomem_and_recovers() {
  CHILD_CHECK(tenon_use_fixed_region(g_region, kRegion) == 0);
  void* first = tenon_malloc(64);  // the first chunk, before the region runs out
  CHILD_CHECK(first && in_region(first));
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) {
    void* p = tenon_malloc(std::size_t{5} << 20);
    if (!p) {
      CHILD_CHECK(errno == ENOMEM);
      break;
    }
    CHILD_CHECK(in_region(p));
    blocks.push_back(p);
  }
  CHILD_CHECK(!blocks.empty() && blocks.size() < 64);
  // Out of memory changed nothing: small blocks still come from the chunk,
  // and a freed huge block (kept by the huge cache) serves the next request.
  void* small = tenon_malloc(64);
  CHILD_CHECK(small && in_region(small));
  tenon_free(blocks.back());
  blocks.back() = tenon_malloc(std::size_t{5} << 20);
  CHILD_CHECK(blocks.back() && in_region(blocks.back()));
  for (void* p : blocks) tenon_free(p);
  tenon_free(small);
  tenon_free(first);
  _exit(0);
}

int g_reserves = 0, g_releases = 0;
void* counting_reserve(std::size_t size, std::size_t align, void*) {
  ++g_reserves;
  void* raw = mmap(nullptr, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto start = (reinterpret_cast<std::uintptr_t>(raw) + align - 1) & ~(align - 1);
  return reinterpret_cast<void*>(start);  // the slack stays mapped: a test
}
void counting_release(void*, std::size_t, void*) { ++g_releases; }

void custom_source_is_used_and_released_to() {
  tenon_memory_source source{counting_reserve, counting_release, nullptr};
  CHILD_CHECK(tenon_set_memory_source(&source) == 0);
  void* small = tenon_malloc(100);
  void* huge = tenon_malloc(std::size_t{80} << 20);
  CHILD_CHECK(small && huge && g_reserves >= 2);
  // Kept by the huge cache at free (since 2026-11-29 a block over its 64 MiB
  // limit too, for a shorter time); the trim gives it back to the source.
  tenon_free(huge);
  tenon_malloc_trim(0);
  CHILD_CHECK(g_releases >= 1);
  tenon_free(small);
  _exit(0);
}

void too_late_is_ebusy() {
  void* p = tenon_malloc(10);
  CHILD_CHECK(p);
  CHILD_CHECK(tenon_use_fixed_region(g_region, kRegion) == EBUSY);
  tenon_memory_source source{counting_reserve, nullptr, nullptr};
  CHILD_CHECK(tenon_set_memory_source(&source) == EBUSY);
  tenon_free(p);
  _exit(0);
}

void bad_arguments_are_einval() {
  CHILD_CHECK(tenon_set_memory_source(nullptr) == EINVAL);
  tenon_memory_source no_reserve{nullptr, counting_release, nullptr};
  CHILD_CHECK(tenon_set_memory_source(&no_reserve) == EINVAL);
  CHILD_CHECK(tenon_use_fixed_region(nullptr, kRegion) == EINVAL);
  CHILD_CHECK(tenon_use_fixed_region(g_region, 4096) == EINVAL);
  // None of them installed anything: a good one still can be.
  CHILD_CHECK(tenon_use_fixed_region(g_region, kRegion) == 0);
  _exit(0);
}

TEST(MemorySource, FixedRegionServesEverySize) {
  EXPECT_EXIT(fixed_region_serves_every_size(), ::testing::ExitedWithCode(0), "");
}
TEST(MemorySource, FixedRegionRunsOutWithEnomemAndRecovers) {
  EXPECT_EXIT(fixed_region_runs_out_with_enomem_and_recovers(), ::testing::ExitedWithCode(0), "");
}
TEST(MemorySource, CustomSourceIsUsedAndReleasedTo) {
  EXPECT_EXIT(custom_source_is_used_and_released_to(), ::testing::ExitedWithCode(0), "");
}
TEST(MemorySource, TooLateIsEbusy) { EXPECT_EXIT(too_late_is_ebusy(), ::testing::ExitedWithCode(0), ""); }
TEST(MemorySource, BadArgumentsAreEinval) {
  EXPECT_EXIT(bad_arguments_are_einval(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
