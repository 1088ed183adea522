// thread-scaling: the same amount of allocator work split over 1, 2, ...
// MAXTHREADS threads, one count after the other in one process. Each thread
// replaces blocks at random in a working set of its own (sizes 16 B - 1 KiB,
// one in 32 up to 32 KiB), and one replacement in 8 trades the new block
// through a shared exchange array, so that its old occupant, from some
// other thread, is freed here (a remote free). Prints per thread count the
// wall time per operation (one operation: a free and a malloc), all threads
// together, the median of TRIALS runs (a loaded machine's hiccups hit single
// trials):
//   SCALE threads=T ns_per_op=... ops=...
// On a machine with fewer cores than threads the larger counts measure
// oversubscription: threads preempted in the middle of an allocator call.
// usage: thread_scaling OPS MAXTHREADS TRIALS
#include <algorithm>
#include "common.h"

namespace {

constexpr size_t kWorkset = 256;
constexpr size_t kExchange = 256;
std::atomic<char*> g_exchange[kExchange];

void work(int t, long ops) {
  wl::Rng rng(uint64_t(t) * 7919 + 3);
  std::vector<char*> ws(kWorkset, nullptr);
  uint64_t sum = 0;
  for (long i = 0; i < ops; i++) {
    size_t k = size_t(rng.below(kWorkset));
    size_t sz = rng.below(32) == 0 ? 1024 + rng.below(31 << 10) : 16 + rng.below(1008);
    char* p = static_cast<char*>(malloc(sz));
    p[0] = char(sz);
    if (rng.below(8) == 0) p = g_exchange[rng.below(kExchange)].exchange(p, std::memory_order_acq_rel);
    if (ws[k]) {
      sum += uint8_t(ws[k][0]);
      free(ws[k]);
    }
    ws[k] = p;
  }
  for (char* p : ws) {
    if (p) sum += uint8_t(p[0]);
    free(p);
  }
  wl::checksum() += sum;
}

}  // namespace

int main(int argc, char** argv) {
  long ops = wl::arg(argc, argv, 1, 1000000);
  int maxthreads = int(wl::arg(argc, argv, 2, 20));
  int trials = int(wl::arg(argc, argv, 3, 3));
  for (int threads = 1; threads <= maxthreads; threads++) {
    long per = wl::share(ops, threads);
    std::vector<double> ns;
    for (int k = 0; k < trials; k++) {
      uint64_t t0 = wl::now_ns();
      wl::run_threads(threads, [&](int t) { work(t, per); });
      ns.push_back(double(wl::now_ns() - t0) / double(per * threads));
    }
    std::sort(ns.begin(), ns.end());
    std::printf("SCALE threads=%d ns_per_op=%.2f ops=%ld trials=%d\n", threads, ns[ns.size() / 2], per * threads, trials);
  }
  for (auto& slot : g_exchange) {
    char* p = slot.exchange(nullptr);
    if (p) wl::checksum() += uint8_t(p[0]);
    free(p);
  }
  wl::done("thread-scaling");
}
