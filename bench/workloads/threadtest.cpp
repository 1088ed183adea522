// threadtest: each thread allocates a batch of same-size objects and frees
// them in allocation order, over and over. Measures the owner-thread fast
// path and how well per-thread caches scale (after Hoard's threadtest).
// usage: threadtest THREADS ROUNDS BATCH SIZE   (ROUNDS is the total, split over threads)
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long rounds = wl::arg(argc, argv, 2, 2000);
  long batch = wl::arg(argc, argv, 3, 1000);
  size_t size = size_t(wl::arg(argc, argv, 4, 64));
  long per = wl::share(rounds, threads);
  wl::run_threads(threads, [&](int) {
    std::vector<char*> objs(static_cast<size_t>(batch));
    uint64_t sum = 0;
    for (long r = 0; r < per; r++) {
      for (long i = 0; i < batch; i++) {
        objs[size_t(i)] = static_cast<char*>(malloc(size));
        objs[size_t(i)][0] = char(i);
      }
      for (long i = 0; i < batch; i++) {
        sum += uint8_t(objs[size_t(i)][0]);
        free(objs[size_t(i)]);
      }
    }
    wl::checksum() += sum;
  });
  wl::done("threadtest");
}
