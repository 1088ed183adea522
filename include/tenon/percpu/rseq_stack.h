// Per-CPU caches, the restartable sequences: pop and push of a bounded stack
// of block pointers in the calling CPU's region, each a restartable sequence
// (Linux rseq, registered per thread by glibc 2.35 and later). The kernel
// sends a thread that is preempted, migrated or signalled inside a sequence
// to its abort handler, which starts it again, so a sequence's single
// commit store (the stack's new top) is made only by a thread that ran the
// whole sequence on that CPU without interruption: no atomic read-modify-
// write, and no thread ever waits for another.
//
// The CPU's region comes from table[cpu_id + 2]: a null entry (a CPU whose
// region is not made yet, or is being drained by trim) fails the sequence,
// and so does cpu_id -1 (not registered) or -2 (registration failed, or
// GLIBC_TUNABLES=glibc.pthread.rseq=0, or valgrind or qemu-user, which do not
// implement rseq): entries 0 and 1 stay null. The caller then goes to the
// layer underneath, which is the whole of the fallback.
//
// rseq->rseq_cs is left pointing at the descriptor after a sequence (the
// kernel clears it when it finds the thread outside): one store less a
// call, and the reason the library holding them must never be unloaded
// (-z nodelete, as every preloadable tenon library is linked).
//
// x86-64 only (the sequences are assembly, shaped like librseq's
// cmpeqv_storev); ThreadSanitizer cannot see them, so its builds and other
// architectures compile pop/push as "always fails" and get the fallback.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__linux__) && defined(__has_include)
#if __has_include(<sys/rseq.h>)
#define TENON_PERCPU_HAVE_RSEQ_HEADER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TENON_PERCPU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENON_PERCPU_TSAN 1
#endif
#endif
#if defined(TENON_PERCPU_HAVE_RSEQ_HEADER) && !defined(TENON_PERCPU_TSAN) && !defined(TENON_PERCPU_NO_RSEQ)
#define TENON_PERCPU_RSEQ 1
#include <sys/rseq.h>

#include "tenon/platform/rseq_asm.h"
#else
#define TENON_PERCPU_RSEQ 0
#endif

