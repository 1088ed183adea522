// latency: per-call cost of malloc and free, sampled one call in eight with
// the cycle counter (rdtsc; clock_gettime where there is none), threads
// pinned one per CPU round-robin. Random replacement in a per-thread working
// set with a mostly-small size mix, so the tail shows slow paths (refills,
// span changes, OS calls). Prints p50 ... p99.9999 and max per operation.
// usage: latency THREADS OPS WORKSET   (OPS total, split over threads)
#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long ops = wl::arg(argc, argv, 2, 4000000);
  long workset = wl::arg(argc, argv, 3, 4096);
  long per = wl::share(ops, threads);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<std::vector<uint32_t>> mall(static_cast<size_t>(threads)), frees(static_cast<size_t>(threads));
  wl::run_threads(threads, [&](int t) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(int(t % (ncpu > 0 ? ncpu : 1)), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    auto& ms = mall[size_t(t)];
    auto& fs = frees[size_t(t)];
    ms.reserve(size_t(per / 8 + 2));
    fs.reserve(size_t(per / 8 + 2));
    wl::Rng rng(uint64_t(t) + 5);
    std::vector<char*> ws(size_t(workset), nullptr);
    uint64_t sum = 0;
    for (long i = 0; i < per; i++) {
      size_t k = size_t(rng.below(uint64_t(workset)));
      uint64_t r = rng.below(100);
      size_t sz = r < 90 ? 8 + rng.below(248) : r < 99 ? 256 + rng.below(4096) : 4096 + rng.below(64 << 10);
      bool sample = (i & 7) == 0;
      if (ws[k]) {
        sum += uint8_t(ws[k][0]);
        if (sample) {
          uint64_t a = wl::ticks();
          free(ws[k]);
          uint64_t b = wl::ticks();
          fs.push_back(uint32_t(std::min<uint64_t>(b - a, 0xFFFFFFFFu)));
        } else {
          free(ws[k]);
        }
      }
      char* p;
      if (sample) {
        uint64_t a = wl::ticks();
        p = static_cast<char*>(malloc(sz));
        uint64_t b = wl::ticks();
        ms.push_back(uint32_t(std::min<uint64_t>(b - a, 0xFFFFFFFFu)));
      } else {
        p = static_cast<char*>(malloc(sz));
      }
      p[0] = char(sz);
      ws[k] = p;
    }
    for (auto* p : ws) free(p);
    wl::checksum() += sum;
  });
  auto report = [](const char* op, std::vector<std::vector<uint32_t>>& per_thread) {
    std::vector<uint32_t> all;
    for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
    if (all.empty()) return;
    std::sort(all.begin(), all.end());
    auto q = [&](double p) { return all[std::min(all.size() - 1, size_t(p * double(all.size())))]; };
    std::printf("LAT op=%s unit=%s n=%zu p50=%u p90=%u p99=%u p99.9=%u p99.99=%u p99.999=%u p99.9999=%u max=%u\n",
                op, wl::tick_unit(), all.size(), q(0.5), q(0.9), q(0.99), q(0.999), q(0.9999), q(0.99999),
                q(0.999999), all.back());
  };
  report("malloc", mall);
  report("free", frees);
  wl::done("latency");
}
