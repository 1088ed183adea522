// remote-free: for each size class from 16 to 2048 bytes, every thread
// allocates its share of objects onto one global array, the array is
// shuffled, and each thread frees a slice of it: almost every free is of a
// block another thread allocated. This is the row that separates allocators most.
// usage: remote_free THREADS OBJECTS   (OBJECTS total per size, split over threads)
#include <algorithm>
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long objects = wl::arg(argc, argv, 2, 200000);
  long per = wl::share(objects, threads);
  long total = per * threads;
  std::vector<char*> all(static_cast<size_t>(total));
  wl::Barrier bar(threads);
  static const size_t sizes[] = {16, 32, 48, 64, 96, 128, 256, 512, 1024, 2048};
  wl::run_threads(threads, [&](int t) {
    uint64_t sum = 0;
    for (size_t sz : sizes) {
      for (long i = 0; i < per; i++) {
        char* p = static_cast<char*>(malloc(sz));
        p[0] = char(i);
        all[size_t(t * per + i)] = p;
      }
      bar.wait();
      if (t == 0) {  // one shuffle, same for every allocator
        wl::Rng rng{uint64_t(sz)};
        for (long i = total - 1; i > 0; i--) std::swap(all[size_t(i)], all[rng.below(uint64_t(i + 1))]);
      }
      bar.wait();
      for (long i = 0; i < per; i++) {
        char* p = all[size_t(t * per + i)];
        sum += uint8_t(p[0]);
        free(p);
      }
      bar.wait();
    }
    wl::checksum() += sum;
  });
  wl::done("remote-free");
}
