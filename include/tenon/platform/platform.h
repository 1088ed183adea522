// Layer 1, platform: what the engines ask of the operating system, stated as
// a concept. An engine's config names its platform (`using platform = ...`);
// tenon ships linux_platform, the functions of os.h. Every requirement is a
// static function that takes no lock and allocates nothing; failures leave
// errno as the OS set it.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "tenon/platform/os.h"

namespace tenon {

template <class P>
concept platform = requires(void* p, std::size_t n, const char* name, void* (*fn)(void*)) {
  // The page size (read at run time: 4, 16 or 64 KiB on aarch64).
  { P::page_size() } -> std::same_as<std::size_t>;
  // n bytes of read-write, lazily committed address space at a multiple of the alignment; nullptr on failure.
  { P::reserve(n, n) } -> std::same_as<void*>;
  // Give a reserved range back whole.
  { P::release(p, n) } -> std::same_as<void>;
  // Drop the pages behind a range (it then reads as zeros); false if refused.
  { P::purge(p, n) } -> std::same_as<bool>;
  // Grow or shrink a mapping in place; false if it cannot (callers then copy).
  { P::resize_in_place(p, n, n) } -> std::same_as<bool>;
  // Move a mapping's pages to a range the caller reserved; false if it cannot.
  { P::move_to(p, n, n, p) } -> std::same_as<bool>;
  // Bytes of a range that are resident (0 if unknown).
  { P::resident_bytes(p, n) } -> std::same_as<std::size_t>;
  // Fault a range in, writable, contents unchanged (TENON_POPULATE); best effort: false if refused.
  { P::populate(p, n) } -> std::same_as<bool>;
  // Ask for transparent huge pages on a range (TENON_HUGE_PAGES); best effort.
  { P::advise_huge(p, n) } -> std::same_as<void>;
  // Take that advice back (MADV_NOHUGEPAGE): khugepaged leaves the range alone; best effort.
  { P::unadvise_huge(p, n) } -> std::same_as<void>;
  // Whether n bytes fit in half of the memory free now (machine and cgroup).
  { P::fits_free_memory(n) } -> std::same_as<bool>;
  // Milliseconds on a cheap monotonic clock (wraps; compare differences).
  { P::now_ms() } -> std::same_as<std::uint32_t>;
  // True while no second thread was ever created (creating one cannot wait for a lock then).
  { P::single_threaded() } -> std::same_as<bool>;
  // Start a detached thread running fn(p) with every signal blocked; false if it cannot.
  { P::start_thread(fn, p) } -> std::same_as<bool>;
  // Name the calling thread (ps, gdb).
  { P::name_this_thread(name) } -> std::same_as<void>;
  // Sleep about that many milliseconds.
  { P::sleep_ms(std::uint32_t{1}) } -> std::same_as<void>;
};

// Linux (x86-64, aarch64): mmap and friends (src/platform/os_linux.cpp).
struct linux_platform {
  static std::size_t page_size() { return os::page_size(); }
  static void* reserve(std::size_t size, std::size_t align) { return os::reserve(size, align); }
  static void release(void* p, std::size_t size) { os::release(p, size); }
  static bool purge(void* p, std::size_t size) { return os::purge(p, size); }
  static bool resize_in_place(void* p, std::size_t old_size, std::size_t new_size) {
    return os::resize_in_place(p, old_size, new_size);
  }
  static bool move_to(void* p, std::size_t old_size, std::size_t new_size, void* dest) {
    return os::move_to(p, old_size, new_size, dest);
  }
  static std::size_t resident_bytes(void* p, std::size_t size) { return os::resident_bytes(p, size); }
  static bool populate(void* p, std::size_t size) { return os::populate(p, size); }
  static void advise_huge(void* p, std::size_t size) { os::advise_huge(p, size); }
  static void unadvise_huge(void* p, std::size_t size) { os::unadvise_huge(p, size); }
  static bool fits_free_memory(std::size_t size) { return os::fits_free_memory(size); }
  // Not in the concept: asked only by configs that protect freed memory.
  static bool protect(void* p, std::size_t size, bool accessible) { return os::protect(p, size, accessible); }
  static void owe_reopening(std::ptrdiff_t bytes) { os::owe_reopening(bytes); }
  static std::uint32_t now_ms() { return os::now_ms(); }
  static bool single_threaded() { return os::single_threaded(); }
  static bool start_thread(void* (*fn)(void*), void* arg) { return os::start_thread(fn, arg); }
  static void name_this_thread(const char* name) { os::name_this_thread(name); }
  static void sleep_ms(std::uint32_t ms) { os::sleep_ms(ms); }
};
static_assert(platform<linux_platform>);

}  // namespace tenon
