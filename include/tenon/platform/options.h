// Layer 1, platform: run-time options, read from the process environment
// (docs/options.md has every one). One parser for every TENON_* variable:
// the allocator and the measurement layers take their settings from here.
//
// When the library loads, the environment is checked once: a bad value or
// an unknown TENON_* name gives one "tenon: ..." warning line on stderr, and
// TENON_VERBOSE=1 prints every setting with where it came from. The
// allocator's own settings are then published at first use (options()), not
// at load, so a program linking libtenon.a may still set them in main before
// its first allocation. Lock-free: the first caller to claim the parse
// publishes it; anyone racing with it parses the environment itself instead
// of waiting. Nothing here allocates.
#pragma once
#include <cstdint>

namespace tenon {

// TENON_BACKGROUND_PURGE: when the background purger thread starts.
enum class purge_thread : std::uint8_t {
  off = 0,      // never: purging happens on allocator activity only
  lazy = 1,     // when memory is first kept for reuse while single-threaded
  at_load = 2,  // when the library is loaded (also for multithreaded programs)
};

// TENON_HUGE_PAGES: where transparent huge pages are asked for (MADV_HUGEPAGE).
enum class huge_pages : std::uint8_t {
  off = 0,     // nowhere: the kernel's own policy applies
  blocks = 1,  // huge blocks (their own mappings, over 2 MiB)
  chunks = 2,  // huge blocks and every 4 MiB chunk
  dense = 3,   // huge blocks up to 64 MiB while the program writes them densely (huge_maps<C>::advise_fresh)
  grown = 4,   // those, and chunks made while the arena is full and resident (arena<C>::advise_chunk)
};

// Whether huge blocks are advised by what the program writes (3 and 4).
inline bool learns_density(huge_pages mode) { return mode == huge_pages::dense || mode == huge_pages::grown; }

struct options_t {
  std::uint32_t purge_delay_ms = 500;                  // TENON_PURGE_DELAY_MS
  purge_thread background_purge = purge_thread::lazy;  // TENON_BACKGROUND_PURGE=0|1|2
  std::uint32_t populate = 0;                          // TENON_POPULATE: bytes, 0 = off
  huge_pages thp = huge_pages::off;                    // TENON_HUGE_PAGES=0|1|2|3|4
  bool stats = false;                                  // TENON_STATS
  bool verbose = false;                                // TENON_VERBOSE
  bool latency = false;                                // TENON_LATENCY (measurement layers)
  std::uint32_t latency_sample = 8;                    // TENON_LATENCY_SAMPLE (measurement layers)
  const char* trace = nullptr;                         // TENON_TRACE: a file name, or nullptr
};

// Largest TENON_PURGE_DELAY_MS accepted (one day): the purge clock compares
// millisecond differences that wrap after 49 days.
inline constexpr std::uint32_t kMaxPurgeDelayMs = 86'400'000;
// Largest TENON_POPULATE accepted: any block size from 1 byte to 4 GiB - 1
// (a threshold above every request the program makes means off).
inline constexpr std::uint32_t kMaxPopulate = 0xFFFFFFFF;
// Largest TENON_LATENCY_SAMPLE accepted (the sampler's random gaps are drawn
// below twice this).
inline constexpr std::uint32_t kMaxLatencySample = 0x3FFFFFFF;

// The settings, parsed and published at the first call.
options_t options();

// The environment's settings now, parsed quietly without publishing: for
// what is decided when a library loads (the purger at load, the measurement
// layers). trace points into the environment.
options_t read_options();

}  // namespace tenon
