// producer-consumer: half the threads allocate batches of BATCH blocks of
// SIZE bytes and queue them (at most QUEUE batches queued); the other half
// take batches and free every block, so every free is a remote free of a
// block whose allocating thread is alive and still allocating. Live data
// stays below (QUEUE + THREADS) * BATCH * SIZE bytes (about 27 MB at the
// defaults), so peak RSS shows whether remotely freed memory is reused or
// piles up while the producers take fresh memory.
// Prints the peak RSS at half time and at the end (growth over time).
// usage: producer_consumer THREADS BATCHES BATCH SIZE QUEUE   (BATCHES total)
#include <condition_variable>
#include <mutex>
#include "common.h"

namespace {

// A bounded FIFO of batch arrays. Blocking is fine here: this is the
// workload, not the allocator, and a waiting thread must not burn a core
// another thread needs.
struct Queue {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<char**> items;
  size_t head = 0, count = 0;
  explicit Queue(size_t cap) : items(cap) {}
  void put(char** b) {
    std::unique_lock<std::mutex> g(mu);
    changed.wait(g, [&] { return count < items.size(); });
    items[(head + count) % items.size()] = b;
    count++;
    changed.notify_all();
  }
  char** take() {
    std::unique_lock<std::mutex> g(mu);
    changed.wait(g, [&] { return count > 0; });
    char** b = items[head];
    head = (head + 1) % items.size();
    count--;
    changed.notify_all();
    return b;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = int(wl::arg(argc, argv, 1, 4));
  long batches = wl::arg(argc, argv, 2, 20000);
  long batch = wl::arg(argc, argv, 3, 4096);
  long size = wl::arg(argc, argv, 4, 64);
  long queue = wl::arg(argc, argv, 5, 100);
  int producers = threads / 2 > 0 ? threads / 2 : 1;
  int consumers = threads - producers > 0 ? threads - producers : 1;
  // Batch arrays come from the workload's own memory, set up front (a ring
  // of them cycles through the queues), so that only the blocks go through
  // the allocator.
  size_t arrays = size_t(queue + producers + consumers);
  std::vector<std::vector<char*>> storage(arrays, std::vector<char*>(size_t(batch)));
  Queue empty{arrays}, full{size_t(queue)};
  for (auto& a : storage) empty.put(a.data());
  std::atomic<int> producing{producers};
  std::atomic<long> consumed{0};
  long half_peak_kib = 0;
  wl::run_threads(producers + consumers, [&](int t) {
    uint64_t sum = 0;
    if (t < producers) {
      long mine = batches / producers + (t < batches % producers ? 1 : 0);
      for (long b = 0; b < mine; b++) {
        char** a = empty.take();
        for (long i = 0; i < batch; i++) {
          a[i] = static_cast<char*>(malloc(size_t(size)));
          a[i][0] = char(i);
        }
        full.put(a);
      }
      // The last producer to finish tells every consumer (a null batch each).
      if (producing.fetch_sub(1) == 1)
        for (int c = 0; c < consumers; c++) full.put(nullptr);
    } else {
      for (;;) {
        char** a = full.take();
        if (!a) break;
        for (long i = 0; i < batch; i++) {
          sum += uint8_t(a[i][0]);
          free(a[i]);
        }
        empty.put(a);
        // Peak RSS at half time: compared with the end, it shows growth.
        if (consumed.fetch_add(1) + 1 == batches / 2) half_peak_kib = wl::peak_rss_kib();
      }
    }
    wl::checksum() += sum;
  });
  std::printf("PEAK half_kib=%ld end_kib=%ld\n", half_peak_kib, wl::peak_rss_kib());
  wl::done("producer-consumer");
}
