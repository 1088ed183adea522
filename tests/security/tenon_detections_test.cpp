// Death tests for the heap-misuse detections the default libtenon.so is to
// have (docs/security.md, "What the default build is to catch"): each misuse
// runs in a child process with libtenon.so preloaded and must end there, at
// the bad call itself, by SIGABRT with a stderr line that names tenon and the
// operation (`tenon: ... free ...`) and the pointer.
//
// DISABLED: they wait for the detections, which libtenon.so does not have
// yet (the security table in `make bench` shows each of these missed or
// crashed today). Enable a test by dropping its DISABLED_ prefix in the same
// change that adds its detection.
#include <signal.h>

#include <string>

#include "misuse_runner.h"

namespace tenon_test {
namespace {

#define TENON_STOPS(Test, misuse_case) \
  TEST(TenonDetects, Test) { expect_tenon_stops(TENON_PRELOAD_LIBRARY, TENON_MISUSE_PROGRAM, misuse_case); }

// free(p); free(p): small (8 B), page-sized (4 KiB), large (256 KiB), huge (4 MiB).
TENON_STOPS(DoubleFree8, "double_free_8")
TENON_STOPS(DoubleFree4K, "double_free_4k")
TENON_STOPS(DoubleFree256K, "double_free_256k")
TENON_STOPS(DoubleFree4M, "double_free_4m")

// A large block freed twice with no allocation of the program's between
// (issue 11's gaps, item 3). Until 2026-11-27 (branch gap) a block whose
// free kept 16 slices or more resident (1,000,000 bytes) started the
// background purger thread there, after its run's slices were free again,
// and pthread_create's calloc (the new thread's DTV, 288 bytes) formed a
// small span on them whose first block was p: the second free freed that
// live block, unreported (malloc_usable_size(p) said 320 in between).
TEST(TenonDetects, DoubleFreeOfALargeBlockThatStartsThePurger) {
  for (const char* n : {"1000000", "1500000"}) {
    std::string c = std::string("large_double_free:") + n;
    expect_tenon_stops(TENON_PRELOAD_LIBRARY, TENON_GUARD_PROBE_PROGRAM, c.c_str());
  }
}

// free(p); free(q); free(p): p is no longer the last block freed.
TENON_STOPS(DoubleFreeDelayed8, "double_free_delayed_8")
TENON_STOPS(DoubleFreeDelayed4K, "double_free_delayed_4k")
TENON_STOPS(DoubleFreeDelayed256K, "double_free_delayed_256k")
TENON_STOPS(DoubleFreeDelayed4M, "double_free_delayed_4m")

// realloc(p, 16 * n) moved the block; then free(p). Skipped where realloc
// grew the block in place (nothing was freed). At 4 MiB realloc moves the
// pages with mremap and the old range is unmapped: tenon only knows the old
// address as its own if it keeps a trace of it (its lookup marking, or the
// range reserved); today free() reads the 16 bytes before it as a foreign
// pointer's header and crashes.
TENON_STOPS(FreeAfterRealloc8, "free_after_realloc_8")
TENON_STOPS(FreeAfterRealloc4K, "free_after_realloc_4k")
TENON_STOPS(FreeAfterRealloc256K, "free_after_realloc_256k")
TENON_STOPS(FreeAfterRealloc4M, "free_after_realloc_4m")

// free(p + n / 2) of a live block of n bytes. At 4 MiB, p + 2 MiB may lie in
// the next 4 MiB unit of the mapping, which the chunk map does not mark (only
// the unit of the user pointer is): today tenon takes it for a foreign
// pointer and ignores it.
TENON_STOPS(FreeInterior64, "free_interior_64")
TENON_STOPS(FreeInterior4K, "free_interior_4k")
TENON_STOPS(FreeInterior256K, "free_interior_256k")
TENON_STOPS(FreeInterior4M, "free_interior_4m")

// free(p + 1).
TENON_STOPS(FreeUnaligned8, "free_unaligned_8")
TENON_STOPS(FreeUnaligned4K, "free_unaligned_4k")
TENON_STOPS(FreeUnaligned256K, "free_unaligned_256k")
TENON_STOPS(FreeUnaligned4M, "free_unaligned_4m")

// An address tenon never handed out, inside its memory: p + 16 KiB from a
// 16 B block (a block slot of the same span not yet carved), and p + 1 MiB
// (in a fresh process the first 16 B span is slice 1 of the first chunk, so
// this is slice 17 of that chunk, which no span uses: today free() reads the
// slice's null descriptor and crashes).
TENON_STOPS(FreeNeverAllocatedNear, "free_never_allocated_near")
TENON_STOPS(FreeNeverAllocatedFar, "free_never_allocated_far")

// Pointers no allocator handed out, outside tenon's memory: into a stack
// buffer, a static buffer, an anonymous mapping, each with zeros in the 16
// bytes before it (no glibc header there). glibc's free aborts on each
// ("free(): invalid pointer"); tenon ignored them as foreign.
TENON_STOPS(FreeStack, "free_stack")
TENON_STOPS(FreeStatic, "free_static")
TENON_STOPS(FreeForeignMapping, "free_foreign_mapping")

// A fresh small block holds no heap address in its first word (the free-list
// link is cleared when the block is handed out): missed at 8 B and 4 KiB
// before (docs/security.md's table).
TEST(TenonDefends, FreshBlockPointer8) { expect_tenon_defends(TENON_PRELOAD_LIBRARY, "fresh_block_pointer_8"); }
TEST(TenonDefends, FreshBlockPointer4K) { expect_tenon_defends(TENON_PRELOAD_LIBRARY, "fresh_block_pointer_4k"); }

}  // namespace
}  // namespace tenon_test
