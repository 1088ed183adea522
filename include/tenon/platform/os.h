// Layer 1, platform: the only code that talks to the operating system and
// the C library (mimalloc's lesson: one small primitives header). Everything
// above asks here for address space, the clock, the environment, stderr,
// the thread-exit key and symbols of the next library in line, and never
// calls mmap, getenv, write, pthread_* or dlsym itself (tests/layers/
// layout_check.py fails on a call elsewhere). No function here takes a lock
// or allocates unless it says so; failures return nullptr/false and leave
// errno as the kernel set it (ENOMEM for address-space exhaustion).
// platform.h states the contract the engines rely on as a concept.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

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

// Address space no access may touch (PROT_NONE, never committed): a read or
// write there ends the program with SIGSEGV. Not from a memory source:
// straight from the kernel. nullptr on failure.
void* reserve_inaccessible(std::size_t size);

// Make [p, p + size) (page aligned, inside a reserved range) inaccessible, or
// read-write again. False if the kernel refused.
bool protect(void* p, std::size_t size, bool accessible);

// Bytes closed (protect(..., false)) that will be opened again: a live
// large block's guards, a large block waiting in quarantine. Linux counts
// only writable pages against RLIMIT_DATA, so a closed page lends its share
// of the limit to whatever is mapped next, and opening it again is refused
// once that share is taken: a freed block that could never be reused
// (preload.data_limit). reserve() does not take that share: under a finite
// RLIMIT_DATA, a mapping that leaves no room for these bytes is given back
// and refused (ENOMEM). Whoever closes such bytes adds them here, and takes
// them off when it opens them again or gives up on them.
void owe_reopening(std::ptrdiff_t bytes);

// Whether the page holding p is mapped (mincore; msync, then a read through
// process_vm_readv where a seccomp filter refuses it): a read of p then does
// not fault for want of a mapping. A system call or three: slow paths only.
bool is_mapped(const void* p);

// n bytes at `from` copied to `to` through the kernel (process_vm_readv
// within this process), so that a range unmapped or closed meanwhile fails
// the copy instead of faulting: 1 copied whole, 0 not (nothing readable
// there), -1 the kernel would not say (a seccomp filter refusing the call).
// A system call: slow paths only.
int copy_quietly(const void* from, void* to, std::size_t n);

// n random words from the kernel, one getrandom call (n at most 32: the
// kernel never answers such a call in part); never blocks. Where it gives
// none (a seccomp filter that refuses getrandom; EAGAIN early in boot,
// before its generator is ready), the words come from the 16 random bytes
// the kernel put in the auxiliary vector at exec (AT_RANDOM) mixed with the
// clock, a stack address and a count of such words: as secret as those 16
// bytes, and different at every draw.
void random_words(std::uint64_t* words, std::size_t n);
std::uint64_t random_u64();  // random_words(&v, 1)

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

// Ask for transparent huge pages on a range, or take that back (best effort).
void advise_huge(void* p, std::size_t size);
void unadvise_huge(void* p, std::size_t size);

// Fault a range in, writable, without changing its contents
// (MADV_POPULATE_WRITE, Linux 5.14+). Best effort: false if the kernel is
// older or out of memory, or if the range is over 2 MiB and more than half
// of the memory free now, on the machine or in the process's memory cgroup
// (not asked: the kernel would call the OOM killer); the pages then fault
// in on first touch as usual.
bool populate(void* p, std::size_t size);

// Whether size bytes fit in half of the memory free now, on the machine
// (sysinfo) and in the process's memory cgroups (cgroup_memory_left); true
// without asking up to 2 MiB. About a dozen system calls above that; errno
// unchanged.
bool fits_free_memory(std::size_t size);

// Bytes the process's memory cgroups still allow (limit - usage, the least
// over its cgroup and those above it, v2 or v1); all ones where none has a
// limit or none can be read (cgroup_memory.cpp). About a dozen system calls.
std::uint64_t cgroup_memory_left();

// Restarting other threads' restartable sequences (rseq), for the bulk
// pool's owned lanes (membarrier, Linux 5.10+). register_sequence_restarts()
// registers the process once (the kernel waits for an RCU grace period
// there when the process has other threads: milliseconds; idempotent) and
// checks that a restart works; restart_sequences() restarts every other
// running thread's sequence (an interrupt to each CPU running one of the
// process's threads) and answers 0, or an errno value when the kernel
// refused. errno is left as it was.
bool register_sequence_restarts();
int restart_sequences();

