// Layer 1, platform: the only code that talks to the operating system.
// Everything above asks for address space here and never calls mmap itself.
// No function here takes a lock or allocates; failures return nullptr/false
// and leave errno as the kernel set it (ENOMEM for address-space exhaustion).
#pragma once
#include <cstddef>
#include <cstdint>

namespace tenon::os {

// Page size, read from the kernel at run time (4 KiB, 16 KiB or 64 KiB on
// aarch64), never assumed at compile time.
std::size_t page_size();

// Reserve `size` bytes of read-write, lazily committed address space whose
// start is a multiple of `align` (a power of two, at least the page size).
// Untouched pages cost no memory. Returns nullptr on failure.
void* reserve(std::size_t size, std::size_t align);

// Give the range back to the OS entirely.
void release(void* p, std::size_t size);

// Drop the physical pages behind a range (MADV_DONTNEED): the range stays
// reserved and reads back as zeros. Returns false if the kernel refused.
bool purge(void* p, std::size_t size);

// Resize a mapping in place, without moving it. Returns false if the
// neighbouring address space is taken.
bool resize_in_place(void* p, std::size_t old_size, std::size_t new_size);

// Move a mapping's pages (without copying them) to `dest`, an address range
// the caller reserved with reserve() of at least new_size bytes.
bool move_to(void* p, std::size_t old_size, std::size_t new_size, void* dest);

// How many bytes of [p, p + size) are resident (mincore; p page aligned).
// 0 if the kernel cannot tell.
std::size_t resident_bytes(void* p, std::size_t size);

// Ask for transparent huge pages on a range (best effort).
void advise_huge(void* p, std::size_t size);

// Fault a range in, writable, without changing its contents
// (MADV_POPULATE_WRITE, Linux 5.14+). Best effort: false if the kernel is
// older or out of memory; the pages then fault in on first touch as usual.
bool populate(void* p, std::size_t size);

// Threads (for the background purger, src/arena/purger.cpp).

// True while the process has never had a second thread (glibc's
// __libc_single_threaded; false where the C library does not say). Then no
// other thread can hold a lock that creating a thread takes.
bool single_threaded();

// Start a detached thread running fn(nullptr), with a small stack and every
// signal blocked (signals sent to the process must reach the program's own
// threads). False if the thread could not be created (thread limits,
// seccomp); errno is left as it was.
bool start_thread(void* (*fn)(void*));

// Name the calling thread (shown by ps, top and gdb; at most 15 characters).
void name_this_thread(const char* name);

// Sleep for about ms milliseconds (returns early if a signal interrupts it).
void sleep_ms(std::uint32_t ms);

}  // namespace tenon::os
