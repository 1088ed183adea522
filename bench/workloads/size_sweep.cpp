// size-sweep: time against allocation size. For 2 MiB, 4 MiB, ... up to
// MAXMIB: malloc + touch every page + free, then calloc + touch + free.
// Prints per-call time, the peak RSS while the block was held and
// RSS / requested (how much more than asked the process had resident).
// usage: size_sweep MAXMIB BUDGETMIB   (each size repeats until BUDGETMIB were touched, at least once)
#include "common.h"

namespace {
// RSS before the first allocation: what the allocator keeps after a step
// (a retained block, a raised trim threshold) counts against it later.
long start_rss = 0;

void step(const char* op, size_t bytes, long reps) {
  wl::reset_peak_rss();
  uint64_t t0 = wl::now_ns();
  for (long r = 0; r < reps; r++) {
    char* p = static_cast<char*>(op[0] == 'c' ? calloc(1, bytes) : malloc(bytes));
    if (!p) { std::printf("FAIL %s %zu\n", op, bytes); std::exit(1); }
    wl::touch_pages(p, bytes);
    wl::checksum() += uint8_t(p[bytes / 2]);
    free(p);
  }
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
  wl::done("size-sweep");
}
