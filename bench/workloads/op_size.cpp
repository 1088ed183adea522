// op-size: time per call against block size, for each call on its own:
// malloc, free, calloc and realloc (growing a block from half the size), at
// 1 KiB, 2 KiB, ... up to MAXKIB. Each step allocates a batch of blocks
// (at most 256, about LIVEMIB in all, at least one), timing the batch of
// calls only; every page of every block is written between the timed
// batches, as a program would. Prints the median over ROUNDS of the batch
// time per call:
//   OPSIZE op=malloc bytes=1024 ns_per_call=... blocks=...
// usage: op_size MAXKIB LIVEMIB ROUNDS
#include <algorithm>
#include "common.h"

namespace {

long g_live_mib, g_rounds;

struct step {
  size_t bytes;
  size_t blocks;
  std::vector<char*> p;
  std::vector<double> ns[4];  // malloc, free, calloc, realloc: per call, one entry per round
};

void touch_all(step& s, size_t bytes) {
  for (char* b : s.p) {
    if (!b) { std::printf("FAIL %zu\n", bytes); std::exit(1); }
    wl::touch_pages(b, bytes);
    wl::checksum() += uint8_t(b[bytes / 2]);
  }
}

template <class F>
double timed(step& s, F call) {
  uint64_t t0 = wl::now_ns();
  for (size_t i = 0; i < s.blocks; i++) call(i);
  return double(wl::now_ns() - t0) / double(s.blocks);
}

void round(step& s) {
  size_t n = s.bytes;
  s.ns[0].push_back(timed(s, [&](size_t i) { s.p[i] = static_cast<char*>(malloc(n)); }));
  touch_all(s, n);
  s.ns[1].push_back(timed(s, [&](size_t i) { free(s.p[i]); }));
  s.ns[2].push_back(timed(s, [&](size_t i) { s.p[i] = static_cast<char*>(calloc(1, n)); }));
  touch_all(s, n);
  for (char* b : s.p) free(b);
  for (auto& b : s.p) b = static_cast<char*>(malloc(n / 2));
  touch_all(s, n / 2);
  s.ns[3].push_back(timed(s, [&](size_t i) { s.p[i] = static_cast<char*>(realloc(s.p[i], n)); }));
  touch_all(s, n);
  for (char* b : s.p) free(b);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long maxkib = wl::arg(argc, argv, 1, 65536);
  g_live_mib = wl::arg(argc, argv, 2, 16);
  g_rounds = wl::arg(argc, argv, 3, 3);
  static const char* names[] = {"malloc", "free", "calloc", "realloc"};
  for (size_t bytes = 1024; bytes <= size_t(maxkib) << 10; bytes *= 2) {
    step s;
    s.bytes = bytes;
    s.blocks = std::clamp<size_t>((size_t(g_live_mib) << 20) / bytes, 1, 256);
    s.p.resize(s.blocks);
    for (long r = 0; r < g_rounds; r++) round(s);
    for (int op = 0; op < 4; op++)
      std::printf("OPSIZE op=%s bytes=%zu ns_per_call=%.1f blocks=%zu\n", names[op], bytes, median(s.ns[op]), s.blocks);
  }
  wl::done("op-size");
}
