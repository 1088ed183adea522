// Blocks that carry their own identity: the first 8 bytes pack (size, owner
// thread, sequence number) and the rest is a pattern seeded by that header, so
// whichever thread frees a block can check it without any side table.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

namespace tenon_stress {

using tenon_test::first_pattern_mismatch;
using tenon_test::fill_pattern;

inline constexpr std::size_t kMaxBlock = std::size_t{1} << 20;  // fits in 21 bits

inline std::uint64_t pack(std::size_t size, unsigned owner, std::uint64_t seq) {
  return (std::uint64_t{size} & 0x1fffff) | (std::uint64_t{owner & 0xff} << 21) | (seq << 29);
}
inline std::size_t header_size(std::uint64_t h) { return h & 0x1fffff; }

// Sizes from 8 B to 1 MiB, mostly small: 90% up to 256 B, 9% up to 64 KiB, 1% up to 1 MiB.
inline std::size_t random_size(std::mt19937_64& rng) {
  unsigned r = rng() % 100;
  if (r < 90) return 8 + rng() % 249;
  if (r < 99) return 8 + rng() % 65529;
  return 8 + rng() % (kMaxBlock - 7);
}

// Records the first failure seen by any thread (gtest's ASSERT only works on
// the main thread; threads report here and the test checks at the end).
class Failures {
 public:
  void add(const std::string& what) {
    if (count_.fetch_add(1, std::memory_order_relaxed) == 0) {
      std::lock_guard<std::mutex> lock(mutex_);  // test code: a mutex is fine here
      first_ = what;
    }
  }
  int count() const { return count_.load(std::memory_order_relaxed); }
  std::string first() {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  std::mutex mutex_;
  std::string first_;
};

// Allocates a block of `size` bytes (8 to kMaxBlock) for (owner, seq) and
// writes its identity over all of it.
inline void* make_sized_block(std::size_t size, unsigned owner, std::uint64_t seq, Failures& failures) {
  auto* p = static_cast<unsigned char*>(tenon_malloc(size));
  if (!p) {
    failures.add("tenon_malloc(" + std::to_string(size) + ") returned NULL");
    return nullptr;
  }
  std::uint64_t h = pack(size, owner, seq);
  std::memcpy(p, &h, 8);
  fill_pattern(p + 8, size - 8, h);
  return p;
}

// A block of random_size's sizes for (owner, seq), its identity written over all of it.
inline void* make_block(std::mt19937_64& rng, unsigned owner, std::uint64_t seq, Failures& failures) {
  return make_sized_block(random_size(rng), owner, seq, failures);
}

// The identity (pack's word) a block made by make_sized_block holds now.
inline std::uint64_t block_header(const void* block) {
  std::uint64_t h;
  std::memcpy(&h, block, 8);
  return h;
}

// Checks a block made by make_block (by any thread) and frees it.
inline void check_and_free(void* block, Failures& failures) {
  auto* p = static_cast<unsigned char*>(block);
  std::uint64_t h;
  std::memcpy(&h, p, 8);
  std::size_t size = header_size(h);
  if (size < 8 || size > kMaxBlock) {
    failures.add("block " + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                 " has a corrupt header " + std::to_string(h));
    return;  // do not free what may not be a block
  }
  std::size_t bad = first_pattern_mismatch(p + 8, size - 8, h);
  if (bad != size - 8) {
    failures.add("block of " + std::to_string(size) + " bytes from thread " + std::to_string((h >> 21) & 0xff) +
                 " seq " + std::to_string(h >> 29) + " corrupt at offset " + std::to_string(bad + 8));
  }
  if (tenon_malloc_usable_size(p) < size) failures.add("usable size below the request");
  tenon_free(p);
}

// Resident set size in bytes, from /proc/self/statm.
// Bytes of [p, p + n) resident now (mincore), p rounded down to its page.
inline std::size_t resident_in(const void* p, std::size_t n) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto start = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  std::size_t len = reinterpret_cast<std::uintptr_t>(p) + n - start;
  std::vector<unsigned char> vec((len + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(start), len, vec.data()) != 0) return 0;
  std::size_t pages = 0;
  for (unsigned char v : vec) pages += v & 1;
  return pages * page;
}

// calloc(size) right after a block of that size was written whole and freed
// (*freed: its address): what a reused huge block gives calloc. nullptr if
// either call failed.
inline unsigned char* calloc_after_written_free(std::size_t size, void** freed) {
  auto* p = static_cast<unsigned char*>(tenon_malloc(size));
  if (!p) return nullptr;
  std::memset(p, 0x5a, size);
  tenon_free(p);
  *freed = p;
  return static_cast<unsigned char*>(tenon_calloc(1, size));
}

inline std::size_t resident_bytes() {
  long pages = 0, rss = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(rss) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// One number from tenon_stats_print (which writes to stderr), read back
// through a temporary file put in place of fd 2; -1 if it is not there.
inline long stat_value(const char* name) {
  std::FILE* tmp = std::tmpfile();
  if (!tmp) return -1;
  std::fflush(stderr);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  tenon_stats_print();
  dup2(saved, 2);
  close(saved);
  std::rewind(tmp);
  char line[256];
  long value = -1;
  while (std::fgets(line, sizeof line, tmp)) {
    long v;
    char text[200];
    if (std::sscanf(line, " %ld %199[^\n]", &v, text) == 2 && std::strcmp(text, name) == 0) value = v;
  }
  std::fclose(tmp);
  return value;
}

}  // namespace tenon_stress
