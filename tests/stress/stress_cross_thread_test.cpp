// Blocks allocated by one thread and freed by another, through lock-free
// hand-over structures, with every block's contents checked by its freer.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

// Many-to-many: each thread swaps its new blocks into random shared slots and
// frees whatever it takes out (usually another thread's block).
TEST(CrossThread, RandomSlotExchange) {
  const unsigned threads = 4;
  const std::size_t ops = tenon_test::scaled(400000);
  constexpr std::size_t kSlots = 4096;
  std::vector<std::atomic<void*>> slots(kSlots);
  for (auto& s : slots) s.store(nullptr);
  Failures failures;
  std::atomic<std::uint64_t> made{0}, freed{0};

  auto worker = [&](unsigned id) {
    std::mt19937_64 rng(1000 + id);
    std::vector<void*> local;  // blocks freed by their own thread, for contrast
    std::uint64_t my_made = 0, my_freed = 0;
    for (std::size_t i = 0; i < ops && failures.count() == 0; ++i) {
      void* b = make_block(rng, id, i, failures);
      if (!b) break;
      ++my_made;
      if (rng() % 4 == 0) {
        local.push_back(b);
        if (local.size() > 64) {
          std::size_t k = rng() % local.size();
          check_and_free(local[k], failures);
          ++my_freed;
          local[k] = local.back();
          local.pop_back();
        }
        continue;
      }
      void* old = slots[rng() % kSlots].exchange(b, std::memory_order_acq_rel);
      if (old) {
        check_and_free(old, failures);
        ++my_freed;
      }
    }
    for (void* b : local) check_and_free(b, failures);
    my_freed += local.size();
    made += my_made;
    freed += my_freed;
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (auto& t : pool) t.join();
  // Whatever is left in the slots belongs to threads that have exited.
  for (auto& s : slots) {
    if (void* b = s.exchange(nullptr)) {
      check_and_free(b, failures);
      ++freed;
    }
  }
  EXPECT_EQ(failures.count(), 0) << failures.first();
  EXPECT_EQ(made.load(), freed.load()) << "every block must be freed exactly once";
}

// A single-producer single-consumer ring of block pointers (lock-free).
class Ring {
 public:
  bool push(void* p) {
    std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) == kSize) return false;
    cells_[t % kSize] = p;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  void* pop() {
    std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return nullptr;
    void* p = cells_[h % kSize];
    head_.store(h + 1, std::memory_order_release);
    return p;
  }

 private:
  static constexpr std::size_t kSize = 1024;
  void* cells_[kSize] = {};
  alignas(64) std::atomic<std::size_t> head_{0};
  alignas(64) std::atomic<std::size_t> tail_{0};
};

// Many-to-one: producers allocate, one consumer frees everything (all of the
// consumer's frees are remote), while producers keep allocating from the
// spans those remote frees return blocks to.
TEST(CrossThread, ProducersToOneConsumer) {
  const unsigned producers = 3;
  const std::size_t per_producer = tenon_test::scaled(300000);
  std::vector<Ring> rings(producers);
  std::atomic<unsigned> done{0};
  Failures failures;
  std::atomic<std::uint64_t> consumed{0};

  auto producer = [&](unsigned id) {
    std::mt19937_64 rng(77 + id);
    for (std::size_t i = 0; i < per_producer && failures.count() == 0; ++i) {
      void* b = make_block(rng, id, i, failures);
      if (!b) break;
      while (!rings[id].push(b)) {
        if (failures.count()) { check_and_free(b, failures); break; }
        std::this_thread::yield();  // test code: waiting for the consumer is fine
      }
    }
    done.fetch_add(1, std::memory_order_release);
  };
  auto consumer = [&] {
    std::uint64_t n = 0;
    for (;;) {
      bool all_done = done.load(std::memory_order_acquire) == producers;
      bool got = false;
      for (auto& r : rings) {
        while (void* b = r.pop()) {
          check_and_free(b, failures);
          ++n;
          got = true;
        }
      }
      if (all_done && !got) break;
      if (!got) std::this_thread::yield();
    }
    consumed = n;
  };
  std::thread c(consumer);
  std::vector<std::thread> ps;
  for (unsigned t = 0; t < producers; ++t) ps.emplace_back(producer, t);
  for (auto& t : ps) t.join();
  c.join();
  EXPECT_EQ(failures.count(), 0) << failures.first();
  if (failures.count() == 0) EXPECT_EQ(consumed.load(), producers * per_producer);
}

// Ping-pong of realloc: a block is grown by one thread and shrunk by another,
// so realloc runs on blocks owned by a different thread.
TEST(CrossThread, ReallocOnForeignThreadBlocks) {
  const std::size_t rounds = tenon_test::scaled(100000);
  constexpr std::size_t kSlots = 256;
  std::vector<std::atomic<void*>> slots(kSlots);
  for (auto& s : slots) s.store(nullptr);
  Failures failures;
  auto worker = [&](unsigned id) {
    std::mt19937_64 rng(5 + id);
    for (std::size_t i = 0; i < rounds && failures.count() == 0; ++i) {
      void* b = slots[rng() % kSlots].exchange(nullptr, std::memory_order_acq_rel);
      if (!b) b = make_block(rng, id, i, failures);
      if (!b) break;
      // Check, resize to a new random size, rewrite the identity, put back.
      std::uint64_t h;
      std::memcpy(&h, b, 8);
      std::size_t old_size = header_size(h);
      if (old_size < 8 || old_size > kMaxBlock ||
          first_pattern_mismatch(static_cast<char*>(b) + 8, old_size - 8, h) != old_size - 8) {
        failures.add("block corrupt before realloc");
        break;
      }
      std::size_t size = random_size(rng);
      auto* q = static_cast<unsigned char*>(tenon_realloc(b, size));
      if (!q) {
        failures.add("tenon_realloc returned NULL");
        break;
      }
      std::size_t keep = std::min(old_size, size) - 8;
      if (first_pattern_mismatch(q + 8, keep, h) != keep) failures.add("tenon_realloc lost contents");
      std::uint64_t nh = pack(size, id, i);
      std::memcpy(q, &nh, 8);
      fill_pattern(q + 8, size - 8, nh);
      void* old = slots[rng() % kSlots].exchange(q, std::memory_order_acq_rel);
      if (old) check_and_free(old, failures);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < 4; ++t) pool.emplace_back(worker, t);
  for (auto& t : pool) t.join();
  for (auto& s : slots)
    if (void* b = s.exchange(nullptr)) check_and_free(b, failures);
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

}  // namespace
