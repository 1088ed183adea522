// thread-chunks: per-thread chunks of 130 KiB ... 33 MiB, each malloc'd,
// filled with memset and freed, for several thread counts. Prints per-call
// time, peak RSS and peak RSS / (threads x chunk) for each cell.
// usage: thread_chunks BUDGETMIB THREADLIST   (e.g. "1,2,4,8,20"; each cell memsets about BUDGETMIB)
#include <string>
#include "common.h"

int main(int argc, char** argv) {
  long budget = wl::arg(argc, argv, 1, 128);
  std::string list = argc > 2 ? argv[2] : "1,2,4,8,20";
  std::vector<int> tlist;
  for (size_t at = 0; at < list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    tlist.push_back(std::stoi(list.substr(at, comma - at)));
    at = comma + 1;
  }
  // Measured once, after the first thread has started and exited, so the
  // thread library's own setup is not charged to the first cell.
  wl::run_threads(1, [](int) {});
  long start_rss = wl::rss_kib();
  static const size_t chunks[] = {130u << 10, 520u << 10, 2u << 20, 8u << 20, 33u << 20};
  for (int threads : tlist) {
    for (size_t chunk : chunks) {
      long iters = long((size_t(budget) << 20) / (chunk * size_t(threads)));
      if (iters < 1) iters = 1;
      wl::reset_peak_rss();
      uint64_t t0 = wl::now_ns();
      wl::run_threads(threads, [&](int t) {
        for (long i = 0; i < iters; i++) {
          char* p = static_cast<char*>(malloc(chunk));
          memset(p, t + int(i), chunk);
          wl::checksum() += uint8_t(p[chunk / 3]);
          free(p);
        }
      });
      uint64_t t1 = wl::now_ns();
      long peak = wl::peak_rss_kib();
      double ratio = double(peak - start_rss) * 1024.0 / double(chunk * size_t(threads));
      // Per call = wall time of the cell / calls per thread (threads run side by side).
      std::printf("CHUNK threads=%d bytes=%zu iters=%ld ns_per_call=%.0f peak_rss_kib=%ld rss_ratio=%.3f\n",
                  threads, chunk, iters, double(t1 - t0) / double(iters), peak, ratio);
    }
  }
  wl::done("thread-chunks");
}
