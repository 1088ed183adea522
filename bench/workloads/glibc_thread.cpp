// glibc-thread: each thread keeps a working set of blocks of random sizes
// and replaces a random one per step, never sharing with other threads.
// Sizes follow a skewed distribution (many small, few up to 32 KiB) like
// glibc's benchtests/bench-malloc-thread.
// usage: glibc_thread THREADS OPS WORKSET   (OPS total, split over threads)
#include "common.h"

namespace {
size_t pick_size(wl::Rng& rng) {
  // Squaring a uniform value skews towards small sizes; 4 .. 32768 bytes.
  uint64_t u = rng.below(1u << 16);
  return 4 + size_t((u * u) >> 17);
}
}  // namespace

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long ops = wl::arg(argc, argv, 2, 3000000);
  long workset = wl::arg(argc, argv, 3, 512);
  long per = wl::share(ops, threads);
  wl::run_threads(threads, [&](int t) {
    wl::Rng rng(uint64_t(t) + 3);
    std::vector<char*> ws(size_t(workset), nullptr);
    uint64_t sum = 0;
    for (long i = 0; i < per; i++) {
      size_t k = size_t(rng.below(uint64_t(workset)));
      if (ws[k]) { sum += uint8_t(ws[k][0]); free(ws[k]); }
      size_t sz = pick_size(rng);
      ws[k] = static_cast<char*>(malloc(sz));
      ws[k][0] = char(sz);
    }
    for (auto* p : ws) free(p);
    wl::checksum() += sum;
  });
  wl::done("glibc-thread");
}
