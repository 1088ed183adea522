// size-sweep: time against allocation size. For 2 MiB, 4 MiB, ... up to
// MAXMIB: malloc + touch every page + free, then calloc + touch + free.
// Then, from 1 to 64 MiB (at most MAXMIB), calloc + touch one byte + free
// (op calloc-touch1), after two untimed calls at each size: what a zeroed
// block costs in a loop when the program uses little of it (a reused block
// cleared with memset pays for every page anyway).
// Prints per-call time, the peak RSS while the block was held and
// RSS / requested (how much more than asked the process had resident).
// usage: size_sweep MAXMIB BUDGETMIB   (each size repeats until BUDGETMIB were touched, at least once)
#include "common.h"

namespace {
// RSS before the first allocation: what the allocator keeps after a step
// (a retained block, a raised trim threshold) counts against it later.
long start_rss = 0;

void once(const char* op, size_t bytes) {
  char* p = static_cast<char*>(op[0] == 'c' ? calloc(1, bytes) : malloc(bytes));
  if (!p) { std::printf("FAIL %s %zu\n", op, bytes); std::exit(1); }
  if (std::strcmp(op, "calloc-touch1") == 0)
    p[bytes / 2] = 1;
  else
    wl::touch_pages(p, bytes);
  wl::checksum() += uint8_t(p[bytes / 2]);
  free(p);
}

// warmup calls run first, untimed: the loop's steady state is what is measured.
void step(const char* op, size_t bytes, long reps, long warmup = 0) {
  for (long r = 0; r < warmup; r++) once(op, bytes);
  wl::reset_peak_rss();
  uint64_t t0 = wl::now_ns();
  for (long r = 0; r < reps; r++) once(op, bytes);
  uint64_t t1 = wl::now_ns();
  long peak = wl::peak_rss_kib();
  double ratio = double(peak - start_rss) * 1024.0 / double(bytes);
  std::printf("SIZE op=%s bytes=%zu reps=%ld ns_per_call=%.0f peak_rss_kib=%ld rss_ratio=%.3f\n",
              op, bytes, reps, double(t1 - t0) / double(reps), peak, ratio);
}
}  // namespace

int main(int argc, char** argv) {
  long maxmib = wl::arg(argc, argv, 1, 1024);
  long budget = wl::arg(argc, argv, 2, 256);
  start_rss = wl::rss_kib();
  for (long mib = 2; mib <= maxmib; mib *= 2) {
    long reps = budget / mib > 0 ? budget / mib : 1;
    if (reps > 64) reps = 64;
    step("malloc", size_t(mib) << 20, reps);
    step("calloc", size_t(mib) << 20, reps);
  }
  // After the loop above, glibc's mmap threshold has risen to its 32 MiB
  // maximum, as in a program that has been running: below it, glibc reuses
  // heap memory (and clears it); from it on, it maps fresh pages.
  for (long mib : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
    if (mib > maxmib) break;
    long reps = budget * 4 / mib;
    step("calloc-touch1", size_t(mib) << 20, reps < 8 ? 8 : reps > 256 ? 256 : reps, 2);
  }
  wl::done("size-sweep");
}
