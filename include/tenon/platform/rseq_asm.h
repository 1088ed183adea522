// Layer 1, platform: the assembly every restartable sequence (Linux rseq,
// x86-64) shares, so that the descriptor's layout and the abort signature
// are written once. A sequence using them follows one label convention:
//   3  its descriptor (TENON_RSEQ_DESCRIPTOR puts it in __rseq_cs)
//   1  the first instruction the kernel may abort, 2 the first after the
//      commit (the sequence is [1, 2))
//   4  the abort handler (TENON_RSEQ_ABORT_HANDLER opens __rseq_failure with
//      the signature and the label; the caller writes the handler and
//      closes the section with .popsection)
// Users: the bulk pool's owned lanes (mass_pool.hpp), the per-CPU caches
// (percpu/rseq_stack.h).
#pragma once

// struct rseq_cs { u32 version, flags; u64 start_ip, post_commit_offset,
// abort_ip; }, 32-byte aligned as the kernel requires.
#define TENON_RSEQ_DESCRIPTOR            \
  ".pushsection __rseq_cs, \"aw\"\n\t"   \
  ".balign 32\n\t"                       \
  "3:\n\t"                               \
  ".long 0, 0\n\t"                       \
  ".quad 1f, (2f - 1f), 4f\n\t"          \
  ".popsection\n\t"

// The 4 bytes before the abort handler must be the signature the thread
// registered (glibc's RSEQ_SIG, 0x53053053 on x86-64); encoded as the operand
// of ud1, so that a jump into it by mistake traps.
#define TENON_RSEQ_ABORT_HANDLER             \
  ".pushsection __rseq_failure, \"ax\"\n\t"  \
  ".byte 0x0f, 0xb9, 0x3d\n\t"               \
  ".long 0x53053053\n\t"                     \
  "4:\n\t"
