// larson: server-style random replacement. Each thread owns a slot array of
// live blocks of random size and replaces random slots; at the end of a
// round its array (blocks and all) is handed to a fresh thread of the next
// round, which frees blocks another thread allocated. After Larson & Krishnan.
// usage: larson THREADS OPS ROUNDS SLOTS MINSIZE MAXSIZE   (OPS total per round, split over threads)
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long ops = wl::arg(argc, argv, 2, 2000000);
  long rounds = wl::arg(argc, argv, 3, 8);
  long slots = wl::arg(argc, argv, 4, 1000);
  long minsz = wl::arg(argc, argv, 5, 8);
  long maxsz = wl::arg(argc, argv, 6, 512);
  long per = wl::share(ops / (rounds > 0 ? rounds : 1), threads);
  // One slot array per thread position; it outlives the threads that use it.
  std::vector<std::vector<char*>> arrays(size_t(threads), std::vector<char*>(size_t(slots), nullptr));
  for (int t = 0; t < threads; t++) {
    wl::Rng rng(uint64_t(t) + 7);
    for (auto& p : arrays[size_t(t)]) {
      size_t sz = size_t(minsz + long(rng.below(uint64_t(maxsz - minsz + 1))));
      p = static_cast<char*>(malloc(sz));
      p[0] = 1;
    }
  }
  for (long r = 0; r < rounds; r++) {
    wl::run_threads(threads, [&](int t) {
      // Thread t of round r takes the array thread t of round r-1 filled.
      auto& a = arrays[size_t(t)];
      wl::Rng rng(uint64_t(r) * 1000 + uint64_t(t));
      uint64_t sum = 0;
      for (long i = 0; i < per; i++) {
        size_t k = size_t(rng.below(uint64_t(slots)));
        sum += uint8_t(a[k][0]);
        free(a[k]);
        size_t sz = size_t(minsz + long(rng.below(uint64_t(maxsz - minsz + 1))));
        a[k] = static_cast<char*>(malloc(sz));
        a[k][0] = char(sz);
      }
      wl::checksum() += sum;
    });
  }
  for (auto& a : arrays)
    for (auto* p : a) free(p);
  wl::done("larson");
}
