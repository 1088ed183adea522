// Layer 1, platform: the end of a program that misused the heap. Every
// detection (a double free, a pointer that is not the start of a live block)
// reports through here: one line on stderr naming tenon, the call, the
// pointer and what was wrong, then SIGABRT. For example
//   tenon: free(0x7f3a2c010040): double free (block of 48 bytes)
// Out of line and cold: a fast path that checks pays only its compare and
// branch. The line is platform/report.h's message_line: one write(2), no
// allocation, no lock, no stdio.
#pragma once
#include <cstddef>

namespace tenon {

// op: the call ("free", "realloc", ...); what: the misuse ("double free");
// block_size: the size of the block p was taken for, 0 when there is none.
[[noreturn, gnu::cold, gnu::noinline]] void report_misuse(const char* op, const void* p, const char* what,
                                                          std::size_t block_size) noexcept;

}  // namespace tenon