namespace tenon::percpu {

// CPU numbers the table covers. The kernel's cpu_id is below nr_cpu_ids,
// which x86-64's Kconfig caps at 8192 (NR_CPUS_RANGE_END): the sequences
// index the table with no bounds test. 64 KiB of .bss; only the pages of the
// CPUs in use are ever touched.
constexpr std::size_t kMaxCpus = 8192;
using cpu_table = std::atomic<char*>[kMaxCpus + 2];

// A region's header: per size class, the byte offsets from the region's
// start of the stack's next free slot (top), its first slot and its end;
// top == begin: empty, top == end: full. Three arrays rather than one
// struct per class, so that the sequences index them with the class itself
// (an addressing mode with scale 4) instead of a class times 16 computed
// first: one instruction less in malloc and in free.
constexpr std::size_t kHeaderClasses = 32;
struct region_header {
  std::uint32_t top[kHeaderClasses];
  std::uint32_t begin[kHeaderClasses];
  std::uint32_t end[kHeaderClasses];
};
static_assert(offsetof(region_header, begin) == 128 && offsetof(region_header, end) == 256,
              "the sequences below address begin and end as 128 and 256 bytes past top");

#if TENON_PERCPU_RSEQ
static_assert(offsetof(struct rseq, cpu_id) == 4 && offsetof(struct rseq, rseq_cs) == 8);

// The calling thread's CPU as the kernel last wrote it into glibc's rseq
// area; negative without rseq. A hint outside a sequence (the thread may
// move at once).
inline int current_cpu() noexcept {
  int cpu;
  asm volatile("movl %%fs:4(%1), %0" : "=r"(cpu) : "r"(__rseq_offset));
  return cpu;
}

// Whether the calling thread runs restartable sequences: glibc registered
// them and the kernel wrote a CPU number (for tests and tools; a hint, like
// current_cpu).
inline bool sequences_here() noexcept { return __rseq_size > 0 && current_cpu() >= 0; }

// Test hook (TENON_TEST_PERCPU_WITHOUT_RSEQ, for counting instructions
// under valgrind, which has no rseq): makes this thread read as CPU 0 with
// nothing to restart its sequences. Safe only while the process has one
// thread.
inline void pretend_cpu0() noexcept { asm volatile("movl $0, %%fs:4(%0)" : : "r"(__rseq_offset) : "memory"); }

// Pops a block pointer from class c's stack in the calling CPU's region.
// False when the region is absent or the stack empty.
__attribute__((always_inline)) inline bool pop(cpu_table& table, std::uintptr_t c, void*& out) noexcept {
  bool ok;
  void* r;
  std::uintptr_t reg, top;
  asm volatile(
      TENON_RSEQ_DESCRIPTOR
      "6:\n\t"
      "leaq 3b(%%rip), %[reg]\n\t"
      "movq %[reg], %%fs:8(%[off])\n\t"       // rseq->rseq_cs = &descriptor
      "1:\n\t"
      "movslq %%fs:4(%[off]), %[reg]\n\t"     // rseq->cpu_id
      "movq 16(%[tbl],%[reg],8), %[reg]\n\t"  // table[cpu_id + 2]: the region
      "testq %[reg], %[reg]\n\t"
      "jz 5f\n\t"
      "movl (%[reg],%[c],4), %k[top]\n\t"
      "cmpl 128(%[reg],%[c],4), %k[top]\n\t"  // top == begin: empty
      "je 5f\n\t"
      "subl $8, %k[top]\n\t"                  // never 0 (begin > 0): ZF clear
      "movq (%[reg],%[top]), %[r]\n\t"
      "movl %k[top], (%[reg],%[c],4)\n\t"     // the commit
      "2:\n\t"
      TENON_RSEQ_ABORT_HANDLER
      "jmp 6b\n\t"
      "5:\n\t"                                // ZF set: failed
      "jmp 2b\n\t"
      ".popsection\n\t"
      : "=@ccnz"(ok), [r] "=&r"(r), [reg] "=&r"(reg), [top] "=&r"(top)
      : [off] "r"(__rseq_offset), [tbl] "r"(&table[0]), [c] "r"(c)
      : "memory");
  out = r;
  return ok;
}

// Pushes p on class c's stack in the calling CPU's region. False when the
// region is absent or the stack full.
__attribute__((always_inline)) inline bool push(cpu_table& table, std::uintptr_t c, void* p) noexcept {
  bool ok;
  std::uintptr_t reg, top;
  asm volatile(
      TENON_RSEQ_DESCRIPTOR
      "6:\n\t"
      "leaq 3b(%%rip), %[reg]\n\t"
      "movq %[reg], %%fs:8(%[off])\n\t"
      "1:\n\t"
      "movslq %%fs:4(%[off]), %[reg]\n\t"
      "movq 16(%[tbl],%[reg],8), %[reg]\n\t"
      "testq %[reg], %[reg]\n\t"
      "jz 5f\n\t"
      "movl (%[reg],%[c],4), %k[top]\n\t"
      "cmpl 256(%[reg],%[c],4), %k[top]\n\t"  // top == end: full
      "je 5f\n\t"
      "movq %[p], (%[reg],%[top])\n\t"        // the slot (above top until the commit)
      "addl $8, %k[top]\n\t"                  // never 0: ZF clear
      "movl %k[top], (%[reg],%[c],4)\n\t"     // the commit
      "2:\n\t"
      TENON_RSEQ_ABORT_HANDLER
      "jmp 6b\n\t"
      "5:\n\t"
      "jmp 2b\n\t"
      ".popsection\n\t"
      : "=@ccnz"(ok), [reg] "=&r"(reg), [top] "=&r"(top)
      : [off] "r"(__rseq_offset), [tbl] "r"(&table[0]), [c] "r"(c), [p] "r"(p)
      : "memory");
  return ok;
}

#else
inline int current_cpu() noexcept { return -1; }
inline bool sequences_here() noexcept { return false; }
inline void pretend_cpu0() noexcept {}
inline bool pop(cpu_table&, std::uintptr_t, void*&) noexcept { return false; }
inline bool push(cpu_table&, std::uintptr_t, void*) noexcept { return false; }
#endif

}  // namespace tenon::percpu
