// Death tests for libtenon-percpu.so (the default allocator behind per-CPU
// caches, include/tenon/percpu/): every misuse TenonDetects.* expects the
// default libtenon.so to stop must be stopped the same way when the block's
// class is one the per-CPU stacks hold (up to 1 KiB), where the free goes to
// a CPU's stack instead of the thread heap's checks: at the bad call, by
// SIGABRT, with a stderr line naming tenon, the call and the pointer.
// Where rseq is missing in the child (qemu-user, valgrind) the layer is its
// fallback, the thread heaps, and these pass through their checks.
#include <string>

#include "misuse_runner.h"

namespace tenon_test {
namespace {

// One misuse case of the C program, by name.
class PercpuDetects : public ::testing::TestWithParam<const char*> {};
TEST_P(PercpuDetects, StoppedAtTheCall) {
  expect_tenon_stops(TENON_PERCPU_LIBRARY, TENON_MISUSE_PROGRAM, GetParam());
}
std::string case_name(const ::testing::TestParamInfo<const char*>& info) { return info.param; }

// The cases a CPU's stack used to take without a look (docs/security.md,
// the tenon-percpu row): blocks of 8 to 64 B, and delete of a new[]'d array
// below.
INSTANTIATE_TEST_SUITE_P(CachedBlocks, PercpuDetects,
                         ::testing::Values("double_free_8", "double_free_delayed_8", "free_after_realloc_8",
                                           "free_interior_64", "free_never_allocated_near"),
                         case_name);
TEST(PercpuDetectsCxx, DeleteOfNewArray) {
  expect_tenon_stops(TENON_PERCPU_LIBRARY, TENON_MISUSE_CXX_PROGRAM, "delete_new_array");
}

// The rest of TenonDetects.*, which the per-CPU build stopped already
// (larger blocks go to the heaps underneath): kept stopped.
INSTANTIATE_TEST_SUITE_P(
    OtherBlocks, PercpuDetects,
    ::testing::Values("double_free_4k", "double_free_256k", "double_free_4m", "double_free_delayed_4k",
                      "double_free_delayed_256k", "double_free_delayed_4m", "free_after_realloc_4k",
                      "free_after_realloc_256k", "free_after_realloc_4m", "free_interior_4k", "free_interior_256k",
                      "free_interior_4m", "free_unaligned_8", "free_unaligned_4k", "free_unaligned_256k",
                      "free_unaligned_4m", "free_never_allocated_far"),
    case_name);

// No heap address in a fresh block: defended already.
TEST(PercpuDefends, FreshBlockPointer8) { expect_tenon_defends(TENON_PERCPU_LIBRARY, "fresh_block_pointer_8"); }
TEST(PercpuDefends, FreshBlockPointer4K) { expect_tenon_defends(TENON_PERCPU_LIBRARY, "fresh_block_pointer_4k"); }

}  // namespace
}  // namespace tenon_test
