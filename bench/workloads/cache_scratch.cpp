// cache-scratch: passive false sharing. The main thread allocates one small
// object per worker (neighbours in memory) and hands them over; each worker
// frees its object, then allocates, writes and frees its own. An allocator
// that reuses the freed neighbour for the worker keeps the line shared.
// After Hoard's cache-scratch.
// usage: cache_scratch THREADS ITERS WRITES SIZE   (ITERS total, split over threads)
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long iters = wl::arg(argc, argv, 2, 20000);
  long writes = wl::arg(argc, argv, 3, 1000);
  size_t size = size_t(wl::arg(argc, argv, 4, 8));
  long per = wl::share(iters, threads);
  std::vector<char*> handed(static_cast<size_t>(threads));
  for (auto& p : handed) p = static_cast<char*>(malloc(size));
  wl::run_threads(threads, [&](int t) {
    uint64_t sum = 0;
    free(handed[size_t(t)]);  // a remote free of a neighbour's line
    for (long i = 0; i < per; i++) {
      volatile char* p = static_cast<char*>(malloc(size));
      for (long w = 0; w < writes; w++) p[w % long(size)] = char(p[w % long(size)] + 1);
      sum += uint8_t(p[0]);
      free(const_cast<char*>(p));
    }
    wl::checksum() += sum;
  });
  wl::done("cache-scratch");
}
