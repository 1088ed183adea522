// malloc-large: blocks of 2 to 35 MiB in a small working set, replaced at
// random and written at their first and a few scattered pages. Shows whether
// an allocator keeps recently freed large blocks or returns them to the OS
// and faults fresh pages in again (page-fault counts tell).
// usage: malloc_large THREADS OPS WORKSET   (OPS total, split over threads)
#include "common.h"

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 1));
  long ops = wl::arg(argc, argv, 2, 2000);
  long workset = wl::arg(argc, argv, 3, 4);
  long per = wl::share(ops, threads);
  constexpr size_t MiB = size_t(1) << 20;
  wl::run_threads(threads, [&](int t) {
    wl::Rng rng(uint64_t(t) + 11);
    std::vector<char*> ws(size_t(workset), nullptr);
    uint64_t sum = 0;
    for (long i = 0; i < per; i++) {
      size_t k = size_t(rng.below(uint64_t(workset)));
      if (ws[k]) { sum += uint8_t(ws[k][0]); free(ws[k]); }
      size_t sz = 2 * MiB + size_t(rng.below(33 * MiB));
      char* p = static_cast<char*>(malloc(sz));
      // Write a handful of pages, as a program filling a buffer partly would.
      for (size_t off = 0; off < sz; off += 256 * 1024) p[off] = char(off >> 18);
      p[sz - 1] = 1;
      ws[k] = p;
    }
    for (auto* p : ws) free(p);
    wl::checksum() += sum;
  });
  wl::done("malloc-large");
}
