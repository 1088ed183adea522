// xmalloc: producer/consumer. Half the threads allocate blocks in batches and
// publish each batch; the other half take batches and free every block, so
// every free is a remote free. After Lever & Boreham's xmalloc-test.
// usage: xmalloc THREADS BLOCKS BATCH MAXSIZE   (BLOCKS total, split over producers)
#include <mutex>
#include "common.h"

namespace {
struct Batch {
  Batch* next;
  long n;
  char* p[1];  // n entries follow (allocated with the batch)
};
// A mutex-protected stack of batches: the lock is taken once per batch, so
// it costs little next to the BATCH mallocs and frees being measured.
std::mutex mu;
Batch* head = nullptr;
long queued = 0;
std::atomic<int> producers_left{0};
}  // namespace

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 2));
  long blocks = wl::arg(argc, argv, 2, 2000000);
  long batch = wl::arg(argc, argv, 3, 64);
  long maxsz = wl::arg(argc, argv, 4, 256);
  int producers = threads / 2 > 0 ? threads / 2 : 1;
  int consumers = threads - producers > 0 ? threads - producers : 1;
  long per = wl::share(blocks, producers) / batch + 1;
  producers_left = producers;
  wl::run_threads(producers + consumers, [&](int t) {
    uint64_t sum = 0;
    if (t < producers) {
      wl::Rng rng(uint64_t(t) + 1);
      for (long b = 0; b < per; b++) {
        auto* bt = static_cast<Batch*>(malloc(sizeof(Batch) + sizeof(char*) * size_t(batch)));
        bt->n = batch;
        for (long i = 0; i < batch; i++) {
          size_t sz = 8 + size_t(rng.below(uint64_t(maxsz - 7)));
          bt->p[i] = static_cast<char*>(malloc(sz));
          bt->p[i][0] = char(i);
        }
        // Bound the queue so producers cannot run ahead without limit.
        for (;;) {
          std::lock_guard<std::mutex> g(mu);
          if (queued < 1024) { bt->next = head; head = bt; queued++; break; }
        }
      }
      producers_left--;
    } else {
      for (;;) {
        Batch* bt = nullptr;
        {
          std::lock_guard<std::mutex> g(mu);
          if (head) { bt = head; head = bt->next; queued--; }
        }
        if (!bt) {
          if (producers_left.load() == 0) {
            std::lock_guard<std::mutex> g(mu);
            if (!head) break;
            continue;
          }
          std::this_thread::yield();
          continue;
        }
        for (long i = 0; i < bt->n; i++) { sum += uint8_t(bt->p[i][0]); free(bt->p[i]); }
        free(bt);
      }
    }
    wl::checksum() += sum;
  });
  wl::done("xmalloc");
}
