// cache-thrash: active false sharing. Each thread repeatedly allocates a
// small object, writes it many times and frees it. An allocator that hands
// neighbouring bytes of one cache line to different threads makes those
// writes bounce the line between cores. After Hoard's cache-thrash.
// usage: cache_thrash THREADS ITERS WRITES SIZE   (ITERS total, split over threads)
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long iters = wl::arg(argc, argv, 2, 20000);
  long writes = wl::arg(argc, argv, 3, 1000);
  size_t size = size_t(wl::arg(argc, argv, 4, 8));
  long per = wl::share(iters, threads);
  wl::run_threads(threads, [&](int) {
    uint64_t sum = 0;
    for (long i = 0; i < per; i++) {
      volatile char* p = static_cast<char*>(malloc(size));
      for (long w = 0; w < writes; w++) p[w % long(size)] = char(p[w % long(size)] + 1);
      sum += uint8_t(p[0]);
      free(const_cast<char*>(p));
    }
    wl::checksum() += sum;
  });
  wl::done("cache-thrash");
}
