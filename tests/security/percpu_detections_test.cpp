// Death tests for libtenon-percpu.so (the default allocator behind per-CPU
// caches, include/tenon/percpu/): every misuse TenonDetects.* expects the
// default libtenon.so to stop must be stopped the same way when the block's
// class is one the per-CPU stacks hold (up to 1 KiB), where the free goes to
// a CPU's stack instead of the thread heap's checks: at the bad call, by
// SIGABRT, with a stderr line naming tenon, the call and the pointer.
// Where rseq is missing in the child (qemu-user, valgrind) the layer is its
// fallback, the thread heaps, and these pass through their checks.
#include <signal.h>

#include "misuse_runner.h"

namespace tenon_test {
namespace {

const char kStopPattern[] = "tenon:.*free";

void expect_percpu_stops(const char* program, const char* misuse_case) {
  std::string why = preload_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  misuse_run r = run_misuse(program, misuse_case, TENON_PERCPU_LIBRARY);
  if (r.exited && r.exit_code == 77) GTEST_SKIP() << "not applicable here: " << r.out;
  EXPECT_TRUE(stopped_at_misuse(r, SIGABRT, kStopPattern)) << "case " << misuse_case;
}

#define PERCPU_STOPS(Test, misuse_case) \
  TEST(PercpuDetects, Test) { expect_percpu_stops(TENON_MISUSE_PROGRAM, misuse_case); }

// The cases a CPU's stack used to take without a look (docs/security.md,
// the tenon-percpu row): blocks of 8 to 64 B.
PERCPU_STOPS(DoubleFree8, "double_free_8")
PERCPU_STOPS(DoubleFreeDelayed8, "double_free_delayed_8")
PERCPU_STOPS(FreeAfterRealloc8, "free_after_realloc_8")
PERCPU_STOPS(FreeInterior64, "free_interior_64")
PERCPU_STOPS(FreeNeverAllocatedNear, "free_never_allocated_near")
TEST(PercpuDetects, DeleteOfNewArray) { expect_percpu_stops(TENON_MISUSE_CXX_PROGRAM, "delete_new_array"); }

// The rest of TenonDetects.*, which the per-CPU build stopped already
// (larger blocks go to the heaps underneath): kept stopped.
PERCPU_STOPS(DoubleFree4K, "double_free_4k")
PERCPU_STOPS(DoubleFree256K, "double_free_256k")
PERCPU_STOPS(DoubleFree4M, "double_free_4m")
PERCPU_STOPS(DoubleFreeDelayed4K, "double_free_delayed_4k")
PERCPU_STOPS(DoubleFreeDelayed256K, "double_free_delayed_256k")
PERCPU_STOPS(DoubleFreeDelayed4M, "double_free_delayed_4m")
PERCPU_STOPS(FreeAfterRealloc4K, "free_after_realloc_4k")
PERCPU_STOPS(FreeAfterRealloc256K, "free_after_realloc_256k")
PERCPU_STOPS(FreeAfterRealloc4M, "free_after_realloc_4m")
PERCPU_STOPS(FreeInterior4K, "free_interior_4k")
PERCPU_STOPS(FreeInterior256K, "free_interior_256k")
PERCPU_STOPS(FreeInterior4M, "free_interior_4m")
PERCPU_STOPS(FreeUnaligned8, "free_unaligned_8")
PERCPU_STOPS(FreeUnaligned4K, "free_unaligned_4k")
PERCPU_STOPS(FreeUnaligned256K, "free_unaligned_256k")
PERCPU_STOPS(FreeUnaligned4M, "free_unaligned_4m")
PERCPU_STOPS(FreeNeverAllocatedFar, "free_never_allocated_far")

// No heap address in a fresh block, and the forged link never followed
// (the stacks hold pointers, the blocks hold no links): defended already.
void expect_percpu_defends(const char* misuse_case) {
  std::string why = preload_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, misuse_case, TENON_PERCPU_LIBRARY);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(r.printed("DEFENDED")) << r.describe();
}
TEST(PercpuDefends, FreshBlockPointer8) { expect_percpu_defends("fresh_block_pointer_8"); }
TEST(PercpuDefends, FreshBlockPointer4K) { expect_percpu_defends("fresh_block_pointer_4k"); }

}  // namespace
}  // namespace tenon_test
