// mstress: mixed sizes with thread churn. Threads share one array of slots
// and replace random slots (atomic exchange), so many frees are remote;
// every round the threads exit and new ones start, so the allocator must
// hand over (or adopt) what exiting threads held. In the spirit of mimalloc-bench's mstress.
// usage: mstress THREADS OPS ROUNDS SLOTS   (OPS total per run, split over rounds and threads)
#include "common.h"

namespace {
// Mostly small, some medium, rare large: the shape of a real heap.
size_t pick_size(wl::Rng& rng) {
  uint64_t r = rng.below(1000);
  if (r < 900) return 8 + rng.below(256);
  if (r < 995) return 256 + rng.below(8192);
  return 8192 + rng.below(256 * 1024);
}
}  // namespace

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long ops = wl::arg(argc, argv, 2, 2000000);
  long rounds = wl::arg(argc, argv, 3, 20);
  long slots = wl::arg(argc, argv, 4, 20000);
  long per = wl::share(ops / (rounds > 0 ? rounds : 1), threads);
  std::vector<std::atomic<char*>> arr(static_cast<size_t>(slots));
  for (auto& a : arr) a.store(nullptr);
  for (long r = 0; r < rounds; r++) {
    wl::run_threads(threads, [&](int t) {
      wl::Rng rng(uint64_t(r) * 7919 + uint64_t(t));
      uint64_t sum = 0;
      for (long i = 0; i < per; i++) {
        size_t sz = pick_size(rng);
        char* p = static_cast<char*>(malloc(sz));
        p[0] = char(sz);
        p[sz - 1] = 1;
        char* old = arr[size_t(rng.below(uint64_t(slots)))].exchange(p, std::memory_order_acq_rel);
        if (old) { sum += uint8_t(old[0]); free(old); }
      }
      wl::checksum() += sum;
    });
  }
  for (auto& a : arr) free(a.load());
  wl::done("mstress");
}
