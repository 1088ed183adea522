// Shared helpers for the benchmark workloads: argument parsing, a cheap
// per-thread random generator, clocks, peak-RSS control and the one output
// format bench/run.py parses. The workloads call plain malloc/free/new/delete
// so that LD_PRELOAD decides which allocator they measure; nothing here
// links against tenon.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <thread>
#include <unistd.h>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace wl {

// argv[i] as an integer with a default, so every workload reads
// "prog THREADS SCALE ..." the same way and run.py can pass fewer args.
inline long arg(int argc, char** argv, int i, long def) {
  if (i < argc) return std::strtol(argv[i], nullptr, 10);
  return def;
}

// xorshift64*: deterministic, allocation-free, one per thread.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Cycle counter for the latency workload; falls back to nanoseconds where
// there is no rdtsc (aarch64 builds report ns and say so).
inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return now_ns();
#endif
}
inline const char* tick_unit() {
#if defined(__x86_64__) || defined(__i386__)
  return "cycles";
#else
  return "ns";
#endif
}

// Keeps the compiler from proving a block unused and deleting the
// malloc/free pair (GCC does that for plain free(malloc(n))).
inline void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// Touch one byte per page so the pages are really faulted in.
inline void touch_pages(void* p, size_t n) {
  volatile char* c = static_cast<char*>(p);
  for (size_t i = 0; i < n; i += 4096) c[i] = char(i);
  if (n) c[n - 1] = 1;
}

// Current and peak resident set from /proc/self/status, in KiB.
inline long status_kib(const char* key) {
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char* at = strstr(buf, key);
  if (!at) return -1;
  return std::strtol(at + strlen(key) + 1, nullptr, 10);
}
inline long rss_kib() { return status_kib("VmRSS"); }
inline long peak_rss_kib() { return status_kib("VmHWM"); }

// Resets VmHWM to the current RSS (Linux >= 4.0), so one process can report
// the peak of each step of a sweep separately.
inline void reset_peak_rss() {
  int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd < 0) return;
  ssize_t r = write(fd, "5", 1);
  (void)r;
  close(fd);
}

// Start n threads running f(index) and join them all.
template <class F>
inline void run_threads(int n, F f) {
  std::vector<std::thread> ts;
  ts.reserve(size_t(n));
  for (int i = 0; i < n; i++) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
}

// Splits a fixed amount of total work over the threads, so the wall time of
// a row measures the allocator, not the thread count.
inline long share(long total, int threads) {
  long s = total / (threads > 0 ? threads : 1);
  return s > 0 ? s : 1;
}

// Spin barrier for the workloads (bench code may wait; the allocator may not).
// Yields because the suite runs 64 threads on 2 cores.
struct Barrier {
  std::atomic<int> count{0};
  std::atomic<int> phase{0};
  int n;
  explicit Barrier(int n_) : n(n_) {}
  void wait() {
    int ph = phase.load(std::memory_order_acquire);
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      count.store(0, std::memory_order_relaxed);
      phase.fetch_add(1, std::memory_order_acq_rel);
    } else {
      while (phase.load(std::memory_order_acquire) == ph) std::this_thread::yield();
    }
  }
};

// Checksum sink: every workload prints one, so wrong memory shows up as a
// changed checksum between allocators rather than as a fast result.
inline std::atomic<uint64_t>& checksum() {
  static std::atomic<uint64_t> c{0};
  return c;
}
inline void done(const char* name) {
  std::printf("OK %s checksum=%llu\n", name, (unsigned long long)checksum().load());
}

}  // namespace wl