// Where memory comes from (see tenon_set_memory_source in tenon.h). A
// source installed before the first reservation replaces mmap for every
// reserve() from then on; with one, release() hands ranges back to it and
// resize_in_place()/move_to() always answer false (its memory is not the
// kernel's to remap), so callers copy instead. Only the first install counts.
struct memory_source {
  void* (*reserve)(std::size_t size, std::size_t align, void* context);
  void (*release)(void* p, std::size_t size, void* context);
  void* context;
};
// False (nothing changes) once memory has been reserved or a source is set.
bool set_memory_source(const memory_source& source);

// Milliseconds on a coarse monotonic clock (CLOCK_MONOTONIC_COARSE: cheap,
// a few ms of resolution; slow paths only). Wraps after 49 days: callers
// compare differences.
std::uint32_t now_ms();

// Nanoseconds on CLOCK_MONOTONIC (a full clock read: calibration, tools).
std::uint64_t monotonic_ns();

// The process environment's value for name, or nullptr (getenv: neither
// allocates nor locks).
const char* env(const char* name);

// The process environment itself ("NAME=value" strings, a null pointer
// last: environ), for the options check that looks for names it does not
// know. Read it while no other thread calls setenv (at load).
const char* const* environment();

// Writes to stderr with write(2): no buffering, no allocation; errno kept.
void write_error(const char* text, std::size_t length);
void write_error(const char* text);
// Writes text to a stdio stream (fputs; malloc_info's FILE*): false on an
// error. A buffered stream gets its buffer from malloc on its first write.
bool write_stream(std::FILE* stream, const char* text);
// fflush(stream): false if the write failed.
bool flush_stream(std::FILE* stream);

// Ends the process with SIGABRT (after a message was written).
[[noreturn]] void abort_process();

// The thread-exit hook: a pthread key whose destructor runs at each thread's
// exit with the value the thread set. -1 if no key could be created.
long thread_key_create(void (*destructor)(void*));
// The same, at a slot of at least min_slot where that is safe to find:
// glibc runs each round of a thread's key destructors in slot order, so a
// destructor of any key the program makes at a lower slot (its first
// min_slot keys: the lowest free slot is handed out) runs before this one
// in the same round, and what it leaves in this key is seen in that round,
// the last one included. Only while the process is single-threaded (the
// lower slots are taken for a moment: no other thread can be refused a key
// meanwhile); else, or with no free slot there, as thread_key_create.
long thread_key_create_above(void (*destructor)(void*), unsigned min_slot);
void thread_key_delete(long key);
bool thread_key_set(long key, void* value);  // false if the value could not be stored
// The key kept in cell (-1 until made), created by the first caller. Racing
// first callers each create one and the losers delete theirs: nobody waits.
// -1 if no key could be created.
long shared_thread_key(std::atomic<long>& cell, void (*destructor)(void*));

// Registers fn to run in the child after fork() (pthread_atfork's child
// hook: glibc runs it in the child before fork returns there).
bool at_fork_child(void (*fn)());

// Files, for the tools that write out what they measured (the trace writer).
// open_for_append: created if missing, emptied if `truncate`, every write
// appended (O_APPEND, close-on-exec); -1 with errno on failure.
int open_for_append(const char* path, bool truncate);
// Writes all of it (retrying short writes and EINTR); false on an error.
bool write_all(int fd, const void* data, std::size_t size);
void close_file(int fd);
// The calling process's id.
int process_id();

// The definition of `name` in the next library after this one in the lookup
// order (dlsym(RTLD_NEXT)), or nullptr. Takes the dynamic linker's lock:
// call it at load time (a constructor) or on a path that may wait.
void* next_symbol(const char* name);

// The definition of `name` in the library already loaded under `soname`,
// wherever it was loaded (also in another library's local scope, dlopen
// RTLD_LOCAL, where dlsym(RTLD_DEFAULT) does not look), or nullptr; loads
// nothing. Takes the dynamic linker's lock, as next_symbol does. The
// address is good only while that library stays loaded.
void* loaded_library_symbol(const char* soname, const char* name);

// The file name of the library that holds `address` (dladdr), or nullptr.
const char* library_of(const void* address);

// Threads (for the background purger, src/arena/purger.cpp).

// True while the process has never had a second thread (glibc's
// __libc_single_threaded; false where the C library does not say). Then no
// other thread can hold a lock that creating a thread takes.
bool single_threaded();

// Start a detached thread running fn(arg), with a small stack and every
// signal blocked (signals sent to the process must reach the program's own
// threads). False if the thread could not be created (thread limits,
// seccomp); errno is left as it was.
bool start_thread(void* (*fn)(void*), void* arg);

// Name the calling thread (shown by ps, top and gdb; at most 15 characters).
void name_this_thread(const char* name);

// Sleep for about ms milliseconds (returns early if a signal interrupts it).
void sleep_ms(std::uint32_t ms);

}  // namespace tenon::os
